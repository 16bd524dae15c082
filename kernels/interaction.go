package kernels

// DLRM's dot interaction (facebookresearch/dlrm, interact_features with
// arch_interaction_op="dot") multiplies every pair of a sample's feature
// vectors: the bottom MLP's output and one embedding per table. PyTorch
// forms the whole F×F Gram matrix with bmm and then gathers its lower
// triangle; these kernels compute only the pairs that are kept, straight
// from the feature matrices, so no [B, F, d] copy or [B, F, F] matrix is
// ever built.
//
// Every dot is accumulated in float32 in one fixed order: sixteen partial
// sums, lane k%16 taking the products of elements k, in increasing k, then
// folded in halves (lane l + lane l+8, then l + l+4, l + l+2, l + l+1;
// see interactionDot), which is one ZMM register's order and two YMM
// registers'. Each product is added with one rounding (a fused
// multiply-add, fma32 in Go), and every gradient element adds its terms
// in the forward's pair order, so the bits are the same at every level
// and on every platform.
// Each sample is done by one worker from start to end, so results are
// also the same for any thread count. How a level gets there is free: the
// AVX-512 forward folds sixteen dots at once with shuffles (the same
// additions), and the assembly backward sums four features' gradients at
// once, reading each row once for the four.

// InteractionShape describes a dot interaction: Batch samples, each with
// Features vectors of Dim elements. Self keeps the dots of each vector
// with itself too (dlrm's arch_interaction_itself).
type InteractionShape struct {
	Batch, Dim, Features int
	Self                 bool
}

// Pairs is the number of dots per sample: F(F−1)/2, or F(F+1)/2 with
// Self.
func (s InteractionShape) Pairs() int {
	if s.Self {
		return s.Features * (s.Features + 1) / 2
	}
	return s.Features * (s.Features - 1) / 2
}

// Width is the length of a sample's output row: the first feature's Dim
// values, then the Pairs dots.
func (s InteractionShape) Width() int { return s.Dim + s.Pairs() }

// forwardWork and backwardWork are the rough costs of the whole forward
// and backward, for Parallel.
func (s InteractionShape) forwardWork() int { return s.Batch*s.Pairs()*s.Dim + s.Batch*s.Width() }
func (s InteractionShape) backwardWork() int {
	return 2*s.Batch*s.Pairs()*s.Dim + s.Batch*s.Features*s.Dim
}

// checkInteraction validates s and the slices a kernel is given, float32
// or bfloat16: one [Batch, Dim] row-major matrix per feature (each at
// least Batch·Dim long; for outs, nil skips that feature) and the [Batch,
// Width] matrix rows.
func checkInteraction[T float32 | uint16](s InteractionShape, op string, feats [][]T, featsName string, outs [][]T, rows []T, rowsName string) {
	if s.Batch < 0 || s.Dim < 0 || s.Features < 1 {
		fail(ErrShape, op, "inconsistent shape %+v (want Batch, Dim ≥ 0 and Features ≥ 1)", s)
	}
	n := s.Batch * s.Dim
	if len(feats) != s.Features {
		fail(ErrShape, op, "%d %s for %d features", len(feats), featsName, s.Features)
	}
	for f, v := range feats {
		if len(v) < n {
			fail(ErrShape, op, "%s %d has %d elements, needs %d", featsName, f, len(v), n)
		}
	}
	if outs != nil {
		if len(outs) != s.Features {
			fail(ErrShape, op, "%d gradients for %d features", len(outs), s.Features)
		}
		for f, v := range outs {
			if v != nil && len(v) < n {
				fail(ErrShape, op, "gradient %d has %d elements, needs %d", f, len(v), n)
			}
		}
	}
	if w := s.Batch * s.Width(); len(rows) < w {
		fail(ErrShape, op, "%s has %d elements, needs %d", rowsName, len(rows), w)
	}
}

// InteractionForward writes, for every sample b, row b of out ([Batch,
// Width]): feats[0]'s row b, then the dots <f_i, f_j> of the rows b of
// feats[i] and feats[j] for i = 1…F−1 (0…F−1 with Self) and j = 0…i−1
// (0…i with Self), in that order. feats holds the Features matrices,
// each [Batch, Dim] row-major; this is dlrm's cat([x, Z[:, li, lj]]).
// Each dot is sixteen float32 partial sums over k mod 16 in increasing k,
// folded in halves.
func InteractionForward(s InteractionShape, feats [][]float32, out []float32) {
	checkInteraction(s, "InteractionForward", feats, "feature", nil, out, "out")
	// Through a pooled job, not a closure: a compiled graph runs this on
	// every call and allocates nothing.
	interactionJobs.run(s.Batch, s.forwardWork(), interactionArgs{s: s, feats: feats, out: out}, interactionRows)
}

type interactionArgs struct {
	s     InteractionShape
	feats [][]float32
	out   []float32
}

var interactionJobs parPool[interactionArgs]

// interactionRows is InteractionForward for samples [lo, hi): per
// sample, all the dots in one interactionTriangleImpl call.
func interactionRows(a *interactionArgs, lo, hi int) {
	s, feats, out := a.s, a.feats, a.out
	d, w := s.Dim, s.Width()
	for b := lo; b < hi; b++ {
		row := out[b*w : (b+1)*w]
		copy(row[:d], feats[0][b*d:(b+1)*d])
		interactionTriangleImpl(row[d:], feats, b, d, s.Self)
	}
}

// InteractionBackward overwrites grads[f] (each [Batch, Dim], nil to skip
// a feature) with the gradient of InteractionForward's output with
// respect to feats[f], given that output's gradient dout ([Batch,
// Width]): dout's first Dim columns for feats[0], plus, for each dot z_ij
// with gradient g, g·f_j added to feature i and g·f_i to feature j (2g·f_i
// when i = j). The terms of an element are added in float32 in the
// forward's pair order. grads must not overlap feats or dout.
func InteractionBackward(s InteractionShape, feats [][]float32, dout []float32, grads [][]float32) {
	checkInteraction(s, "InteractionBackward", feats, "feature", grads, dout, "dout")
	interactionGradJobs.run(s.Batch, s.backwardWork(), interactionGradArgs{s: s, feats: feats, dout: dout, grads: grads}, interactionGradRows)
}

type interactionGradArgs struct {
	s            InteractionShape
	feats, grads [][]float32
	dout         []float32
}

var interactionGradJobs parPool[interactionGradArgs]

// interactionGradRows is InteractionBackward for samples [lo, hi): per
// sample, every feature's gradient row in one interactionGradsImpl call.
func interactionGradRows(a *interactionGradArgs, lo, hi int) {
	s, feats, dout, grads := a.s, a.feats, a.dout, a.grads
	d, w := s.Dim, s.Width()
	sc := interactionScratches.get().grow(s.Features)
	defer sc.put()
	for b := lo; b < hi; b++ {
		interactionGradsImpl(sc, grads, dout[b*w:(b+1)*w], feats, b, d, s.Self)
	}
}

// gradsFunc sets the rows b of a sample's feature gradients, grads[t]
// (nil skips t; d floats a row, as in feats): to g[:d] for t = 0, zeros
// for the others, plus c·x_m for every m ≠ t in increasing m, x_m row b
// of feats[m], each product added with one rounding (fma32), c the
// dot (t, m) or (m, t) among g[d:], the sample's dots in the forward's
// order; with self, m = t too, c twice the dot (t, t). That is every
// pair's terms in pair order: those of the pairs (t, j), j < t, then
// (t, t), then (i, t), i > t. sc is the worker's scratch, sized for the
// features.
type gradsFunc func(sc *interactionScratch, grads [][]float32, g []float32, feats [][]float32, b, d int, self bool)

// interactionGradsGo is the reference gradsFunc: it lays the sample's
// coefficients out in sc.coef, coef[t·F+m] for row m in feature t's
// gradient, and sums each gradient row with interactionAxpysGo.
func interactionGradsGo(sc *interactionScratch, grads [][]float32, g []float32, feats [][]float32, b, d int, self bool) {
	F, s := len(feats), b2i(self)
	rows, coef := sc.rows, sc.coef
	for f := range rows {
		rows[f] = feats[f][b*d : (b+1)*d]
	}
	init, g := g[:d], g[d:]
	p := 0
	for i := 1 - s; i < F; i++ {
		// Row i's dots with rows j < i (+ self) lie side by side in g.
		gi := g[p : p+i+s]
		copy(coef[i*F:], gi)
		for j, v := range gi {
			coef[j*F+i] = v
		}
		p += len(gi)
	}
	if self {
		for t := range F {
			coef[t*F+t] *= 2
		}
	}
	for t, gt := range grads {
		if gt == nil {
			continue
		}
		var in []float32
		if t == 0 {
			in = init
		}
		skip := t
		if self {
			skip = -1
		}
		interactionAxpysGo(gt[b*d:(b+1)*d], in, rows, coef[t*F:(t+1)*F], skip)
	}
}

// interactionScratch is a worker's per-sample lists for
// interactionGradsGo and its block for the bfloat16 kernels (see
// interactionScratch.block), pooled.
type interactionScratch struct {
	rows [][]float32
	coef []float32

	wide         []float32
	feats, grads [][]float32
}

var interactionScratches = freeList[interactionScratch]{New: newOf[interactionScratch]}

// grow sizes the lists for f features.
func (sc *interactionScratch) grow(f int) *interactionScratch {
	if cap(sc.rows) < f {
		sc.rows, sc.coef = make([][]float32, f), make([]float32, f*f)
		sc.feats, sc.grads = make([][]float32, f), make([][]float32, f)
	}
	sc.rows, sc.coef = sc.rows[:f], sc.coef[:f*f]
	sc.feats, sc.grads = sc.feats[:f], sc.grads[:f]
	return sc
}

// put drops the rows (user memory) and frees sc.
func (sc *interactionScratch) put() {
	clear(sc.rows)
	interactionScratches.put(sc)
}

// interactionDot is <a, b> in float32: sixteen partial sums, lane k%16
// holding the products of elements k in increasing k, folded in halves.
// Independent chains keep the adder busy, and the order is a vector
// register's.
func interactionDot(a, b []float32) float32 {
	b = b[:len(a)]
	var s [16]float32
	k := 0
	for ; k+16 <= len(a); k += 16 {
		x, y := a[k:k+16:k+16], b[k:k+16:k+16]
		for l := range s {
			s[l] = fma32(x[l], y[l], s[l])
		}
	}
	for l := range len(a) - k {
		s[l] = fma32(a[k+l], b[k+l], s[l])
	}
	for h := 8; h > 0; h /= 2 {
		for l := range h {
			s[l] += s[l+h]
		}
	}
	return s[0]
}

// triangleFunc sets dst to the dots of row b of every pair of the
// [Batch, d] matrices feats, (i, j) for j < i (j ≤ i with self), i
// ascending, then j: the forward's pair order.
type triangleFunc func(dst []float32, feats [][]float32, b, d int, self bool)

// interactionTriangleGo is the reference triangleFunc.
func interactionTriangleGo(dst []float32, feats [][]float32, b, d int, self bool) {
	p, s := 0, b2i(self)
	for i := 1 - s; i < len(feats); i++ {
		for j := range i + s {
			dst[p] = interactionDot(feats[i][b*d:(b+1)*d], feats[j][b*d:(b+1)*d])
			p++
		}
	}
}

// interactionAxpysGo sets dst to init (zeros when nil) plus coef[m]·rows[m]
// for m in order but m = skip (none when skip < 0), each product added
// with one rounding: one gradient row of a sample.
func interactionAxpysGo(dst, init []float32, rows [][]float32, coef []float32, skip int) {
	if init == nil {
		clear(dst)
	} else {
		copy(dst, init[:len(dst)])
	}
	for m, x := range rows[:len(coef)] {
		if m == skip {
			continue
		}
		x = x[:len(dst)]
		g := coef[m]
		for k, v := range x {
			dst[k] = fma32(g, v, dst[k])
		}
	}
}

// The variants in use; the tables are in interaction_amd64.go and
// interaction_noasm.go.
var (
	interactionTriangleImpl = pick(level, interactionTriangleVariants)
	interactionGradsImpl    = pick(level, interactionGradsVariants)
)
