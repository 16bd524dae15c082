package autograd

import "github.com/kilnml/kiln/kernels"

// linearRowMajor returns t's elements in row-major order: t's own slice
// when t is contiguous, else a reordered copy. Matrix products need rows.
func linearRowMajor(t *Tensor) []float32 {
	if t.format == Contiguous {
		return t.Float32s()
	}
	return t.reformat(Contiguous).Float32s()
}

// linearGrad wraps a row-major gradient in a tensor of t's shape and
// memory format.
func linearGrad(t *Tensor, data []float32) *Tensor {
	g := &Tensor{dtype: Float32, shape: cloneInts(t.shape), data: data}
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
	aBatch, bBatch := as[:len(as)-2], bs[:len(bs)-2]
	batch := matmulBatch(op, a, b, aBatch, bBatch)
	outShape := cloneInts(batch)
	if a.NDim() > 1 {
		outShape = append(outShape, n)
	}
	if b.NDim() > 1 {
		outShape = append(outShape, m)
	}
	if bf16 {
		return matmulBF16(op, a, b, outShape, batch, aBatch, bBatch, n, k, m)
	}
	out := &Tensor{dtype: Float32, shape: outShape, data: make([]float32, numel(op, outShape))}
	ad, bd, od := linearRowMajor(a), linearRowMajor(b), out.Float32s()

	if len(bBatch) == 0 {
		// b is one matrix: every row of every batch of a multiplies it,
		// so the whole product (and its gradients) is one GEMM over
		// batch·n rows.
		rows := numel(op, batch) * n
		kernels.Sgemm(false, false, rows, m, k, 1, ad, k, bd, m, 0, od, m)
		return traceRecord(op, out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
			gd := linearRowMajor(g)
			var ga, gb *Tensor
			if a.requiresGrad {
				d := make([]float32, len(ad))
				kernels.Sgemm(false, true, rows, k, m, 1, gd, m, bd, m, 0, d, k)
				ga = linearGrad(a, d)
			}
			if b.requiresGrad {
				d := make([]float32, len(bd))
				kernels.Sgemm(true, false, k, m, rows, 1, ad, k, gd, m, 0, d, m)
				gb = linearGrad(b, d)
			}
			return []*Tensor{ga, gb}
		})
	}

	aOff := matmulOffsets(op, aBatch, batch, n*k)
	bOff := matmulOffsets(op, bBatch, batch, k*m)
	cOff := matmulOffsets(op, batch, batch, n*m)
	kernels.SgemmBatched(false, false, n, m, k, 1, ad, aOff, k, bd, bOff, m, 0, od, cOff, m)
	return traceRecord(op, out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		gd := linearRowMajor(g)
		var ga, gb *Tensor
		if a.requiresGrad {
			// Batches that shared a matrix of a (broadcast) add into it.
			d := make([]float32, len(ad))
			kernels.SgemmBatched(false, true, n, k, m, 1, gd, cOff, m, bd, bOff, m, 0, d, aOff, k)
			ga = linearGrad(a, d)
		}
		if b.requiresGrad {
			d := make([]float32, len(bd))
			kernels.SgemmBatched(true, false, k, m, n, 1, ad, aOff, k, gd, cOff, m, 0, d, bOff, m)
			gb = linearGrad(b, d)
		}
		return []*Tensor{ga, gb}
	})
}

// matmulBF16 is matmul on bfloat16 operands: one GemmBF16 per batch
// matrix, float32 accumulation, the result and the gradients rounded to
// bfloat16 once (gradients of broadcast matrices are summed in float32
// first).
func matmulBF16(op string, a, b *Tensor, outShape, batch, aBatch, bBatch []int, n, k, m int) *Tensor {
	ad, bd := bf16RowMajor(a), bf16RowMajor(b)
	aOff := matmulOffsets(op, aBatch, batch, n*k)
	bOff := matmulOffsets(op, bBatch, batch, k*m)
	cOff := matmulOffsets(op, batch, batch, n*m)
	acc := gradBuffer(numel(op, outShape))
	for i := range cOff {
		kernels.GemmBF16(false, false, n, m, k, 1, ad[aOff[i]:], k, bd[bOff[i]:], m, 0, acc[cOff[i]:], m)
	}
	out := bf16Tensor(outShape, Contiguous, Contiguous, acc)
	return traceRecord(op, out, []*Tensor{a, b}, func(g *Tensor) []*Tensor {
		if g.dtype != BFloat16 {
			g = g.castTo(BFloat16)
		}
		gd := bf16RowMajor(g)
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
			return bf16Tensor(like.shape, Contiguous, like.format, d)
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
	return matmul(op, a, b)
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
	if x != nil && x.dtype == BFloat16 {
		return linearBF16(x, w, b)
	}
	checkF32(op, "input", x)
	checkF32(op, "weight", w)
	if b != nil {
		checkF32(op, "bias", b)
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
	outShape := append(cloneInts(x.shape[:x.NDim()-1]), outF)
	out := &Tensor{dtype: Float32, shape: outShape, data: make([]float32, numel(op, outShape))}
	rows := numel(op, outShape[:len(outShape)-1])
	xd, wd, od := linearRowMajor(x), linearRowMajor(w), out.Float32s()
	beta := float32(0)
	if b != nil && rows > 0 {
		// Start every row at the bias and let the GEMM add x·wᵀ to it.
		kernels.StridedCopy(od, b.Float32s(), []int{rows, outF}, []int{outF, 1}, []int{0, 1})
		beta = 1
	}
	kernels.Sgemm(false, true, rows, outF, inF, 1, xd, inF, wd, inF, beta, od, outF)
	return traceRecord(op, out, []*Tensor{x, w, b}, func(g *Tensor) []*Tensor {
		gd := linearRowMajor(g)
		var gx, gw, gb *Tensor
		if x.requiresGrad {
			d := make([]float32, len(xd))
			kernels.Sgemm(false, false, rows, inF, outF, 1, gd, outF, wd, inF, 0, d, inF)
			gx = linearGrad(x, d)
		}
		if w.requiresGrad {
			d := make([]float32, len(wd))
			kernels.Sgemm(true, false, outF, inF, rows, 1, gd, outF, xd, inF, 0, d, inF)
			gw = linearGrad(w, d)
		}
		if b != nil && b.requiresGrad {
			gb = Zeros(outF)
			kernels.StridedSum(gb.Float32s(), gd, []int{rows, outF}, []int{0, 1}, []int{outF, 1}, 1)
		}
		return []*Tensor{gx, gw, gb}
	})
}

// linearBF16 is Linear on bfloat16 operands.
func linearBF16(x, w, b *Tensor) *Tensor {
	const op = "Linear"
	checkBF16 := func(what string, t *Tensor) {
		if t == nil {
			Fail(op, "%s is nil", what)
		}
		if t.dtype != BFloat16 {
			failDType(op, "%s has dtype %v but the input is bfloat16; cast it, or use amp.Autocast", what, t.dtype)
		}
	}
	checkBF16("weight", w)
	if b != nil {
		checkBF16("bias", b)
	}
	if w.NDim() != 2 {
		failShape(op, "weight must be 2-D [out, in], got shape %v", w.shape)
	}
	outF, inF := w.shape[0], w.shape[1]
	if x.NDim() == 0 || x.shape[x.NDim()-1] != inF {
		failShape(op, "input %v does not end in the %d features weight %v expects", x.shape, inF, w.shape)
	}
	if b != nil && (b.NDim() != 1 || b.shape[0] != outF) {
		failShape(op, "bias has shape %v, want [%d] for weight %v", b.shape, outF, w.shape)
	}
	outShape := append(cloneInts(x.shape[:x.NDim()-1]), outF)
	rows := numel(op, outShape[:len(outShape)-1])
	xd, wd := bf16RowMajor(x), bf16RowMajor(w)
	acc := gradBuffer(rows * outF)
	beta := float32(0)
	if b != nil && rows > 0 {
		bias := make([]float32, outF)
		kernels.BF16ToF32(bias, b.BFloat16s())
		for r := range rows {
			copy(acc[r*outF:(r+1)*outF], bias)
		}
		beta = 1
	}
	kernels.GemmBF16(false, true, rows, outF, inF, 1, xd, inF, wd, inF, beta, acc, outF)
	out := bf16Tensor(outShape, Contiguous, Contiguous, acc)
	return traceRecord(op, out, []*Tensor{x, w, b}, func(g *Tensor) []*Tensor {
		if g.dtype != BFloat16 {
			g = g.castTo(BFloat16)
		}
		gd := bf16RowMajor(g)
		var gx, gw, gb *Tensor
		if x.requiresGrad {
			d := gradBuffer(rows * inF)
			kernels.GemmBF16(false, false, rows, inF, outF, 1, gd, outF, wd, inF, 0, d, inF)
			gx = bf16Tensor(x.shape, Contiguous, x.format, d)
		}
		if w.requiresGrad {
			d := gradBuffer(outF * inF)
			kernels.GemmBF16(true, false, outF, inF, rows, 1, gd, outF, xd, inF, 0, d, inF)
			gw = bf16Tensor(w.shape, Contiguous, w.format, d)
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
			gb = bf16Tensor([]int{outF}, Contiguous, Contiguous, sum)
		}
		return []*Tensor{gx, gw, gb}
	})
}

// bf16RowMajor is linearRowMajor for bfloat16 tensors.
func bf16RowMajor(t *Tensor) []uint16 {
	if t.format == Contiguous {
		return t.BFloat16s()
	}
	return t.reformat(Contiguous).BFloat16s()
}

// bf16Tensor rounds float32 results, laid out in format from, to a
// bfloat16 tensor of shape in format to (to nearest even; reordered when
// the formats differ): the result or gradient of a BF16 op. f is scratch
// from gradBuffer (or fresh) and goes back to the pool.
func bf16Tensor(shape []int, from, to MemoryFormat, f []float32) *Tensor {
	h := make([]uint16, len(f))
	kernels.F32ToBF16(h, f)
	releaseGradBuffer(f)
	t := &Tensor{dtype: BFloat16, shape: cloneInts(shape), format: from, data: h}
	if to != from {
		t = t.reformat(to)
	}
	return t
}
