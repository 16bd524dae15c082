package main

import (
	"slices"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// The ranks' slices of a batch put back together are the batch: its dense
// rows, targets and every table's bags.
func TestShardBatch(t *testing.T) {
	// 5 samples; table 0 has bags of 1, 2, 0, 1, 3 indices, table 1 one
	// each and shares no offsets with table 0.
	b := &batch{size: 5,
		dense:  autograd.FromFloat32([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 5, 2),
		target: autograd.FromFloat32([]float32{1, 0, 1, 0, 1}, 5, 1),
		indices: []*autograd.Tensor{autograd.FromInt64([]int64{10, 11, 12, 13, 14, 15, 16}, 7),
			autograd.FromInt64([]int64{20, 21, 22, 23, 24}, 5)},
		offsets: []*autograd.Tensor{autograd.FromInt64([]int64{0, 1, 3, 3, 4}, 5), autograd.FromInt64([]int64{0, 1, 2, 3, 4}, 5)},
	}
	for _, world := range []int{1, 2, 3, 5} {
		var dense, target []float32
		var bags [2][][]int64
		for r := range world {
			s := shardBatch(b, r, world)
			if want := (r+1)*5/world - r*5/world; s.size != want {
				t.Errorf("world %d rank %d: %d samples, want %d", world, r, s.size, want)
			}
			dense = append(dense, s.dense.Float32s()...)
			target = append(target, s.target.Float32s()...)
			for tb := range 2 {
				idx, offs := s.indices[tb].Int64s(), s.offsets[tb].Int64s()
				for i, o := range offs {
					end := int64(len(idx))
					if i+1 < len(offs) {
						end = offs[i+1]
					}
					bags[tb] = append(bags[tb], idx[o:end])
				}
			}
		}
		if !slices.Equal(dense, b.dense.Float32s()) || !slices.Equal(target, b.target.Float32s()) {
			t.Errorf("world %d: dense %v targets %v", world, dense, target)
		}
		want := [2][][]int64{{{10}, {11, 12}, {}, {13}, {14, 15, 16}}, {{20}, {21}, {22}, {23}, {24}}}
		for tb := range 2 {
			if !slices.EqualFunc(bags[tb], want[tb], slices.Equal) {
				t.Errorf("world %d table %d: bags %v, want %v", world, tb, bags[tb], want[tb])
			}
		}
	}
}
