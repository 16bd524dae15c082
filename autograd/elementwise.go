package autograd

// Add returns a+b with broadcasting.
func Add(a, b *Tensor) *Tensor {
	out := binaryF32("Add", a, b, func(x, y float32) float32 { return x + y })
	return record("AddBackward", out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		return []*Tensor{sumToShape(g, a.shape, a.format), sumToShape(g, b.shape, b.format)}
	})
}

// Sub returns a-b with broadcasting.
func Sub(a, b *Tensor) *Tensor {
	out := binaryF32("Sub", a, b, func(x, y float32) float32 { return x - y })
	return record("SubBackward", out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		var gb *Tensor
		if b.requiresGrad {
			gb = sumToShape(unaryF32("Neg", g, func(x float32) float32 { return -x }), b.shape, b.format)
		}
		return []*Tensor{sumToShape(g, a.shape, a.format), gb}
	})
}

// Mul returns a*b elementwise with broadcasting.
func Mul(a, b *Tensor) *Tensor {
	out := binaryF32("Mul", a, b, func(x, y float32) float32 { return x * y })
	return record("MulBackward", out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		var ga, gb *Tensor
		if a.requiresGrad {
			ga = sumToShape(binaryF32("Mul", g, b, mulF32), a.shape, a.format)
		}
		if b.requiresGrad {
			gb = sumToShape(binaryF32("Mul", g, a, mulF32), b.shape, b.format)
		}
		return []*Tensor{ga, gb}
	})
}

// Div returns a/b elementwise with broadcasting.
func Div(a, b *Tensor) *Tensor {
	out := binaryF32("Div", a, b, func(x, y float32) float32 { return x / y })
	return record("DivBackward", out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		var ga, gb *Tensor
		if a.requiresGrad {
			ga = sumToShape(binaryF32("Div", g, b, func(x, y float32) float32 { return x / y }), a.shape, a.format)
		}
		if b.requiresGrad {
			// d(a/b)/db = -a/b² = -out/b
			t := binaryF32("Div", out, b, func(x, y float32) float32 { return -x / y })
			gb = sumToShape(binaryF32("Mul", g, t, mulF32), b.shape, b.format)
		}
		return []*Tensor{ga, gb}
	})
}

func mulF32(x, y float32) float32 { return x * y }
