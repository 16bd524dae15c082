package kernels

// DLRM's dot interaction (facebookresearch/dlrm, interact_features with
// arch_interaction_op="dot") multiplies every pair of a sample's feature
// vectors: the bottom MLP's output and one embedding per table. PyTorch
// forms the whole F×F Gram matrix with bmm and then gathers its lower
// triangle; these kernels compute only the pairs that are kept, straight
// from the feature matrices, so no [B, F, d] copy or [B, F, F] matrix is
// ever built.
//
// Every dot is accumulated in float32 in one fixed order: four partial
// sums, lane k%4 taking the products of elements k, in increasing k, then
// combined as (s0+s1)+(s2+s3) (see interactionDot). Each product is
// rounded to float32 before it is added: the conversion stops the compiler
// fusing it into an FMA where the target has one, so the bits are the same
// on every platform. Each sample is done by one worker from start to end,
// so results are also the same for any thread count.

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

// check validates s and the slices a kernel is given: one [Batch, Dim]
// row-major matrix per feature (each at least Batch·Dim long; for outs,
// nil skips that feature) and the [Batch, Width] matrix rows.
func (s InteractionShape) check(op string, feats [][]float32, featsName string, outs [][]float32, rows []float32, rowsName string) {
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
// Each dot is four float32 partial sums over k ≡ 0, 1, 2, 3 (mod 4) in
// increasing k, combined as (s0+s1)+(s2+s3).
func InteractionForward(s InteractionShape, feats [][]float32, out []float32) {
	s.check("InteractionForward", feats, "feature", nil, out, "out")
	work := s.Batch*s.Pairs()*s.Dim + s.Batch*s.Width()
	// Through a pooled job, not a closure: a compiled graph runs this on
	// every call and allocates nothing.
	interactionJobs.run(s.Batch, work, interactionArgs{s: s, feats: feats, out: out}, interactionRows)
}

type interactionArgs struct {
	s     InteractionShape
	feats [][]float32
	out   []float32
}

var interactionJobs parPool[interactionArgs]

// interactionRows is InteractionForward for samples [lo, hi).
func interactionRows(a *interactionArgs, lo, hi int) {
	s, feats, out := a.s, a.feats, a.out
	d, w, first := s.Dim, s.Width(), 1
	if s.Self {
		first = 0
	}
	for b := lo; b < hi; b++ {
		row := out[b*w : (b+1)*w]
		copy(row[:d], feats[0][b*d:(b+1)*d])
		p := d
		for i := first; i < s.Features; i++ {
			fi := feats[i][b*d : (b+1)*d]
			last := i
			if s.Self {
				last = i + 1
			}
			for j := 0; j < last; j++ {
				row[p] = interactionDot(fi, feats[j][b*d:(b+1)*d])
				p++
			}
		}
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
	s.check("InteractionBackward", feats, "feature", grads, dout, "dout")
	d, w, first := s.Dim, s.Width(), 1
	if s.Self {
		first = 0
	}
	Parallel(s.Batch, 2*s.Batch*s.Pairs()*d+s.Batch*s.Features*d, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			row := dout[b*w : (b+1)*w]
			for f, g := range grads {
				switch {
				case g == nil:
				case f == 0:
					copy(g[b*d:(b+1)*d], row[:d])
				default:
					clear(g[b*d : (b+1)*d])
				}
			}
			p := d
			for i := first; i < s.Features; i++ {
				fi := feats[i][b*d : (b+1)*d]
				var gi []float32
				if grads[i] != nil {
					gi = grads[i][b*d : (b+1)*d]
				}
				last := i
				if s.Self {
					last = i + 1
				}
				for j := 0; j < last; j++ {
					gz := row[p]
					p++
					if j == i {
						if gi != nil {
							interactionAxpy(gi, 2*gz, fi)
						}
						continue
					}
					fj := feats[j][b*d : (b+1)*d]
					if gi != nil {
						interactionAxpy(gi, gz, fj)
					}
					if grads[j] != nil {
						interactionAxpy(grads[j][b*d:(b+1)*d], gz, fi)
					}
				}
			}
		}
	})
}

// interactionDot is <a, b> in float32 with four partial sums, lane k%4
// holding the products of elements k in increasing k, combined as
// (s0+s1)+(s2+s3): independent chains keep the adder busy, and the order
// never changes.
func interactionDot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	k := 0
	for ; k+4 <= len(a); k += 4 {
		s0 += float32(a[k] * b[k])
		s1 += float32(a[k+1] * b[k+1])
		s2 += float32(a[k+2] * b[k+2])
		s3 += float32(a[k+3] * b[k+3])
	}
	switch len(a) - k {
	case 3:
		s2 += float32(a[k+2] * b[k+2])
		fallthrough
	case 2:
		s1 += float32(a[k+1] * b[k+1])
		fallthrough
	case 1:
		s0 += float32(a[k] * b[k])
	}
	return (s0 + s1) + (s2 + s3)
}

// interactionAxpy adds g·x to y in float32, the product rounded first (no
// FMA), as in interactionDot.
func interactionAxpy(y []float32, g float32, x []float32) {
	x = x[:len(y)]
	for k, v := range x {
		y[k] += float32(g * v)
	}
}
