//go:build !noasm

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAMXStripKernel runs the AMX kernel against its Go model: bit for bit
// on whole numbers (exact sums in any order), and within float32 rounding
// of the sum of magnitudes on normal random values, for 1 to 9 steps and
// 1 to 3 blocks, with the C blocks guarded on both sides.
func TestAMXStripKernel(t *testing.T) {
	kernel := amxAsmKernel()
	if kernel == nil {
		t.Skip("no AMX here: " + Features())
	}
	r := rand.New(rand.NewPCG(41, 42))
	for _, whole := range []bool{true, false} {
		for _, steps := range []int{1, 2, 9} {
			for _, blocks := range []int{1, 3} {
				val := func() uint16 {
					if whole {
						return BF16FromF32(float32(r.IntN(9) - 4))
					}
					return BF16FromF32(float32(r.NormFloat64()))
				}
				var abuf []uint16
				var bbuf []uint32
				var cbuf []float32
				a := alignedGrow(&abuf, steps*amxStepElems)
				b := alignedGrow(&bbuf, blocks*steps*amxStepWords)
				for i := range a {
					a[i] = val()
				}
				for i := range b {
					b[i] = uint32(val()) | uint32(val())<<16
				}
				const guard = 64
				c := alignedGrow(&cbuf, blocks*amxBlockElems+2*guard)
				for i := range c {
					c[i] = -7
				}
				want := make([]float32, blocks*amxBlockElems)
				amxStripGo(&amxTiles, &a[0], &b[0], &want[0], steps, blocks)
				kernel(&amxTiles, &a[0], &b[0], &c[guard], steps, blocks)
				for i, v := range c {
					if i < guard || i >= guard+len(want) {
						if v != -7 {
							t.Fatalf("steps %d, blocks %d: wrote guard element %d", steps, blocks, i)
						}
						continue
					}
					w := want[i-guard]
					tol := 0.0
					if !whole {
						tol = float64(steps*amxStepDepth) * 8 * 0x1p-24 * float64(steps*amxStepDepth) * 4
					}
					if math.Abs(float64(v-w)) > tol {
						t.Fatalf("whole %v, steps %d, blocks %d: C element %d (block %d, row %d, column %d) = %v, model %v",
							whole, steps, blocks, i-guard, (i-guard)/amxBlockElems, (i-guard)%amxBlockElems/amxBlockCols, (i-guard)%amxBlockCols, v, w)
					}
				}
			}
		}
	}
}

// BenchmarkAMXStrip times the kernel alone on one core with its operands
// in cache: a 32-row strip of 512 depths by eight 32-column blocks.
func BenchmarkAMXStrip(b *testing.B) {
	kernel := amxAsmKernel()
	if kernel == nil {
		b.Skip("no AMX here")
	}
	const steps, blocks = 16, 8
	var abuf []uint16
	var bbuf []uint32
	var cbuf []float32
	a := alignedGrow(&abuf, steps*amxStepElems)
	bp := alignedGrow(&bbuf, blocks*steps*amxStepWords)
	c := alignedGrow(&cbuf, blocks*amxBlockElems)
	for i := range a {
		a[i] = BF16FromF32(1)
	}
	for i := range bp {
		bp[i] = 0x3f803f80
	}
	for b.Loop() {
		kernel(&amxTiles, &a[0], &bp[0], &c[0], steps, blocks)
	}
	flops := 2.0 * amxStripRows * blocks * amxBlockCols * steps * amxStepDepth
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
