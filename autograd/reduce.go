package autograd

import (
	"github.com/kilnml/kiln/kernels"
)

// Sum adds up x's elements over dims, like torch.sum(x, dims, keepdim).
// Dims may be negative (counting from the end) and must not repeat; nil or
// empty dims reduce over every dimension, giving a 0-d tensor (or, with
// keepDim, a tensor of ones in every dimension). keepDim keeps each reduced
// dimension with size 1. Sums accumulate in float64. x may be in any memory
// format; the result is contiguous, as PyTorch 1.13's reductions are.
func Sum(x *Tensor, dims []int, keepDim bool) *Tensor {
	return reduceSum("Sum", x, dims, keepDim, false)
}

// Mean averages x's elements over dims, like torch.mean(x, dims, keepdim),
// with Sum's rules for dims, keepDim and memory format. The mean over no
// elements is NaN, as in PyTorch.
func Mean(x *Tensor, dims []int, keepDim bool) *Tensor {
	return reduceSum("Mean", x, dims, keepDim, true)
}

// reducePlan validates dims for x and returns which dimensions are
// reduced, the result's shape and the number of elements each result sums.
func reducePlan(op string, x *Tensor, dims []int, keepDim bool) (reduced []bool, outShape []int, count int) {
	nd := x.NDim()
	reduced = make([]bool, nd)
	if len(dims) == 0 {
		for i := range reduced {
			reduced[i] = true
		}
	}
	for _, d := range dims {
		// A 0-d tensor accepts dim 0 or -1, as in PyTorch.
		nd1 := max(nd, 1)
		if d < -nd1 || d >= nd1 {
			failIndex(op, "dimension %d out of range for a %d-D tensor of shape %v (dims %v)", d, nd, x.shape, dims)
		}
		if d < 0 {
			d += nd1
		}
		if nd == 0 {
			continue
		}
		if reduced[d] {
			failShape(op, "dimension %d appears more than once in dims %v", d, dims)
		}
		reduced[d] = true
	}
	count = 1
	outShape = make([]int, 0, nd)
	for i, n := range x.shape {
		switch {
		case reduced[i]:
			count *= n
			if keepDim {
				outShape = append(outShape, 1)
			}
		default:
			outShape = append(outShape, n)
		}
	}
	return reduced, outShape, count
}

// reduceStrides maps the strides of a tensor holding the reduction's result
// (or its gradient) onto x's dimensions: reduced dimensions get stride 0.
func reduceStrides(reduced []bool, keepDim bool, outStrides []int) []int {
	st := make([]int, len(reduced))
	j := 0
	for i, r := range reduced {
		switch {
		case r && keepDim:
			j++
		case !r:
			st[i] = outStrides[j]
			j++
		}
	}
	return st
}

func reduceSum(op string, x *Tensor, dims []int, keepDim, mean bool) *Tensor {
	if x != nil && x.dtype == BFloat16 {
		// As PyTorch: accumulated in float32, the result rounded to
		// bfloat16.
		return viaFloat32(x, func(x *Tensor) *Tensor { return reduceSum(op, x, dims, keepDim, mean) })
	}
	checkF32(op, "input", x)
	reduced, outShape, count := reducePlan(op, x, dims, keepDim)
	scale := 1.0
	if mean {
		scale = 1 / float64(count) // +Inf for no elements, so the mean is NaN
	}
	out := resultIn(op, x.mode, Float32, outShape, Contiguous, true)
	dst := reduceStrides(reduced, keepDim, stridesOf(outShape, Contiguous))
	kernels.StridedSum(out.Float32s(), x.Float32s(), x.shape, dst, stridesOf(x.shape, x.format), scale)
	if traced(x) {
		name := "Sum"
		if mean {
			name = "Mean"
		}
		trace(name, reduceAttrs{dims, keepDim}, []*Tensor{x}, []*Tensor{out})
	}
	return record(op+"Backward", out, []*Tensor{x}, func(g *Tensor) []*Tensor {
		// Every input element receives the gradient of the result it
		// went into, scaled by 1/count for a mean.
		gd := g.Float32s()
		if mean {
			s := make([]float32, len(gd))
			for i, v := range gd {
				s[i] = float32(float64(v) * scale)
			}
			gd = s
		}
		gx := gradFor(x, Float32, x.format)
		clear(gx.Float32s())
		src := reduceStrides(reduced, keepDim, stridesOf(g.shape, g.format))
		kernels.StridedCopy(gx.Float32s(), gd, x.shape, stridesOf(x.shape, x.format), src)
		return []*Tensor{gx}
	})
}

// reduceAttrs are Sum's and Mean's attributes.
type reduceAttrs struct {
	Dims    []int
	KeepDim bool `kiln:"keepdim"`
}

func init() {
	registerInfer(func(op string, attrs any, in []*Tensor) []TensorType {
		at := attrs.(reduceAttrs)
		_, s, _ := reducePlan(op, in[0], at.Dims, at.KeepDim)
		return []TensorType{{DType: in[0].dtype, Shape: s}}
	}, "Sum", "Mean")
	for op, f := range map[string]func(*Tensor, []int, bool) *Tensor{"Sum": Sum, "Mean": Mean} {
		defineEager(op, reduceAttrs{}, func(a any, in []*Tensor) []*Tensor {
			at := a.(reduceAttrs)
			return one(f(in[0], at.Dims, at.KeepDim))
		})
	}
}
