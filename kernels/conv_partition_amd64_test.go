//go:build amd64 && !noasm

package kernels

import (
	"fmt"
	"testing"
)

// TestConvDirectPartition is issue 23's partition test for the passes
// of ResNet-50's convolutions that take the direct AVX-512 path rather
// than a GEMM (TestGemmPartition has those): at batch 1, 8 and 16, on
// 16, 32 and 64 workers, the forward's cells (output rows × 32-channel
// blocks) and the input gradient's give every worker work within what
// whole cells allow (gemmGoal: 1.25 where there are 4 cells a worker),
// and the weight gradient's parts × cells give every worker work within
// 1.25 of the mean.
func TestConvDirectPartition(t *testing.T) {
	if level < AVX512 {
		t.Skip("the direct path needs AVX-512")
	}
	checkGrid := func(what string, s *ConvShape, workers int) {
		t.Helper()
		_, nc := directBlocking(s)
		rows := s.N * s.Out[0] * s.Out[1]
		for j0 := 0; j0 < s.O; j0 += nc {
			np := min(nc, s.O-j0) / 32
			g := gemmPlan(rows, np, workers, false)
			if !g.balanced(workers) {
				t.Errorf("%s, %d workers: %d rows × %d blocks as %d×%d cells, busiest %.2f× the mean (goal %.2f)",
					what, workers, rows, np, g.gm, g.gn, g.imbalance(workers), gemmGoal(rows, np, workers))
			}
		}
	}
	paths := 0
	for _, batch := range []int{1, 8, 16} {
		for _, sh := range ResNet50ConvShapes(batch) {
			s := &sh.ConvShape
			for _, workers := range []int{16, 32, 64} {
				name := fmt.Sprintf("%s at batch %d", sh.Name, batch)
				if directFits(s) {
					paths++
					checkGrid(name+" forward", s, workers)
				}
				if ds, ok := directDataShape(s); ok {
					paths++
					checkGrid(name+" backward-data", &ds, workers)
				}
				if directWeightFits(s) {
					paths++
					parts, step, _, cells := directWeightPlan(s, workers)
					rows := s.N * s.Out[0] * s.Out[1]
					if r := splitKImbalance(cells, rows, step, parts, workers); r > gemmBalanced || parts*cells.cells() < workers {
						t.Errorf("%s backward-weight, %d workers: %d parts × %d cells, busiest %.2f× the mean", name, workers, parts, cells.cells(), r)
					}
				}
			}
		}
	}
	if paths == 0 {
		t.Error("no ResNet-50 convolution takes the direct path")
	}
}
