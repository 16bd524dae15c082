package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// embCase is a random table and bags of indices into it.
type embCase struct {
	num, dim int
	idx      []int64
	offsets  []int64
	weight   []float32
}

func newEmbCase(r *rand.Rand, num, dim, n, bags int) embCase {
	c := embCase{num: num, dim: dim, idx: make([]int64, n), weight: normRandom(r, num*dim, 0)}
	for i := range c.idx {
		c.idx[i] = int64(r.IntN(num))
	}
	// Random non-decreasing bag starts from 0, some bags empty.
	c.offsets = make([]int64, bags)
	for b := 1; b < bags; b++ {
		c.offsets[b] = c.offsets[b-1] + int64(r.IntN(3*n/bags+1))
		if c.offsets[b] > int64(n) {
			c.offsets[b] = int64(n)
		}
	}
	return c
}

func (c embCase) bagOf(i int) int {
	b := 0
	for k, o := range c.offsets {
		if int64(i) >= o {
			b = k
		}
	}
	return b
}

func TestEmbeddingKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sz := range [][3]int{{1, 1, 1}, {5, 3, 17}, {11, 7, 200}, {3, 1, 1000}, {101, 33, 4096}} {
		c := newEmbCase(r, sz[0], sz[1], sz[2], 1)
		t.Run(fmt.Sprintf("%dx%d/%d", c.num, c.dim, len(c.idx)), func(t *testing.T) {
			n, dim := len(c.idx), c.dim
			out, ok := normOut(t, "out", n*dim)
			EmbeddingForward(dim, c.idx, c.weight, out)
			ok()
			for i, r := range c.idx {
				for j := 0; j < dim; j++ {
					if out[i*dim+j] != c.weight[int(r)*dim+j] {
						t.Fatalf("row %d differs from table row %d", i, r)
					}
				}
			}
			dy := normRandom(r, n*dim, 0)
			for _, skip := range []int64{-1, c.idx[0]} {
				want := make([]float64, c.num*dim)
				for i, r := range c.idx {
					if r == skip {
						continue
					}
					for j := 0; j < dim; j++ {
						want[int(r)*dim+j] += float64(dy[i*dim+j])
					}
				}
				dw, ok := normOut(t, "dw", c.num*dim)
				for i := range dw {
					dw[i] = 99 // overwritten, not accumulated
				}
				EmbeddingBackward(c.num, dim, c.idx, dy, skip, dw)
				ok()
				normClose(t, "dw", dw, want, 1e-6)
			}
		})
	}
}

func TestEmbeddingBagKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, sz := range [][4]int{{1, 1, 1, 1}, {6, 3, 10, 4}, {13, 5, 61, 17}, {40, 16, 3000, 300}, {7, 2, 0, 3}} {
		c := newEmbCase(r, sz[0], sz[1], sz[2], sz[3])
		for _, mode := range []string{"sum", "psw", "mean", "max"} {
			t.Run(fmt.Sprintf("%dx%d/%d/%d/%s", c.num, c.dim, len(c.idx), len(c.offsets), mode), func(t *testing.T) {
				n, dim, bags := len(c.idx), c.dim, len(c.offsets)
				var psw []float32
				if mode == "psw" {
					psw = normRandom(r, n, 0)
				}
				want := make([]float64, bags*dim)
				wantArg := make([]int64, bags*dim)
				for k := range wantArg {
					wantArg[k] = -1
				}
				size := make([]int, bags)
				for i, row := range c.idx {
					b := c.bagOf(i)
					size[b]++
					for j := 0; j < dim; j++ {
						v := float64(c.weight[int(row)*dim+j])
						switch mode {
						case "psw":
							want[b*dim+j] += float64(psw[i]) * v
						case "max":
							if wantArg[b*dim+j] < 0 || v > want[b*dim+j] {
								want[b*dim+j], wantArg[b*dim+j] = v, row
							}
						default:
							want[b*dim+j] += v
						}
					}
				}
				if mode == "mean" {
					for b := range size {
						for j := 0; j < dim && size[b] > 0; j++ {
							want[b*dim+j] /= float64(size[b])
						}
					}
				}
				out, ok := normOut(t, "out", bags*dim)
				var arg []int64
				if mode == "max" {
					arg = make([]int64, bags*dim)
					EmbeddingBagMax(dim, c.idx, c.offsets, c.weight, out, arg)
					if fmt.Sprint(arg) != fmt.Sprint(wantArg) {
						t.Fatalf("argmax %v, want %v", arg, wantArg)
					}
				} else {
					EmbeddingBagSum(dim, c.idx, c.offsets, c.weight, psw, mode == "mean", out)
				}
				ok()
				normClose(t, "out", out, want, 1e-6)

				dy := normRandom(r, bags*dim, 0)
				wantDW := make([]float64, c.num*dim)
				wantDP := make([]float64, n)
				for i, row := range c.idx {
					b := c.bagOf(i)
					for j := 0; j < dim; j++ {
						g := float64(dy[b*dim+j])
						switch mode {
						case "psw":
							wantDW[int(row)*dim+j] += float64(psw[i]) * g
							wantDP[i] += g * float64(c.weight[int(row)*dim+j])
						case "mean":
							wantDW[int(row)*dim+j] += g / float64(size[b])
						case "sum":
							wantDW[int(row)*dim+j] += g
						}
					}
				}
				if mode == "max" {
					for k, row := range wantArg {
						if row >= 0 {
							wantDW[int(row)*dim+k%dim] += float64(dy[k])
						}
					}
				}
				dw, ok := normOut(t, "dw", c.num*dim)
				if mode == "max" {
					EmbeddingBagMaxBackward(c.num, dim, arg, dy, dw)
				} else {
					EmbeddingBagBackward(c.num, dim, c.idx, c.offsets, dy, psw, mode == "mean", dw)
				}
				ok()
				normClose(t, "dw", dw, wantDW, 1e-5)
				if mode == "psw" {
					dp, ok := normOut(t, "dpsw", n)
					EmbeddingBagWeightsGrad(dim, c.idx, c.offsets, c.weight, dy, dp)
					ok()
					normClose(t, "dpsw", dp, wantDP, 1e-5)
				}
			})
		}
	}
}

func TestEmbeddingBagMaxNaN(t *testing.T) {
	nan := float32(math.NaN())
	w := []float32{nan, 1, 2, nan}
	out, arg := make([]float32, 4), make([]int64, 4)
	// A NaN that comes first in a bag stays; one that comes later loses.
	EmbeddingBagMax(2, []int64{0, 1, 1, 0}, []int64{0, 2}, w, out, arg)
	if !math.IsNaN(float64(out[0])) || out[1] != 1 || out[2] != 2 || !math.IsNaN(float64(out[3])) {
		t.Errorf("max %v, want [NaN 1 2 NaN] as PyTorch's strict comparison gives", out)
	}
	if fmt.Sprint(arg) != "[0 0 1 1]" {
		t.Errorf("argmax %v", arg)
	}
}

func BenchmarkEmbeddingBag(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	c := newEmbCase(r, 100000, 64, 2048*20, 2048)
	out := make([]float32, len(c.offsets)*c.dim)
	dy := normRandom(r, len(out), 0)
	dw := make([]float32, c.num*c.dim)
	b.Run("sum", func(b *testing.B) {
		for b.Loop() {
			EmbeddingBagSum(c.dim, c.idx, c.offsets, c.weight, nil, false, out)
		}
	})
	b.Run("backward", func(b *testing.B) {
		for b.Loop() {
			EmbeddingBagBackward(c.num, c.dim, c.idx, c.offsets, dy, nil, false, dw)
		}
	})
}
