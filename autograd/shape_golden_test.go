package autograd_test

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

type shapeOp = func(xs ...*autograd.Tensor) []*autograd.Tensor

func shapeOne(f func(xs ...*autograd.Tensor) *autograd.Tensor) shapeOp {
	return func(xs ...*autograd.Tensor) []*autograd.Tensor { return []*autograd.Tensor{f(xs...)} }
}

func shapeMatmul(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Matmul(xs[0], xs[1]) }

func shapeLinear(xs ...*autograd.Tensor) *autograd.Tensor {
	var b *autograd.Tensor
	if len(xs) == 3 {
		b = xs[2]
	}
	return autograd.Linear(xs[0], xs[1], b)
}

func shapeCat(dim int) shapeOp {
	return shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Cat(xs, dim) })
}

const (
	gC   = autograd.Contiguous
	gCL  = autograd.ChannelsLast
	gCL3 = autograd.ChannelsLast3d
)

// The cases of testdata/golden/gen_shape.py, with the same ops and input
// formats.
var shapeGoldenCases = []struct {
	name    string
	formats []autograd.MemoryFormat
	op      shapeOp
}{
	{"sum.all", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sum(xs[0], nil, false) })},
	{"sum.dim1", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sum(xs[0], []int{1}, false) })},
	{"sum.neg_keep", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sum(xs[0], []int{-1, -3}, true) })},
	{"sum.cl_hw_keep", []autograd.MemoryFormat{gCL}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sum(xs[0], []int{2, 3}, true) })},
	{"sum.cl_n", []autograd.MemoryFormat{gCL}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sum(xs[0], []int{0}, false) })},
	{"sum.cl_c_keep", []autograd.MemoryFormat{gCL}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sum(xs[0], []int{1}, true) })},
	{"sum.big", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Sum(xs[0], nil, false) })},
	{"mean.all", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Mean(xs[0], nil, false) })},
	{"mean.d02", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Mean(xs[0], []int{0, 2}, false) })},
	{"mean.cl_hw", []autograd.MemoryFormat{gCL}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Mean(xs[0], []int{2, 3}, false) })},
	{"mean.cl_hw_keep", []autograd.MemoryFormat{gCL}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Mean(xs[0], []int{-1, -2}, true) })},
	{"mean.cl3d_dhw_keep", []autograd.MemoryFormat{gCL3}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Mean(xs[0], []int{2, 3, 4}, true) })},

	{"mm.dot", nil, shapeOne(shapeMatmul)},
	{"mm.mm", nil, shapeOne(shapeMatmul)},
	{"mm.vec_mat", nil, shapeOne(shapeMatmul)},
	{"mm.mat_vec", nil, shapeOne(shapeMatmul)},
	{"mm.batched_mat", nil, shapeOne(shapeMatmul)},
	{"mm.mat_batched", nil, shapeOne(shapeMatmul)},
	{"mm.bcast", nil, shapeOne(shapeMatmul)},
	{"mm.bcast_both", nil, shapeOne(shapeMatmul)},
	{"mm.vec_batched", nil, shapeOne(shapeMatmul)},
	{"mm.batched_vec", nil, shapeOne(shapeMatmul)},
	{"mm.cl", []autograd.MemoryFormat{gCL, gC}, shapeOne(shapeMatmul)},
	{"mm.cl_both", []autograd.MemoryFormat{gCL, gCL}, shapeOne(shapeMatmul)},
	{"bmm", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.BMM(xs[0], xs[1]) })},
	{"linear.2d", nil, shapeOne(shapeLinear)},
	{"linear.3d_nobias", nil, shapeOne(shapeLinear)},
	{"linear.1d", nil, shapeOne(shapeLinear)},
	{"linear.cl", []autograd.MemoryFormat{gCL, gC, gC}, shapeOne(shapeLinear)},
	{"linear.wide", nil, shapeOne(shapeLinear)},

	{"reshape.basic", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Reshape(xs[0], 4, -1) })},
	{"reshape.cl", []autograd.MemoryFormat{gCL}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Reshape(xs[0], 2, -1) })},
	{"reshape.cl_same", []autograd.MemoryFormat{gCL}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Reshape(xs[0], 2, 3, 4, 5) })},
	{"view.basic", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.View(xs[0], 2, 2, 3) })},
	{"flatten.basic", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Flatten(xs[0], 1, -1) })},
	{"flatten.cl", []autograd.MemoryFormat{gCL}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Flatten(xs[0], 1, -1) })},
	{"flatten.mid", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Flatten(xs[0], 1, 2) })},
	{"flatten.0d", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Flatten(xs[0], 0, -1) })},
	{"transpose.basic", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Transpose(xs[0], 0, 2) })},
	{"transpose.cl", []autograd.MemoryFormat{gCL}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Transpose(xs[0], 1, 3) })},
	{"permute.basic", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Permute(xs[0], 2, 0, 1) })},
	{"permute.to_cl", nil, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Permute(xs[0], 0, 3, 1, 2) })},
	{"permute.cl_to_nhwc", []autograd.MemoryFormat{gCL}, shapeOne(func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Permute(xs[0], 0, 2, 3, 1) })},
	{"cat.d0", nil, shapeCat(0)},
	{"cat.neg", nil, shapeCat(-1)},
	{"cat.cl", []autograd.MemoryFormat{gCL, gCL}, shapeCat(1)},
	{"cat.cl_d2", []autograd.MemoryFormat{gCL, gCL}, shapeCat(2)},
	{"cat.mixed", []autograd.MemoryFormat{gCL, gC}, shapeCat(1)},
	{"split.d1", nil, func(xs ...*autograd.Tensor) []*autograd.Tensor { return autograd.Split(xs[0], 2, 1) }},
	{"split.d0", nil, func(xs ...*autograd.Tensor) []*autograd.Tensor { return autograd.Split(xs[0], 2, 0) }},
	{"split.cl", []autograd.MemoryFormat{gCL}, func(xs ...*autograd.Tensor) []*autograd.Tensor { return autograd.Split(xs[0], 4, 1) }},
	{"split.cl_n", []autograd.MemoryFormat{gCL}, func(xs ...*autograd.Tensor) []*autograd.Tensor { return autograd.Split(xs[0], 2, 0) }},
	{"splitsizes.last", nil, func(xs ...*autograd.Tensor) []*autograd.Tensor { return autograd.SplitSizes(xs[0], []int{2, 0, 5}, -1) }},
	{"splitsizes.cl", []autograd.MemoryFormat{gCL}, func(xs ...*autograd.Tensor) []*autograd.Tensor { return autograd.SplitSizes(xs[0], []int{1, 3}, 2) }},
}

func TestShapeGolden(t *testing.T) {
	set := golden.Load(t, "shape.safetensors")
	known := map[string]bool{}
	for _, c := range shapeGoldenCases {
		known[c.name] = true
	}
	for _, name := range set.Cases() {
		if !known[name] {
			t.Errorf("golden case %s has no entry in shapeGoldenCases", name)
		}
	}
	for _, c := range shapeGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			var xs []*autograd.Tensor
			for j := 0; ; j++ {
				x, ok := set[fmt.Sprintf("%s.x%d", c.name, j)]
				if !ok {
					break
				}
				if j < len(c.formats) && c.formats[j] != gC {
					x = x.To(c.formats[j])
				}
				xs = append(xs, x.SetRequiresGrad(true))
			}
			if len(xs) == 0 {
				t.Fatalf("no inputs for %s in shape.safetensors", c.name)
			}
			ys := c.op(xs...)
			var loss *autograd.Tensor
			for i, y := range ys {
				want := set.Get(t, fmt.Sprintf("%s.out%d", c.name, i))
				golden.AssertClose(t, fmt.Sprintf("out%d", i), y, want, 1e-5)
				shapeGoldenStrides(t, set, fmt.Sprintf("%s.out%d", c.name, i), y)
				gout := set.Get(t, fmt.Sprintf("%s.gout%d", c.name, i))
				if len(ys) == 1 {
					y.Backward(gout)
					break
				}
				// Several outputs: dL/dy_i = gout_i for L = Σ sum(y_i·gout_i).
				term := autograd.Sum(autograd.Mul(y, gout), nil, false)
				if loss == nil {
					loss = term
				} else {
					loss = autograd.Add(loss, term)
				}
			}
			if _, extra := set[fmt.Sprintf("%s.out%d", c.name, len(ys))]; extra {
				t.Errorf("%d outputs, PyTorch gave more", len(ys))
			}
			if loss != nil {
				loss.Backward()
			}
			for j, x := range xs {
				golden.AssertClose(t, fmt.Sprintf("grad%d", j), x.Grad(), set.Get(t, fmt.Sprintf("%s.grad%d", c.name, j)), 1e-5)
			}
		})
	}
}

// shapeGoldenStrides compares y's strides with PyTorch's where the
// generator saved them. Only dimensions of size above 1 decide where
// elements lie (PyTorch's strides on size-1 dimensions vary with how a
// tensor was made), and an empty tensor has no layout.
func shapeGoldenStrides(t *testing.T, set golden.Set, name string, y *autograd.Tensor) {
	t.Helper()
	want, ok := set[name+"_strides"]
	if !ok || y.Numel() == 0 {
		return
	}
	got, ws, shape := y.Strides(), want.Int64s(), y.Shape()
	if len(got) != len(ws) {
		t.Errorf("%s: strides %v, PyTorch's %v", name, got, ws)
		return
	}
	for i, n := range shape {
		if n > 1 && int64(got[i]) != ws[i] {
			t.Errorf("%s: strides %v (%v), PyTorch's %v", name, got, y.Format(), ws)
			return
		}
	}
}
