package datasets

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/kilnml/kiln/autograd"
)

// LoaderOptions configures a DataLoader. The zero value loads one example per
// batch, in order, in the caller's goroutine.
type LoaderOptions struct {
	// BatchSize is the number of examples per batch; 0 means 1.
	BatchSize int
	// Shuffle visits the examples in a new random order each epoch. The
	// order depends only on Seed and the epoch number, so runs repeat.
	Shuffle bool
	Seed    uint64
	// DropLast drops the final batch of an epoch when it is smaller than
	// BatchSize.
	DropLast bool
	// Workers is the number of goroutines loading batches ahead of the
	// consumer; 0 loads each batch in the consumer's goroutine when it is
	// asked for. Batches come out in order whatever the number of workers.
	Workers int
	// Prefetch bounds how many loaded batches may wait for the consumer;
	// 0 means 2 per worker (PyTorch's prefetch_factor). Unused without
	// workers.
	Prefetch int
	// ChannelsLast lays batches of [C, H, W] images out channels-last
	// (memory format autograd.ChannelsLast), and batches of [C, D, H, W]
	// volumes as autograd.ChannelsLast3d.
	ChannelsLast bool

	// Rank and WorldSize shard every epoch for data-parallel training, as
	// PyTorch's torch.utils.data.distributed.DistributedSampler does: the
	// loader of process Rank (counting from 0) out of WorldSize yields only
	// the examples at positions Rank, Rank+WorldSize, Rank+2·WorldSize, …
	// of the epoch's order. WorldSize 0 or 1 means no sharding (Rank must
	// then be 0).
	//
	// Every rank must use the same Seed, Shuffle and epoch numbers: the
	// epoch's permutation depends on those alone, never on Rank, so all
	// ranks shuffle alike and their shards are disjoint and cover the data
	// set. Every rank also gets the same number of examples, so the same
	// Len, and no rank waits at a gradient all-reduce for a step its peers
	// never take: when WorldSize does not divide the data set, the order is
	// padded by repeating examples from its start (some examples are seen
	// twice in the epoch), unless DropUneven is set.
	Rank      int
	WorldSize int
	// DropUneven, when WorldSize does not divide the data set's length n,
	// cuts the epoch's order to the largest multiple of WorldSize instead
	// of padding it: the last n mod WorldSize examples of each epoch's
	// order are skipped (a different few each epoch when shuffling), and
	// each rank gets floor(n / WorldSize) examples. It is PyTorch's
	// DistributedSampler(drop_last=True), applied before the order is split
	// among the ranks. DropLast, PyTorch's DataLoader(drop_last=True), is
	// separate: it then drops a short final batch of the rank's own shard.
	// Without sharding DropUneven does nothing.
	DropUneven bool
}

// A Batch is a group of examples stacked along a new leading dimension.
type Batch struct {
	// Inputs holds the examples' inputs, of shape [N, C, H, W] for images.
	Inputs *autograd.Tensor
	// Labels holds the examples' labels as an Int64 tensor of shape [N].
	Labels *autograd.Tensor
	// Indices are the examples' indices in the data set.
	Indices []int
}

// DataLoader iterates over a Dataset in batches, like PyTorch's
// torch.utils.data.DataLoader. It keeps no state between epochs, so one
// DataLoader serves a whole training run.
type DataLoader struct {
	ds  Dataset
	opt LoaderOptions
}

// NewDataLoader returns a DataLoader over ds, or an error if the options
// make no sense.
func NewDataLoader(ds Dataset, opt LoaderOptions) (*DataLoader, error) {
	switch {
	case ds == nil:
		return nil, fmt.Errorf("datasets: data set is nil")
	case ds.Len() < 0:
		return nil, fmt.Errorf("datasets: data set reports %d examples", ds.Len())
	case opt.BatchSize < 0:
		return nil, fmt.Errorf("datasets: batch size %d is negative", opt.BatchSize)
	case opt.Workers < 0:
		return nil, fmt.Errorf("datasets: %d workers is negative", opt.Workers)
	case opt.Prefetch < 0:
		return nil, fmt.Errorf("datasets: prefetch %d is negative", opt.Prefetch)
	case opt.WorldSize < 0:
		return nil, fmt.Errorf("datasets: LoaderOptions.WorldSize %d is negative", opt.WorldSize)
	case opt.Rank < 0 || opt.Rank >= max(opt.WorldSize, 1):
		return nil, fmt.Errorf("datasets: LoaderOptions.Rank %d is outside [0, %d) for WorldSize %d",
			opt.Rank, max(opt.WorldSize, 1), opt.WorldSize)
	}
	if opt.BatchSize == 0 {
		opt.BatchSize = 1
	}
	if opt.Prefetch == 0 {
		opt.Prefetch = 2 * opt.Workers
	}
	return &DataLoader{ds: ds, opt: opt}, nil
}

// Len returns the number of batches in an epoch; with WorldSize > 1, the
// number in this rank's shard, which is the same on every rank.
func (l *DataLoader) Len() int {
	n, b := shardLen(l.ds.Len(), l.opt.WorldSize, l.opt.DropUneven), l.opt.BatchSize
	if l.opt.DropLast {
		return n / b
	}
	return (n + b - 1) / b
}

// Epoch returns the batches of epoch number epoch (counting from 0) for a
// range loop. With Shuffle the order is a permutation drawn from Seed and
// epoch: ranging over the same epoch twice, or in another run, gives the
// same batches. With WorldSize > 1 the batches hold this rank's shard of
// the epoch (see LoaderOptions.Rank).
//
// If loading an example fails, the sequence yields that error, naming the
// example, and ends. Leaving the loop early stops the workers and waits for
// them before the loop statement completes, so no goroutine outlives it. A
// panic in Dataset.Get in a worker is re-raised in the consumer's
// goroutine.
func (l *DataLoader) Epoch(epoch int) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		order := l.order(epoch)
		if l.opt.Workers == 0 {
			for b := range l.Len() {
				batch, err := l.load(order, b, nil)
				if !yield(batch, err) || err != nil {
					return
				}
			}
			return
		}
		l.prefetch(order, yield)
	}
}

// order returns the example indices of an epoch in visiting order: this
// rank's shard of the one permutation every rank draws from Seed and epoch.
func (l *DataLoader) order(epoch int) []int {
	n := l.ds.Len()
	var order []int
	if l.opt.Shuffle {
		order = autograd.NewGenerator(mix(l.opt.Seed, uint64(epoch))).Perm(n)
	} else {
		order = make([]int, n)
		for i := range order {
			order[i] = i
		}
	}
	return shard(order, l.opt.Rank, l.opt.WorldSize, l.opt.DropUneven)
}

// loaded is what a worker hands back for one batch.
type loaded struct {
	batch Batch
	err   error
	panic any // non-nil when Dataset.Get panicked
}

type job struct {
	batch int
	out   chan<- loaded
}

// errStopped ends a worker's batch once the consumer has gone; nobody
// reads it.
var errStopped = errors.New("datasets: loader stopped")

// prefetch runs an epoch with workers. A dispatcher hands batch numbers
// out in order, queueing each batch's result channel in pending first, so
// the consumer can wait for the batches in order while the workers finish
// them in any order; pending's capacity bounds how far loading runs ahead.
func (l *DataLoader) prefetch(order []int, yield func(Batch, error) bool) {
	done := make(chan struct{})
	jobs := make(chan job)
	pending := make(chan chan loaded, l.opt.Prefetch)
	var wg sync.WaitGroup
	defer func() {
		close(done)
		wg.Wait()
	}()

	wg.Go(func() {
		defer close(jobs)
		defer close(pending)
		for b := range l.Len() {
			out := make(chan loaded, 1) // workers never block on a result
			select {
			case pending <- out:
			case <-done:
				return
			}
			select {
			case jobs <- job{b, out}:
			case <-done:
				return
			}
		}
	})
	for range l.opt.Workers {
		wg.Go(func() {
			for j := range jobs {
				j.out <- l.loadRecovering(order, j.batch, done)
			}
		})
	}

	for out := range pending {
		r := <-out
		if r.panic != nil {
			panic(r.panic)
		}
		if !yield(r.batch, r.err) || r.err != nil {
			return
		}
	}
}

// loadRecovering loads a batch in a worker, catching a panic so that it
// can be raised where the consumer sees it rather than killing the program
// from a goroutine nobody can recover.
func (l *DataLoader) loadRecovering(order []int, b int, done <-chan struct{}) (r loaded) {
	defer func() {
		if p := recover(); p != nil {
			r = loaded{panic: p}
		}
	}()
	batch, err := l.load(order, b, done)
	return loaded{batch: batch, err: err}
}

// load reads and collates batch b of order, giving up early with
// errStopped once done is closed.
func (l *DataLoader) load(order []int, b int, done <-chan struct{}) (Batch, error) {
	lo := b * l.opt.BatchSize
	idx := slices.Clone(order[lo:min(lo+l.opt.BatchSize, len(order))])
	examples := make([]Example, len(idx))
	for k, i := range idx {
		select {
		case <-done:
			return Batch{}, errStopped
		default:
		}
		ex, err := l.ds.Get(i)
		if err != nil {
			return Batch{}, fmt.Errorf("datasets: example %d: %w", i, err)
		}
		examples[k] = ex
	}
	return collate(examples, idx, l.opt.ChannelsLast)
}

// collate stacks examples into one batch. All inputs must be float32 and
// of one shape.
func collate(examples []Example, idx []int, channelsLast bool) (Batch, error) {
	first := examples[0].Input
	for k, ex := range examples {
		switch {
		case ex.Input == nil:
			return Batch{}, fmt.Errorf("datasets: example %d has no input", idx[k])
		case ex.Input.DType() != autograd.Float32:
			return Batch{}, fmt.Errorf("datasets: example %d has a %v input, want float32", idx[k], ex.Input.DType())
		case !slices.Equal(ex.Input.Shape(), first.Shape()):
			return Batch{}, fmt.Errorf("datasets: example %d has shape %v, but example %d has %v; batches need one shape",
				idx[k], ex.Input.Shape(), idx[0], first.Shape())
		}
	}
	format := autograd.Contiguous
	if channelsLast {
		switch first.NDim() {
		case 3:
			format = autograd.ChannelsLast
		case 4:
			format = autograd.ChannelsLast3d
		default:
			return Batch{}, fmt.Errorf("datasets: channels-last batches need [C, H, W] or [C, D, H, W] inputs, example %d has shape %v",
				idx[0], first.Shape())
		}
	}

	size := first.Numel()
	inputs := autograd.Zeros(append([]int{len(examples)}, first.Shape()...)...)
	data := inputs.Float32s()
	labels := make([]int64, len(examples))
	for k, ex := range examples {
		copy(data[k*size:(k+1)*size], ex.Input.ContiguousFloat32s())
		labels[k] = ex.Label
	}
	if format != autograd.Contiguous {
		inputs.SetFormat(format)
	}
	return Batch{Inputs: inputs, Labels: autograd.FromInt64(labels, len(labels)), Indices: idx}, nil
}
