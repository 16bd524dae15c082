package autograd

import (
	"slices"

	"github.com/kilnml/kiln/kernels"
)

// QuantizedMatmulAttrs are the attributes of QuantizedMatmul: the int8
// product of two 8-bit activations an int8 graph runs in place of
// Dequantize(a), Dequantize(b) → Matmul or BMM → [Div] → [Quantize].
//
// Per output element the product is exact in int32:
// acc = Σ_p (a[i,p] − z_a)·(b[p,j] − z_b), taken as the INT8 GEMM's
// Σ a·b' − z_a·Σ b' with b' = b − 128 as int8 (a uint8 b is shifted into
// the weight's type, its zero point with it) plus the row correction
// −z_b'·Σ_p (a[i,p] − z_a). Then y = float32(acc)·float32(s_a·s_b),
// divided by Divisor when it is not 0, and quantized when OutDType is
// "uint8" or "int8".
type QuantizedMatmulAttrs struct {
	Scale          float64
	ZeroPoint      int
	OtherScale     float64
	OtherZeroPoint int
	Divisor        float64
	OutDType       string
	OutScale       float64
	OutZeroPoint   int
}

// quantizedMatmulMaxK bounds the inner dimension: both factors of each
// term lie within ±255 of their zero points, so the exact sum fits int32
// only while 255·255·K does.
const quantizedMatmulMaxK = (1<<31 - 1) / (255 * 255)

// QuantizedMatmul is the int8 matrix product of the 8-bit a ([…, M, K])
// and b ([…, K, N] with a's batch dimensions, or [K, N]), each uint8 or
// int8, as QuantizedMatmulAttrs describes: torch.bmm or torch.matmul of
// quantized tensors. The result is contiguous [… , M, N]; it is not
// differentiable.
func QuantizedMatmul(a, b *Tensor, attrs QuantizedMatmulAttrs) *Tensor {
	const op = "QuantizedMatmul"
	t := quantizedMatmulType(op, attrs, a, b)
	y := &Tensor{dtype: t.DType, shape: t.Shape, format: Contiguous, data: makeData(t.DType, numel(op, t.Shape))}
	if a.format != Contiguous {
		a = a.Contiguous()
	}
	if b.format != Contiguous {
		b = b.Contiguous()
	}
	bindQuantizedMatmul(attrs, a, b, y)()
	return y
}

// quantizedMatmulType checks the operands and attributes and returns the
// result's type.
func quantizedMatmulType(op string, at QuantizedMatmulAttrs, a, b *Tensor) TensorType {
	if a == nil || b == nil {
		Fail(op, "both operands are required")
	}
	for _, o := range []struct {
		what  string
		t     *Tensor
		scale float64
		zero  int
	}{{"first operand", a, at.Scale, at.ZeroPoint}, {"second operand", b, at.OtherScale, at.OtherZeroPoint}} {
		if o.t.dtype != Uint8 && o.t.dtype != Int8 {
			failDType(op, "%s has dtype %v, want uint8 or int8", o.what, o.t.dtype)
		}
		checkScale(op, float32(o.scale))
		checkZeroPoint(op, o.zero, o.t.dtype)
	}
	if a.NDim() < 2 || b.NDim() < 2 {
		failShape(op, "operands %v and %v must have at least 2 dimensions", a.shape, b.shape)
	}
	m, k := a.shape[a.NDim()-2], a.shape[a.NDim()-1]
	kb, n := b.shape[b.NDim()-2], b.shape[b.NDim()-1]
	batch := a.shape[:a.NDim()-2]
	if k != kb || (b.NDim() > 2 && !slices.Equal(b.shape[:b.NDim()-2], batch)) {
		failShape(op, "operands %v and %v do not multiply (want [..., M, K] and [..., K, N] with the same batch dimensions, or [K, N])", a.shape, b.shape)
	}
	if k > quantizedMatmulMaxK {
		failShape(op, "inner dimension %d exceeds %d, past which int32 sums could overflow", k, quantizedMatmulMaxK)
	}
	if at.Divisor != 0 && !(float32(at.Divisor) == float32(at.Divisor)) {
		Fail(op, "divisor %v is NaN", at.Divisor)
	}
	out := Float32
	if at.OutDType != "float32" {
		out = parseQuantDType(op, at.OutDType)
		checkScale(op, float32(at.OutScale))
		checkZeroPoint(op, at.OutZeroPoint, out)
	}
	return TensorType{DType: out, Shape: append(slices.Clone(batch), m, n), Format: Contiguous}
}

// bindQuantizedMatmul binds the product over contiguous a, b and y: each
// run turns every batch's b into the GEMM's int8 weight (transposed,
// shifted) packed into memory kept from the first run, and computes its
// rows' corrections.
func bindQuantizedMatmul(at QuantizedMatmulAttrs, a, b, y *Tensor) func() {
	m, k := a.shape[a.NDim()-2], a.shape[a.NDim()-1]
	n := b.shape[b.NDim()-1]
	batches := numel("QuantizedMatmul", a.shape) / max(1, m*k)
	if m*k == 0 {
		batches = numel("QuantizedMatmul", y.shape) / max(1, m*n)
	}
	bBatched := b.NDim() > 2
	za, zb := int32(at.ZeroPoint), int32(at.OtherZeroPoint)
	au, shiftA := eightBitAsUint8(a)
	if shiftA != nil {
		za += 128
	}
	if b.dtype == Uint8 {
		zb -= 128
	}
	ws := make([]float32, n)
	for j := range ws {
		ws[j] = float32(at.OtherScale)
	}
	ep := kernels.Int8Epilogue{Scale: float32(at.Scale), WScales: ws, RowAdd: make([]int32, m),
		OutScale: float32(at.OutScale), OutZero: int32(at.OutZeroPoint)}
	if at.Divisor != 0 {
		ep.Divisor, ep.Divide = float32(at.Divisor), true
	}
	w := make([]int8, n*k)
	var packed *kernels.PackedInt8
	return func() {
		if shiftA != nil {
			shiftA()
		}
		for bi := range batches {
			bs := 0
			if bBatched {
				bs = bi
			}
			// The weight is bᵀ as int8: a uint8 b with its sign bit
			// flipped is b − 128.
			switch b.dtype {
			case Uint8:
				bd := b.Uint8s()[bs*k*n : (bs+1)*k*n]
				for p := range k {
					for j, v := range bd[p*n : (p+1)*n] {
						w[j*k+p] = int8(v ^ 0x80)
					}
				}
			default:
				bd := b.Int8s()[bs*k*n : (bs+1)*k*n]
				for p := range k {
					for j, v := range bd[p*n : (p+1)*n] {
						w[j*k+p] = v
					}
				}
			}
			packed = kernels.RepackInt8(packed, n, k, w, k)
			ab := au[bi*m*k : (bi+1)*m*k]
			for i := range m {
				var s int32
				for _, v := range ab[i*k : (i+1)*k] {
					s += int32(v)
				}
				ep.RowAdd[i] = -zb * (s - int32(k)*za)
			}
			off := bi * m * n
			switch y.dtype {
			case Float32:
				kernels.GemmU8S8(m, ab, k, za, packed, y.Float32s()[off:off+m*n], n, ep)
			case Uint8:
				kernels.GemmU8S8ToU8(m, ab, k, za, packed, y.Uint8s()[off:off+m*n], n, ep)
			default:
				kernels.GemmU8S8ToS8(m, ab, k, za, packed, y.Int8s()[off:off+m*n], n, ep)
			}
		}
	}
}

func init() {
	const op = "QuantizedMatmul"
	defineBind(op, func(attrs any, ins, outs []*Tensor, _ []bool) func() {
		a, b, y := ins[0], ins[1], outs[0]
		t := quantizedMatmulType(op, attrs.(QuantizedMatmulAttrs), a, b)
		if a.format != Contiguous || b.format != Contiguous || y.format != Contiguous || y.dtype != t.DType {
			return nil
		}
		return bindQuantizedMatmul(attrs.(QuantizedMatmulAttrs), a, b, y)
	})
	registerInfer(func(op string, attrs any, ins []*Tensor) []TensorType {
		return []TensorType{quantizedMatmulType(op, attrs.(QuantizedMatmulAttrs), ins[0], ins[1])}
	}, op)
	defineEager(op, QuantizedMatmulAttrs{}, func(attrs any, in []*Tensor) []*Tensor {
		return one(QuantizedMatmul(in[0], in[1], attrs.(QuantizedMatmulAttrs)))
	})
}
