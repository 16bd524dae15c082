package main

import "github.com/kilnml/kiln/autograd"

// shardBatch returns rank's slice of b when world ranks share it: samples
// [rank·n/world, (rank+1)·n/world), their dense rows, targets and bags.
// Every rank reads the whole batch and keeps its slice, so the global
// batches, and a run's course, are those of one process whatever world
// is.
func shardBatch(b *batch, rank, world int) *batch {
	if world == 1 {
		return b
	}
	n := b.size
	lo, hi := rank*n/world, (rank+1)*n/world
	out := &batch{size: hi - lo, dense: rowsOf(b.dense, lo, hi), target: rowsOf(b.target, lo, hi)}
	sliced := map[*autograd.Tensor]*autograd.Tensor{} // tables often share one offsets tensor
	for t, idx := range b.indices {
		offs := b.offsets[t].Int64s()
		start, end := offs[lo], int64(idx.Numel())
		if hi < n {
			end = offs[hi]
		}
		out.indices = append(out.indices, autograd.FromInt64(append([]int64(nil), idx.Int64s()[start:end]...), int(end-start)))
		o, ok := sliced[b.offsets[t]]
		if !ok {
			v := make([]int64, hi-lo)
			for i := range v {
				v[i] = offs[lo+i] - start
			}
			o = autograd.FromInt64(v, hi-lo)
			sliced[b.offsets[t]] = o
		}
		out.offsets = append(out.offsets, o)
	}
	return out
}

// rowsOf returns rows [lo, hi) of a float32 tensor.
func rowsOf(x *autograd.Tensor, lo, hi int) *autograd.Tensor {
	shape := x.Shape()
	per := x.Numel() / shape[0]
	shape[0] = hi - lo
	return autograd.FromFloat32(append([]float32(nil), x.ContiguousFloat32s()[lo*per:hi*per]...), shape...)
}
