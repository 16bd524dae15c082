//go:build amd64 && !noasm

package kernels

// adamAVX2 updates len(p) elements, a multiple of 4; vmax is read and
// written only with AMSGrad (flags&2) and must then be as long as p.
//
//go:noescape
func adamAVX2(p, g, m, v, vmax []float32, k1, wd float64, b1, b2, k2, scale, bc2, eps, negStep, sign float32, flags int)

var adamSpanAVX2 = adamSpanAsm

// adamChunk is the most elements one assembly call updates, so no call
// holds up the garbage collector for long.
const adamChunk = 1 << 14

// adamSpanAsm is adamSpan in AVX2: whole vectors in place, the last few
// elements through the same kernel on a zero-padded copy, so every element
// is computed alike.
func adamSpanAsm(c *AdamConfig, p, g, m, v, vmax []float32) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	flags := 0
	if c.WeightDecay != 0 {
		flags |= 1
	}
	if c.AMSGrad {
		flags |= 2
		vmax = vmax[:len(p)]
	}
	sign, scale := float32(1), float32(1)
	if c.Maximize {
		sign = -1
	}
	if c.Decoupled {
		scale = c.DecayScale
	}
	k1, wd := float64(c.Keep1), float64(c.WeightDecay)
	call := func(p, g, m, v, vmax []float32) {
		adamAVX2(p, g, m, v, vmax, k1, wd, c.Beta1, c.Beta2, c.Keep2, scale, c.BiasCorrection2Sqrt, c.Eps, c.NegStepSize, sign, flags)
	}
	n := len(p) &^ 3
	for lo := 0; lo < n; lo += adamChunk {
		hi := min(lo+adamChunk, n)
		var vm []float32
		if flags&2 != 0 {
			vm = vmax[lo:hi]
		}
		call(p[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], vm)
	}
	if n == len(p) {
		return
	}
	var tp, tg, tm, tv, tvmax [4]float32
	k := copy(tp[:], p[n:])
	copy(tg[:], g[n:])
	copy(tm[:], m[n:])
	copy(tv[:], v[n:])
	if flags&2 != 0 {
		copy(tvmax[:], vmax[n:])
	}
	call(tp[:], tg[:], tm[:], tv[:], tvmax[:])
	copy(p[n:], tp[:k])
	copy(m[n:], tm[:k])
	copy(v[n:], tv[:k])
	if flags&2 != 0 {
		copy(vmax[n:], tvmax[:k])
	}
}
