package autograd

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/kilnml/kiln/kernels"
)

// widenKeepGrad widens a bfloat16 y to float32 with a backward that hands
// the float32 gradient on unrounded: Cast would round it to bfloat16, and
// the lookups must also take a float32 output gradient.
func widenKeepGrad(y *Tensor) *Tensor {
	return record("WidenKeepGrad", y.castTo(Float32), []*Tensor{y}, func(g *Tensor) []*Tensor { return []*Tensor{g} })
}

func bf16Leaf(t *Tensor) *Tensor { return t.castTo(BFloat16).SetRequiresGrad(true) }

func f32Leaf(t *Tensor) *Tensor { return t.castTo(Float32).SetRequiresGrad(true) }

// sameBF16Bits fails unless got is bfloat16 and holds want rounded to
// nearest even, bit for bit (maxULP 0), or within maxULP bfloat16 units.
func sameBF16Bits(t *testing.T, what string, got, want *Tensor, maxULP int) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	if got.dtype != BFloat16 {
		t.Fatalf("%s: dtype %v, want bfloat16", what, got.dtype)
	}
	if !sameShape(got.shape, want.shape) {
		t.Fatalf("%s: shape %v, want %v", what, got.shape, want.shape)
	}
	gb, wb := got.BFloat16s(), want.castTo(BFloat16).BFloat16s()
	for i := range wb {
		if d := int(int16(gb[i])) - int(int16(wb[i])); d > maxULP || -d > maxULP {
			t.Fatalf("%s: element %d = %v (%#04x), want %v (%#04x)", what, i, kernels.F32FromBF16(gb[i]), gb[i], kernels.F32FromBF16(wb[i]), wb[i])
		}
	}
}

// TestEmbeddingBF16MatchesWidened runs every lookup on a bfloat16 table and
// on its float32 widening. The bfloat16 op does the float32 op's
// arithmetic in its order (float64 sums, float32 maxima), so its output
// and dense table gradient are the float32 ones rounded once, bit for bit,
// and its sparse gradient (float32 values) is the float32 one exactly. Only
// the gradient of float32 per-sample weights may differ, by float32
// rounding: the float32 op's vector kernel adds its dot products in
// another order; bfloat16 per-sample weight gradients are compared within
// one bfloat16 unit for that reason.
func TestEmbeddingBF16MatchesWidened(t *testing.T) {
	const num, dim = 7, 13
	gen := NewGenerator(77)
	idx2 := FromInt64([]int64{3, 1, 3, 6, 0, 2, 3, 2}, 2, 4)
	flat := FromInt64([]int64{3, 1, 3, 6, 0, 2, 3, 2, 5}, 9)
	off := FromInt64([]int64{0, 3, 3, 7}, 4) // bag 1 is empty
	type lookup func(w, psw *Tensor) *Tensor
	bag := func(mode EmbeddingBagMode, sparse bool) lookup {
		return func(w, psw *Tensor) *Tensor {
			if sparse {
				return EmbeddingBagSparse(flat, off, w, mode, psw)
			}
			return EmbeddingBag(flat, off, w, mode, psw)
		}
	}
	cases := []struct {
		name   string
		f      lookup
		sparse bool
		psw    *DType // per-sample weights' dtype, or none
	}{
		{"Embedding", func(w, _ *Tensor) *Tensor { return Embedding(idx2, w) }, false, nil},
		{"EmbeddingPadding", func(w, _ *Tensor) *Tensor { return EmbeddingPadding(idx2, w, 3) }, false, nil},
		{"EmbeddingSparse", func(w, _ *Tensor) *Tensor { return EmbeddingSparse(idx2, w) }, true, nil},
		{"EmbeddingSparsePadding", func(w, _ *Tensor) *Tensor { return EmbeddingSparsePadding(idx2, w, -4) }, true, nil},
		{"EmbeddingBag sum", bag(BagSum, false), false, nil},
		{"EmbeddingBag mean", bag(BagMean, false), false, nil},
		{"EmbeddingBag max", bag(BagMax, false), false, nil},
		{"EmbeddingBag 2-D mean", func(w, _ *Tensor) *Tensor { return EmbeddingBag(idx2, nil, w, BagMean, nil) }, false, nil},
		{"EmbeddingBag sum float32 psw", bag(BagSum, false), false, ptrTo(Float32)},
		{"EmbeddingBag sum bfloat16 psw", bag(BagSum, false), false, ptrTo(BFloat16)},
		{"EmbeddingBagSparse sum", bag(BagSum, true), true, nil},
		{"EmbeddingBagSparse mean", bag(BagMean, true), true, nil},
		{"EmbeddingBagSparse float32 psw", bag(BagSum, true), true, ptrTo(Float32)},
		{"EmbeddingBagSparse bfloat16 psw", bag(BagSum, true), true, ptrTo(BFloat16)},
	}
	for _, c := range cases {
		for _, gdt := range []DType{Float32, BFloat16} {
			t.Run(fmt.Sprintf("%s/%v grad", c.name, gdt), func(t *testing.T) {
				w32 := Randn(gen, num, dim)
				wb := bf16Leaf(w32)
				ww := f32Leaf(wb)
				var pb, pw *Tensor
				if c.psw != nil {
					p := Randn(gen, flat.shape...)
					if *c.psw == BFloat16 {
						p = p.castTo(BFloat16)
					}
					pb = p.castTo(*c.psw).SetRequiresGrad(true)
					pw = f32Leaf(p)
				}
				yb, yw := c.f(wb, pb), c.f(ww, pw)
				sameBF16Bits(t, "output", yb, yw, 0)

				g := Randn(gen, yw.shape...)
				if gdt == BFloat16 {
					gb := g.castTo(BFloat16)
					g = gb.castTo(Float32) // the reference sees the rounded gradient
					yb.Backward(gb)
				} else {
					widenKeepGrad(yb).Backward(g)
				}
				yw.Backward(g)

				if c.sparse {
					sb, sw := wb.SparseGrad(), ww.SparseGrad()
					if wb.Grad() != nil || sb == nil || sw == nil {
						t.Fatalf("want only a sparse gradient, got dense %v sparse %v", wb.Grad(), sb)
					}
					if !slices.Equal(sb.Indices, sw.Indices) || !slices.Equal(sb.Shape(), sw.Shape()) {
						t.Fatalf("sparse rows %v of %v, want %v of %v", sb.Indices, sb.Shape(), sw.Indices, sw.Shape())
					}
					vb, vw := sb.Values.Float32s(), sw.Values.Float32s()
					for i := range vw {
						if math.Float32bits(vb[i]) != math.Float32bits(vw[i]) {
							t.Fatalf("sparse value %d = %v, want %v", i, vb[i], vw[i])
						}
					}
				} else {
					sameBF16Bits(t, "weight gradient", wb.Grad(), ww.Grad(), 0)
				}
				if c.psw == nil {
					return
				}
				if *c.psw == BFloat16 {
					sameBF16Bits(t, "per-sample weight gradient", pb.Grad(), pw.Grad(), 1)
					return
				}
				gp, wp := pb.Grad().Float32s(), pw.Grad().Float32s()
				for i := range wp {
					if d := math.Abs(float64(gp[i] - wp[i])); d > 1e-6*(1+math.Abs(float64(wp[i]))) {
						t.Fatalf("per-sample weight gradient %d = %v, want %v", i, gp[i], wp[i])
					}
				}
			})
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestEmbeddingBF16NonLeafTable looks a bfloat16 table made from a float32
// leaf up sparsely: the table is not a leaf, so its gradient is dense and
// Cast carries it back to the float32 leaf widened.
func TestEmbeddingBF16NonLeafTable(t *testing.T) {
	gen := NewGenerator(78)
	w := Randn(gen, 5, 3).SetRequiresGrad(true)
	idx := FromInt64([]int64{4, 0, 4}, 3)
	y := EmbeddingSparse(idx, Cast(w, BFloat16))
	if y.dtype != BFloat16 {
		t.Fatalf("output dtype %v, want bfloat16", y.dtype)
	}
	g := Randn(gen, 3, 3).castTo(BFloat16)
	y.Backward(g)
	if w.SparseGrad() != nil || w.Grad() == nil {
		t.Fatal("the float32 leaf should get a dense gradient")
	}
	ref := f32Leaf(w)
	Embedding(idx, ref).Backward(g.castTo(Float32))
	want := ref.Grad().castTo(BFloat16).castTo(Float32).Float32s()
	for i, v := range w.Grad().Float32s() {
		if v != want[i] {
			t.Fatalf("gradient %d = %v, want %v", i, v, want[i])
		}
	}
}
