package kernels

// Channels-first (NCHW / NCDHW) convolution runs on the channels-last
// paths: operands are reordered into pooled scratch, and results back.
// Each reorder is one streaming pass (8×8 register transposes in the
// assembly variants); a native channels-first im2col would instead build,
// per image, a [C·k][pixels] matrix the GEMM must then repack, which costs
// more than the reorders as soon as the kernel is larger than 1×1, and per
// image products are small for the late, small-image layers.

// reorder transposes src, outer items of [rows][cols], into (*buf)[:len]
// as outer items of [cols][rows], and returns it.
func (j *convJob) reorder(buf *[]float32, src []float32, outer, rows, cols int) []float32 {
	dst := grow(buf, outer*rows*cols)
	j.transposeBatch(dst, src, outer, rows, cols)
	return dst
}

// transposeChunk is the number of columns one parallel transpose item
// covers, so a batch of one large image still splits among workers.
const transposeChunk = 512

// transposeBatch writes each of the outer [rows][cols] items of src to dst
// as [cols][rows].
func (j *convJob) transposeBatch(dst, src []float32, outer, rows, cols int) {
	j.trDst, j.trSrc = dst[:outer*rows*cols], src[:outer*rows*cols]
	j.trOuter, j.trRows, j.trCol = outer, rows, cols
	chunks := (cols + transposeChunk - 1) / transposeChunk
	Parallel(outer*chunks, outer*rows*cols, j.trFn)
}

func (j *convJob) transposeItems(lo, hi int) {
	rows, cols := j.trRows, j.trCol
	chunks := (cols + transposeChunk - 1) / transposeChunk
	for t := lo; t < hi; t++ {
		o, c0 := t/chunks, t%chunks*transposeChunk
		c1 := min(c0+transposeChunk, cols)
		base := o * rows * cols
		cv.transpose(j.trDst[base+c0*rows:], rows, j.trSrc[base+c0:], cols, rows, c1-c0)
	}
}
