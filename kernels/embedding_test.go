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

// TestEmbeddingLevels runs every variant of the embedding kernels against
// the reference. All but the per-sample-weight gradient (a dot product per
// lookup) add the same values in the same order and must give the same
// bits.
func TestEmbeddingLevels(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		r := rand.New(rand.NewPCG(61, 62))
		fwd, bwd := pick(l, embForwardVariants), pick(l, embBackwardVariants)
		sum, mx := pick(l, bagSumVariants), pick(l, bagMaxVariants)
		bbwd, mxbwd, wgrad := pick(l, bagBackwardVariants), pick(l, bagMaxBackVariants), pick(l, bagWGradVariants)
		dims := append(suiteSizes(8), vecChunk+9)
		for _, dim := range dims {
			num, n, bags := 13, 40, 11
			if dim > 1000 {
				num, n, bags = 3, 5, 2
			}
			c := newEmbCase(r, num, dim, n, bags)
			for i := range c.weight {
				if r.IntN(60) == 0 {
					c.weight[i] = float32(math.NaN())
				}
			}
			name := fmt.Sprintf("dim=%d", dim)

			out, ok := guarded(t, n*dim)
			fwd(dim, c.idx, c.weight, out)
			ok()
			want := make([]float32, n*dim)
			embForwardGeneric(dim, c.idx, c.weight, want)
			sameBits32(t, "forward "+name, out, want)

			dy := vecRand(r, n*dim, 0)
			wantDW := make([]float32, num*dim)
			embBackwardVariants[Generic](num, dim, c.idx, dy, c.idx[0], wantDW)
			dw, ok := guarded(t, num*dim)
			poolGarbage(dw)
			bwd(num, dim, c.idx, dy, c.idx[0], dw)
			ok()
			sameBits32(t, "backward "+name, dw, wantDW)

			psw := vecRand(r, n, 0)
			gy := vecRand(r, bags*dim, 0)
			for _, mode := range []string{"sum", "mean", "psw"} {
				var p []float32
				if mode == "psw" {
					p = psw
				}
				want := make([]float32, bags*dim)
				bagSumGeneric(dim, c.idx, c.offsets, c.weight, p, mode == "mean", want)
				out, ok := guarded(t, bags*dim)
				poolGarbage(out)
				sum(dim, c.idx, c.offsets, c.weight, p, mode == "mean", out)
				ok()
				sameBits32(t, mode+" "+name, out, want)

				bagBackwardGeneric(num, dim, c.idx, c.offsets, gy, p, mode == "mean", wantDW)
				dw, ok := guarded(t, num*dim)
				poolGarbage(dw)
				bbwd(num, dim, c.idx, c.offsets, gy, p, mode == "mean", dw)
				ok()
				sameBits32(t, mode+" backward "+name, dw, wantDW)
			}

			wantArg := make([]int64, bags*dim)
			bagMaxGeneric(dim, c.idx, c.offsets, c.weight, want[:bags*dim], wantArg)
			out, ok = guarded(t, bags*dim)
			arg := make([]int64, bags*dim)
			mx(dim, c.idx, c.offsets, c.weight, out, arg)
			ok()
			sameBits32(t, "max "+name, out, want[:bags*dim])
			for i := range arg {
				if arg[i] != wantArg[i] {
					t.Fatalf("max %s: argmax %d = %d, want %d", name, i, arg[i], wantArg[i])
				}
			}
			bagMaxBackwardGeneric(num, dim, wantArg, gy, wantDW)
			dw, ok = guarded(t, num*dim)
			poolGarbage(dw)
			mxbwd(num, dim, arg, gy, dw)
			ok()
			sameBits32(t, "max backward "+name, dw, wantDW)

			wantDP := make([]float32, n)
			bagWeightsGradGeneric(dim, c.idx, c.offsets, c.weight, gy, wantDP)
			dp, ok := guarded(t, n)
			wgrad(dim, c.idx, c.offsets, c.weight, gy, dp)
			ok()
			for i := range dp {
				// NaN table entries make some products NaN in both.
				if d := math.Abs(float64(dp[i] - wantDP[i])); d > 1e-6*(1+math.Abs(float64(wantDP[i]))) {
					t.Fatalf("weights grad %s: element %d = %v, want %v", name, i, dp[i], wantDP[i])
				}
			}
		}
	})
}

func TestEmbeddingDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	if level == Generic {
		t.Skip("the pure-Go reference allocates; only the vector path promises not to")
	}
	r := rand.New(rand.NewPCG(63, 64))
	c := newEmbCase(r, 5000, 64, 4096, 512)
	dim, n, bags := c.dim, len(c.idx), len(c.offsets)
	out, dy, dw := make([]float32, n*dim), vecRand(r, n*dim, 0), make([]float32, c.num*dim)
	psw, dp, arg := vecRand(r, n, 0), make([]float32, n), make([]int64, bags*dim)
	for name, f := range map[string]func(){
		"EmbeddingForward":        func() { EmbeddingForward(dim, c.idx, c.weight, out) },
		"EmbeddingBackward":       func() { EmbeddingBackward(c.num, dim, c.idx, dy, -1, dw) },
		"EmbeddingBagSum":         func() { EmbeddingBagSum(dim, c.idx, c.offsets, c.weight, psw, false, out[:bags*dim]) },
		"EmbeddingBagMax":         func() { EmbeddingBagMax(dim, c.idx, c.offsets, c.weight, out[:bags*dim], arg) },
		"EmbeddingBagBackward":    func() { EmbeddingBagBackward(c.num, dim, c.idx, c.offsets, dy[:bags*dim], nil, true, dw) },
		"EmbeddingBagMaxBackward": func() { EmbeddingBagMaxBackward(c.num, dim, arg, dy[:bags*dim], dw) },
		"EmbeddingBagWeightsGrad": func() { EmbeddingBagWeightsGrad(dim, c.idx, c.offsets, c.weight, dy[:bags*dim], dp) },
	} {
		f()
		if a := testing.AllocsPerRun(5, f); a != 0 {
			t.Errorf("%s allocates %v times per call", name, a)
		}
	}
}

// BenchmarkEmbeddingBag times DLRM-style bags on a 1M×64 table: 2048 bags
// of 8 random rows (16k lookups). GB/s counts the rows read and the
// output written (forward) or, for the backward pass, the whole dense
// table gradient written (which dominates it).
func BenchmarkEmbeddingBag(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	num, dim, bags, per := 1<<20, 64, 2048, 8
	weight := vecRand(r, num*dim, 0)
	idx := make([]int64, bags*per)
	for i := range idx {
		idx[i] = int64(r.IntN(num))
	}
	offsets := make([]int64, bags)
	for i := range offsets {
		offsets[i] = int64(i * per)
	}
	out := make([]float32, bags*dim)
	dy := vecRand(r, bags*dim, 0)
	b.Run("sum", func(b *testing.B) {
		m := startMeter()
		for b.Loop() {
			EmbeddingBagSum(dim, idx, offsets, weight, nil, false, out)
		}
		m.report(b, float64(4*dim*(len(idx)+bags)))
	})
	b.Run("max", func(b *testing.B) {
		arg := make([]int64, bags*dim)
		m := startMeter()
		for b.Loop() {
			EmbeddingBagMax(dim, idx, offsets, weight, out, arg)
		}
		m.report(b, float64(4*dim*(len(idx)+3*bags)))
	})
	b.Run("backward", func(b *testing.B) {
		dw := make([]float32, num*dim)
		m := startMeter()
		for b.Loop() {
			EmbeddingBagBackward(num, dim, idx, offsets, dy, nil, false, dw)
		}
		m.report(b, float64(4*num*dim))
	})
}
