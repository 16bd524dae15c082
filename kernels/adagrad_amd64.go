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

// adagradChunk is the most elements one assembly call updates, so no call
// holds up the garbage collector for long.
const adagradChunk = 1 << 15

// adagradSpanAsm is adagradSpan in AVX2.
func adagradSpanAsm(c *AdagradConfig, p, g, s []float32) {
	k := adagradKernel{c: c, sign: adagradSign(c), wd: float64(c.WeightDecay)}
	if c.WeightDecay != 0 {
		k.flags |= 1
	}
	k.vectors(p, g, s)
}

// adagradSparseSpanAsm is adagradSparseSpan in AVX2.
func adagradSparseSpanAsm(c *AdagradConfig, p, g, s []float32) {
	k := adagradKernel{c: c, sign: adagradSign(c), sparse: true}
	k.vectors(p, g, s)
}

func adagradSign(c *AdagradConfig) float32 {
	if c.Maximize {
		return -1
	}
	return 1
}

// adagradKernel is one call's choice of assembly update and its
// arguments.
type adagradKernel struct {
	c      *AdagradConfig
	sign   float32
	wd     float64
	flags  int
	sparse bool
}

func (k *adagradKernel) run(p, g, s []float32) {
	if k.sparse {
		adagradSparseAVX2(p, g, s, float64(k.c.NegLR), k.c.Eps, k.sign)
		return
	}
	adagradAVX2(p, g, s, k.wd, k.c.NegLR, k.c.Eps, k.sign, k.flags)
}

// vectors runs the kernel, which takes whole vectors of 4, over p, g and
// s in place, at most adagradChunk elements a call; the last few elements
// go through the same kernel on a zero-padded copy, so every element is
// computed alike.
func (k *adagradKernel) vectors(p, g, s []float32) {
	g, s = g[:len(p)], s[:len(p)]
	n := len(p) &^ 3
	for lo := 0; lo < n; lo += adagradChunk {
		hi := min(lo+adagradChunk, n)
		k.run(p[lo:hi], g[lo:hi], s[lo:hi])
	}
	if n == len(p) {
		return
	}
	var tp, tg, ts [4]float32
	m := copy(tp[:], p[n:])
	copy(tg[:], g[n:])
	copy(ts[:], s[n:])
	k.run(tp[:], tg[:], ts[:])
	copy(p[n:], tp[:m])
	copy(s[n:], ts[:m])
}
