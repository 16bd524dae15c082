package graph

import (
	"fmt"
	"slices"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/shape"
	"github.com/kilnml/kiln/kernels"
)

// Type inference of the ops, the infer field of their definitions. Each
// follows the shape rules of the autograd op the node runs and fails where
// it would; dtypes follow it too, closely enough to size memory (the eager
// run the plan starts from is what decides them). Operand counts and
// attributes have been checked against the op's definition first.

type inferFunc = func(n *Node, ins []*sig) ([]sig, error)

func like(s *sig, shape []int) []sig {
	return []sig{{dtype: s.dtype, format: s.format, shape: shape}}
}

// inferSame is the type of an op whose result is its first operand's.
func inferSame(_ *Node, ins []*sig) ([]sig, error) { return like(ins[0], ins[0].shape), nil }

// inferWidened is inferSame with bfloat16 widened to float32 (LayerNorm and
// Softmax, see ops_eager.go).
func inferWidened(n *Node, ins []*sig) ([]sig, error) {
	s, _ := inferSame(n, ins)
	s[0].dtype = autograd.Float32
	return s, nil
}

// dimIndex resolves a possibly negative dimension of a rank-nd shape, where
// a 0-d shape takes 0 or -1 as autograd's ops do.
func dimIndex(field string, d, nd int) (int, error) {
	m := max(nd, 1)
	if d < -m || d >= m {
		return 0, badField(field, "dimension %d is out of range for %d dimensions", d, nd)
	}
	if d < 0 {
		d += m
	}
	return d, nil
}

// inferBroadcast is the type of an elementwise op of two operands.
func inferBroadcast(_ *Node, ins []*sig) ([]sig, error) {
	a, b := ins[0], ins[1]
	out, err := autograd.BroadcastShapes(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	r := like(a, out)
	if a.dtype != b.dtype {
		r[0].dtype = autograd.Float32
	}
	return r, nil
}

// spatial expands a convolution or pooling attribute to one value per
// spatial dimension, as autograd's convSpatialArg does.
func spatial(v []int, nsp, def int) []int {
	out := make([]int, nsp)
	for i := range out {
		switch len(v) {
		case 0:
			out[i] = def
		case 1:
			out[i] = v[0]
		default:
			out[i] = v[i]
		}
	}
	return out
}

// windowFits reports whether a window of k taps dil apart fits in a
// padded size, without overflowing: attributes are at most maxDim.
func windowFits(padded, k, dil int) bool {
	return k >= 1 && padded >= 1 && k-1 <= (padded-1)/dil
}

func inferConv(nsp int) inferFunc {
	return func(n *Node, ins []*sig) ([]sig, error) {
		x, w, b := ins[0], ins[1], ins[2]
		batched := len(x.shape) == nsp+2
		if !batched && len(x.shape) != nsp+1 {
			return nil, fmt.Errorf("input %v is not %d-D or %d-D", x.shape, nsp+1, nsp+2)
		}
		if len(w.shape) != nsp+2 {
			return nil, fmt.Errorf("weight %v is not %d-D", w.shape, nsp+2)
		}
		xs := x.shape
		if !batched {
			xs = append([]int{1}, xs...)
		}
		groups := n.Int("groups")
		c, o := xs[1], w.shape[0]
		if o%groups != 0 || c%groups != 0 || c/groups != w.shape[1] {
			return nil, fmt.Errorf("input %v and weight %v do not fit groups=%d", x.shape, w.shape, groups)
		}
		if b != nil && (len(b.shape) != 1 || b.shape[0] != o) {
			return nil, fmt.Errorf("bias %v does not fit weight %v", b.shape, w.shape)
		}
		stride, pad, dil := spatial(n.Ints("stride"), nsp, 1), spatial(n.Ints("padding"), nsp, 0), spatial(n.Ints("dilation"), nsp, 1)
		out := []int{xs[0], o}
		for i := range nsp {
			in, k := xs[2+i], w.shape[2+i]
			if !windowFits(in+2*pad[i], k, dil[i]) {
				return nil, fmt.Errorf("kernel %v with dilation %v does not fit input %v padded by %v", w.shape[2:], dil, x.shape, pad)
			}
			out = append(out, kernels.ConvOutSize(in, k, stride[i], pad[i], dil[i]))
		}
		if !batched {
			out = out[1:]
		}
		return like(x, out), nil
	}
}

func inferPool(n *Node, ins []*sig) ([]sig, error) {
	x := ins[0]
	if len(x.shape) != 3 && len(x.shape) != 4 {
		return nil, fmt.Errorf("input %v is not 3-D or 4-D", x.shape)
	}
	k := spatial(n.Ints("kernel"), 2, 0)
	stride := k
	if s := n.Ints("stride"); len(s) > 0 {
		stride = spatial(s, 2, 0)
	}
	pad, dil := spatial(n.Ints("padding"), 2, 0), spatial(n.Ints("dilation"), 2, 1)
	out := slices.Clone(x.shape)
	for i := range 2 {
		if pad[i] > k[i]/2 {
			return nil, badField("attrs.padding", "%v is more than half the kernel %v", n.Ints("padding"), k)
		}
		in := x.shape[len(x.shape)-2+i]
		if !windowFits(in+2*pad[i], k[i], dil[i]) {
			return nil, fmt.Errorf("kernel %v with dilation %v does not fit input %v padded by %v", k, dil, x.shape, pad)
		}
		out[len(out)-2+i] = kernels.PoolOutSize(in, k[i], stride[i], pad[i], dil[i], n.Bool("ceil_mode"))
	}
	return like(x, out), nil
}

func inferAdaptivePool(n *Node, ins []*sig) ([]sig, error) {
	x := ins[0]
	if len(x.shape) != 3 && len(x.shape) != 4 {
		return nil, fmt.Errorf("input %v is not 3-D or 4-D", x.shape)
	}
	k := n.Ints("kernel")
	return like(x, append(slices.Clone(x.shape[:len(x.shape)-2]), k...)), nil
}

// linearShape is the shape of x·wᵀ.
func linearShape(x, w, b *sig) ([]int, error) {
	if len(w.shape) != 2 || len(x.shape) == 0 || x.shape[len(x.shape)-1] != w.shape[1] {
		return nil, fmt.Errorf("input %v and weight %v do not multiply", x.shape, w.shape)
	}
	if b != nil && (len(b.shape) != 1 || b.shape[0] != w.shape[0]) {
		return nil, fmt.Errorf("bias %v does not fit weight %v", b.shape, w.shape)
	}
	return append(slices.Clone(x.shape[:len(x.shape)-1]), w.shape[0]), nil
}

func inferLinear(_ *Node, ins []*sig) ([]sig, error) {
	s, err := linearShape(ins[0], ins[1], ins[2])
	if err != nil {
		return nil, err
	}
	r := like(ins[0], s)
	r[0].format = autograd.Contiguous
	return r, nil
}

func inferLinearConcat(n *Node, ins []*sig) ([]sig, error) {
	s, err := linearShape(ins[0], ins[1], ins[2])
	if err != nil {
		return nil, err
	}
	y := sig{dtype: ins[0].dtype, shape: s}
	return splitShapes(&y, n.Ints("sizes"), len(s)-1)
}

// splitShapes gives the pieces of x split along dimension d into sizes.
func splitShapes(x *sig, sizes []int, d int) ([]sig, error) {
	total := 0
	for _, s := range sizes {
		if total += s; total > maxDim { // each is at most maxDim: no overflow
			break
		}
	}
	if total != x.shape[d] {
		return nil, badField("attrs.sizes", "%v add up to %d, dimension %d of %v is %d", sizes, total, d, x.shape, x.shape[d])
	}
	out := make([]sig, len(sizes))
	for i, s := range sizes {
		sh := slices.Clone(x.shape)
		sh[d] = s
		out[i] = sig{dtype: x.dtype, format: x.format, shape: sh}
	}
	return out, nil
}

func inferSplit(n *Node, ins []*sig) ([]sig, error) {
	x := ins[0]
	if len(x.shape) == 0 {
		return nil, fmt.Errorf("cannot split a 0-d value")
	}
	d, err := dimIndex("attrs.dim", n.Int("dim"), len(x.shape))
	if err != nil {
		return nil, err
	}
	return splitShapes(x, n.Ints("sizes"), d)
}

func inferMatmul(_ *Node, ins []*sig) ([]sig, error) {
	a, b := ins[0], ins[1]
	if len(a.shape) == 0 || len(b.shape) == 0 {
		return nil, fmt.Errorf("operands %v and %v need at least 1 dimension", a.shape, b.shape)
	}
	as, bs := a.shape, b.shape
	if len(as) == 1 {
		as = []int{1, as[0]}
	}
	if len(bs) == 1 {
		bs = []int{bs[0], 1}
	}
	if as[len(as)-1] != bs[len(bs)-2] {
		return nil, fmt.Errorf("operands %v and %v do not multiply", a.shape, b.shape)
	}
	batch, err := inferBroadcast(nil, []*sig{{shape: as[:len(as)-2]}, {shape: bs[:len(bs)-2]}})
	if err != nil {
		return nil, err
	}
	out := batch[0].shape
	if len(a.shape) > 1 {
		out = append(out, as[len(as)-2])
	}
	if len(b.shape) > 1 {
		out = append(out, bs[len(bs)-1])
	}
	return []sig{{dtype: a.dtype, shape: out}}, nil
}

func inferBMM(n *Node, ins []*sig) ([]sig, error) {
	a, b := ins[0], ins[1]
	if len(a.shape) != 3 || len(b.shape) != 3 || a.shape[0] != b.shape[0] {
		return nil, fmt.Errorf("operands %v and %v are not [batch, n, k] and [batch, k, m]", a.shape, b.shape)
	}
	return inferMatmul(n, ins)
}

func inferReduce(n *Node, ins []*sig) ([]sig, error) {
	x := ins[0]
	dims := n.Ints("dims")
	reduced := make([]bool, len(x.shape))
	for _, d := range dims {
		i, err := dimIndex("attrs.dims", d, len(x.shape))
		if err != nil {
			return nil, err
		}
		if len(x.shape) > 0 {
			reduced[i] = true
		}
	}
	out := []int{}
	for i, d := range x.shape {
		switch {
		case !reduced[i] && len(dims) > 0:
			out = append(out, d)
		case n.Bool("keepdim"):
			out = append(out, 1)
		}
	}
	return like(x, out), nil
}

func inferReshape(n *Node, ins []*sig) ([]sig, error) {
	x := ins[0]
	want := n.Ints("shape")
	free := -1
	known := make([]int, 0, len(want))
	for i, d := range want {
		if d == -1 {
			if free >= 0 {
				return nil, badField("attrs.shape", "%v infers more than one dimension", want)
			}
			free = i
			continue
		}
		known = append(known, d)
	}
	k, err := shape.Numel(known)
	if err != nil {
		return nil, badField("attrs.shape", "%w", err)
	}
	have, err := shape.Numel(x.shape)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(want)
	if free >= 0 {
		if k == 0 || have%k != 0 {
			return nil, badField("attrs.shape", "%v does not fit %v", want, x.shape)
		}
		out[free] = have / k
	} else if k != have {
		return nil, badField("attrs.shape", "%v does not hold the %d elements of %v", want, have, x.shape)
	}
	return []sig{{dtype: x.dtype, shape: out}}, nil
}

func inferFlatten(n *Node, ins []*sig) ([]sig, error) {
	x := ins[0]
	nd := len(x.shape)
	s, err := dimIndex("attrs.start_dim", n.Int("start_dim"), nd)
	if err != nil {
		return nil, err
	}
	e, err := dimIndex("attrs.end_dim", n.Int("end_dim"), nd)
	if err != nil {
		return nil, err
	}
	if nd == 0 {
		return []sig{{dtype: x.dtype, shape: []int{1}}}, nil
	}
	if s > e {
		return nil, badField("attrs.start_dim", "start_dim %d comes after end_dim %d", s, e)
	}
	merged, err := shape.Numel(x.shape[s : e+1])
	if err != nil {
		return nil, err
	}
	out := append(append(slices.Clone(x.shape[:s]), merged), x.shape[e+1:]...)
	return []sig{{dtype: x.dtype, shape: out}}, nil
}

func inferPermute(n *Node, ins []*sig) ([]sig, error) {
	x := ins[0]
	perm := n.Ints("dims")
	if len(perm) != len(x.shape) {
		return nil, badField("attrs.dims", "%v has %d entries for %d dimensions", perm, len(perm), len(x.shape))
	}
	out := make([]int, len(perm))
	seen := make([]bool, len(perm))
	for i, p := range perm {
		d, err := dimIndex("attrs.dims", p, len(perm))
		if err != nil {
			return nil, err
		}
		if seen[d] {
			return nil, badField("attrs.dims", "%v names dimension %d twice", perm, d)
		}
		seen[d] = true
		out[i] = x.shape[d]
	}
	return []sig{{dtype: x.dtype, shape: out}}, nil
}

func inferCat(n *Node, ins []*sig) ([]sig, error) {
	x0 := ins[0]
	if len(x0.shape) == 0 {
		return nil, fmt.Errorf("cannot concatenate 0-d values")
	}
	d, err := dimIndex("attrs.dim", n.Int("dim"), len(x0.shape))
	if err != nil {
		return nil, err
	}
	out := slices.Clone(x0.shape)
	out[d] = 0
	for i, x := range ins {
		if len(x.shape) != len(out) {
			return nil, fmt.Errorf("operand %d %v and operand 0 %v differ in rank", i, x.shape, x0.shape)
		}
		for j := range out {
			if j != d && x.shape[j] != out[j] {
				return nil, fmt.Errorf("operand %d %v and operand 0 %v differ outside dimension %d", i, x.shape, x0.shape, d)
			}
		}
		if out[d] > maxDim {
			return nil, fmt.Errorf("concatenation is longer than %d", maxDim)
		}
		out[d] += x.shape[d]
	}
	r := like(x0, out)
	r[0].format = autograd.Contiguous
	return r, nil
}

func inferSoftmax(n *Node, ins []*sig) ([]sig, error) {
	if _, err := dimIndex("attrs.dim", n.Int("dim"), len(ins[0].shape)); err != nil {
		return nil, err
	}
	if n.Op == "Softmax" {
		return inferWidened(n, ins)
	}
	return inferSame(n, ins)
}

func inferEmbedding(_ *Node, ins []*sig) ([]sig, error) {
	idx, w := ins[0], ins[1]
	if len(w.shape) != 2 {
		return nil, fmt.Errorf("weight %v is not 2-D", w.shape)
	}
	return []sig{{dtype: w.dtype, shape: append(slices.Clone(idx.shape), w.shape[1])}}, nil
}

func inferEmbeddingBag(_ *Node, ins []*sig) ([]sig, error) {
	input, offsets, w := ins[0], ins[1], ins[2]
	if len(w.shape) != 2 {
		return nil, fmt.Errorf("weight %v is not 2-D", w.shape)
	}
	var bags int
	switch {
	case len(input.shape) == 2 && offsets == nil:
		bags = input.shape[0]
	case len(input.shape) == 1 && offsets != nil && len(offsets.shape) == 1:
		bags = offsets.shape[0]
	default:
		return nil, fmt.Errorf("input %v and offsets are neither 2-D without offsets nor 1-D with 1-D offsets", input.shape)
	}
	return []sig{{dtype: w.dtype, shape: []int{bags, w.shape[1]}}}, nil
}

func inferCast(n *Node, ins []*sig) ([]sig, error) {
	d, _ := ParseDType(n.Str("dtype")) // checked with the attribute
	r := like(ins[0], ins[0].shape)
	r[0].dtype = d
	return r, nil
}

func inferTo(n *Node, ins []*sig) ([]sig, error) {
	f, _ := ParseFormat(n.Str("format")) // checked with the attribute
	if r := formatRank(f); r != 0 && len(ins[0].shape) != r {
		return nil, fmt.Errorf("format %v needs %d dimensions, the input is %v", f, r, ins[0].shape)
	}
	r := like(ins[0], ins[0].shape)
	r[0].format = f
	return r, nil
}

func inferChannelShuffle(n *Node, ins []*sig) ([]sig, error) {
	x := ins[0]
	if g := n.Int("groups"); len(x.shape) < 2 || x.shape[1]%g != 0 {
		return nil, badField("attrs.groups", "%d groups do not split the channels of %v", g, x.shape)
	}
	return inferSame(n, ins)
}
