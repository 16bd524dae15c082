package autograd_test

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/shape"
)

// shapeShares reports whether a and b are backed by the same memory.
func shapeShares(a, b *autograd.Tensor) bool {
	da, db := a.Float32s(), b.Float32s()
	return len(da) > 0 && len(db) > 0 && &da[0] == &db[0]
}

// shapeInput makes a leaf of shape in format f with distinct values.
func shapeInput(g *autograd.Generator, f autograd.MemoryFormat, shape ...int) *autograd.Tensor {
	x := autograd.Randn(g, shape...)
	if f != autograd.Contiguous {
		x = x.To(f)
	}
	return shapeLeaf(x)
}

// shapeLogical returns the element of x at a logical multi-index.
func shapeLogical(x *autograd.Tensor, idx ...int) float64 {
	st := x.Strides()
	o := 0
	for i, v := range idx {
		o += v * st[i]
	}
	return float64(x.Float32s()[o])
}

func TestShapeGradCheck(t *testing.T) {
	g := autograd.NewGenerator(9)
	cl, cl3 := autograd.ChannelsLast, autograd.ChannelsLast3d
	c := autograd.Contiguous
	type f = func(xs ...*autograd.Tensor) *autograd.Tensor
	cases := []struct {
		name string
		ins  []*autograd.Tensor
		f    f
	}{
		{"reshape", []*autograd.Tensor{shapeInput(g, c, 2, 3, 4)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Reshape(xs[0], 4, -1) }},
		{"reshape-cl", []*autograd.Tensor{shapeInput(g, cl, 2, 3, 2, 2)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Reshape(xs[0], -1, 6) }},
		{"reshape-cl-same", []*autograd.Tensor{shapeInput(g, cl, 2, 3, 2, 2)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Reshape(xs[0], 2, 3, 2, 2) }},
		{"reshape-0d", []*autograd.Tensor{shapeInput(g, c, 1, 1)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Reshape(xs[0]) }},
		{"view", []*autograd.Tensor{shapeInput(g, c, 3, 4)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.View(xs[0], 2, 2, 3) }},
		{"view-infer", []*autograd.Tensor{shapeInput(g, c, 2, 3, 4)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.View(xs[0], -1, 4) }},
		{"view-0d", []*autograd.Tensor{shapeInput(g, c, 1, 1)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.View(xs[0]) }},
		// One channel: channels-last memory is row-major, so it can be viewed.
		{"view-cl-one-channel", []*autograd.Tensor{shapeInput(g, cl, 2, 1, 3, 3)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.View(xs[0], 2, 9) }},
		{"view-cl-same", []*autograd.Tensor{shapeInput(g, cl, 2, 3, 2, 2)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.View(xs[0], 2, 3, 2, 2) }},
		{"flatten", []*autograd.Tensor{shapeInput(g, c, 2, 3, 2, 2)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Flatten(xs[0], 1, -1) }},
		{"flatten-cl", []*autograd.Tensor{shapeInput(g, cl, 2, 3, 2, 2)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Flatten(xs[0], 1, -1) }},
		{"flatten-cl3d-mid", []*autograd.Tensor{shapeInput(g, cl3, 2, 3, 2, 2, 2)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Flatten(xs[0], -3, -2) }},
		{"transpose", []*autograd.Tensor{shapeInput(g, c, 2, 3, 4)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Transpose(xs[0], 0, -1) }},
		{"transpose-cl", []*autograd.Tensor{shapeInput(g, cl, 2, 3, 2, 4)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Transpose(xs[0], 1, 2) }},
		{"permute", []*autograd.Tensor{shapeInput(g, c, 2, 3, 4)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Permute(xs[0], 2, 0, 1) }},
		{"permute-to-cl", []*autograd.Tensor{shapeInput(g, c, 2, 3, 4, 5)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Permute(xs[0], 0, 3, 1, 2) }},
		{"permute-cl-to-nhwc", []*autograd.Tensor{shapeInput(g, cl, 2, 3, 4, 5)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Permute(xs[0], 0, 2, 3, 1) }},
		{"cat", []*autograd.Tensor{shapeInput(g, c, 2, 3), shapeInput(g, c, 2, 1), shapeInput(g, c, 2, 4)},
			func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Cat(xs, -1) }},
		{"cat-cl", []*autograd.Tensor{shapeInput(g, cl, 2, 3, 2, 2), shapeInput(g, cl, 2, 2, 2, 2)},
			func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Cat(xs, 1) }},
		{"cat-mixed", []*autograd.Tensor{shapeInput(g, cl, 2, 3, 2, 2), shapeInput(g, c, 2, 3, 1, 2)},
			func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Cat(xs, 2) }},
		{"cat-same-input", []*autograd.Tensor{shapeInput(g, c, 3, 2)},
			func(xs ...*autograd.Tensor) *autograd.Tensor {
				return autograd.Cat([]*autograd.Tensor{xs[0], xs[0]}, 0)
			}},
		{"split", []*autograd.Tensor{shapeInput(g, c, 2, 5, 3)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return shapeReversed(autograd.Split(xs[0], 2, 1), 1) }},
		{"split-dim0", []*autograd.Tensor{shapeInput(g, c, 5, 3)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return shapeReversed(autograd.Split(xs[0], 3, 0), 0) }},
		{"split-cl", []*autograd.Tensor{shapeInput(g, cl, 2, 4, 3, 2)}, func(xs ...*autograd.Tensor) *autograd.Tensor { return shapeReversed(autograd.Split(xs[0], 3, 1), 1) }},
		{"split-sizes", []*autograd.Tensor{shapeInput(g, c, 2, 3, 6)}, func(xs ...*autograd.Tensor) *autograd.Tensor {
			return shapeReversed(autograd.SplitSizes(xs[0], []int{1, 0, 5}, -1), -1)
		}},
		{"split-sizes-cl", []*autograd.Tensor{shapeInput(g, cl, 2, 3, 4, 2)}, func(xs ...*autograd.Tensor) *autograd.Tensor {
			return shapeReversed(autograd.SplitSizes(xs[0], []int{3, 1}, 2), 2)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := autograd.GradCheck(c.f, c.ins, autograd.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
			for i, in := range c.ins {
				if in.Grad().Format() != in.Format() {
					t.Errorf("input %d: gradient format %v, want %v", i, in.Grad().Format(), in.Format())
				}
			}
		})
	}
}

// shapeReversed concatenates chunks in reverse order, so every chunk's
// gradient lands somewhere else than it came from.
func shapeReversed(chunks []*autograd.Tensor, dim int) *autograd.Tensor {
	r := make([]*autograd.Tensor, len(chunks))
	for i, c := range chunks {
		r[len(chunks)-1-i] = c
	}
	return autograd.Cat(r, dim)
}

func TestReshapeMemory(t *testing.T) {
	g := autograd.NewGenerator(1)
	x := shapeInput(g, autograd.Contiguous, 2, 3, 4)
	y := autograd.Reshape(x, 6, -1)
	if !shapeShares(x, y) || fmt.Sprint(y.Shape()) != "[6 4]" {
		t.Errorf("Reshape of a contiguous tensor: shape %v, shares %v; want [6 4] sharing", y.Shape(), shapeShares(x, y))
	}
	if v := autograd.View(x, 24); !shapeShares(x, v) {
		t.Error("View does not share memory")
	}
	xc := shapeInput(g, autograd.ChannelsLast, 2, 3, 4, 5)
	r := autograd.Reshape(xc, 2, 3, 20)
	if shapeShares(xc, r) || r.Format() != autograd.Contiguous {
		t.Errorf("Reshape of channels-last: shares %v, format %v; want a contiguous copy", shapeShares(xc, r), r.Format())
	}
	if got, want := shapeLogical(r, 1, 2, 13), shapeLogical(xc, 1, 2, 2, 3); got != want {
		t.Errorf("reshaped element %v, want %v", got, want)
	}
	if same := autograd.Reshape(xc, 2, 3, 4, 5); !shapeShares(xc, same) || same.Format() != autograd.ChannelsLast {
		t.Errorf("Reshape of channels-last to its own shape: format %v, shares %v; want it kept", same.Format(), shapeShares(xc, same))
	}
	// Channels-last with one channel is in row-major order already.
	one := shapeInput(g, autograd.ChannelsLast, 2, 1, 3, 3)
	if v := autograd.View(one, 2, 9); !shapeShares(one, v) {
		t.Error("View of a one-channel channels-last tensor copies")
	}
	if f := autograd.Flatten(xc, 2, 2); f != xc {
		t.Error("Flatten with startDim == endDim does not return its input")
	}
	if f := autograd.Flatten(autograd.Scalar(3), 0, -1); fmt.Sprint(f.Shape()) != "[1]" || f.Item() != 3 {
		t.Errorf("Flatten of a 0-d tensor: %v, want [1]", f.Shape())
	}
}

func TestPermuteMemory(t *testing.T) {
	g := autograd.NewGenerator(2)
	nhwc := shapeInput(g, autograd.Contiguous, 2, 4, 5, 3)
	nchw := autograd.Permute(nhwc, 0, 3, 1, 2)
	if nchw.Format() != autograd.ChannelsLast || !shapeShares(nhwc, nchw) || fmt.Sprint(nchw.Shape()) != "[2 3 4 5]" {
		t.Errorf("NHWC permuted to NCHW: %v %v shares %v; want channels-last sharing", nchw.Shape(), nchw.Format(), shapeShares(nhwc, nchw))
	}
	if got, want := shapeLogical(nchw, 1, 2, 3, 4), shapeLogical(nhwc, 1, 3, 4, 2); got != want {
		t.Errorf("element %v, want %v", got, want)
	}
	back := autograd.Permute(nchw, 0, 2, 3, 1)
	if back.Format() != autograd.Contiguous || !shapeShares(back, nhwc) {
		t.Errorf("channels-last permuted to NHWC: %v shares %v; want contiguous sharing", back.Format(), shapeShares(back, nhwc))
	}
	tr := autograd.Transpose(nhwc, 1, 2)
	if tr.Format() != autograd.Contiguous || shapeShares(tr, nhwc) {
		t.Errorf("transpose: %v shares %v; want a contiguous copy", tr.Format(), shapeShares(tr, nhwc))
	}
	if got, want := shapeLogical(tr, 1, 3, 2, 1), shapeLogical(nhwc, 1, 2, 3, 1); got != want {
		t.Errorf("transposed element %v, want %v", got, want)
	}
	// The gradient of a permuted NHWC input comes back contiguous.
	autograd.Sum(nchw, nil, false).Backward()
	if nhwc.Grad().Format() != autograd.Contiguous {
		t.Errorf("gradient format %v", nhwc.Grad().Format())
	}
	if s := autograd.Transpose(autograd.Scalar(2), 0, -1); s.NDim() != 0 || s.Item() != 2 {
		t.Errorf("transpose of a 0-d tensor: %v", s)
	}
}

func TestCatSplitFormats(t *testing.T) {
	g := autograd.NewGenerator(3)
	cl := autograd.ChannelsLast
	a, b := shapeInput(g, cl, 2, 3, 4, 5), shapeInput(g, cl, 2, 2, 4, 5)
	if y := autograd.Cat([]*autograd.Tensor{a, b}, 1); y.Format() != cl {
		t.Errorf("cat of channels-last tensors is %v, want channels_last", y.Format())
	}
	if y := autograd.Cat([]*autograd.Tensor{a, shapeInput(g, autograd.Contiguous, 2, 3, 4, 5)}, 0); y.Format() != autograd.Contiguous {
		t.Errorf("cat of mixed formats is %v, want contiguous", y.Format())
	}
	y := autograd.Cat([]*autograd.Tensor{a, b}, 1)
	if got, want := shapeLogical(y, 1, 4, 2, 3), shapeLogical(b, 1, 1, 2, 3); got != want {
		t.Errorf("cat element %v, want %v", got, want)
	}
	for _, ch := range autograd.Split(a, 2, 1) {
		if ch.Format() != cl {
			t.Errorf("chunk of a channels-last tensor is %v", ch.Format())
		}
	}
	chunks := autograd.Split(a, 1, 0)
	if !shapeShares(chunks[0], a) || chunks[1].Float32s()[0] != a.Float32s()[60] {
		t.Error("chunks along the batch of a channels-last tensor do not share its memory")
	}
	if cs := autograd.Split(autograd.Zeros(0, 3), 2, 0); len(cs) != 1 || fmt.Sprint(cs[0].Shape()) != "[0 3]" {
		t.Errorf("split of an empty dimension: %d chunks", len(cs))
	}
	sizes := autograd.SplitSizes(autograd.Zeros(2, 7), []int{3, 0, 4}, 1)
	if len(sizes) != 3 || fmt.Sprint(sizes[1].Shape()) != "[2 0]" || fmt.Sprint(sizes[2].Shape()) != "[2 4]" {
		t.Errorf("SplitSizes shapes %v %v", sizes[1].Shape(), sizes[2].Shape())
	}
}

// Each chunk's gradient is the full size of the input with zeros outside
// the chunk; when only some chunks are used, the others contribute nothing.
func TestSplitGradientOfUnusedChunks(t *testing.T) {
	x := shapeLeaf(autograd.FromFloat32([]float32{1, 2, 3, 4, 5}))
	cs := autograd.Split(x, 2, 0)
	autograd.Sum(cs[1], nil, false).Backward()
	if fmt.Sprint(x.Grad().Values()) != "[0 0 1 1 0]" {
		t.Fatalf("gradient %v, want [0 0 1 1 0]", x.Grad().Values())
	}
}

func TestShapeBadInputs(t *testing.T) {
	x := autograd.Zeros(2, 3, 4)
	xcl := autograd.Zeros(2, 3, 4, 5).To(autograd.ChannelsLast)
	i64 := autograd.Empty(autograd.Int64, 2, 3)
	shapeBadInputs(t, []shapeBadCase{
		{"reshape nil", func() { autograd.Reshape(nil, 2) }, "Reshape: input is nil"},
		{"reshape size", func() { autograd.Reshape(x, 5, 5) }, "Reshape: shape [5 5] is invalid for a tensor of 24 elements (shape [2 3 4])"},
		{"reshape two -1", func() { autograd.Reshape(x, -1, -1) }, "Reshape: only one dimension can be inferred, got shape [-1 -1]"},
		{"reshape negative", func() { autograd.Reshape(x, -2, 12) }, "Reshape: invalid dimension -2 in shape [-2 12]"},
		{"reshape infer indivisible", func() { autograd.Reshape(x, 5, -1) }, "shape [5 -1] is invalid for a tensor of 24 elements"},
		{"reshape ambiguous", func() { autograd.Reshape(autograd.Zeros(0, 3), 0, -1) }, "the size of -1 is ambiguous"},
		{"reshape 0-d", func() { autograd.Reshape(x) }, "shape [] is invalid for a tensor of 24 elements"},
		{"view channels-last", func() { autograd.View(xcl, 2, 60) }, "View: tensor of shape [2 3 4 5] is channels_last, so its memory is not in row-major order"},
		{"view size", func() { autograd.View(x, 7) }, "View: shape [7] is invalid"},
		// (2^61+3)·8 wraps around to x's 24 elements.
		{"reshape overflowing", func() { autograd.Reshape(x, 1<<61+3, 8) }, "Reshape: shape [2305843009213693955 8]: element count overflows"},
		{"reshape overflowing past -1", func() { autograd.Reshape(x, 1<<40, -1, 1<<40) }, "Reshape: shape [1099511627776 1 1099511627776]: element count overflows"},
		{"view overflowing", func() { autograd.View(x, 8, 1<<61+3) }, "View: shape [8 2305843009213693955]: element count overflows"},
		{"view overflowing past -1", func() { autograd.View(x, -1, 1<<61+3, 8) }, "View: shape [1 2305843009213693955 8]: element count overflows"},
		{"split sizes wrapping to the size", func() { autograd.SplitSizes(x, []int{1 << 62, 1 << 62, 1 << 62, 1<<62 + 4}, 2) },
			"SplitSizes: sizes [4611686018427387904 4611686018427387904 4611686018427387904 4611686018427387908] must add up to 4"},
		{"flatten order", func() { autograd.Flatten(x, 2, 1) }, "Flatten: start dimension 2 comes after end dimension 1 for shape [2 3 4]"},
		{"flatten range", func() { autograd.Flatten(x, 0, 3) }, "Flatten: dimension 3 out of range for a 3-D tensor of shape [2 3 4]"},
		{"flatten negative", func() { autograd.Flatten(x, -4, -1) }, "Flatten: dimension -4 out of range"},
		{"flatten 0-d range", func() { autograd.Flatten(autograd.Scalar(1), 0, 1) }, "dimension 1 out of range for a 0-D tensor"},
		{"transpose range", func() { autograd.Transpose(x, 0, 3) }, "Transpose: dimension 3 out of range for a 3-D tensor of shape [2 3 4]"},
		{"transpose nil", func() { autograd.Transpose(nil, 0, 1) }, "Transpose: input is nil"},
		{"permute length", func() { autograd.Permute(x, 0, 1) }, "Permute: dims [0 1] has 2 entries for a 3-D tensor of shape [2 3 4]"},
		{"permute repeat", func() { autograd.Permute(x, 0, 2, -1) }, "Permute: dimension 2 appears more than once in dims [0 2 -1]"},
		{"permute range", func() { autograd.Permute(x, 0, 1, 3) }, "Permute: dimension 3 out of range"},
		{"cat empty", func() { autograd.Cat(nil, 0) }, "Cat: expected a non-empty list of tensors"},
		{"cat nil", func() { autograd.Cat([]*autograd.Tensor{x, nil}, 0) }, "Cat: tensor 1 is nil"},
		{"cat dtype", func() { autograd.Cat([]*autograd.Tensor{autograd.Zeros(2, 3), i64}, 0) }, "Cat: tensor 1 has dtype int64, tensor 0 float32; only float32 and bfloat16 mix"},
		{"cat integer dtypes", func() { autograd.Cat([]*autograd.Tensor{i64, autograd.Empty(autograd.Int8, 2, 3)}, 0) }, "Cat: tensor 1 has dtype int8, tensor 0 int64"},
		{"cat 0-d", func() { autograd.Cat([]*autograd.Tensor{autograd.Scalar(1), autograd.Scalar(2)}, 0) }, "Cat: tensor 0 is 0-d"},
		{"cat rank", func() {
			autograd.Cat([]*autograd.Tensor{autograd.Zeros(2, 3), autograd.Zeros(2, 3), autograd.Zeros(2, 3, 1)}, 0)
		},
			"Cat: tensor 2 has 3 dimensions (shape [2 3 1]) but tensor 0 has 2 (shape [2 3])"},
		{"cat sizes", func() { autograd.Cat([]*autograd.Tensor{autograd.Zeros(2, 3), autograd.Zeros(2, 4)}, 0) },
			"Cat: sizes must match except in dimension 0: tensor 1 has shape [2 4], tensor 0 has shape [2 3]"},
		{"cat dim", func() { autograd.Cat([]*autograd.Tensor{x}, 3) }, "Cat: dimension 3 out of range for 3-D tensors (tensor 0 has shape [2 3 4])"},
		{"split size", func() { autograd.Split(x, 0, 1) }, "Split: split size must be positive (or 0 for a dimension of size 0), got 0 for dimension 1 of size 3"},
		{"split negative", func() { autograd.Split(x, -2, 1) }, "got -2 for dimension 1"},
		{"split dim", func() { autograd.Split(x, 1, -4) }, "Split: dimension -4 out of range for a 3-D tensor"},
		{"split 0-d", func() { autograd.Split(autograd.Scalar(1), 1, 0) }, "Split: cannot split a 0-d tensor"},
		{"split nil", func() { autograd.Split(nil, 1, 0) }, "Split: input is nil"},
		{"sizes sum", func() { autograd.SplitSizes(x, []int{2, 1}, 2) }, "SplitSizes: sizes [2 1] must add up to 4, the size of dimension 2 of shape [2 3 4]"},
		{"sizes empty", func() { autograd.SplitSizes(x, nil, 0) }, "SplitSizes: sizes [] must add up to 2"},
		{"sizes negative", func() { autograd.SplitSizes(x, []int{5, -1}, 2) }, "SplitSizes: sizes [5 -1] must be non-negative"},
		{"sizes dim", func() { autograd.SplitSizes(x, []int{2}, 3) }, "SplitSizes: dimension 3 out of range"},
	})
}

// Reshape shares a contiguous tensor's memory; -1 is inferred.
func ExampleReshape() {
	x := autograd.Arange(0, 6, 1, autograd.Float32)
	y := autograd.Reshape(x, 2, -1)
	fmt.Println(y.Shape(), y.Values())
	x.Float32s()[0] = 100
	fmt.Println(y.Values()[0])
	// Output:
	// [2 3] [0 1 2 3 4 5]
	// 100
}

// Flatten merges dimensions, as before a classifier head.
func ExampleFlatten() {
	x := autograd.Zeros(8, 16, 2, 2).To(autograd.ChannelsLast)
	fmt.Println(autograd.Flatten(x, 1, -1).Shape())
	// Output: [8 64]
}

// Permuting an NHWC tensor to NCHW needs no copy: the result is the same
// memory seen as a channels-last tensor.
func ExamplePermute() {
	nhwc := autograd.Zeros(1, 4, 4, 3)
	nchw := autograd.Permute(nhwc, 0, 3, 1, 2)
	fmt.Println(nchw.Shape(), nchw.Format())
	fmt.Println(autograd.Transpose(autograd.Zeros(2, 5), 0, 1).Shape())
	// Output:
	// [1 3 4 4] channels_last
	// [5 2]
}

// Cat joins along a dimension; Split cuts it up again.
func ExampleCat() {
	a := autograd.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	b := autograd.FromFloat32([]float32{5, 6}, 2, 1)
	y := autograd.Cat([]*autograd.Tensor{a, b}, 1)
	fmt.Println(y.Shape(), y.Values())
	// Output: [2 3] [1 2 5 3 4 6]
}

// Split with a chunk size; SplitSizes with explicit sizes.
func ExampleSplit() {
	x := autograd.Arange(0, 5, 1, autograd.Float32)
	for _, c := range autograd.Split(x, 2, 0) {
		fmt.Print(c.Values())
	}
	fmt.Println()
	for _, c := range autograd.SplitSizes(x, []int{1, 4}, -1) {
		fmt.Print(c.Values())
	}
	fmt.Println()
	// Output:
	// [0 1][2 3][4]
	// [0][1 2 3 4]
}

// FuzzShapes hands Reshape, View and FromFloat32 arbitrary shapes (rank up
// to 4, -1 included) for a small tensor. Each must panic with
// autograd's typed error or return a tensor whose shape counts exactly the
// elements it holds.
func FuzzShapes(f *testing.F) {
	f.Add(uint8(16), uint8(0), uint8(2), 1<<60+1, 16, 0, 0)
	f.Add(uint8(24), uint8(1), uint8(3), -1, 1<<61+3, 8, 0)
	f.Add(uint8(24), uint8(2), uint8(4), 2, 3, 2, 2)
	f.Add(uint8(0), uint8(0), uint8(3), 0, 1<<62, -1, 0)
	f.Fuzz(func(t *testing.T, n, via, rank uint8, d0, d1, d2, d3 int) {
		dims := []int{d0, d1, d2, d3}[:min(rank, 4)]
		data := make([]float32, n)
		var x *autograd.Tensor
		err := autograd.Try(func() {
			switch via % 3 {
			case 0:
				x = autograd.Reshape(autograd.FromFloat32(data), dims...)
			case 1:
				x = autograd.View(autograd.FromFloat32(data), dims...)
			default:
				x = autograd.FromFloat32(data, dims...)
			}
		})
		if err != nil {
			return
		}
		if count, cerr := shape.Numel(x.Shape()); cerr != nil || count != x.Numel() || x.Numel() != len(data) {
			t.Fatalf("shape %v of %d elements gave a tensor of shape %v holding %d (count %d, %v)", dims, n, x.Shape(), x.Numel(), count, cerr)
		}
	})
}
