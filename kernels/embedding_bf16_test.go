package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// bf16Table rounds c's table to bfloat16 and returns it with its exact
// float32 widening, the table the float32 kernels compare on.
func bf16Table(c embCase) (bf []uint16, wide []float32) {
	bf = make([]uint16, len(c.weight))
	F32ToBF16(bf, c.weight)
	wide = make([]float32, len(bf))
	BF16ToF32(wide, bf)
	return bf, wide
}

// rounded16 is want rounded to bfloat16 element by element.
func rounded16(want []float32) []uint16 {
	out := make([]uint16, len(want))
	for i, v := range want {
		out[i] = BF16FromF32(v)
	}
	return out
}

func sameBits16(t *testing.T, what string, got, want []uint16) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: element %d = %#04x (%v), want %#04x (%v)", what, i, got[i], F32FromBF16(got[i]), want[i], F32FromBF16(want[i]))
		}
	}
}

// garbage16 fills an output the kernel must overwrite entirely.
func garbage16(d []uint16) {
	for i := range d {
		d[i] = 0x42c6 // 99
	}
}

// TestEmbeddingBF16Kernels checks every bfloat16 kernel against the
// float32 reference on the widened table, rounded once: the arithmetic
// and its order are the same, so the bits must be.
func TestEmbeddingBF16Kernels(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	for _, sz := range [][4]int{{1, 1, 1, 1}, {5, 3, 17, 4}, {13, 7, 40, 11}, {11, 31, 200, 9}, {3, 97, 9, 4}, {101, 33, 1000, 64}} {
		num, dim, n, bags := sz[0], sz[1], sz[2], sz[3]
		c := newEmbCase(r, num, dim, n, bags)
		for i := range c.weight {
			if r.IntN(60) == 0 {
				c.weight[i] = float32(math.NaN())
			}
		}
		bf, wide := bf16Table(c)
		t.Run(fmt.Sprintf("%dx%d/%d in %d", num, dim, n, bags), func(t *testing.T) {
			out, ok := guarded16(t, n*dim)
			garbage16(out)
			EmbeddingForwardBF16(dim, c.idx, bf, out)
			ok()
			want := make([]float32, n*dim)
			embForwardGeneric(dim, c.idx, wide, want)
			sameBits16(t, "forward", out, rounded16(want))

			dy := vecRand(r, n*dim, 0)
			wantDW := make([]float32, num*dim)
			for _, skip := range []int64{-1, c.idx[0]} {
				embBackwardVariants[Generic](num, dim, c.idx, dy, skip, wantDW)
				dw, ok := guarded16(t, num*dim)
				garbage16(dw)
				EmbeddingBackwardBF16(num, dim, c.idx, dy, skip, dw)
				ok()
				sameBits16(t, fmt.Sprintf("backward skip %d", skip), dw, rounded16(wantDW))
			}

			psw, gy := vecRand(r, n, 0), vecRand(r, bags*dim, 0)
			for _, mode := range []string{"sum", "mean", "psw"} {
				var p []float32
				if mode == "psw" {
					p = psw
				}
				want := make([]float32, bags*dim)
				bagSumGeneric(dim, c.idx, c.offsets, wide, p, mode == "mean", want)
				out, ok := guarded16(t, bags*dim)
				garbage16(out)
				EmbeddingBagSumBF16(dim, c.idx, c.offsets, bf, p, mode == "mean", out)
				ok()
				sameBits16(t, mode, out, rounded16(want))

				bagBackwardGeneric(num, dim, c.idx, c.offsets, gy, p, mode == "mean", wantDW)
				dw, ok := guarded16(t, num*dim)
				garbage16(dw)
				EmbeddingBagBackwardBF16(num, dim, c.idx, c.offsets, gy, p, mode == "mean", dw)
				ok()
				sameBits16(t, mode+" backward", dw, rounded16(wantDW))
			}

			wantMax, wantArg := make([]float32, bags*dim), make([]int64, bags*dim)
			bagMaxGeneric(dim, c.idx, c.offsets, wide, wantMax, wantArg)
			mx, ok := guarded16(t, bags*dim)
			garbage16(mx)
			arg := make([]int64, bags*dim)
			EmbeddingBagMaxBF16(dim, c.idx, c.offsets, bf, mx, arg)
			ok()
			sameBits16(t, "max", mx, rounded16(wantMax))
			for i := range arg {
				if arg[i] != wantArg[i] {
					t.Fatalf("max: argmax %d = %d, want %d", i, arg[i], wantArg[i])
				}
			}
			bagMaxBackwardGeneric(num, dim, wantArg, gy, wantDW)
			dw, ok := guarded16(t, num*dim)
			garbage16(dw)
			EmbeddingBagMaxBackwardBF16(num, dim, arg, gy, dw)
			ok()
			sameBits16(t, "max backward", dw, rounded16(wantDW))

			wantDP := make([]float32, n)
			bagWeightsGradGeneric(dim, c.idx, c.offsets, wide, gy, wantDP)
			dp, ok := guarded(t, n)
			EmbeddingBagWeightsGradBF16(dim, c.idx, c.offsets, bf, gy, dp)
			ok()
			sameBits32(t, "weights grad", dp, wantDP)
		})
	}
}

// TestEmbeddingBF16MaxBackwardSumsInFloat32 pins the rounding of a table
// element that receives many small gradients: summed in float32 and
// rounded once it keeps them, where bfloat16 running sums (PyTorch 1.13's
// dense embedding backward) would lose every one after the first.
func TestEmbeddingBF16MaxBackwardSumsInFloat32(t *testing.T) {
	const bags = 300
	argmax := make([]int64, bags)
	dy := make([]float32, bags)
	for b := range dy {
		dy[b] = 0x1p-9
	}
	dy[0] = 1
	dw := make([]uint16, 2)
	EmbeddingBagMaxBackwardBF16(2, 1, argmax, dy, dw)
	if want := BF16FromF32(1 + 299*0x1p-9); dw[0] != want || dw[1] != 0 {
		t.Fatalf("dw = %v %v, want %v 0", F32FromBF16(dw[0]), F32FromBF16(dw[1]), F32FromBF16(want))
	}
	idx := make([]int64, bags)
	EmbeddingBackwardBF16(2, 1, idx, dy, -1, dw)
	if want := BF16FromF32(1 + 299*0x1p-9); dw[0] != want {
		t.Fatalf("embedding backward dw = %v, want %v", F32FromBF16(dw[0]), F32FromBF16(want))
	}
}

func TestEmbeddingBF16ShortOutputs(t *testing.T) {
	idx, offsets := []int64{0, 1}, []int64{0}
	table := make([]uint16, 4)
	for name, f := range map[string]func(){
		"forward":  func() { EmbeddingForwardBF16(2, idx, table, make([]uint16, 3)) },
		"backward": func() { EmbeddingBackwardBF16(2, 2, idx, make([]float32, 4), -1, make([]uint16, 3)) },
		"bag sum":  func() { EmbeddingBagSumBF16(2, idx, offsets, table, []float32{1}, false, make([]uint16, 2)) },
		"bag max":  func() { EmbeddingBagMaxBF16(2, idx, offsets, table, make([]uint16, 2), make([]int64, 1)) },
		"bag backward": func() {
			EmbeddingBagBackwardBF16(2, 2, idx, offsets, make([]float32, 1), nil, false, make([]uint16, 4))
		},
		"max backward": func() { EmbeddingBagMaxBackwardBF16(2, 2, make([]int64, 2), make([]float32, 2), make([]uint16, 3)) },
		"weights grad": func() { EmbeddingBagWeightsGradBF16(2, idx, offsets, table, make([]float32, 2), make([]float32, 1)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic for a short slice", name)
				}
			}()
			f()
		}()
	}
}

func TestEmbeddingBF16DoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	r := rand.New(rand.NewPCG(93, 94))
	c := newEmbCase(r, 5000, 65, 4096, 512)
	bf, _ := bf16Table(c)
	dim, n, bags := c.dim, len(c.idx), len(c.offsets)
	out, dy, dw := make([]uint16, n*dim), vecRand(r, n*dim, 0), make([]uint16, c.num*dim)
	psw, dp, arg := vecRand(r, n, 0), make([]float32, n), make([]int64, bags*dim)
	EmbeddingBagMaxBF16(dim, c.idx, c.offsets, bf, out[:bags*dim], arg)
	for name, f := range map[string]func(){
		"EmbeddingForwardBF16":        func() { EmbeddingForwardBF16(dim, c.idx, bf, out) },
		"EmbeddingBackwardBF16":       func() { EmbeddingBackwardBF16(c.num, dim, c.idx, dy, -1, dw) },
		"EmbeddingBagSumBF16":         func() { EmbeddingBagSumBF16(dim, c.idx, c.offsets, bf, psw, false, out[:bags*dim]) },
		"EmbeddingBagMaxBF16":         func() { EmbeddingBagMaxBF16(dim, c.idx, c.offsets, bf, out[:bags*dim], arg) },
		"EmbeddingBagBackwardBF16":    func() { EmbeddingBagBackwardBF16(c.num, dim, c.idx, c.offsets, dy[:bags*dim], nil, true, dw) },
		"EmbeddingBagMaxBackwardBF16": func() { EmbeddingBagMaxBackwardBF16(c.num, dim, arg, dy[:bags*dim], dw) },
		"EmbeddingBagWeightsGradBF16": func() { EmbeddingBagWeightsGradBF16(dim, c.idx, c.offsets, bf, dy[:bags*dim], dp) },
	} {
		if level == Generic && name == "EmbeddingBagMaxBackwardBF16" {
			continue // it runs the float32 kernel, whose reference allocates
		}
		f()
		if a := testing.AllocsPerRun(5, f); a != 0 {
			t.Errorf("%s allocates %v times per call", name, a)
		}
	}
}
