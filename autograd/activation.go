package autograd

import (
	"github.com/kilnml/kiln/kernels"
)

// ReLU returns max(x, 0) elementwise, like torch.relu. The gradient is 0
// where x ≤ 0 (at 0 included) and passes through elsewhere; a NaN stays NaN
// and passes its gradient, as in PyTorch.
func ReLU(x *Tensor) *Tensor { return actApply("ReLU", x, kernels.Act{Fn: kernels.ActReLU}) }

// Sigmoid returns 1/(1+e⁻ˣ) elementwise, like torch.sigmoid.
func Sigmoid(x *Tensor) *Tensor { return actApply("Sigmoid", x, kernels.Act{Fn: kernels.ActSigmoid}) }

// Tanh returns the hyperbolic tangent elementwise, like torch.tanh.
func Tanh(x *Tensor) *Tensor { return actApply("Tanh", x, kernels.Act{Fn: kernels.ActTanh}) }

// HardTanh clamps x to [minVal, maxVal], like
// torch.nn.functional.hardtanh. The gradient passes only strictly inside
// (minVal, maxVal): it is 0 at the bounds, as in PyTorch, and at NaN, as in
// PyTorch's vectorised kernel. minVal > maxVal, or a NaN bound, is an error
// (PyTorch's functional form would quietly return maxVal everywhere).
func HardTanh(x *Tensor, minVal, maxVal float32) *Tensor {
	checkActAttrs("HardTanh", hardTanhAttrs{float64(minVal), float64(maxVal)})
	return actApply("HardTanh", x, kernels.Act{Fn: kernels.ActHardTanh, A: minVal, B: maxVal})
}

// SiLU returns x·sigmoid(x) elementwise, like torch.nn.functional.silu.
func SiLU(x *Tensor) *Tensor { return actApply("SiLU", x, kernels.Act{Fn: kernels.ActSiLU}) }

// ELU returns x for x > 0 and alpha·(eˣ−1) otherwise, like
// torch.nn.functional.elu. For x ≤ 0 the gradient is alpha·eˣ (so alpha
// at 0), as in PyTorch; a NaN gets a NaN gradient, as in PyTorch's
// vectorised kernel.
func ELU(x *Tensor, alpha float32) *Tensor {
	return actApply("ELU", x, kernels.Act{Fn: kernels.ActELU, A: alpha})
}

// GELU returns the Gaussian error linear unit x·Φ(x), like
// torch.nn.functional.gelu. approximate is "none" for the exact form with
// erf, or "tanh" for PyTorch's approximation
// 0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³))).
func GELU(x *Tensor, approximate string) *Tensor {
	checkActAttrs("GELU", geluAttrs{approximate})
	a, _ := actOf("GELU", geluAttrs{approximate})
	return actApply("GELU", x, a)
}

// Dropout zeroes each element of x with probability p and scales the others
// by 1/(1−p) when training, like torch.nn.functional.dropout; the result
// keeps x's shape and memory format. The mask is drawn from g in logical
// (row-major) order, so one seed gives the same mask whatever x's memory
// format, and the gradient is the output gradient times that same mask and
// scale. The scale is 1/(1−p) in float32, as PyTorch computes it, and
// dropped elements are x·0, so a dropped NaN or infinity gives NaN, not 0.
//
// With training false or p = 0, x itself is returned (the identity, as
// PyTorch returns its input) and g is not used; p = 1 gives x·0 and draws
// nothing. p outside [0, 1] is an error.
func Dropout(x *Tensor, p float64, training bool, g *Generator) *Tensor {
	if x != nil && x.dtype == BFloat16 {
		return viaFloat32(x, func(x *Tensor) *Tensor { return Dropout(x, p, training, g) })
	}
	const op = "Dropout"
	checkF32(op, "input", x)
	if !(p >= 0 && p <= 1) {
		Fail(op, "dropout probability has to be between 0 and 1, but got %v", p)
	}
	if !training || p == 0 || x.Numel() == 0 {
		if traced(x) {
			// The identity is traced, so a graph shows where dropout was
			// and Freeze visibly removes it, as PyTorch's freezing does.
			out := &Tensor{dtype: x.dtype, shape: x.shape, format: x.format, data: x.data, requiresGrad: x.requiresGrad, node: x.node, mode: x.mode}
			trace(op, dropoutAttrs{p}, []*Tensor{x}, []*Tensor{out})
			return out
		}
		return x
	}
	var keep []uint8
	scale := float32(0)
	if p < 1 {
		if g == nil {
			Fail(op, "generator is nil; dropout with p=%v in training draws its mask from one", p)
		}
		keep = actDropoutMask(x, 1-p, g)
		scale = 1 / float32(1-p)
	}
	out := actEmptyLike(x)
	kernels.Dropout(out.Float32s(), x.Float32s(), keep, scale)
	return record(op+"Backward", out, []*Tensor{x}, func(gr *Tensor) []*Tensor {
		gx := actEmptyLike(x)
		kernels.Dropout(gx.Float32s(), actGradData(gr, x), keep, scale)
		return []*Tensor{gx}
	})
}

// actDropoutMask draws a keep mask (1 with probability q) for x's elements
// in logical order and stores it in x's physical order.
func actDropoutMask(x *Tensor, q float64, g *Generator) []uint8 {
	keep := make([]uint8, x.Numel())
	nd := len(x.shape)
	walk(x.shape, physicalOrder(Contiguous, nd), [][]int{stridesOf(x.shape, x.format)}, func(offs []int, n int, steps []int) {
		o, step := offs[0], steps[0]
		for k := 0; k < n; k++ {
			if g.Float64() < q {
				keep[o] = 1
			}
			o += step
		}
	})
	return keep
}

// actApply runs the elementwise kernel a over x's physical elements, so the
// result keeps x's shape and memory format, and records a's backward.
func actApply(op string, x *Tensor, a kernels.Act) *Tensor {
	if x != nil && x.dtype == BFloat16 {
		return actApplyBF16(op, x, a)
	}
	checkF32(op, "input", x)
	out := actEmptyLike(x)
	bindAct(a, x, out)()
	// The backward keeps only the slice its derivative reads: ReLU's
	// output, not its input too, so that input (often a batch norm's
	// output) can be freed as soon as the forward pass moves on.
	var xs, ys []float32
	if a.ReadsOutput() {
		ys = out.Float32s()
	} else {
		xs = x.Float32s()
	}
	if traced(x) {
		trace(op, actAttrs(op, a), []*Tensor{x}, []*Tensor{out})
	}
	like := x.meta()
	return record(op+"Backward", out, []*Tensor{x}, func(g *Tensor) []*Tensor {
		gd := actGradData(g, like)
		gx := gradLike(like)
		a.Backward(gx.Float32s(), gd, xs, ys)
		return []*Tensor{gx}
	})
}

// actApplyBF16 is actApply on a bfloat16 x: the kernel computes in
// float32 and rounds the result, and the gradient, to bfloat16 once.
func actApplyBF16(op string, x *Tensor, a kernels.Act) *Tensor {
	out := bf16EmptyLike(x)
	bindAct(a, x, out)()
	var v []uint16
	switch {
	case a.ReadsOutput():
		v = out.BFloat16s()
	case a.ReadsInput():
		v = x.BFloat16s()
	}
	if traced(x) {
		trace(op, actAttrs(op, a), []*Tensor{x}, []*Tensor{out})
	}
	like := x.meta()
	return record(op+"Backward", out, []*Tensor{x}, func(g *Tensor) []*Tensor {
		gx := bf16GradLike(like)
		a.BackwardBF16(gx.BFloat16s(), bf16GradData(g, like), v)
		return []*Tensor{gx}
	})
}

// reluInPlaceBF16 is ReLU(z), bit for bit, values and gradient, for a
// fresh result z that only the caller holds and whose op's backward does
// not read it: bfloat16 z is rectified in place, saving a tensor (any
// other z goes to ReLU).
func reluInPlaceBF16(z *Tensor) *Tensor {
	if z.dtype != BFloat16 {
		return ReLU(z)
	}
	relu := kernels.Act{Fn: kernels.ActReLU}
	v := z.BFloat16s()
	relu.ForwardBF16(v, v)
	out := &Tensor{dtype: BFloat16, shape: z.shape, format: z.format, data: z.data, mode: z.mode.arenaMode()}
	like := z.meta()
	return record("ReLUBackward", out, []*Tensor{z}, func(g *Tensor) []*Tensor {
		gz := bf16GradLike(like)
		relu.BackwardBF16(gz.BFloat16s(), bf16GradData(g, like), v)
		return []*Tensor{gz}
	})
}

// ReLUInPlace sets x = max(x, 0) and returns x, for inference where x is a
// temporary (torch.relu_). x must not need a gradient while gradients are
// recorded.
func ReLUInPlace(x *Tensor) *Tensor {
	const op = "ReLUInPlace"
	if x == nil {
		Fail(op, "input is nil")
	}
	checkInPlace(op, x)
	relu := kernels.Act{Fn: kernels.ActReLU}
	switch x.dtype {
	case Float32:
		relu.Forward(x.Float32s(), x.Float32s())
	case BFloat16:
		relu.ForwardBF16(x.BFloat16s(), x.BFloat16s())
	default:
		failDType(op, "input has dtype %v; %s supports float32 and bfloat16", x.dtype, op)
	}
	if traced(x) {
		trace("ReLU", nil, []*Tensor{x}, []*Tensor{x})
	}
	return x
}

// actFuncs are the kernel functions of the elementwise ops run by one
// kernels.Act (GELU's by its attribute).
var actFuncs = map[string]kernels.ActFunc{"ReLU": kernels.ActReLU, "Sigmoid": kernels.ActSigmoid,
	"Tanh": kernels.ActTanh, "SiLU": kernels.ActSiLU, "HardTanh": kernels.ActHardTanh, "Clamp": kernels.ActClamp, "ELU": kernels.ActELU,
	"GELU": kernels.ActGELU, "Neg": kernels.ActNeg, "Exp": kernels.ActExp, "Log": kernels.ActLog,
	"Sqrt": kernels.ActSqrt, "Pow": kernels.ActPow, "AddScalar": kernels.ActAddScalar, "MulScalar": kernels.ActMulScalar}

// The attribute structs of the elementwise ops that have attributes.
type (
	hardTanhAttrs struct{ MinVal, MaxVal float64 }
	eluAttrs      struct{ Alpha float64 }
	powAttrs      struct{ Exponent float64 }
	scalarAttrs   struct{ Value float64 } // AddScalar's and MulScalar's
	geluAttrs     struct{ Approximate string }
	dropoutAttrs  struct{ P float64 }
)

// actAttrs is the attribute struct of the elementwise op running a.
func actAttrs(op string, a kernels.Act) any {
	switch op {
	case "GELU":
		if a.Fn == kernels.ActGELUTanh {
			return geluAttrs{"tanh"}
		}
		return geluAttrs{"none"}
	case "HardTanh":
		return hardTanhAttrs{float64(a.A), float64(a.B)}
	case "Clamp":
		return clampAttrs{float64(a.A), float64(a.B)}
	case "ELU":
		return eluAttrs{float64(a.A)}
	case "Pow":
		return powAttrs{float64(a.A)}
	case "AddScalar", "MulScalar":
		return scalarAttrs{float64(a.A)}
	}
	return nil
}

// checkActAttrs fails where an elementwise op's attributes are invalid.
func checkActAttrs(op string, attrs any) {
	switch a := attrs.(type) {
	case hardTanhAttrs:
		minVal, maxVal := float32(a.MinVal), float32(a.MaxVal)
		if minVal != minVal || maxVal != maxVal {
			Fail(op, "bounds must be numbers, got min %v and max %v", minVal, maxVal)
		}
		if minVal > maxVal {
			Fail(op, "min %v is greater than max %v", minVal, maxVal)
		}
	case clampAttrs:
		checkClampAttrs(op, a)
	case geluAttrs:
		if a.Approximate != "none" && a.Approximate != "tanh" {
			Fail(op, "approximate must be \"none\" or \"tanh\", got %q", a.Approximate)
		}
	}
}

// actOf is actAttrs' inverse: the kernel function of op with attributes
// attrs, and whether op is one.
func actOf(op string, attrs any) (kernels.Act, bool) {
	fn, ok := actFuncs[op]
	a := kernels.Act{Fn: fn}
	switch at := attrs.(type) {
	case geluAttrs:
		switch at.Approximate {
		case "none":
		case "tanh":
			a.Fn = kernels.ActGELUTanh
		default:
			return a, false
		}
	case hardTanhAttrs:
		a.A, a.B = float32(at.MinVal), float32(at.MaxVal)
	case clampAttrs:
		a.A, a.B = float32(at.Min), float32(at.Max)
	case eluAttrs:
		a.A = float32(at.Alpha)
	case powAttrs:
		a.A = float32(at.Exponent)
	case scalarAttrs:
		a.A = float32(at.Value)
	}
	return a, ok
}

// bindAct binds a over x's physical elements into y, a tensor of x's
// dtype, shape and format (x itself for in place); nil for other dtypes.
// Bfloat16 runs a's bfloat16 kernel, with Clamp's bounds rounded to
// bfloat16, except AddScalar, which goes through float32 and back as the
// op does.
func bindAct(a kernels.Act, x, y *Tensor) func() {
	switch x.dtype {
	case Float32:
		xd, yd := x.Float32s(), y.Float32s()
		return func() { a.Forward(yd, xd) }
	case BFloat16:
		xd, yd := x.BFloat16s(), y.BFloat16s()
		if a.Fn == kernels.ActAddScalar {
			xf := make([]float32, len(xd))
			return func() {
				kernels.BF16ToF32(xf, xd)
				a.Forward(xf, xf)
				kernels.F32ToBF16(yd, xf)
			}
		}
		if a.Fn == kernels.ActClamp {
			a = clampBF16("Clamp", a, float64(a.A), float64(a.B))
		}
		return func() { a.ForwardBF16(yd, xd) }
	}
	return nil
}

// sameLayout reports whether a and b have one dtype, shape and format.
func sameLayout(a, b *Tensor) bool {
	return a.dtype == b.dtype && a.format == b.format && sameShape(a.shape, b.shape)
}

func init() {
	for op := range actFuncs {
		defineBind(op, func(attrs any, ins, outs []*Tensor, _ []bool) func() {
			if !sameLayout(ins[0], outs[0]) {
				return nil
			}
			if a, ok := actOf(op, attrs); ok {
				return bindAct(a, ins[0], outs[0])
			}
			return nil
		})
	}
	for op, f := range map[string]func(*Tensor) *Tensor{"ReLU": ReLU, "Sigmoid": Sigmoid, "Tanh": Tanh,
		"SiLU": SiLU, "Neg": Neg, "Exp": Exp, "Log": Log, "Sqrt": Sqrt} {
		defineEager(op, nil, func(_ any, in []*Tensor) []*Tensor { return one(f(in[0])) })
	}
	defineEager("HardTanh", hardTanhAttrs{}, func(a any, in []*Tensor) []*Tensor {
		at := a.(hardTanhAttrs)
		return one(HardTanh(in[0], float32(at.MinVal), float32(at.MaxVal)))
	})
	defineEager("ELU", eluAttrs{}, func(a any, in []*Tensor) []*Tensor { return one(ELU(in[0], float32(a.(eluAttrs).Alpha))) })
	defineEager("GELU", geluAttrs{}, func(a any, in []*Tensor) []*Tensor { return one(GELU(in[0], a.(geluAttrs).Approximate)) })
	defineEager("Pow", powAttrs{}, func(a any, in []*Tensor) []*Tensor { return one(Pow(in[0], float32(a.(powAttrs).Exponent))) })
	defineEager("AddScalar", scalarAttrs{}, func(a any, in []*Tensor) []*Tensor {
		return one(AddScalar(in[0], float32(a.(scalarAttrs).Value)))
	})
	defineEager("MulScalar", scalarAttrs{}, func(a any, in []*Tensor) []*Tensor {
		return one(MulScalar(in[0], float32(a.(scalarAttrs).Value)))
	})
}

// bf16EmptyLike allocates a bfloat16 tensor with x's shape and format.
func bf16EmptyLike(x *Tensor) *Tensor {
	return resultIn("bf16EmptyLike", x.mode, BFloat16, cloneInts(x.shape), x.format, false)
}

// bf16GradData returns the output gradient g as bfloat16 data in x's
// memory format, converting only where g is not already.
func bf16GradData(g, x *Tensor) []uint16 {
	if g.dtype != BFloat16 {
		g = g.castTo(BFloat16)
	}
	if g.format != x.format {
		g = g.reformat(x.format)
	}
	return g.BFloat16s()
}

// actEmptyLike allocates a float32 tensor with x's shape and format.
func actEmptyLike(x *Tensor) *Tensor {
	return resultIn("actEmptyLike", x.mode, Float32, cloneInts(x.shape), x.format, false)
}

// actGradIn returns the output gradient g as a float32 tensor in x's memory
// format, so an elementwise backward can walk it beside x's physical slice.
// It is g itself when it already is.
func actGradIn(g, x *Tensor) *Tensor {
	if g.dtype != Float32 {
		g = g.castTo(Float32)
	}
	if g.format != x.format {
		g = g.reformat(x.format)
	}
	return g
}

// actGradData is actGradIn's backing slice.
func actGradData(g, x *Tensor) []float32 { return actGradIn(g, x).Float32s() }
