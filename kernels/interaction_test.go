package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// interactionCase is a random interaction: feature matrices and an output
// gradient.
type interactionCase struct {
	s     InteractionShape
	feats [][]float32
	dout  []float32
}

func newInteractionCase(r *rand.Rand, s InteractionShape) interactionCase {
	c := interactionCase{s: s, feats: make([][]float32, s.Features), dout: normRandom(r, s.Batch*s.Width(), 0)}
	for f := range c.feats {
		c.feats[f] = normRandom(r, s.Batch*s.Dim, 0)
	}
	return c
}

// reference computes the interaction and its gradients in float64 from
// the pair lists as dlrm builds them (li, lj), with the bound of each
// value's rounding error: the sum of the magnitudes of its terms.
func (c interactionCase) reference() (out, outMag []float64, grads, gradMags [][]float64) {
	s := c.s
	d, w := s.Dim, s.Width()
	offset := 0
	if s.Self {
		offset = 1
	}
	var li, lj []int
	for i := range s.Features {
		for j := 0; j < i+offset; j++ {
			li, lj = append(li, i), append(lj, j)
		}
	}
	out, outMag = make([]float64, s.Batch*w), make([]float64, s.Batch*w)
	grads, gradMags = make([][]float64, s.Features), make([][]float64, s.Features)
	for f := range grads {
		grads[f], gradMags[f] = make([]float64, s.Batch*d), make([]float64, s.Batch*d)
	}
	at := func(f, b, k int) float64 { return float64(c.feats[f][b*d+k]) }
	for b := range s.Batch {
		for k := range d {
			out[b*w+k] = at(0, b, k)
			outMag[b*w+k] = math.Abs(at(0, b, k))
			grads[0][b*d+k] = float64(c.dout[b*w+k])
			gradMags[0][b*d+k] = math.Abs(grads[0][b*d+k])
		}
		for p := range li {
			i, j := li[p], lj[p]
			g := float64(c.dout[b*w+d+p])
			for k := range d {
				out[b*w+d+p] += at(i, b, k) * at(j, b, k)
				outMag[b*w+d+p] += math.Abs(at(i, b, k) * at(j, b, k))
				grads[i][b*d+k] += g * at(j, b, k)
				grads[j][b*d+k] += g * at(i, b, k)
				gradMags[i][b*d+k] += math.Abs(g * at(j, b, k))
				gradMags[j][b*d+k] += math.Abs(g * at(i, b, k))
			}
		}
	}
	return
}

// interactionClose fails t unless every element of got is within float32
// rounding of a sum of its length: n·2⁻²⁴ of the magnitudes of its terms.
func interactionClose(t *testing.T, what string, got []float32, want, mag []float64, terms int) {
	t.Helper()
	tol := float64(terms+2) * 0x1p-24
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol*mag[i]+1e-30) {
			t.Fatalf("%s: element %d = %v, want %v (tolerance %g)", what, i, got[i], want[i], tol*mag[i])
		}
	}
}

func TestInteractionKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	for _, s := range []InteractionShape{
		{Batch: 1, Dim: 1, Features: 1, Self: true},
		{Batch: 1, Dim: 1, Features: 2},
		{Batch: 3, Dim: 2, Features: 2, Self: true},
		{Batch: 5, Dim: 8, Features: 5},
		{Batch: 5, Dim: 8, Features: 5, Self: true},
		{Batch: 4, Dim: 7, Features: 3},
		{Batch: 7, Dim: 13, Features: 4, Self: true},
		{Batch: 3, Dim: 16, Features: 27},
		{Batch: 2, Dim: 0, Features: 3, Self: true},
	} {
		t.Run(fmt.Sprintf("B%d_d%d_F%d_self%v", s.Batch, s.Dim, s.Features, s.Self), func(t *testing.T) {
			c := newInteractionCase(r, s)
			want, wantMag, wantGrads, gradMags := c.reference()
			out, ok := guarded(t, s.Batch*s.Width())
			InteractionForward(s, c.feats, out)
			ok()
			interactionClose(t, "out", out, want, wantMag, s.Dim)
			grads := make([][]float32, s.Features)
			checks := make([]func(), s.Features)
			for f := range grads {
				grads[f], checks[f] = guarded(t, s.Batch*s.Dim)
				for i := range grads[f] {
					grads[f][i] = float32(math.NaN()) // overwritten, not added to
				}
			}
			InteractionBackward(s, c.feats, c.dout, grads)
			for f := range grads {
				checks[f]()
				interactionClose(t, fmt.Sprintf("gradient %d", f), grads[f], wantGrads[f], gradMags[f], 2*s.Features+1)
			}
			// A nil gradient is skipped and changes none of the others.
			if s.Features > 1 {
				part := make([][]float32, s.Features)
				part[1] = make([]float32, s.Batch*s.Dim)
				InteractionBackward(s, c.feats, c.dout, part)
				sameBits32(t, "gradient 1 alone", part[1], grads[1])
			}
		})
	}
}

// TestInteractionThreads checks that the bits do not depend on how the
// samples are split: the work here is large enough for Parallel to split
// it at 2 and 3 threads.
func TestInteractionThreads(t *testing.T) {
	r := rand.New(rand.NewPCG(63, 64))
	for _, self := range []bool{false, true} {
		s := InteractionShape{Batch: 257, Dim: 16, Features: 9, Self: self}
		c := newInteractionCase(r, s)
		var outs [][]float32
		var grads [][][]float32
		for _, threads := range []int{1, 2, 3} {
			out := make([]float32, s.Batch*s.Width())
			g := make([][]float32, s.Features)
			for f := range g {
				g[f] = make([]float32, s.Batch*s.Dim)
			}
			int8WithThreads(threads, func() {
				InteractionForward(s, c.feats, out)
				InteractionBackward(s, c.feats, c.dout, g)
			})
			outs, grads = append(outs, out), append(grads, g)
		}
		for k := 1; k < len(outs); k++ {
			sameBits32(t, fmt.Sprintf("self=%v out at %d threads", self, k+1), outs[k], outs[0])
			for f := range grads[k] {
				sameBits32(t, fmt.Sprintf("self=%v gradient %d at %d threads", self, f, k+1), grads[k][f], grads[0][f])
			}
		}
	}
}

func TestInteractionZeroBatch(t *testing.T) {
	s := InteractionShape{Batch: 0, Dim: 4, Features: 3}
	feats := [][]float32{nil, {}, nil}
	InteractionForward(s, feats, nil)
	InteractionBackward(s, feats, nil, [][]float32{nil, {}, nil})
	if s.Width() != 4+3 {
		t.Fatalf("width %d, want 7", s.Width())
	}
}

func TestInteractionMisuse(t *testing.T) {
	s := InteractionShape{Batch: 2, Dim: 3, Features: 3}
	feats := [][]float32{make([]float32, 6), make([]float32, 6), make([]float32, 6)}
	out := make([]float32, 2*s.Width())
	grads := [][]float32{make([]float32, 6), nil, make([]float32, 6)}
	feats16 := [][]uint16{make([]uint16, 6), make([]uint16, 6), make([]uint16, 6)}
	out16, nil16 := make([]uint16, 2*s.Width()), make([][]uint16, 3)
	checkMisuse(t, []misuseCase{
		{"no features", ErrShape, func() { InteractionForward(InteractionShape{Batch: 2, Dim: 3}, nil, out) }},
		{"negative batch", ErrShape, func() { InteractionForward(InteractionShape{Batch: -1, Dim: 3, Features: 3}, feats, out) }},
		{"negative dim", ErrShape, func() { InteractionForward(InteractionShape{Batch: 2, Dim: -3, Features: 3}, feats, out) }},
		{"too few features", ErrShape, func() { InteractionForward(s, feats[:2], out) }},
		{"short feature", ErrShape, func() { InteractionForward(s, [][]float32{feats[0], feats[1][:5], feats[2]}, out) }},
		{"short out", ErrShape, func() { InteractionForward(s, feats, out[:len(out)-1]) }},
		{"short dout", ErrShape, func() { InteractionBackward(s, feats, out[:len(out)-1], grads) }},
		{"too few gradients", ErrShape, func() { InteractionBackward(s, feats, out, grads[:2]) }},
		{"short gradient", ErrShape, func() { InteractionBackward(s, feats, out, [][]float32{nil, nil, make([]float32, 5)}) }},
		{"short bfloat16 out", ErrShape, func() { InteractionForwardBF16(s, feats16, out16[:len(out16)-1]) }},
		{"short bfloat16 feature", ErrShape, func() { InteractionBackwardBF16(s, [][]uint16{feats16[0], feats16[1][:5], feats16[2]}, out16, nil16) }},
		{"short bfloat16 gradient", ErrShape, func() { InteractionBackwardBF16(s, feats16, out16, [][]uint16{nil, make([]uint16, 5), nil}) }},
		{"too few bfloat16 gradients", ErrShape, func() { InteractionBackwardBF16(s, feats16, out16, nil16[:2]) }},
		{"self width", ErrShape, func() {
			InteractionForward(InteractionShape{Batch: 2, Dim: 3, Features: 3, Self: true}, feats, out)
		}},
	})
}

// TestInteractionVariants holds each level's dot and gradient loops to
// the reference bit for bit, on row lengths around the vectors' 16 and
// 64 (tails included) and feature counts from 0 to DLRM's 27 and around
// the four gradients done at once, with and without a gradient skipped,
// writing nothing but the sample's rows.
func TestInteractionVariants(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		triangle, grads := pick(l, interactionTriangleVariants), pick(l, interactionGradsVariants)
		r := rand.New(rand.NewPCG(65, 66))
		lengths := []int{63, 64, 65, 79, 127, 128, 130, 200}
		for d := range 34 {
			lengths = append(lengths, d)
		}
		const batch, b = 3, 1 // the middle sample: rows on both sides
		for _, d := range lengths {
			for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 27} {
				feats := make([][]float32, n)
				for f := range feats {
					feats[f] = normRandom(r, batch*d, 0)
				}
				for _, self := range []bool{false, true} {
					name := fmt.Sprintf("d=%d n=%d self=%v", d, n, self)
					pairs := n*(n-1)/2 + n*b2i(self)
					want := make([]float32, pairs)
					interactionTriangleGo(want, feats, b, d, self)
					got, ok := guarded(t, pairs)
					triangle(got, feats, b, d, self)
					ok()
					sameBits32(t, name+" dots", got, want)
					if n == 0 {
						continue
					}

					g := normRandom(r, d+pairs, 0)
					for _, skip := range []bool{false, true} {
						wantG, gotG := make([][]float32, n), make([][]float32, n)
						for f := range n {
							if skip && f == 1 { // a gradient nobody wants
								continue
							}
							wantG[f] = make([]float32, batch*d)
							gotG[f] = normRandom(r, batch*d, 0)
							copy(wantG[f], gotG[f])
							for k := range d {
								gotG[f][b*d+k] = float32(math.NaN()) // overwritten, not added to
							}
						}
						sc := interactionScratches.get().grow(n)
						interactionGradsGo(sc, wantG, g, feats, b, d, self)
						grads(sc, gotG, g, feats, b, d, self)
						sc.put()
						for f := range n {
							sameBits32(t, fmt.Sprintf("%s skip=%v gradient %d", name, skip, f), gotG[f], wantG[f])
						}
					}
				}
			}
		}
	})
}

// BenchmarkInteraction times DLRM's baseline interaction, 27 features of
// 64 at batch 2048, forward and backward, in float32 and bfloat16.
func BenchmarkInteraction(b *testing.B) {
	r := rand.New(rand.NewPCG(67, 68))
	s := InteractionShape{Batch: 2048, Dim: 64, Features: 27}
	c := newInteractionCase(r, s)
	out := make([]float32, s.Batch*s.Width())
	grads := make([][]float32, s.Features)
	for f := range grads {
		grads[f] = make([]float32, s.Batch*s.Dim)
	}
	b.Run("forward", func(b *testing.B) {
		for range b.N {
			InteractionForward(s, c.feats, out)
		}
	})
	b.Run("backward", func(b *testing.B) {
		for range b.N {
			InteractionBackward(s, c.feats, c.dout, grads)
		}
	})
	feats16, grads16 := make([][]uint16, s.Features), make([][]uint16, s.Features)
	for f := range feats16 {
		feats16[f], _ = randBF16(r, s.Batch*s.Dim)
		grads16[f] = make([]uint16, s.Batch*s.Dim)
	}
	dout16, _ := randBF16(r, s.Batch*s.Width())
	out16 := make([]uint16, len(dout16))
	b.Run("forward bf16", func(b *testing.B) {
		for range b.N {
			InteractionForwardBF16(s, feats16, out16)
		}
	})
	b.Run("backward bf16", func(b *testing.B) {
		for range b.N {
			InteractionBackwardBF16(s, feats16, dout16, grads16)
		}
	})
}

// useInteractionLevel switches the interaction's loops and the
// conversions to level l until the returned function restores them, so
// one process checks every level's bfloat16 entry points.
func useInteractionLevel(l Level) (restore func()) {
	tri, gr := interactionTriangleImpl, interactionGradsImpl
	cvt := useCvtLevel(l)
	interactionTriangleImpl, interactionGradsImpl = pick(l, interactionTriangleVariants), pick(l, interactionGradsVariants)
	return func() {
		interactionTriangleImpl, interactionGradsImpl = tri, gr
		cvt()
	}
}

// TestInteractionBF16 holds the bfloat16 kernels to widening the whole
// matrices, the float32 kernels and one rounding of their results, bit
// for bit, at every level and thread count: on batches that end in a
// short block (interactionBlockFloats) and split unevenly between
// threads, rows that end in vector tails, with and without self, and
// with gradients not wanted.
func TestInteractionBF16(t *testing.T) {
	shapes := []InteractionShape{
		{Batch: 1, Dim: 1, Features: 1, Self: true},
		{Batch: 3, Dim: 2, Features: 2},
		{Batch: 37, Dim: 17, Features: 5, Self: true},
		{Batch: 257, Dim: 13, Features: 9},
		{Batch: 131, Dim: 33, Features: 6, Self: true},
		{Batch: 301, Dim: 64, Features: 27}, // DLRM's rows, 18 samples a block
		{Batch: 4, Dim: 0, Features: 3, Self: true},
		{Batch: 0, Dim: 5, Features: 2},
	}
	wants := map[string]func(f, n int) bool{
		"all":           func(f, n int) bool { return true },
		"but feature 1": func(f, n int) bool { return f != 1 },
		"last only":     func(f, n int) bool { return f == n-1 },
	}
	forEachLevel(t, func(t *testing.T, l Level) {
		defer useInteractionLevel(l)()
		r := rand.New(rand.NewPCG(69, 70))
		for _, s := range shapes {
			name := fmt.Sprintf("B%d_d%d_F%d_self%v", s.Batch, s.Dim, s.Features, s.Self)
			feats, wide := make([][]uint16, s.Features), make([][]float32, s.Features)
			for f := range feats {
				feats[f], wide[f] = randBF16(r, s.Batch*s.Dim)
			}
			dout, dwide := randBF16(r, s.Batch*s.Width())
			out32 := make([]float32, len(dout))
			InteractionForward(s, wide, out32)
			want := make([]uint16, len(dout))
			F32ToBF16(want, out32)
			wantGrads := map[string][][]uint16{}
			for k, wanted := range wants {
				g32, g := make([][]float32, s.Features), make([][]uint16, s.Features)
				for f := range g {
					if wanted(f, s.Features) {
						g32[f], g[f] = make([]float32, s.Batch*s.Dim), make([]uint16, s.Batch*s.Dim)
					}
				}
				InteractionBackward(s, wide, dwide, g32)
				for f := range g {
					if g[f] != nil {
						F32ToBF16(g[f], g32[f])
					}
				}
				wantGrads[k] = g
			}
			for _, threads := range []int{1, 2, 3} {
				int8WithThreads(threads, func() {
					at := fmt.Sprintf("%s at %d threads", name, threads)
					got, ok := guarded16Filled(t, len(want))
					InteractionForwardBF16(s, feats, got)
					ok()
					sameBits16(t, at+" out", got, want)
					for k, wanted := range wants {
						grads, checks := make([][]uint16, s.Features), make([]func(), s.Features)
						for f := range grads {
							if wanted(f, s.Features) {
								grads[f], checks[f] = guarded16Filled(t, s.Batch*s.Dim)
							}
						}
						InteractionBackwardBF16(s, feats, dout, grads)
						for f, g := range grads {
							if g != nil {
								checks[f]()
								sameBits16(t, fmt.Sprintf("%s gradients %s: %d", at, k, f), g, wantGrads[k][f])
							}
						}
					}
				})
			}
		}
	})
}

// guarded16Filled is guarded16 with the slice set to NaNs, which a kernel
// that writes every element overwrites.
func guarded16Filled(t *testing.T, n int) ([]uint16, func()) {
	s, ok := guarded16(t, n)
	for i := range s {
		s[i] = 0x7fc1
	}
	return s, ok
}

// TestInteractionDoesNotAllocate: a forward and a backward large enough
// for the worker pool allocate nothing once their pools are warm.
func TestInteractionDoesNotAllocate(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	r := rand.New(rand.NewPCG(69, 70))
	s := InteractionShape{Batch: 256, Dim: 32, Features: 9}
	c := newInteractionCase(r, s)
	out := make([]float32, s.Batch*s.Width())
	grads := make([][]float32, s.Features)
	for f := range grads {
		grads[f] = make([]float32, s.Batch*s.Dim)
	}
	if a := testing.AllocsPerRun(10, func() { InteractionForward(s, c.feats, out) }); a != 0 {
		t.Errorf("InteractionForward allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(10, func() { InteractionBackward(s, c.feats, out, grads) }); a != 0 {
		t.Errorf("InteractionBackward allocates %v times per call", a)
	}
}
