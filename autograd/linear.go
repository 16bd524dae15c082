package autograd

import (
	"github.com/kilnml/kiln/internal/opbind"
	"github.com/kilnml/kiln/kernels"
)

// linearGrad wraps a row-major gradient in a tensor of t's shape and
// memory format.
func linearGrad(t *Tensor, data []float32) *Tensor {
	g := &Tensor{dtype: Float32, shape: cloneInts(t.shape), data: data, mode: t.mode.arenaMode()}
	if t.format != Contiguous {
		g = g.reformat(t.format)
	}
	return g
}

// Matmul returns the matrix product of a and b, like torch.matmul: two 1-D
// tensors give their dot product (a 0-d tensor); two 2-D tensors their
// matrix product; a 1-D a is treated as a row [1, k] and a 1-D b as a
// column [k, 1], the added dimension removed from the result; with more
// dimensions the leading ones are batch dimensions, broadcast against each
// other, and the gradients are summed back over the broadcast ones. Inputs
// may be in any memory format (channels-last ones are read through a
// row-major copy); the result is contiguous, as in PyTorch. Products run on
// kernels.Sgemm, accumulating in float32 as PyTorch's CPU GEMM does.
// Bfloat16 operands (both; in an autocast computation float32 ones are cast) run on
// kernels.GemmBF16 and give a bfloat16 result.
func Matmul(a, b *Tensor) *Tensor { return matmul("Matmul", a, b) }

func matmul(op string, a, b *Tensor) *Tensor {
	am := modeOf(a, b)
	a, b = autocastBF16(am, a), autocastBF16(am, b)
	bf16 := a != nil && a.dtype == BFloat16
	if bf16 {
		if b == nil || b.dtype != BFloat16 {
			checkF32(op, "second operand", b) // names nil
			failDType(op, "second operand has dtype %v but the first is bfloat16; cast it, or use amp.Autocast", b.dtype)
		}
	} else {
		checkF32(op, "first operand", a)
		checkF32(op, "second operand", b)
	}
	d := matmulShape(op, a, b)
	if bf16 {
		return matmulBF16(op, a, b, d)
	}
	out := resultIn(op, modeOf(a, b), Float32, d.out, Contiguous, false)
	ac, bc := rowMajor(a), rowMajor(b)
	bindMatmul(op, d, ac, bc, out)()
	ad, bd := ac.Float32s(), bc.Float32s()
	n, k, m := d.n, d.k, d.m

	if d.oneRight() {
		// b is one matrix: every row of every batch of a multiplies it,
		// so the whole product (and its gradients) is one GEMM over
		// batch·n rows.
		rows := numel(op, d.batch) * n
		return traceRecord(op, out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
			gd := rowMajor(g).Float32s()
			var ga, gb *Tensor
			if a.requiresGrad {
				d := gradData(a, len(ad))
				kernels.Sgemm(false, true, rows, k, m, 1, gd, m, bd, m, 0, d, k)
				ga = linearGrad(a, d)
			}
			if b.requiresGrad {
				d := gradData(b, len(bd))
				kernels.Sgemm(true, false, k, m, rows, 1, ad, k, gd, m, 0, d, m)
				gb = linearGrad(b, d)
			}
			return []*Tensor{ga, gb}
		})
	}

	aOff, bOff, cOff := d.offsets(op)
	return traceRecord(op, out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		gd := rowMajor(g).Float32s()
		var ga, gb *Tensor
		if a.requiresGrad {
			// Batches that shared a matrix of a (broadcast) add into it.
			d := gradData(a, len(ad))
			kernels.SgemmBatched(false, true, n, k, m, 1, gd, cOff, m, bd, bOff, m, 0, d, aOff, k)
			ga = linearGrad(a, d)
		}
		if b.requiresGrad {
			d := gradData(b, len(bd))
			kernels.SgemmBatched(true, false, k, m, n, 1, ad, aOff, k, gd, cOff, m, 0, d, bOff, m)
			gb = linearGrad(b, d)
		}
		return []*Tensor{ga, gb}
	})
}

// matmulDims is how Matmul (or BMM) lays out its products: a read as
// [aBatch..., n, k] and b as [bBatch..., k, m] (a 1-D operand as one row
// or column), the batch dimensions broadcast to batch; out is the
// result's shape.
type matmulDims struct {
	n, k, m               int
	batch, aBatch, bBatch []int
	out                   []int
}

// matmulShape works out the products of a and b, which have their dtypes
// checked.
func matmulShape(op string, a, b *Tensor) matmulDims {
	if a.NDim() == 0 || b.NDim() == 0 {
		failShape(op, "both arguments need at least 1 dimension, got shapes %v and %v", a.shape, b.shape)
	}
	// Matrix views of the operands: [batch..., n, k] and [batch..., k, m].
	as, bs := a.shape, b.shape
	if a.NDim() == 1 {
		as = []int{1, as[0]}
	}
	if b.NDim() == 1 {
		bs = []int{bs[0], 1}
	}
	n, k, m := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	if bs[len(bs)-2] != k {
		if a.NDim() == 1 && b.NDim() == 1 {
			failShape(op, "1-D operands of sizes %d and %d differ in size", a.shape[0], b.shape[0])
		}
		failShape(op, "shapes %v and %v cannot be multiplied (%d×%d and %d×%d)", a.shape, b.shape, n, k, bs[len(bs)-2], m)
	}
	d := matmulDims{n: n, k: k, m: m, aBatch: as[:len(as)-2], bBatch: bs[:len(bs)-2]}
	d.batch = matmulBatch(op, a, b, d.aBatch, d.bBatch)
	d.out = cloneInts(d.batch)
	if a.NDim() > 1 {
		d.out = append(d.out, n)
	}
	if b.NDim() > 1 {
		d.out = append(d.out, m)
	}
	return d
}

// oneRight reports that b is a single matrix, which multiplies every row
// of a in one product.
func (d matmulDims) oneRight() bool { return len(d.bBatch) == 0 }

// offsets are the offsets of each batch's matrices in a, b and the
// result (row-major).
func (d matmulDims) offsets(op string) (aOff, bOff, cOff []int) {
	return matmulOffsets(op, d.aBatch, d.batch, d.n*d.k), matmulOffsets(op, d.bBatch, d.batch, d.k*d.m),
		matmulOffsets(op, d.batch, d.batch, d.n*d.m)
}

// bindMatmul binds y = a·b laid out as d says, y contiguous and of a's
// and b's dtype, or returns nil. Float32 operands in another layout are
// read through row-major scratch; bfloat16 ones must be contiguous, and
// their products accumulate in float32 scratch rounded once.
func bindMatmul(op string, d matmulDims, a, b, y *Tensor) func() {
	if y.format != Contiguous || a.dtype != b.dtype || a.dtype != y.dtype {
		return nil
	}
	n, k, m := d.n, d.k, d.m
	switch a.dtype {
	case Float32:
		ra, rb, yd := rowMajorReader(a, false), rowMajorReader(b, false), y.Float32s()
		if d.oneRight() {
			// Every row of every batch of a multiplies b: one GEMM.
			rows := numel(op, d.batch) * n
			return func() { kernels.Sgemm(false, false, rows, m, k, 1, ra(), k, rb(), m, 0, yd, m) }
		}
		aOff, bOff, cOff := d.offsets(op)
		return func() {
			kernels.SgemmBatched(false, false, n, m, k, 1, ra(), aOff, k, rb(), bOff, m, 0, yd, cOff, m)
		}
	case BFloat16:
		if a.format != Contiguous || b.format != Contiguous {
			return nil
		}
		aOff, bOff, cOff := d.offsets(op)
		ad, bd, yd := a.BFloat16s(), b.BFloat16s(), y.BFloat16s()
		acc := make([]float32, len(yd))
		return func() {
			for i := range cOff {
				kernels.GemmBF16(false, false, n, m, k, 1, ad[aOff[i]:], k, bd[bOff[i]:], m, 0, acc[cOff[i]:], m)
			}
			kernels.F32ToBF16(yd, acc)
		}
	}
	return nil
}

// rowMajorReader returns a function giving x's float32 elements in
// row-major order: x's own slice when x is contiguous and copyAlways is
// false, else a copy refreshed on each call into scratch allocated here.
func rowMajorReader(x *Tensor, copyAlways bool) func() []float32 {
	xd := x.Float32s()
	if x.format == Contiguous && !copyAlways {
		return func() []float32 { return xd }
	}
	scratch := make([]float32, len(xd))
	dst := stridesOf(x.shape, Contiguous)
	src := stridesOf(x.shape, x.format)
	return func() []float32 {
		kernels.StridedCopy(scratch, xd, x.shape, dst, src)
		return scratch
	}
}

// matmulBF16 is matmul on bfloat16 operands: one GemmBF16 per batch
// matrix, float32 accumulation, the result and the gradients rounded to
// bfloat16 once (gradients of broadcast matrices are summed in float32
// first).
func matmulBF16(op string, a, b *Tensor, d matmulDims) *Tensor {
	out := resultIn(op, modeOf(a, b), BFloat16, d.out, Contiguous, false) // every element written
	ac, bc := rowMajor(a), rowMajor(b)
	bindMatmul(op, d, ac, bc, out)()
	ad, bd := ac.BFloat16s(), bc.BFloat16s()
	n, k, m := d.n, d.k, d.m
	aOff, bOff, cOff := d.offsets(op)
	return traceRecord(op, out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		if g.dtype != BFloat16 {
			g = g.castTo(BFloat16)
		}
		gd := rowMajor(g).BFloat16s()
		// grad runs one product per batch into dst at offs, adding where a
		// broadcast matrix was already written.
		grad := func(like *Tensor, offs []int, size int, product func(i int, dst []float32, beta float32)) *Tensor {
			d := make([]float32, size)
			seen := map[int]bool{}
			for i, o := range offs {
				var beta float32
				if seen[o] {
					beta = 1
				}
				seen[o] = true
				product(i, d[o:], beta)
			}
			return bf16Grad(like.mode, like.shape, Contiguous, like.format, d)
		}
		var ga, gb *Tensor
		if a.requiresGrad {
			ga = grad(a, aOff, len(ad), func(i int, dst []float32, beta float32) {
				kernels.GemmBF16(false, true, n, k, m, 1, gd[cOff[i]:], m, bd[bOff[i]:], m, beta, dst, k)
			})
		}
		if b.requiresGrad {
			gb = grad(b, bOff, len(bd), func(i int, dst []float32, beta float32) {
				kernels.GemmBF16(true, false, k, m, n, 1, ad[aOff[i]:], k, gd[cOff[i]:], m, beta, dst, m)
			})
		}
		return []*Tensor{ga, gb}
	})
}

// matmulBatch broadcasts the batch dimensions of a and b, naming the whole
// operands when they do not fit.
func matmulBatch(op string, a, b *Tensor, aBatch, bBatch []int) []int {
	var batch []int
	if err := Try(func() { batch = broadcastShapes(op, aBatch, bBatch) }); err != nil {
		failShape(op, "batch dimensions %v of %v and %v of %v cannot be broadcast together", aBatch, a.shape, bBatch, b.shape)
	}
	return batch
}

// matmulOffsets lists, for every index of the broadcast batch shape in
// row-major order, the offset of the operand's matrix of size mat whose
// own batch shape is shape (broadcast dimensions repeat the same matrix).
func matmulOffsets(op string, shape, batch []int, mat int) []int {
	// Counted through numel: a batch broadcast from operands with no
	// elements can still be too large to list.
	nb := numel(op, batch)
	// Strides of the operand's batch dimensions, aligned to batch from the
	// right; 0 where the operand is broadcast.
	st := make([]int, len(batch))
	s := mat
	for i := len(shape) - 1; i >= 0; i-- {
		j := len(batch) - len(shape) + i
		if shape[i] != 1 || batch[j] == 1 {
			st[j] = s
		}
		s *= shape[i]
	}
	offs := make([]int, nb)
	idx := make([]int, len(batch))
	o := 0
	for i := range offs {
		offs[i] = o
		for d := len(batch) - 1; d >= 0; d-- {
			idx[d]++
			o += st[d]
			if idx[d] < batch[d] {
				break
			}
			o -= idx[d] * st[d]
			idx[d] = 0
		}
	}
	return offs
}

// BMM returns the batched matrix product of a [B, n, k] and b [B, k, m],
// a [B, n, m] tensor, like torch.bmm: both must be 3-D with the same batch
// size (no broadcasting; use Matmul for that).
func BMM(a, b *Tensor) *Tensor {
	bmmCheck(a, b)
	return matmul("BMM", a, b)
}

// bmmCheck checks BMM's operand shapes.
func bmmCheck(a, b *Tensor) {
	const op = "BMM"
	if a == nil || b == nil {
		checkF32(op, "first operand", a)
		checkF32(op, "second operand", b)
	}
	if a.NDim() != 3 {
		failShape(op, "first operand must be a 3-D [batch, n, k] tensor, got shape %v", a.shape)
	}
	if b.NDim() != 3 {
		failShape(op, "second operand must be a 3-D [batch, k, m] tensor, got shape %v", b.shape)
	}
	if a.shape[0] != b.shape[0] || a.shape[2] != b.shape[1] {
		failShape(op, "second operand must have shape [%d %d m] to multiply first operand %v, got %v", a.shape[0], a.shape[2], a.shape, b.shape)
	}
}

// linearShape checks Linear's operands and returns the result's shape.
func linearShape(x, w, b *Tensor) []int {
	const op = "Linear"
	if x != nil && x.dtype == BFloat16 {
		checkBF16 := func(what string, t *Tensor) {
			if t == nil {
				Fail(op, "%s is nil", what)
			}
			if t.dtype != BFloat16 {
				Fail(op, "%s has dtype %v but the input is bfloat16; cast it, or use amp.Autocast", what, t.dtype)
			}
		}
		checkBF16("weight", w)
		if b != nil {
			checkBF16("bias", b)
		}
	} else {
		checkF32(op, "input", x)
		checkF32(op, "weight", w)
		if b != nil {
			checkF32(op, "bias", b)
		}
	}
	if w.NDim() != 2 {
		failShape(op, "weight must be 2-D [out, in], got shape %v", w.shape)
	}
	outF, inF := w.shape[0], w.shape[1]
	if x.NDim() == 0 {
		failShape(op, "input must have at least 1 dimension [..., %d], got a 0-d tensor", inF)
	}
	if x.shape[x.NDim()-1] != inF {
		failShape(op, "input %v has %d features in its last dimension, weight %v expects %d", x.shape, x.shape[x.NDim()-1], w.shape, inF)
	}
	if b != nil && (b.NDim() != 1 || b.shape[0] != outF) {
		failShape(op, "bias has shape %v, want [%d] for weight %v", b.shape, outF, w.shape)
	}
	return append(cloneInts(x.shape[:x.NDim()-1]), outF)
}

// Linear applies an affine map to the last dimension of x, like
// torch.nn.functional.linear: x [..., in], w [out, in] and b [out] or nil
// give x·wᵀ + b of shape [..., out]. All leading dimensions of x are rows of
// one GEMM (with w transposed), and so are the gradients. x may be in any
// memory format; the result is contiguous, as in PyTorch.
//
// The operands are all float32 or all bfloat16; in an autocast computation float32
// ones are cast to bfloat16 first. BF16 operands multiply on
// kernels.GemmBF16 (float32 accumulation, the bias added in float32) and
// give a bfloat16 result, as PyTorch's bf16 linear does; their gradients
// are computed the same way.
func Linear(x, w, b *Tensor) *Tensor {
	const op = "Linear"
	m := modeOf(x, w, b)
	x, w, b = autocastBF16(m, x), autocastBF16(m, w), autocastBF16(m, b)
	outShape := linearShape(x, w, b)
	out := resultIn(op, m, x.dtype, outShape, Contiguous, false)
	rows := numel(op, outShape[:len(outShape)-1])
	xc, wc := rowMajor(x), rowMajor(w)
	bindLinear(xc, wc, b, out, false)()
	if x.dtype == BFloat16 {
		return linearBF16(x, w, b, xc, wc, out, rows)
	}
	return traceRecord(op, out, []*Tensor{x, w, b}, linearBackward(x, w, b, xc, wc, rows, nil))
}

// linearBackward returns the backward of a float32 Linear, xc and wc
// being x and w in row-major order. With relu, the output y = ReLU(x·wᵀ+b)
// comes first through ReLU's backward, which reads y.
func linearBackward(x, w, b, xc, wc *Tensor, rows int, relu []float32) func(g *Tensor) []*Tensor {
	outF, inF := w.shape[0], w.shape[1]
	xd, wd := xc.Float32s(), wc.Float32s()
	return func(g *Tensor) []*Tensor {
		gd := rowMajor(g).Float32s()
		if relu != nil {
			masked := gradBuffer(len(relu))
			kernels.Act{Fn: kernels.ActReLU}.Backward(masked, gd, nil, relu)
			gd = masked
			defer releaseGradBuffer(masked)
		}
		var gx, gw, gb *Tensor
		if x.requiresGrad {
			d := gradData(x, len(xd))
			kernels.Sgemm(false, false, rows, inF, outF, 1, gd, outF, wd, inF, 0, d, inF)
			gx = linearGrad(x, d)
		}
		if w.requiresGrad {
			d := gradData(w, len(wd))
			kernels.Sgemm(true, false, outF, inF, rows, 1, gd, outF, xd, inF, 0, d, inF)
			gw = linearGrad(w, d)
		}
		if b != nil && b.requiresGrad {
			gb = &Tensor{dtype: Float32, shape: []int{outF}, data: uninitF32(outF)}
			kernels.StridedSum(gb.Float32s(), gd, []int{rows, outF}, []int{0, 1}, []int{outF, 1}, 1)
		}
		return []*Tensor{gx, gw, gb}
	}
}

// LinearReLU returns ReLU(Linear(x, w, b)), bit for bit, values and
// gradients. Where nothing is traced and the operands are float32, the
// GEMM rectifies each block of the result as it stores it: no second pass
// over the result and no intermediate tensor; the backward masks the
// gradient by the result, as ReLU's does. Otherwise it is the two ops.
// nn.Sequential runs a Linear followed by a ReLU through it.
func LinearReLU(x, w, b *Tensor) *Tensor {
	const op = "Linear"
	m := modeOf(x, w, b)
	if m.autocast && !m.trace.active() {
		// A BF16 product: rectified in its own memory, which its
		// backward does not read.
		return reluInPlaceBF16(Linear(x, w, b))
	}
	if m.trace.active() || x == nil || x.dtype != Float32 {
		return ReLU(Linear(x, w, b))
	}
	outShape := linearShape(x, w, b)
	out := resultIn(op, modeOf(x, w, b), Float32, outShape, Contiguous, false)
	xc, wc := rowMajor(x), rowMajor(w)
	f := bindLinearAct(xc, wc, b, out, false, true)
	if f == nil {
		return ReLU(Linear(x, w, b))
	}
	f()
	rows := numel(op, outShape[:len(outShape)-1])
	return record(op+"ReLUBackward", out, []*Tensor{x, w, b}, linearBackward(x, w, b, xc, wc, rows, out.Float32s()))
}

// linearBF16 records Linear's result out of bfloat16 operands, xc and wc
// being x and w in row-major order.
func linearBF16(x, w, b, xc, wc, out *Tensor, rows int) *Tensor {
	const op = "Linear"
	outF, inF := w.shape[0], w.shape[1]
	xd, wd := xc.BFloat16s(), wc.BFloat16s()
	return traceRecord(op, out, []*Tensor{x, w, b}, func(g *Tensor) []*Tensor {
		if g.dtype != BFloat16 {
			g = g.castTo(BFloat16)
		}
		gd := rowMajor(g).BFloat16s()
		var gx, gw, gb *Tensor
		if x.requiresGrad {
			d := gradData(x, rows*inF)
			kernels.GemmBF16(false, false, rows, inF, outF, 1, gd, outF, wd, inF, 0, d, inF)
			gx = bf16Grad(x.mode, x.shape, Contiguous, x.format, d)
		}
		if w.requiresGrad {
			d := gradData(w, outF*inF)
			kernels.GemmBF16(true, false, outF, inF, rows, 1, gd, outF, xd, inF, 0, d, inF)
			gw = bf16Grad(w.mode, w.shape, Contiguous, w.format, d)
		}
		if b != nil && b.requiresGrad {
			sum := make([]float32, outF)
			row := make([]float32, outF)
			for r := range rows {
				kernels.BF16ToF32(row, gd[r*outF:(r+1)*outF])
				for j, v := range row {
					sum[j] += v
				}
			}
			gb = bf16Grad(b.mode, []int{outF}, Contiguous, Contiguous, sum)
		}
		return []*Tensor{gx, gw, gb}
	})
}

// bindLinear binds y = x·wᵀ + b, the rows of x's last dimension
// multiplied by w [out, in] on one GEMM, or returns nil. x, y and w are
// contiguous and of one dtype, or w is a constant (constW), reordered
// here; a constant float32 w is also packed here where the packed
// product is the unpacked one bit for bit. A float32 GEMM adds the bias
// to each finished block of y; bfloat16 operands accumulate in float32
// scratch that starts at the bias, rounded once.
func bindLinear(x, w, b, y *Tensor, constW bool) func() {
	return bindLinearAct(x, w, b, y, constW, false)
}

// bindLinearAct is bindLinear that, with relu, also rectifies each block
// of y as the GEMM stores it (float32 only: nil for bfloat16).
func bindLinearAct(x, w, b, y *Tensor, constW, relu bool) func() {
	if x.format != Contiguous || y.format != Contiguous || y.NDim() == 0 || w.NDim() != 2 ||
		x.dtype != y.dtype || w.dtype != x.dtype || (b != nil && b.dtype != x.dtype) {
		return nil
	}
	if w.format != Contiguous {
		if !constW {
			return nil
		}
		w = w.reformat(Contiguous)
	}
	outF, inF := w.shape[0], w.shape[1]
	rows := numel("Linear", y.shape[:y.NDim()-1])
	// start sets every row of c to the bias, or reports that there is
	// none to add: the GEMM's beta.
	start := func(c, bias []float32) float32 {
		if bias == nil || rows == 0 {
			return 0
		}
		for r := range rows {
			copy(c[r*outF:(r+1)*outF], bias)
		}
		return 1
	}
	switch x.dtype {
	case Float32:
		xd, wd, yd := x.Float32s(), w.Float32s(), y.Float32s()
		var bd []float32
		if b != nil {
			bd = b.Float32s()
		}
		var pb *kernels.PackedB
		if constW && kernels.PackedMatchesSgemm(rows, outF, inF) {
			pb = kernels.PackB(true, inF, outF, wd, inF)
		}
		// The bias is added as each block of y is finished, not copied
		// into y first: one pass over y fewer.
		ep := kernels.Epilogue{Bias: bd, Act: kernels.Act{Fn: kernels.ActReLU}, Activate: relu}
		return func() {
			if pb != nil {
				kernels.SgemmPacked(false, rows, 1, xd, inF, pb, 0, yd, outF, ep)
				return
			}
			kernels.SgemmEpilogue(false, true, rows, outF, inF, 1, xd, inF, wd, inF, 0, yd, outF, ep)
		}
	case BFloat16:
		if relu {
			return nil
		}
		xd, wd, yd := x.BFloat16s(), w.BFloat16s(), y.BFloat16s()
		var bias []float32
		var bd []uint16
		if b != nil {
			bias, bd = make([]float32, outF), b.BFloat16s()
		}
		// The float32 products are scratch for each run, from y's arena
		// (which gives the memory to the next result) or the cache.
		m := y.mode.arenaMode()
		return func() {
			if bd != nil {
				kernels.BF16ToF32(bias, bd)
			}
			acc := gradSlice[float32](m, len(yd))
			beta := start(acc, bias)
			kernels.GemmBF16(false, true, rows, outF, inF, 1, xd, inF, wd, inF, beta, acc, outF)
			kernels.F32ToBF16(yd, acc)
			releaseSlice(m, acc)
		}
	}
	return nil
}

func init() {
	// The products' binders take no attributes.
	defineBind("Linear", func(_ any, ins, outs []*Tensor, consts []bool) func() {
		return bindLinear(ins[0], ins[1], ins[2], outs[0], opbind.Const(consts, 1))
	})
	for _, op := range []string{"Matmul", "BMM"} {
		defineBind(op, func(_ any, ins, outs []*Tensor, _ []bool) func() {
			a, b := ins[0], ins[1]
			if a.dtype != b.dtype || (a.dtype != Float32 && a.dtype != BFloat16) {
				return nil
			}
			return bindMatmul(op, matmulShape(op, a, b), a, b, outs[0])
		})
	}
	registerInfer(func(_ string, _ any, in []*Tensor) []TensorType {
		return []TensorType{{DType: in[0].dtype, Shape: linearShape(in[0], in[1], in[2])}}
	}, "Linear")
	registerInfer(func(op string, _ any, in []*Tensor) []TensorType {
		if op == "BMM" {
			bmmCheck(in[0], in[1])
		}
		return []TensorType{{DType: in[0].dtype, Shape: matmulShape(op, in[0], in[1]).out}}
	}, "Matmul", "BMM")
	defineEager("Linear", nil, func(_ any, in []*Tensor) []*Tensor { return one(Linear(in[0], in[1], in[2])) })
	defineEager("Matmul", nil, func(_ any, in []*Tensor) []*Tensor { return one(Matmul(in[0], in[1])) })
	defineEager("BMM", nil, func(_ any, in []*Tensor) []*Tensor { return one(BMM(in[0], in[1])) })
}

// bf16Grad rounds float32 gradients, laid out in format from, to a
// bfloat16 gradient of shape in format to (to nearest even; reordered
// when the formats differ) for a tensor in mode m, its memory from
// gradSlice. f is scratch from gradSlice in m (or fresh) and goes back.
func bf16Grad(m Mode, shape []int, from, to MemoryFormat, f []float32) *Tensor {
	m = m.arenaMode()
	h := gradSlice[uint16](m, len(f))
	kernels.F32ToBF16(h, f)
	releaseSlice(m, f)
	t := &Tensor{dtype: BFloat16, shape: cloneInts(shape), format: from, data: h, mode: m}
	if to != from {
		t = t.reformat(to)
	}
	return t
}
