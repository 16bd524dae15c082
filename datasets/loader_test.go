package datasets_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/datasets"
)

// seqSet is a data set whose example i is an image [2, 3, 2] holding the
// values i·100 + k in logical order, labelled i.
type seqSet struct {
	n       int
	failAt  int // Get(failAt) returns an error; -1 for never
	panicAt int // Get(panicAt) panics; -1 for never
	loads   atomic.Int64
}

func newSeqSet(n int) *seqSet { return &seqSet{n: n, failAt: -1, panicAt: -1} }

var errBroken = errors.New("broken example")

func (s *seqSet) Len() int { return s.n }

func (s *seqSet) Get(i int) (datasets.Example, error) {
	s.loads.Add(1)
	switch i {
	case s.failAt:
		return datasets.Example{}, errBroken
	case s.panicAt:
		panic("seqSet: boom")
	}
	x := make([]float32, 12)
	for k := range x {
		x[k] = float32(i*100 + k)
	}
	return datasets.Example{Input: autograd.FromFloat32(x, 2, 3, 2), Label: int64(i)}, nil
}

// epochOrder ranges over one epoch and returns the example indices in the
// order they came, checking each batch's tensors against them.
func epochOrder(t *testing.T, l *datasets.DataLoader, epoch int) [][]int {
	t.Helper()
	var got [][]int
	for b, err := range l.Epoch(epoch) {
		if err != nil {
			t.Fatalf("epoch %d: %v", epoch, err)
		}
		n := len(b.Indices)
		if s := b.Inputs.Shape(); !slices.Equal(s, []int{n, 2, 3, 2}) {
			t.Fatalf("inputs shape %v, want [%d 2 3 2]", s, n)
		}
		if b.Labels.DType() != autograd.Int64 || !slices.Equal(b.Labels.Shape(), []int{n}) {
			t.Fatalf("labels %v %v, want int64 [%d]", b.Labels.DType(), b.Labels.Shape(), n)
		}
		vals := b.Inputs.Values()
		for k, i := range b.Indices {
			if b.Labels.Int64s()[k] != int64(i) || vals[k*12+5] != float64(i*100+5) {
				t.Fatalf("batch row %d is not example %d", k, i)
			}
		}
		got = append(got, b.Indices)
	}
	return got
}

func TestLoaderBatches(t *testing.T) {
	tests := []struct {
		n, batch int
		dropLast bool
		sizes    []int
	}{
		{10, 3, false, []int{3, 3, 3, 1}},
		{10, 3, true, []int{3, 3, 3}},
		{9, 3, true, []int{3, 3, 3}},
		{2, 5, false, []int{2}},
		{2, 5, true, nil},
		{0, 4, false, nil},
		{3, 0, false, []int{1, 1, 1}}, // batch size 0 means 1
	}
	for _, tc := range tests {
		for _, workers := range []int{0, 1, 3} {
			name := fmt.Sprintf("n%d_b%d_drop%v_w%d", tc.n, tc.batch, tc.dropLast, workers)
			t.Run(name, func(t *testing.T) {
				l, err := datasets.NewDataLoader(newSeqSet(tc.n), datasets.LoaderOptions{
					BatchSize: tc.batch, DropLast: tc.dropLast, Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				if l.Len() != len(tc.sizes) {
					t.Errorf("Len() = %d, want %d", l.Len(), len(tc.sizes))
				}
				var sizes, all []int
				for _, b := range epochOrder(t, l, 0) {
					sizes = append(sizes, len(b))
					all = append(all, b...)
				}
				if !slices.Equal(sizes, tc.sizes) {
					t.Errorf("batch sizes %v, want %v", sizes, tc.sizes)
				}
				for k, i := range all {
					if i != k {
						t.Fatalf("unshuffled order %v is not sequential", all)
					}
				}
			})
		}
	}
}

func TestLoaderShuffle(t *testing.T) {
	const n = 50
	orders := map[string][]int{}
	for _, workers := range []int{0, 2, 5} {
		l, err := datasets.NewDataLoader(newSeqSet(n), datasets.LoaderOptions{
			BatchSize: 8, Shuffle: true, Seed: 42, Workers: workers, Prefetch: 1})
		if err != nil {
			t.Fatal(err)
		}
		for epoch := range 2 {
			order := slices.Concat(epochOrder(t, l, epoch)...)
			sorted := slices.Sorted(slices.Values(order))
			for k, i := range sorted {
				if i != k {
					t.Fatalf("workers %d epoch %d: order %v is not a permutation of [0, %d)", workers, epoch, order, n)
				}
			}
			key := fmt.Sprint("epoch", epoch)
			if prev, ok := orders[key]; ok && !slices.Equal(prev, order) {
				t.Errorf("workers %d epoch %d: order differs from another worker count", workers, epoch)
			}
			orders[key] = order
		}
	}
	if slices.Equal(orders["epoch0"], orders["epoch1"]) {
		t.Error("epochs 0 and 1 have the same order")
	}
	if slices.IsSorted(orders["epoch0"]) {
		t.Error("shuffled epoch is in order")
	}
	other, _ := datasets.NewDataLoader(newSeqSet(n), datasets.LoaderOptions{BatchSize: 8, Shuffle: true, Seed: 43})
	if slices.Equal(slices.Concat(epochOrder(t, other, 0)...), orders["epoch0"]) {
		t.Error("seeds 42 and 43 give the same order")
	}
}

func TestLoaderErrors(t *testing.T) {
	for _, workers := range []int{0, 1, 4} {
		t.Run(fmt.Sprint("workers", workers), func(t *testing.T) {
			ds := newSeqSet(20)
			ds.failAt = 13
			l, _ := datasets.NewDataLoader(ds, datasets.LoaderOptions{BatchSize: 4, Workers: workers})
			var good int
			var gotErr error
			for b, err := range l.Epoch(0) {
				if err != nil {
					gotErr = err
					continue // the sequence must end by itself after an error
				}
				good += len(b.Indices)
			}
			if !errors.Is(gotErr, errBroken) || !strings.Contains(gotErr.Error(), "example 13") {
				t.Errorf("error %v, want errBroken naming example 13", gotErr)
			}
			if good != 12 {
				t.Errorf("%d examples before the error, want 12", good)
			}
		})
	}
}

func TestLoaderWorkerPanic(t *testing.T) {
	ds := newSeqSet(20)
	ds.panicAt = 7
	l, _ := datasets.NewDataLoader(ds, datasets.LoaderOptions{BatchSize: 4, Workers: 3})
	before := runtime.NumGoroutine()
	defer func() {
		if r := recover(); r != "seqSet: boom" {
			t.Errorf("recovered %v, want the dataset's panic", r)
		}
		waitGoroutines(t, before)
	}()
	for range l.Epoch(0) {
	}
	t.Error("no panic")
}

// waitGoroutines fails unless the number of goroutines falls back to at
// most want; exiting goroutines may take a moment to be counted out.
func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	for range 200 {
		if runtime.NumGoroutine() <= want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Fatalf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
}

func TestLoaderEarlyStopLeaksNothing(t *testing.T) {
	ds := newSeqSet(1000)
	l, _ := datasets.NewDataLoader(ds, datasets.LoaderOptions{BatchSize: 2, Workers: 4, Prefetch: 3, Shuffle: true})
	before := runtime.NumGoroutine()
	for epoch := range 5 {
		seen := 0
		for _, err := range l.Epoch(epoch) {
			if err != nil {
				t.Fatal(err)
			}
			if seen++; seen == 3 {
				break
			}
		}
	}
	waitGoroutines(t, before)
	// 5 epochs of 3 batches, plus at most Prefetch batches queued and one
	// being loaded by each worker when the consumer left.
	if max := int64(5 * (3 + 3 + 4) * 2); ds.loads.Load() > max {
		t.Errorf("%d examples loaded, want at most %d", ds.loads.Load(), max)
	}
}

func TestLoaderPrefetchBound(t *testing.T) {
	ds := newSeqSet(400)
	l, _ := datasets.NewDataLoader(ds, datasets.LoaderOptions{BatchSize: 1, Workers: 4, Prefetch: 2})
	for _, err := range l.Epoch(0) {
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // a slow training step
		// Consumed 1, queued ≤ 2, one in each worker's hands.
		if n := ds.loads.Load(); n > 1+2+4 {
			t.Fatalf("%d examples loaded while the consumer holds the first batch, want at most 7", n)
		}
		break
	}
}

func TestLoaderChannelsLast(t *testing.T) {
	for _, workers := range []int{0, 2} {
		ds := newSeqSet(5)
		plain, _ := datasets.NewDataLoader(ds, datasets.LoaderOptions{BatchSize: 5})
		cl, _ := datasets.NewDataLoader(ds, datasets.LoaderOptions{BatchSize: 5, ChannelsLast: true, Workers: workers})
		var want, got *autograd.Tensor
		for b, err := range plain.Epoch(0) {
			if err != nil {
				t.Fatal(err)
			}
			want = b.Inputs
		}
		for b, err := range cl.Epoch(0) {
			if err != nil {
				t.Fatal(err)
			}
			got = b.Inputs
		}
		if got.Format() != autograd.ChannelsLast || want.Format() != autograd.Contiguous {
			t.Fatalf("formats %v and %v, want channels_last and contiguous", got.Format(), want.Format())
		}
		if !slices.Equal(got.Values(), want.Values()) {
			t.Error("channels-last batch has other values than the contiguous one")
		}
		if slices.Equal(got.Float32s(), want.Float32s()) {
			t.Error("channels-last batch has the contiguous memory order")
		}
	}
}

// listSet serves fixed examples.
type listSet []datasets.Example

func (s listSet) Len() int                            { return len(s) }
func (s listSet) Get(i int) (datasets.Example, error) { return s[i], nil }

func TestLoaderCollateErrors(t *testing.T) {
	img := autograd.Zeros(1, 2, 2)
	tests := []struct {
		name         string
		set          listSet
		channelsLast bool
		want         string
	}{
		{"shape", listSet{{Input: img}, {Input: autograd.Zeros(1, 2, 3)}}, false, "example 1 has shape [1 2 3], but example 0 has [1 2 2]"},
		{"dtype", listSet{{Input: img}, {Input: autograd.Empty(autograd.Int64, 1, 2, 2)}}, false, "example 1 has a int64 input, want float32"},
		{"nil", listSet{{Input: img}, {}}, false, "example 1 has no input"},
		{"channels-last rank", listSet{{Input: autograd.Zeros(4)}}, true, "channels-last batches need [C, H, W] or [C, D, H, W] inputs, example 0 has shape [4]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := datasets.NewDataLoader(tc.set, datasets.LoaderOptions{BatchSize: 2, ChannelsLast: tc.channelsLast})
			for _, err := range l.Epoch(0) {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want one containing %q", err, tc.want)
				}
			}
		})
	}
}

func TestLoaderOptionErrors(t *testing.T) {
	tests := []struct {
		ds   datasets.Dataset
		opt  datasets.LoaderOptions
		want string
	}{
		{newSeqSet(1), datasets.LoaderOptions{BatchSize: -1}, "batch size -1"},
		{newSeqSet(1), datasets.LoaderOptions{Workers: -2}, "-2 workers"},
		{newSeqSet(1), datasets.LoaderOptions{Prefetch: -3}, "prefetch -3"},
		{nil, datasets.LoaderOptions{}, "datasets: data set is nil"},
		{newSeqSet(-4), datasets.LoaderOptions{BatchSize: 2}, "datasets: data set reports -4 examples"},
	}
	for _, tc := range tests {
		if l, err := datasets.NewDataLoader(tc.ds, tc.opt); err == nil || l != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewDataLoader(%+v): %v, %v; want error %q", tc.opt, l, err, tc.want)
		}
	}
	// An empty data set is not an error: it has no batches.
	l, err := datasets.NewDataLoader(newSeqSet(0), datasets.LoaderOptions{BatchSize: 3, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range l.Epoch(0) {
		t.Error("an empty data set gave a batch")
	}
	if l.Len() != 0 {
		t.Errorf("Len of an empty loader = %d", l.Len())
	}
}

func TestSplit(t *testing.T) {
	ds := newSeqSet(101)
	train, test := datasets.Split(ds, 0.2, 7)
	if train.Len() != 81 || test.Len() != 20 {
		t.Fatalf("split sizes %d/%d, want 81/20", train.Len(), test.Len())
	}
	all := slices.Sorted(slices.Values(slices.Concat(train.Indices, test.Indices)))
	for k, i := range all {
		if i != k {
			t.Fatal("split parts do not partition the data set")
		}
	}
	train2, _ := datasets.Split(ds, 0.2, 7)
	if !slices.Equal(train.Indices, train2.Indices) {
		t.Error("same seed, different split")
	}
	train3, _ := datasets.Split(ds, 0.2, 8)
	if slices.Equal(train.Indices, train3.Indices) {
		t.Error("seeds 7 and 8 give the same split")
	}
	ex, err := test.Get(3)
	if err != nil || ex.Label != int64(test.Indices[3]) {
		t.Errorf("test.Get(3) = label %d, %v; want example %d", ex.Label, err, test.Indices[3])
	}
	if _, err := test.Get(20); err == nil {
		t.Error("Get past the end: no error")
	}
	for _, c := range []struct {
		ds   datasets.Dataset
		f    float64
		want string
	}{
		{ds, -0.1, "test fraction -0.1 is not in [0, 1]"},
		{ds, 1.5, "test fraction 1.5 is not in [0, 1]"},
		{ds, math.NaN(), "test fraction NaN is not in [0, 1]"},
		{nil, 0.5, "Split: data set is nil"},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Errorf("Split(%v, %v): recovered %v, want a panic mentioning %q", c.ds, c.f, r, c.want)
				}
			}()
			datasets.Split(c.ds, c.f, 0)
		}()
	}
	// The end points give an empty part, not an error.
	if tr, te := datasets.Split(ds, 0, 1); tr.Len() != 101 || te.Len() != 0 {
		t.Errorf("Split(0) sizes %d/%d, want 101/0", tr.Len(), te.Len())
	}
	if tr, te := datasets.Split(ds, 1, 1); tr.Len() != 0 || te.Len() != 101 {
		t.Errorf("Split(1) sizes %d/%d, want 0/101", tr.Len(), te.Len())
	}
	if _, err := (&datasets.Subset{Indices: []int{0}}).Get(0); err == nil || !strings.Contains(err.Error(), "subset of a nil data set") {
		t.Errorf("Subset of nil: error %v", err)
	}
	if _, err := test.Get(-1); err == nil || !strings.Contains(err.Error(), "subset index -1 out of range [0, 20)") {
		t.Errorf("Get(-1): error %v", err)
	}
}
