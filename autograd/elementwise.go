package autograd

import "github.com/kilnml/kiln/kernels"

// Add returns a+b with broadcasting. Bfloat16 operands follow PyTorch's
// type promotion (see binaryBF16).
func Add(a, b *Tensor) *Tensor { return binaryOp("Add", kernels.BinAdd, a, b) }

// Sub returns a-b with broadcasting, promoting bfloat16 as Add does.
func Sub(a, b *Tensor) *Tensor { return binaryOp("Sub", kernels.BinSub, a, b) }

// Mul returns a*b elementwise with broadcasting, promoting bfloat16 as Add
// does.
func Mul(a, b *Tensor) *Tensor { return binaryOp("Mul", kernels.BinMul, a, b) }

// Div returns a/b elementwise with broadcasting, promoting bfloat16 as Add
// does.
func Div(a, b *Tensor) *Tensor { return binaryOp("Div", kernels.BinDiv, a, b) }

// binaryOp runs a broadcasting binary op on float32 operands, or on
// bfloat16 ones through binaryBF16.
func binaryOp(op string, k kernels.BinOp, a, b *Tensor) *Tensor {
	if out, ok := binaryBF16(op, a, b, k); ok {
		return out
	}
	out := binaryF32(op, a, b, k)
	if traced(a, b) {
		trace(op, nil, []*Tensor{a, b}, []*Tensor{out})
	}
	// The backward keeps alive only what it reads: the operands' shapes
	// for sums and differences, the operands for products and quotients,
	// and a quotient's result.
	ta, tb := a, b
	if k == kernels.BinAdd || k == kernels.BinSub {
		ta, tb = a.meta(), b.meta()
	}
	var saved *Tensor
	if k == kernels.BinDiv {
		saved = out
	}
	needA, needB := a.requiresGrad, b.requiresGrad
	return record(op+"Backward", out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		ga, gb := binaryGrads(k, g, ta, tb, saved, needA, needB)
		return []*Tensor{ga, gb}
	})
}

// binaryGrads returns the float32 gradients of a op b for g, the result's
// gradient, each summed to its operand's shape, nil where need says none
// is wanted. Add and Sub read only a's and b's shapes; Div reads out, the
// float32 result.
func binaryGrads(k kernels.BinOp, g, a, b, out *Tensor, needA, needB bool) (ga, gb *Tensor) {
	if needA {
		switch k {
		case kernels.BinAdd, kernels.BinSub:
			ga = g
		case kernels.BinMul:
			ga = binaryF32("Mul", g, b, kernels.BinMul)
		case kernels.BinDiv:
			ga = binaryF32("Div", g, b, kernels.BinDiv)
		}
		ga = sumToShape(ga, a.shape, a.format)
	}
	if needB {
		switch k {
		case kernels.BinAdd:
			gb = g
		case kernels.BinSub:
			gb = negF32(g)
		case kernels.BinMul:
			gb = binaryF32("Mul", g, a, kernels.BinMul)
		case kernels.BinDiv:
			// d(a/b)/db = -a/b² = -out/b, and −(x/y) is (−x)/y exactly.
			t := binaryF32("Div", out, b, kernels.BinDiv)
			kernels.Act{Fn: kernels.ActNeg}.Forward(t.Float32s(), t.Float32s())
			gb = binaryF32("Mul", g, t, kernels.BinMul)
		}
		gb = sumToShape(gb, b.shape, b.format)
	}
	return ga, gb
}

// AddReLU returns ReLU(Add(a, b)), bit for bit, as one op: the sum is
// rectified in place and the backward masks the gradient by the output,
// so no separate sum is kept. It is a residual block's last step.
func AddReLU(a, b *Tensor) *Tensor {
	if a != nil && b != nil && (a.dtype == BFloat16 || b.dtype == BFloat16) {
		return addReLUBF16(a, b)
	}
	var out *Tensor
	if sameShape(a.shape, b.shape) && a.format == b.format {
		checkFloat32("AddReLU", a, b)
		out = actEmptyLike(a)
		kernels.AddReLU(out.Float32s(), a.Float32s(), b.Float32s())
	} else {
		out = binaryF32("AddReLU", a, b, kernels.BinAdd)
		kernels.Act{Fn: kernels.ActReLU}.Forward(out.Float32s(), out.Float32s())
	}
	if traced(a, b) {
		traceAddReLU(a, b, out)
	}
	yd := out.Float32s()
	am, bm, om := a.meta(), b.meta(), out.meta()
	return record("AddReLUBackward", out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		masked := gradLike(om)
		kernels.Act{Fn: kernels.ActReLU}.Backward(masked.Float32s(), actGradData(g, om), nil, yd)
		return []*Tensor{sumToShape(masked, am.shape, am.format), sumToShape(masked, bm.shape, bm.format)}
	})
}

// AddReLUInPlace sets a = ReLU(a + b) and returns a, for inference where a
// is a temporary: AddReLU's result without a new tensor. b must have a's
// shape and format; a must not need a gradient while gradients are
// recorded.
func AddReLUInPlace(a, b *Tensor) *Tensor {
	const op = "AddReLUInPlace"
	if a == nil || b == nil {
		Fail(op, "operand is nil")
	}
	checkInPlace(op, a)
	if !sameShape(a.shape, b.shape) || a.format != b.format {
		failShape(op, "operands must have one shape and format, got %v (%v) and %v (%v)", a.shape, a.format, b.shape, b.format)
	}
	switch {
	case a.dtype == BFloat16 && b.dtype == BFloat16:
		ad := a.BFloat16s()
		kernels.AddReLUBF16(ad, ad, b.BFloat16s())
	default:
		checkFloat32(op, a, b)
		ad := a.Float32s()
		kernels.AddReLU(ad, ad, b.Float32s())
	}
	if traced(a, b) {
		traceAddReLU(a, b, a)
	}
	return a
}

// traceAddReLU reports AddReLU decomposed, as Add then ReLU.
func traceAddReLU(a, b, out *Tensor) {
	sum := out.meta()
	sum.mode = modeOf(a, b) // the intermediate belongs to the traced computation
	trace("Add", nil, []*Tensor{a, b}, []*Tensor{sum})
	trace("ReLU", nil, []*Tensor{sum}, []*Tensor{out})
}

// addReLUBF16 is AddReLU with a bfloat16 operand. Two bfloat16 operands
// of one shape and format run natively, the sum computed in float32 and
// rounded once; otherwise bfloat16 meets float32 as in PyTorch's type
// promotion (or broadcasts) through float32.
func addReLUBF16(a, b *Tensor) *Tensor {
	if a.dtype != b.dtype || !sameShape(a.shape, b.shape) || a.format != b.format {
		out := AddReLU(Cast(a, Float32), Cast(b, Float32))
		if a.dtype == b.dtype {
			out = Cast(out, BFloat16)
		}
		return out
	}
	out := bf16EmptyLike(a)
	kernels.AddReLUBF16(out.BFloat16s(), a.BFloat16s(), b.BFloat16s())
	if traced(a, b) {
		traceAddReLU(a, b, out)
	}
	yd := out.BFloat16s()
	om := out.meta()
	return record("AddReLUBackward", out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		masked := bf16GradLike(om)
		kernels.Act{Fn: kernels.ActReLU}.BackwardBF16(masked.BFloat16s(), bf16GradData(g, om), yd)
		return []*Tensor{masked, masked}
	})
}

// binaryBF16 runs a binary op with a bfloat16 operand as PyTorch's type
// promotion does, reporting false when neither operand is bfloat16. Two
// bfloat16 operands, or a bfloat16 tensor and a 0-dimensional float32
// one, give a bfloat16 result computed in float32 and rounded once;
// bfloat16 with a float32 tensor of any other rank gives float32. Two
// bfloat16 operands of one shape and format, and a bfloat16 tensor with a
// 0-dimensional one, run natively on bfloat16 data; two that broadcast run
// as one op on widened copies; a float32 result goes through Casts and the
// float32 op. Every way, the values and gradients are those of the float32
// route.
func binaryBF16(op string, a, b *Tensor, k kernels.BinOp) (*Tensor, bool) {
	if a == nil || b == nil || (a.dtype != BFloat16 && b.dtype != BFloat16) {
		return nil, false
	}
	var out *Tensor
	switch {
	case a.dtype == BFloat16 && b.dtype == BFloat16 && sameShape(a.shape, b.shape) && a.format == b.format:
		out = bf16EmptyLike(a)
	case a.dtype == BFloat16 && a.NDim() > 0 && bf16Scalar(b):
		out = bf16EmptyLike(a)
	case b.dtype == BFloat16 && b.NDim() > 0 && bf16Scalar(a):
		out = bf16EmptyLike(b)
	case a.dtype == BFloat16 && b.dtype == BFloat16:
		// A broadcast: computed in float32 on widened copies and rounded
		// once, but one op, not a chain of casts.
		t := binaryType(op, a, b)
		out = resultIn(op, modeOf(a, b), BFloat16, t.Shape, t.Format, false)
	default:
		out = binaryOp(op, k, Cast(a, Float32), Cast(b, Float32))
		if binaryType(op, a, b).DType == BFloat16 {
			out = Cast(out, BFloat16)
		}
		return out, true
	}
	bindBinary(k, a, b, out)()
	if traced(a, b) {
		trace(op, nil, []*Tensor{a, b}, []*Tensor{out})
	}
	if k == kernels.BinAdd && a.dtype == BFloat16 && b.dtype == BFloat16 && sameShape(a.shape, b.shape) && a.format == b.format {
		// A residual sum: the gradient passes to both as it is.
		return record("AddBackward", out, []*Tensor{a, b}, func(g *Tensor) []*Tensor { return []*Tensor{g, g} }), true
	}
	ta, tb := a, b
	if k == kernels.BinAdd || k == kernels.BinSub {
		ta, tb = a.meta(), b.meta() // as in binaryOp: shapes suffice
	}
	needA, needB := a.requiresGrad, b.requiresGrad
	return record(op+"Backward", out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		// The float32 route's gradients: widen, differentiate, round back.
		a32, b32 := ta, tb
		var out32 *Tensor
		if k == kernels.BinMul || k == kernels.BinDiv {
			a32, b32 = asFloat32(ta), asFloat32(tb)
		}
		if k == kernels.BinDiv {
			out32 = binaryF32(op, a32, b32, k)
		}
		ga, gb := binaryGrads(k, g.castTo(Float32), a32, b32, out32, needA, needB)
		if ga != nil && ta.dtype == BFloat16 {
			ga = ga.castTo(BFloat16)
		}
		if gb != nil && tb.dtype == BFloat16 {
			gb = gb.castTo(BFloat16)
		}
		return []*Tensor{ga, gb}
	}), true
}

// asFloat32 returns t, or a float32 copy of a bfloat16 t, unrecorded.
func asFloat32(t *Tensor) *Tensor {
	if t.dtype == Float32 {
		return t
	}
	return t.castTo(Float32)
}

// scalarValue is the value of a 0-dimensional float32 or bfloat16 tensor.
func scalarValue(t *Tensor) float32 {
	if t.dtype == BFloat16 {
		return kernels.F32FromBF16(t.BFloat16s()[0])
	}
	return t.Float32s()[0]
}

// negF32 returns −g elementwise in g's shape and format, like unaryF32
// with negation but through the vector kernel.
func negF32(g *Tensor) *Tensor {
	checkFloat32("Neg", g)
	out := actEmptyLike(g)
	kernels.Act{Fn: kernels.ActNeg}.Forward(out.Float32s(), g.Float32s())
	return out
}

// Neg returns −x elementwise, like torch.neg. Like every op of one operand
// below, it works on x's physical elements, so the result keeps x's memory
// format.
func Neg(x *Tensor) *Tensor { return actApply("Neg", x, kernels.Act{Fn: kernels.ActNeg}) }

// Exp returns eˣ elementwise, like torch.exp.
func Exp(x *Tensor) *Tensor { return actApply("Exp", x, kernels.Act{Fn: kernels.ActExp}) }

// Log returns the natural logarithm elementwise, like torch.log: NaN for
// negative elements and −Inf for zeros, as in PyTorch (no panic).
func Log(x *Tensor) *Tensor { return actApply("Log", x, kernels.Act{Fn: kernels.ActLog}) }

// Sqrt returns the square root elementwise, like torch.sqrt: NaN for
// negative elements, as in PyTorch (no panic).
func Sqrt(x *Tensor) *Tensor { return actApply("Sqrt", x, kernels.Act{Fn: kernels.ActSqrt}) }

// Pow raises every element to exponent, like torch.pow(x, exponent): NaN for
// a negative element with a non-integer exponent. Exponent 0 gives ones and
// a zero gradient everywhere (at x = 0 and NaN too), as PyTorch's
// pow_backward does.
func Pow(x *Tensor, exponent float32) *Tensor {
	return actApply("Pow", x, kernels.Act{Fn: kernels.ActPow, A: exponent})
}

// AddScalar returns x + v elementwise, like torch.add(x, v).
func AddScalar(x *Tensor, v float32) *Tensor {
	const op = "AddScalar"
	if x != nil && x.dtype == BFloat16 {
		return viaFloat32(x, func(x *Tensor) *Tensor { return AddScalar(x, v) })
	}
	checkF32(op, "input", x)
	out := actEmptyLike(x)
	bindAct(kernels.Act{Fn: kernels.ActAddScalar, A: v}, x, out)()
	if traced(x) {
		trace(op, scalarAttrs{float64(v)}, []*Tensor{x}, []*Tensor{out})
	}
	// The gradient passes through unchanged, so no copy is made of it.
	return record(op+"Backward", out, []*Tensor{x}, func(g *Tensor) []*Tensor {
		return []*Tensor{actGradIn(g, x)}
	})
}

// MulScalar returns x·v elementwise, like torch.mul(x, v).
func MulScalar(x *Tensor, v float32) *Tensor {
	return actApply("MulScalar", x, kernels.Act{Fn: kernels.ActMulScalar, A: v})
}
