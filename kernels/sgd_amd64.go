//go:build amd64 && !noasm

package kernels

// sgdAVX2 updates len(p) elements, a multiple of 8; b is read and written
// only with momentum (flags&2) and must then be as long as p.
//
//go:noescape
func sgdAVX2(p, g, b []float32, negLR, wd, keep float64, m, sign float32, flags int)

var sgdSpanAVX2 = sgdSpanAsm

// sgdChunk is the most elements one assembly call updates (about 30 µs
// from memory), so no call holds up the garbage collector for long.
const sgdChunk = 1 << 15

// sgdSpanAsm is sgdSpan in AVX2: whole vectors in place, the last few
// elements through the same kernel on a zero-padded copy, so every element
// is computed alike.
func sgdSpanAsm(c *SGDConfig, init bool, p, g, b []float32) {
	g = g[:len(p)]
	flags := 0
	if c.WeightDecay != 0 {
		flags |= 1
	}
	if c.Momentum != 0 {
		flags |= 2
		b = b[:len(p)]
		if init {
			flags |= 4
		}
		if c.Nesterov {
			flags |= 8
		}
	}
	sign := float32(1)
	if c.Maximize {
		sign = -1
	}
	negLR, wd, keep := -float64(c.LR), float64(c.WeightDecay), float64(c.Keep)
	n := len(p) &^ 7
	for lo := 0; lo < n; lo += sgdChunk {
		hi := min(lo+sgdChunk, n)
		var bs []float32
		if flags&2 != 0 {
			bs = b[lo:hi]
		}
		sgdAVX2(p[lo:hi], g[lo:hi], bs, negLR, wd, keep, c.Momentum, sign, flags)
	}
	if n == len(p) {
		return
	}
	var tp, tg, tb [8]float32
	k := copy(tp[:], p[n:])
	copy(tg[:], g[n:])
	if flags&2 != 0 {
		copy(tb[:], b[n:])
	}
	sgdAVX2(tp[:], tg[:], tb[:], negLR, wd, keep, c.Momentum, sign, flags)
	copy(p[n:], tp[:k])
	if flags&2 != 0 {
		copy(b[n:], tb[:k])
	}
}
