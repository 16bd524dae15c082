package autograd

import (
	"fmt"
	"math"
)

// GradCheckOptions tunes GradCheck. Zero fields take the defaults.
type GradCheckOptions struct {
	Eps  float64 // finite-difference step; default 1e-3
	ATol float64 // absolute tolerance; default 1e-3
	RTol float64 // relative tolerance; default 1e-2
	Seed uint64  // seed of the random projection of the output
}

// GradCheck compares the gradients Backward computes for f at inputs with
// central finite differences, and returns an error naming the first input
// and element that disagree. The output is reduced to a scalar by a fixed
// random projection accumulated in float64, so every output element is
// checked. Only inputs that require gradients are checked; f must be
// deterministic and smooth near the inputs (keep away from the kinks of
// ReLU or max pooling).
func GradCheck(f func(xs ...*Tensor) *Tensor, inputs []*Tensor, opt GradCheckOptions) error {
	if opt.Eps == 0 {
		opt.Eps = 1e-3
	}
	if opt.ATol == 0 {
		opt.ATol = 1e-3
	}
	if opt.RTol == 0 {
		opt.RTol = 1e-2
	}
	// A NaN tolerance would make every comparison below false, so every
	// gradient would pass.
	for _, o := range []struct {
		name string
		v    float64
	}{{"Eps", opt.Eps}, {"ATol", opt.ATol}, {"RTol", opt.RTol}} {
		if !(o.v > 0) || math.IsInf(o.v, 0) {
			return fmt.Errorf("gradcheck: %s must be a positive finite number, got %v", o.name, o.v)
		}
	}
	for k, in := range inputs {
		switch {
		case in == nil:
			return fmt.Errorf("gradcheck: input %d is nil", k)
		case in.requiresGrad && in.dtype != Float32:
			return fmt.Errorf("gradcheck: input %d is %v; only float32 inputs can be perturbed", k, in.dtype)
		}
		in.ZeroGrad()
	}
	y := f(inputs...)
	if y == nil {
		return fmt.Errorf("gradcheck: f returned nil")
	}
	if !y.requiresGrad {
		return fmt.Errorf("gradcheck: output does not require grad")
	}
	w := Randn(NewGenerator(opt.Seed+1), y.shape...).To(y.format)
	wv := w.Values()
	loss := func() float64 {
		var out *Tensor
		out = f(noGradViews(inputs)...)
		v := out.Values()
		s := 0.0
		for i := range v {
			s += v[i] * wv[i]
		}
		return s
	}
	if y.dtype != Float32 {
		w = w.castTo(y.dtype)
	}
	y.Backward(w)
	for k, in := range inputs {
		if !in.requiresGrad {
			continue
		}
		if in.grad == nil {
			return fmt.Errorf("gradcheck: input %d got no gradient", k)
		}
		data := in.Float32s()
		grad := in.grad.Float32s()
		for i := range data {
			orig := data[i]
			data[i] = orig + float32(opt.Eps)
			hi := loss()
			data[i] = orig - float32(opt.Eps)
			lo := loss()
			data[i] = orig
			// Divide by the step actually taken in float32.
			step := float64(orig+float32(opt.Eps)) - float64(orig-float32(opt.Eps))
			num := (hi - lo) / step
			ana := float64(grad[i])
			// Written so that a NaN on either side fails.
			if !(math.Abs(num-ana) <= opt.ATol+opt.RTol*math.Abs(num)) {
				return fmt.Errorf("gradcheck: input %d (shape %v, %v) element %d: analytic %.6g, numeric %.6g", k, in.shape, in.format, i, ana, num)
			}
		}
	}
	return nil
}

// noGradViews returns NoGrad views of ts (nil stays nil).
func noGradViews(ts []*Tensor) []*Tensor {
	views := make([]*Tensor, len(ts))
	for i, t := range ts {
		if t != nil {
			views[i] = NoGrad(t)
		}
	}
	return views
}
