//go:build amd64 && !noasm

package kernels

// adagradAVX2 updates len(p) elements, a multiple of 4.
//
//go:noescape
func adagradAVX2(p, g, s []float32, wd float64, negLR, eps, sign float32, flags int)

// adagradSparseAVX2 is adagradSparseSpan on len(p) elements, a multiple
// of 4.
//
//go:noescape
func adagradSparseAVX2(p, g, s []float32, negLR float64, eps, sign float32)

var (
	adagradSpanAVX2       = adagradSpanAsm
	adagradSparseSpanAVX2 = adagradSparseSpanAsm
)

// adagradSparseSpanAsm is adagradSparseSpan in AVX2, the last few elements
// through the same kernel on a zero-padded copy.
func adagradSparseSpanAsm(c *AdagradConfig, p, g, s []float32) {
	g, s = g[:len(p)], s[:len(p)]
	sign := float32(1)
	if c.Maximize {
		sign = -1
	}
	negLR := float64(c.NegLR)
	n := len(p) &^ 3
	for lo := 0; lo < n; lo += adagradChunk {
		hi := min(lo+adagradChunk, n)
		adagradSparseAVX2(p[lo:hi], g[lo:hi], s[lo:hi], negLR, c.Eps, sign)
	}
	if n == len(p) {
		return
	}
	var tp, tg, ts [4]float32
	k := copy(tp[:], p[n:])
	copy(tg[:], g[n:])
	copy(ts[:], s[n:])
	adagradSparseAVX2(tp[:], tg[:], ts[:], negLR, c.Eps, sign)
	copy(p[n:], tp[:k])
	copy(s[n:], ts[:k])
}

// adagradChunk is the most elements one assembly call updates, so no call
// holds up the garbage collector for long.
const adagradChunk = 1 << 15

// adagradSpanAsm is adagradSpan in AVX2: whole vectors in place, the last
// few elements through the same kernel on a zero-padded copy, so every
// element is computed alike.
func adagradSpanAsm(c *AdagradConfig, p, g, s []float32) {
	g, s = g[:len(p)], s[:len(p)]
	flags := 0
	if c.WeightDecay != 0 {
		flags |= 1
	}
	sign := float32(1)
	if c.Maximize {
		sign = -1
	}
	wd := float64(c.WeightDecay)
	n := len(p) &^ 3
	for lo := 0; lo < n; lo += adagradChunk {
		hi := min(lo+adagradChunk, n)
		adagradAVX2(p[lo:hi], g[lo:hi], s[lo:hi], wd, c.NegLR, c.Eps, sign, flags)
	}
	if n == len(p) {
		return
	}
	var tp, tg, ts [4]float32
	k := copy(tp[:], p[n:])
	copy(tg[:], g[n:])
	copy(ts[:], s[n:])
	adagradAVX2(tp[:], tg[:], ts[:], wd, c.NegLR, c.Eps, sign, flags)
	copy(p[n:], tp[:k])
	copy(s[n:], ts[:k])
}
