package autograd_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// embDistinct returns a [num, dim] table holding a random permutation of
// evenly spaced values, so bag maxima have no ties a finite-difference step
// could flip.
func embDistinct(g *autograd.Generator, num, dim int) *autograd.Tensor {
	v := make([]float32, num*dim)
	for i, p := range g.Perm(num * dim) {
		v[i] = float32(p)*0.1 - float32(num*dim)*0.05
	}
	return autograd.FromFloat32(v, num, dim)
}

func embLeaf(t *autograd.Tensor) *autograd.Tensor { return t.Detach().SetRequiresGrad(true) }

func TestEmbeddingGradCheck(t *testing.T) {
	g := autograd.NewGenerator(21)
	cases := []struct {
		name    string
		idx     *autograd.Tensor
		num     int
		dim     int
		wantOut []int
	}{
		{"1-D", autograd.FromInt64([]int64{3, 0, 3, 5, 3}), 6, 4, []int{5, 4}},
		{"2-D", autograd.FromInt64([]int64{1, 2, 2, 0, 4, 4}, 2, 3), 5, 3, []int{2, 3, 3}},
		{"4-D channels-last", autograd.RandInt(g, 0, 7, 2, 3, 2, 2).To(autograd.ChannelsLast), 7, 2, []int{2, 3, 2, 2, 2}},
		{"empty", autograd.FromInt64([]int64{}, 0), 4, 3, []int{0, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := embLeaf(autograd.Randn(g, c.num, c.dim))
			f := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Embedding(c.idx, xs[0]) }
			out := f(w)
			if fmt.Sprint(out.Shape()) != fmt.Sprint(c.wantOut) || out.Format() != autograd.Contiguous {
				t.Fatalf("output shape %v %v, want %v contiguous", out.Shape(), out.Format(), c.wantOut)
			}
			// Each output row is the row the index names.
			iv, ov, wv := c.idx.Values(), out.Values(), w.Values()
			for i, r := range iv {
				for j := 0; j < c.dim; j++ {
					if ov[i*c.dim+j] != wv[int(r)*c.dim+j] {
						t.Fatalf("output row %d differs from table row %v", i, r)
					}
				}
			}
			if c.idx.Numel() == 0 {
				return
			}
			if err := autograd.GradCheck(f, []*autograd.Tensor{w}, autograd.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// EmbeddingPadding's padding row gets no gradient by design, so the check
// builds the table from a trainable part and a constant padding row: the
// trainable rows' gradients must be the true derivatives, with the padding
// index among the ones looked up.
func TestEmbeddingPaddingGradCheck(t *testing.T) {
	g := autograd.NewGenerator(24)
	cases := []struct {
		name string
		idx  *autograd.Tensor
		pad  int64 // the table's last row either way
	}{
		{"1-D", autograd.FromInt64([]int64{4, 0, 3, 4, 1}), 4},
		{"2-D negative padding", autograd.FromInt64([]int64{1, 4, 2, 0, 4, 4}, 2, 3), -1},
		{"4-D channels-last", autograd.RandInt(g, 0, 5, 2, 2, 2, 3).To(autograd.ChannelsLast), 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := embLeaf(autograd.Randn(g, 4, 3))
			padRow := autograd.Randn(g, 1, 3)
			f := func(xs ...*autograd.Tensor) *autograd.Tensor {
				return autograd.EmbeddingPadding(c.idx, autograd.Cat([]*autograd.Tensor{xs[0], padRow}, 0), c.pad)
			}
			if err := autograd.GradCheck(f, []*autograd.Tensor{top}, autograd.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEmbeddingPaddingGradient(t *testing.T) {
	g := autograd.NewGenerator(22)
	idx := autograd.FromInt64([]int64{0, 2, 4, 2, 1, 4}, 2, 3)
	gout := autograd.Randn(g, 2, 3, 3)
	w0 := autograd.Randn(g, 5, 3)
	plain := embLeaf(w0)
	autograd.Embedding(idx, plain).Backward(gout)
	for _, pad := range []int64{2, -3, 3} {
		w := embLeaf(w0)
		y := autograd.EmbeddingPadding(idx, w, pad)
		if fmt.Sprint(y.Values()) != fmt.Sprint(autograd.Embedding(idx, w0).Values()) {
			t.Errorf("padding %d: forward differs from Embedding", pad)
		}
		y.Backward(gout)
		row := pad
		if row < 0 {
			row += 5
		}
		gv, pv := w.Grad().Values(), plain.Grad().Values()
		for r := 0; r < 5; r++ {
			for j := 0; j < 3; j++ {
				want := pv[r*3+j]
				if int64(r) == row {
					want = 0
				}
				if gv[r*3+j] != want {
					t.Fatalf("padding %d: gradient row %d = %v, want %v", pad, r, gv[r*3:r*3+3], want)
				}
			}
		}
	}
}

// Gradients of a row named many times are summed in float64, so 10000
// additions of float32(0.1) round to exactly 1000 (a float32 running sum
// drifts to about 999.9).
func TestEmbeddingRepeatedIndexAccumulation(t *testing.T) {
	const n = 10000
	idx := autograd.Empty(autograd.Int64, n)
	w := autograd.Zeros(3, 2).SetRequiresGrad(true)
	y := autograd.Embedding(idx, w)
	y.Backward(autograd.Full(0.1, n, 2))
	if got := w.Grad().Values(); got[0] != 1000 || got[2] != 0 {
		t.Errorf("gradient %v, want row 0 = 1000", got)
	}
}

func TestEmbeddingBagGradCheck(t *testing.T) {
	g := autograd.NewGenerator(23)
	i64 := func(v []int64, shape ...int) *autograd.Tensor { return autograd.FromInt64(v, shape...) }
	flat := i64([]int64{1, 4, 4, 0, 6, 2, 2, 5, 3}, 9)
	offsets := i64([]int64{0, 3, 3, 7}, 4) // bag 1 is empty
	grid := i64([]int64{0, 3, 3, 1, 6, 2, 5, 5, 4, 2, 0, 1}, 3, 4)
	cases := []struct {
		name    string
		input   *autograd.Tensor
		offsets *autograd.Tensor
		mode    autograd.EmbeddingBagMode
		psw     bool
	}{
		{"sum", flat, offsets, autograd.BagSum, false},
		{"sum-psw", flat, offsets, autograd.BagSum, true},
		{"mean", flat, offsets, autograd.BagMean, false},
		{"max", flat, offsets, autograd.BagMax, false},
		{"sum-2d-psw", grid, nil, autograd.BagSum, true},
		{"mean-2d", grid, nil, autograd.BagMean, false},
		{"max-2d", grid, nil, autograd.BagMax, false},
		{"last-bag-empty", flat, i64([]int64{0, 4, 9}, 3), autograd.BagMean, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ins := []*autograd.Tensor{embLeaf(embDistinct(g, 7, 3))}
			if c.psw {
				ins = append(ins, embLeaf(autograd.Randn(g, c.input.Shape()...)))
			}
			f := func(xs ...*autograd.Tensor) *autograd.Tensor {
				var psw *autograd.Tensor
				if len(xs) == 2 {
					psw = xs[1]
				}
				return autograd.EmbeddingBag(c.input, c.offsets, xs[0], c.mode, psw)
			}
			if err := autograd.GradCheck(f, ins, autograd.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEmbeddingBagValues(t *testing.T) {
	w := autograd.FromFloat32([]float32{
		1, 10,
		2, 20,
		3, -30,
		4, 5,
	}, 4, 2)
	input := autograd.FromInt64([]int64{0, 2, 2, 3, 1})
	offsets := autograd.FromInt64([]int64{0, 3, 3})
	psw := autograd.FromFloat32([]float32{1, 0.5, 2, -1, 1})
	checks := []struct {
		name string
		got  *autograd.Tensor
		want string
	}{
		{"sum", autograd.EmbeddingBag(input, offsets, w, autograd.BagSum, nil), "[7 -50 0 0 6 25]"},
		{"sum weighted", autograd.EmbeddingBag(input, offsets, w, autograd.BagSum, psw), "[8.5 -65 0 0 -2 15]"},
		{"mean", autograd.EmbeddingBag(input, offsets, w, autograd.BagMean, nil), fmt.Sprint([]float64{float64(float32(7.0 / 3)), float64(float32(-50.0 / 3)), 0, 0, 3, 12.5})},
		{"max", autograd.EmbeddingBag(input, offsets, w, autograd.BagMax, nil), "[3 10 0 0 4 20]"},
	}
	for _, c := range checks {
		if got := fmt.Sprint(c.got.Values()); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// Max routes each feature's gradient to the one row that won it, once
	// even when that row appears twice in the bag.
	wl := embLeaf(w)
	autograd.EmbeddingBag(input, offsets, wl, autograd.BagMax, nil).Backward(autograd.Ones(3, 2))
	if got := fmt.Sprint(wl.Grad().Values()); got != "[0 1 0 1 1 0 1 0]" {
		t.Errorf("max gradient %s", got)
	}
	// No bags at all.
	if y := autograd.EmbeddingBag(autograd.FromInt64([]int64{}), autograd.FromInt64([]int64{}), w, autograd.BagSum, nil); fmt.Sprint(y.Shape()) != "[0 2]" {
		t.Errorf("no bags: shape %v", y.Shape())
	}
}

func TestEmbeddingBadInputs(t *testing.T) {
	w := autograd.Zeros(5, 3)
	idx := autograd.FromInt64([]int64{0, 1, 4})
	off := autograd.FromInt64([]int64{0, 2})
	i64 := func(v ...int64) *autograd.Tensor { return autograd.FromInt64(v) }
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"nil indices", func() { autograd.Embedding(nil, w) }, "Embedding: indices is nil"},
		{"float indices", func() { autograd.Embedding(autograd.Zeros(3), w) }, "indices has dtype float32; Embedding needs int64 indices"},
		{"int32 indices", func() { autograd.Embedding(autograd.FromInt32([]int32{1}), w) }, "indices has dtype int32"},
		{"nil weight", func() { autograd.Embedding(idx, nil) }, "Embedding: weight is nil"},
		{"weight rank", func() { autograd.Embedding(idx, autograd.Zeros(5)) }, "weight must be 2-D [num, dim], got shape [5]"},
		{"weight dtype", func() { autograd.Embedding(idx, autograd.Empty(autograd.Int32, 5, 3)) }, "weight has dtype int32; Embedding supports float32 and bfloat16 tables"},
		{"index too big", func() { autograd.Embedding(i64(0, 5), w) }, "index 5 (at position 1 of indices [2]) is out of range for a table of 5 rows"},
		{"negative index", func() { autograd.Embedding(autograd.FromInt64([]int64{2, -1}, 1, 2), w) }, "index -1 (at position 1 of indices [1 2]) is out of range for a table of 5 rows"},
		{"empty table", func() { autograd.Embedding(i64(0), autograd.Zeros(0, 3)) }, "index 0 (at position 0 of indices [1]) is out of range for a table of 0 rows"},
		{"padding too big", func() { autograd.EmbeddingPadding(idx, w, 5) }, "EmbeddingPadding: padding index 5 is out of range for a table of 5 rows"},
		{"padding too small", func() { autograd.EmbeddingPadding(idx, w, -6) }, "padding index -6 is out of range"},
		{"padding bad index", func() { autograd.EmbeddingPadding(i64(7), w, 0) }, "EmbeddingPadding: index 7"},
		{"bag mode", func() { autograd.EmbeddingBag(idx, off, w, autograd.EmbeddingBagMode(7), nil) }, "EmbeddingBag: unknown mode EmbeddingBagMode(7)"},
		{"bag nil input", func() { autograd.EmbeddingBag(nil, off, w, autograd.BagSum, nil) }, "EmbeddingBag: input is nil"},
		{"bag nil weight", func() { autograd.EmbeddingBag(idx, off, nil, autograd.BagSum, nil) }, "EmbeddingBag: weight is nil"},
		{"bag input dtype", func() { autograd.EmbeddingBag(autograd.Zeros(3), off, w, autograd.BagSum, nil) }, "input has dtype float32; EmbeddingBag needs int64 indices"},
		{"bag no offsets", func() { autograd.EmbeddingBag(idx, nil, w, autograd.BagSum, nil) }, "offsets are required for 1-D input [3]"},
		{"bag offsets dtype", func() { autograd.EmbeddingBag(idx, autograd.FromInt32([]int32{0}), w, autograd.BagSum, nil) }, "offsets have dtype int32"},
		{"bag offsets rank", func() { autograd.EmbeddingBag(idx, autograd.FromInt64([]int64{0, 1}, 1, 2), w, autograd.BagSum, nil) }, "offsets must be 1-D, got shape [1 2]"},
		{"bag first offset", func() { autograd.EmbeddingBag(idx, i64(1, 2), w, autograd.BagSum, nil) }, "offsets[0] must be 0 (the first bag starts at the first index), got 1"},
		{"bag decreasing", func() { autograd.EmbeddingBag(idx, i64(0, 2, 1), w, autograd.BagSum, nil) }, "offsets must be non-decreasing, got offsets[2] = 1 after offsets[1] = 2"},
		{"bag beyond", func() { autograd.EmbeddingBag(idx, i64(0, 4), w, autograd.BagMean, nil) }, "offsets[1] = 4 is beyond the input's length 3"},
		{"bag empty offsets", func() { autograd.EmbeddingBag(idx, i64(), w, autograd.BagSum, nil) }, "offsets are empty but input [3] holds 3 indices"},
		{"bag 2-D with offsets", func() { autograd.EmbeddingBag(autograd.FromInt64([]int64{0, 1}, 1, 2), off, w, autograd.BagSum, nil) }, "offsets must be nil for 2-D input [1 2]"},
		{"bag 3-D", func() {
			autograd.EmbeddingBag(autograd.FromInt64([]int64{0, 1}, 1, 1, 2), nil, w, autograd.BagSum, nil)
		}, "input must be 1-D (with offsets) or 2-D [bags, size], got shape [1 1 2]"},
		{"bag index", func() { autograd.EmbeddingBag(i64(0, 9), off, w, autograd.BagMax, nil) }, "EmbeddingBag: index 9 (at position 1 of input [2]) is out of range for a table of 5 rows"},
		{"psw mean", func() { autograd.EmbeddingBag(idx, off, w, autograd.BagMean, autograd.Ones(3)) }, "per-sample weights are only supported with BagSum, got mode mean"},
		{"psw max", func() { autograd.EmbeddingBag(idx, off, w, autograd.BagMax, autograd.Ones(3)) }, "got mode max"},
		{"psw shape", func() { autograd.EmbeddingBag(idx, off, w, autograd.BagSum, autograd.Ones(4)) }, "per-sample weights have shape [4], want the input's shape [3]"},
		{"psw dtype", func() { autograd.EmbeddingBag(idx, off, w, autograd.BagSum, autograd.FromInt64([]int64{1, 1, 1})) }, "per-sample weights have dtype int64; a float32 table takes float32 per-sample weights"},
		{"psw bf16 for f32", func() { autograd.EmbeddingBag(idx, off, w, autograd.BagSum, autograd.Empty(autograd.BFloat16, 3)) }, "per-sample weights have dtype bfloat16; a float32 table takes float32"},
		{"psw int for bf16", func() {
			autograd.EmbeddingBag(idx, off, autograd.Empty(autograd.BFloat16, 5, 3), autograd.BagSum, autograd.FromInt64([]int64{1, 1, 1}))
		}, "per-sample weights have dtype int64; a bfloat16 table takes float32 or bfloat16 per-sample weights"},
	}
	for _, c := range cases {
		err := autograd.Try(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

// Embedding picks rows of a table: [2, 2] indices give [2, 2, dim].
func ExampleEmbedding() {
	table := autograd.FromFloat32([]float32{0, 0, 1, 2, 3, 4}, 3, 2)
	ids := autograd.FromInt64([]int64{2, 0, 2, 1}, 2, 2)
	y := autograd.Embedding(ids, table)
	fmt.Println(y.Shape(), y.Values())
	// Output: [2 2 2] [3 4 0 0 3 4 1 2]
}

// With a padding index that row is looked up as usual but gets no gradient.
func ExampleEmbeddingPadding() {
	table := autograd.FromFloat32([]float32{
		0, 0, // row 0: padding
		1, 2,
		3, 4,
	}, 3, 2).SetRequiresGrad(true)
	ids := autograd.FromInt64([]int64{2, 0, 2, 1}, 2, 2)
	y := autograd.EmbeddingPadding(ids, table, 0)
	fmt.Println(y.Shape(), y.Values())
	y.Backward(autograd.OnesLike(y))
	fmt.Println(table.Grad().Values())
	// Output:
	// [2 2 2] [3 4 0 0 3 4 1 2]
	// [0 0 1 1 2 2]
}

// EmbeddingBag reduces bags given by offsets; the middle bag is empty.
func ExampleEmbeddingBag() {
	table := autograd.FromFloat32([]float32{1, 10, 2, 20, 3, 30}, 3, 2)
	ids := autograd.FromInt64([]int64{0, 2, 1})
	offsets := autograd.FromInt64([]int64{0, 2, 2})
	fmt.Println(autograd.EmbeddingBag(ids, offsets, table, autograd.BagMean, nil).Values())
	fmt.Println(autograd.EmbeddingBag(ids, offsets, table, autograd.BagMax, nil).Values())
	w := autograd.FromFloat32([]float32{0.5, 2, 1})
	fmt.Println(autograd.EmbeddingBag(ids, offsets, table, autograd.BagSum, w).Values())
	// Output:
	// [2 20 0 0 2 20]
	// [3 30 0 0 2 20]
	// [6.5 65 0 0 2 20]
}
