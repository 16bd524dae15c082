//go:build !noasm

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
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

// BenchmarkAMXStrip times the kernel alone on one core with its
// operands where the sizes put them: a strip of steps×32 depths (16 KiB at
// 8 steps, in L1) by blocks 32-column blocks (16 KiB each at 8 steps;
// eight of 64 steps, 1 MiB, stream from L2). The tiles are woken first:
// the first AMX instructions after idling run slowly.
func BenchmarkAMXStrip(b *testing.B) {
	if amxAsmKernel() == nil {
		b.Skip("no AMX here")
	}
	for _, sz := range []struct{ steps, blocks int }{{8, 1}, {8, 8}, {16, 8}, {32, 8}, {64, 4}, {64, 8}} {
		var abuf []uint16
		var bbuf []uint32
		var cbuf []float32
		a := alignedGrow(&abuf, sz.steps*amxStepElems)
		bp := alignedGrow(&bbuf, sz.blocks*sz.steps*amxStepWords)
		c := alignedGrow(&cbuf, sz.blocks*amxBlockElems)
		for i := range a {
			a[i] = BF16FromF32(1)
		}
		for i := range bp {
			bp[i] = 0x3f803f80
		}
		kernel := amxAsmKernel()
		b.Run(fmt.Sprintf("steps=%d/blocks=%d", sz.steps, sz.blocks), func(b *testing.B) {
			for start := time.Now(); time.Since(start) < 10*time.Millisecond; {
				kernel(&amxTiles, &a[0], &bp[0], &c[0], sz.steps, sz.blocks)
			}
			for b.Loop() {
				kernel(&amxTiles, &a[0], &bp[0], &c[0], sz.steps, sz.blocks)
			}
			flops := 2.0 * amxStripRows * float64(sz.blocks*amxBlockCols*sz.steps*amxStepDepth)
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkGemmBF16AMX times square GemmBF16 products on the AMX path on
// the process's pool (KILN_NUM_THREADS), and the same calls with a kernel
// that does nothing: the packing, scheduling and finishing around it.
func BenchmarkGemmBF16AMX(b *testing.B) {
	kernel := amxAsmKernel()
	if kernel == nil {
		b.Skip("no AMX here")
	}
	nop := func(*amxTileConfig, *uint16, *uint32, *float32, int, int) {}
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{256, 1024, 2048} {
		a, bm, c := bf16Rand(r, n*n), bf16Rand(r, n*n), make([]float32, n*n)
		for _, k := range []struct {
			name   string
			kernel amxStripFunc
		}{{"amx", kernel}, {"overhead", nop}} {
			b.Run(fmt.Sprintf("%d/%s", n, k.name), func(b *testing.B) {
				for b.Loop() {
					gemmBF16(false, false, n, n, n, 1, a, n, bm, n, 0, c, n, nil, nil, k.kernel)
				}
				b.ReportMetric(2*float64(n*n*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
