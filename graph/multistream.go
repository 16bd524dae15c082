package graph

import (
	"cmp"
	"fmt"
	"sync"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
)

// MultiStream runs a graph on several pools at once, as IPEX's
// MultiStreamModule does: each call's batch (the first dimension of every
// input) is cut into one slice per stream, each stream a Program bound to
// its own pool runs its slice, and the outputs are joined in order along
// their first dimension. For a graph that computes each row of its batch
// on its own, the result is the one-stream result bit for bit.
type MultiStream struct {
	progs []*Program
}

// NewMultiStream compiles g once per pool (opts as for Compile).
func NewMultiStream(g *Graph, pools []*kernels.Pool, opts ...CompileOption) (*MultiStream, error) {
	if len(pools) == 0 {
		return nil, fmt.Errorf("graph: NewMultiStream: no pools")
	}
	m := &MultiStream{}
	for _, pool := range pools {
		p, err := Compile(g, append(opts, WithPool(pool))...)
		if err != nil {
			return nil, err
		}
		m.progs = append(m.progs, p)
	}
	return m, nil
}

// Run computes the graph's outputs for inputs, whose first dimensions
// must be equal (the batch). A batch of B rows gives the first B mod S of
// the S streams one row more than the others; streams left without rows
// stay idle. Unlike Program.Run the results are new tensors, the caller's.
func (m *MultiStream) Run(inputs ...*autograd.Tensor) ([]*autograd.Tensor, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("graph: MultiStream.Run: no inputs")
	}
	batch := -1
	for i, x := range inputs {
		if x == nil || x.NDim() == 0 {
			return nil, fmt.Errorf("graph: MultiStream.Run: input %d has no batch dimension", i)
		}
		if b := x.Shape()[0]; batch < 0 {
			batch = b
		} else if b != batch {
			return nil, fmt.Errorf("graph: MultiStream.Run: input %d has batch %d, input 0 has %d", i, b, batch)
		}
	}
	streams := min(len(m.progs), batch)
	if streams <= 1 {
		outs, err := m.progs[0].Run(inputs...)
		return clones(outs), err
	}
	sizes := make([]int, streams)
	for s := range sizes {
		sizes[s] = batch / streams
		if s < batch%streams {
			sizes[s]++
		}
	}
	parts := make([][]*autograd.Tensor, streams) // parts[s][i]: stream s's slice of input i
	for _, x := range inputs {
		for s, piece := range autograd.SplitSizes(autograd.NoGrad(x), sizes, 0) {
			parts[s] = append(parts[s], piece.Contiguous().To(x.Format()))
		}
	}
	results := make([][]*autograd.Tensor, streams)
	errs := make([]error, streams)
	var wg sync.WaitGroup
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var runErr error
			misuse := autograd.Try(func() {
				var outs []*autograd.Tensor
				outs, runErr = m.progs[s].Run(parts[s]...)
				results[s] = clones(outs)
			})
			errs[s] = cmp.Or(misuse, runErr)
		}()
	}
	wg.Wait()
	for s, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("graph: MultiStream.Run: stream %d (rows %d): %w", s, sizes[s], err)
		}
	}
	joined := make([]*autograd.Tensor, len(results[0]))
	for o := range joined {
		pieces := make([]*autograd.Tensor, streams)
		for s := range streams {
			pieces[s] = results[s][o]
			if sh := pieces[s].Shape(); len(sh) == 0 || sh[0] != sizes[s] {
				return nil, fmt.Errorf("graph: MultiStream.Run: output %d of a %d-row slice has shape %v: its first dimension is not the batch", o, sizes[s], sh)
			}
		}
		joined[o] = autograd.Cat(pieces, 0)
	}
	return joined, nil
}

func clones(ts []*autograd.Tensor) []*autograd.Tensor {
	if ts == nil {
		return nil
	}
	out := make([]*autograd.Tensor, len(ts))
	for i, t := range ts {
		out[i] = t.Clone()
	}
	return out
}
