package quant

import "math"

// The unsigned and signed INT8 ranges. Activations use the whole range: the
// INT8 kernels widen uint8×int8 products before they add them, so Kiln needs
// no reduce_range (IPEX 1.10 does not reduce it either).
const (
	uint8Min, uint8Max = 0, 255
	int8Min, int8Max   = -128, 127

	// symmetricLevels is IPEX's divisor for symmetric scales: 127, not
	// PyTorch's observers' (qmax−qmin)/2 = 127.5, so that −m and m both
	// quantize to representable values (±127) and −128 is never produced.
	symmetricLevels = 127

	// fallbackScale replaces a scale of zero or one whose reciprocal
	// overflows, as fbgemm does: kernels precompute 1/scale, and an
	// infinite reciprocal would turn every quantized value into a clamp.
	fallbackScale = 0.1
)

// Params are the quantization parameters of one tensor: q = round(x/Scale) +
// ZeroPoint, clamped to DType's range.
type Params struct {
	Scale     float64
	ZeroPoint int32
	DType     string // "uint8" or "int8"
}

// ChooseParams returns the parameters that quantize [min, max] under s, with
// the rule of IPEX 1.10's ChooseQuantizationParams (fbgemm's, as in
// PyTorch's quant_utils): the range is widened to contain 0, so that 0 (the
// value of padding and of rectified activations) is exact.
//
// PyTorch 1.13 additionally raises scales below 6.1e-5 to 6.1e-5; IPEX 1.10
// does not, and neither does Kiln, so the scales of ranges narrower than
// about 0.0156 differ from torch._choose_qparams_per_tensor of 1.13.
func ChooseParams(min, max float32, s Scheme) Params {
	if s == PerTensorSymmetric {
		return symmetricParams(min, max, "int8")
	}
	return affineParams(min, max)
}

func affineParams(lo, hi float32) Params {
	const qmin, qmax = uint8Min, uint8Max
	a := float64(min(lo, 0))
	b := float64(max(hi, 0))
	// float64 for the intermediate steps, as fbgemm does, so that the zero
	// point is computed from the scale the kernels will see.
	scale := guardScale((b - a) / (qmax - qmin))
	zmin := qmin - a/scale
	zmax := qmax - b/scale
	// Both candidates are the same in exact arithmetic; the one whose
	// end of the range is the smaller in magnitude carries the least
	// rounding error.
	errMin := math.Abs(qmin) + math.Abs(a/scale)
	errMax := math.Abs(qmax) + math.Abs(b/scale)
	z := zmax
	if errMin < errMax {
		z = zmin
	}
	return Params{Scale: scale, ZeroPoint: nudge(z, qmin, qmax), DType: "uint8"}
}

// symmetricParams is the symmetric rule for either dtype: zero point 0 for
// int8 and the middle of the range, 128, for uint8, which IPEX uses when a
// symmetric conf feeds an op that only takes unsigned inputs.
func symmetricParams(lo, hi float32, dtype string) Params {
	m := float64(max(-lo, hi, 0))
	p := Params{Scale: guardScale(m / symmetricLevels), DType: dtype}
	if dtype == "uint8" {
		p.ZeroPoint = 128
	}
	return p
}

// guardScale applies fbgemm's fallback to a scale computed in float64; the
// test is on the float32 the kernels use.
func guardScale(s float64) float64 {
	f := float32(s)
	if f == 0 || math.IsInf(float64(1/f), 0) {
		return fallbackScale
	}
	return s
}

// nudge clamps z to [qmin, qmax] and otherwise rounds it half to even, as C's
// nearbyint does in the default rounding mode.
func nudge(z float64, qmin, qmax int32) int32 {
	switch {
	case z < float64(qmin):
		return qmin
	case z > float64(qmax):
		return qmax
	}
	return int32(math.RoundToEven(z))
}

// WeightScales returns the symmetric int8 scales of a weight laid out with
// its output channels outermost (each channel's values contiguous, as in
// OIHW convolution and [out, in] linear weights): one per channel, or one
// for the whole tensor when perChannel is false. It panics if channels does
// not divide len(w), which is a caller's bug, not a property of the data.
func WeightScales(w []float32, channels int, perChannel bool) []float64 {
	if channels <= 0 || len(w)%channels != 0 {
		panic("quant: WeightScales: channels does not divide the weight")
	}
	if !perChannel {
		return []float64{weightScale(w)}
	}
	per := len(w) / channels
	out := make([]float64, channels)
	for c := range out {
		out[c] = weightScale(w[c*per : (c+1)*per])
	}
	return out
}

func weightScale(w []float32) float64 {
	var m float32
	for _, v := range w {
		m = max(m, float32(math.Abs(float64(v))))
	}
	return guardScale(float64(m) / symmetricLevels)
}
