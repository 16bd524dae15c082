//go:build amd64 && !noasm

package kernels

// lambMomentsAVX2 is pass 1 of the Lamb update over len(p) elements, a
// multiple of 4; acc holds the four p² lanes and the four u² lanes, read
// and written. flags&1: weight decay.
//
//go:noescape
func lambMomentsAVX2(p, g, m, v []float32, acc *[8]float64, k1, wd float64, b1, b2, k2, bc1, bc2, eps float32, flags int)

// lambApplyAVX2 is pass 2 over len(p) elements, a multiple of 4.
//
//go:noescape
func lambApplyAVX2(p, m, v []float32, wd, negScale float64, bc1, bc2, eps float32, flags int)

// sumSquares2AVX2 adds the squares of len(a) elements of a and b, a
// multiple of 4, into acc's lanes.
//
//go:noescape
func sumSquares2AVX2(a, b []float32, acc *[8]float64)

var (
	lambMomentsAVX2Span = lambMomentsAsm
	lambApplyAVX2Span   = lambApplyAsm
	sumSquares2AVX2Span = sumSquares2Asm
)

func lambFlags(c *LambConfig) int {
	if c.WeightDecay != 0 {
		return 1
	}
	return 0
}

// lambMomentsAsm is lambMomentsSpan in AVX2: whole vectors of four, then
// the last few elements through the reference, which continues the same
// lanes since the vectors end at a multiple of 4. (A block is at most
// lambBlock elements, so no call holds up the garbage collector for long.)
func lambMomentsAsm(c *LambConfig, p, g, m, v []float32, acc *[8]float64) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	n := len(p) &^ 3
	if n > 0 {
		lambMomentsAVX2(p[:n], g[:n], m[:n], v[:n], acc, float64(c.Keep1), float64(c.WeightDecay),
			c.Beta1, c.Beta2, c.Keep2, c.BiasCorrection1, c.BiasCorrection2, c.Eps, lambFlags(c))
	}
	if n < len(p) {
		lambMomentsSpan(c, p[n:], g[n:], m[n:], v[n:], acc)
	}
}

// lambApplyChunk is the most elements one assembly call updates in pass 2.
const lambApplyChunk = 1 << 14

// lambApplyAsm is lambApplySpan in AVX2, the last few elements through the
// reference.
func lambApplyAsm(c *LambConfig, negScale float32, p, m, v []float32) {
	m, v = m[:len(p)], v[:len(p)]
	n := len(p) &^ 3
	for lo := 0; lo < n; lo += lambApplyChunk {
		hi := min(lo+lambApplyChunk, n)
		lambApplyAVX2(p[lo:hi], m[lo:hi], v[lo:hi], float64(c.WeightDecay), float64(negScale),
			c.BiasCorrection1, c.BiasCorrection2, c.Eps, lambFlags(c))
	}
	if n < len(p) {
		lambApplySpan(c, negScale, p[n:], m[n:], v[n:])
	}
}

// sumSquares2Asm is sumSquares2 in AVX2, the last few elements through the
// reference.
func sumSquares2Asm(a, b []float32, acc *[8]float64) {
	b = b[:len(a)]
	n := len(a) &^ 3
	if n > 0 {
		sumSquares2AVX2(a[:n], b[:n], acc)
	}
	if n < len(a) {
		sumSquares2(a[n:], b[n:], acc)
	}
}

// lambMomentsAVX512 is lambMomentsAVX2 sixteen elements at a time;
// len(p) is a multiple of 16.
//
//go:noescape
func lambMomentsAVX512(p, g, m, v []float32, acc *[8]float64, k1, wd float64, b1, b2, k2, bc1, bc2, eps float32, flags int)

// lambApplyAVX512 is lambApplyAVX2 sixteen elements at a time; len(p) is
// a multiple of 16.
//
//go:noescape
func lambApplyAVX512(p, m, v []float32, wd, negScale float64, bc1, bc2, eps float32, flags int)

var (
	lambMomentsAVX512Span = lambMomentsAsm512
	lambApplyAVX512Span   = lambApplyAsm512
)

// lambMomentsAsm512 is lambMomentsSpan in AVX-512: whole vectors of
// sixteen, then the rest through the AVX2 variant, which continues the
// same lanes since sixteen is a multiple of 4.
func lambMomentsAsm512(c *LambConfig, p, g, m, v []float32, acc *[8]float64) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	n := len(p) &^ 15
	if n > 0 {
		lambMomentsAVX512(p[:n], g[:n], m[:n], v[:n], acc, float64(c.Keep1), float64(c.WeightDecay),
			c.Beta1, c.Beta2, c.Keep2, c.BiasCorrection1, c.BiasCorrection2, c.Eps, lambFlags(c))
	}
	if n < len(p) {
		lambMomentsAsm(c, p[n:], g[n:], m[n:], v[n:], acc)
	}
}

// lambApplyAsm512 is lambApplySpan in AVX-512, the rest through the AVX2
// variant.
func lambApplyAsm512(c *LambConfig, negScale float32, p, m, v []float32) {
	m, v = m[:len(p)], v[:len(p)]
	n := len(p) &^ 15
	for lo := 0; lo < n; lo += lambApplyChunk {
		hi := min(lo+lambApplyChunk, n)
		lambApplyAVX512(p[lo:hi], m[lo:hi], v[lo:hi], float64(c.WeightDecay), float64(negScale),
			c.BiasCorrection1, c.BiasCorrection2, c.Eps, lambFlags(c))
	}
	if n < len(p) {
		lambApplyAsm(c, negScale, p[n:], m[n:], v[n:])
	}
}
