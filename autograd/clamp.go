package autograd

import (
	"math"

	"github.com/kilnml/kiln/kernels"
)

// Clamp returns min(max(x, min), max) elementwise, like torch.clamp(x, min,
// max), for float32 and bfloat16 tensors; the result keeps x's shape and
// memory format. The bounds are first rounded to x's dtype, as PyTorch
// rounds its scalar bounds. A NaN element stays NaN, and min > max gives
// max everywhere (but at NaN), as in PyTorch.
//
// The gradient is PyTorch 1.13's clamp_backward: dy where min ≤ x ≤ max,
// the bounds included (unlike HardTanh's, which is 0 at its bounds), and 0
// elsewhere, at NaN, and everywhere when min > max.
//
// A NaN bound, or a finite bound beyond the dtype's range, is an error
// (PyTorch refuses the latter as an overflow); infinite bounds are allowed.
func Clamp(x *Tensor, min, max float64) *Tensor {
	const op = "Clamp"
	checkActAttrs(op, clampAttrs{min, max})
	a := kernels.Act{Fn: kernels.ActClamp, A: float32(min), B: float32(max)}
	if x != nil && x.dtype == BFloat16 {
		a = clampBF16(op, a, min, max)
	}
	return actApply(op, x, a)
}

// clampAttrs are Clamp's attributes: torch.clamp's min and max.
type clampAttrs struct{ Min, Max float64 }

// checkClampAttrs fails where Clamp's bounds are NaN or overflow float32.
func checkClampAttrs(op string, a clampAttrs) {
	if math.IsNaN(a.Min) || math.IsNaN(a.Max) {
		Fail(op, "bounds must be numbers, got min %v and max %v", a.Min, a.Max)
	}
	clampOverflow(op, "float32", a.Min, float64(float32(a.Min)))
	clampOverflow(op, "float32", a.Max, float64(float32(a.Max)))
}

// clampOverflow fails where the finite bound v became infinite as r in
// dtype dt.
func clampOverflow(op, dt string, v, r float64) {
	if !math.IsInf(v, 0) && math.IsInf(r, 0) {
		Fail(op, "bound %v cannot be converted to %s without overflow", v, dt)
	}
}

// clampBF16 rounds a's float32 bounds to bfloat16, as PyTorch converts
// clamp's bounds to the tensor's dtype (through float, so the rounding is
// the same double one); min and max are the bounds as given, for errors.
func clampBF16(op string, a kernels.Act, min, max float64) kernels.Act {
	lo := kernels.F32FromBF16(kernels.BF16FromF32(a.A))
	hi := kernels.F32FromBF16(kernels.BF16FromF32(a.B))
	clampOverflow(op, "bfloat16", min, float64(lo))
	clampOverflow(op, "bfloat16", max, float64(hi))
	a.A, a.B = lo, hi
	return a
}

func init() {
	defineEager("Clamp", clampAttrs{}, func(a any, in []*Tensor) []*Tensor {
		at := a.(clampAttrs)
		return one(Clamp(in[0], at.Min, at.Max))
	})
}
