package kernels

// ConvEpilogue is what a forward convolution does to its output after the
// bias, while each block of output is still in cache: add Residual (laid
// out as the output, often a residual connection's other branch), then
// apply Act when Activate is set. The result is that of ConvForward
// followed by Binary(BinAdd, y, y, Residual) and Act.Forward(y, y), bit for
// bit: the same additions and the same activation code, in the same order,
// one cache-resident block at a time instead of whole passes over memory.
type ConvEpilogue struct {
	Residual []float32
	Act      Act
	Activate bool

	out16 bf16Stage // ConvForwardEpilogueBF16To's stage, last
}

func (ep *ConvEpilogue) active() bool { return ep.Residual != nil || ep.Activate || ep.out16.on() }

// gemm is the epilogue as a GEMM applies it, with bias.
func (ep *ConvEpilogue) gemm(bias []float32) Epilogue {
	return Epilogue{Bias: bias, Residual: ep.Residual, Act: ep.Act, Activate: ep.Activate, out16: ep.out16}
}

// ConvForwardEpilogue computes y = ep(conv(x, w) + bias). cw, when not nil,
// holds w packed by PackConvWeights for s (as ConvForwardPacked reads it).
func ConvForwardEpilogue(s *ConvShape, x, w []float32, cw *ConvWeights, bias, y []float32, ep ConvEpilogue) {
	if ep.Residual != nil && len(ep.Residual) < s.yLen() {
		fail(ErrShape, "ConvForwardEpilogue", "residual has %d elements, the output %d", len(ep.Residual), s.yLen())
	}
	if ep.Activate {
		ep.Act.check("ConvForwardEpilogue")
	}
	var pb *PackedB
	if cw != nil {
		if !cw.Fits(s) {
			fail(ErrShape, "ConvForwardEpilogue", "weights packed for %d→%d %v (groups %d), convolution is %d→%d %v (groups %d, channels-last %v)",
				cw.c, cw.o, cw.kernel, cw.groups, s.C, s.O, s.Kernel, s.Groups, s.ChannelsLast)
		}
		pb = cw.pb
	}
	convForwardEpilogue(s, x, w, pb, bias, y, ep)
}

// epilogueRows applies the epilogue to pixels [lo, hi) of the current
// block of channels-last output rows.
func (j *convJob) epilogueRows(lo, hi int) {
	o := j.s.O
	base := j.r0 * j.ow * o
	y := j.y[base+lo*o : base+hi*o]
	if r := j.ep.Residual; r != nil {
		convOps.addTo(y, r[base+lo*o:base+hi*o])
	}
	if j.ep.Activate {
		actForwardImpl(j.ep.Act, y, y)
	}
	if st := &j.ep.out16; st.on() {
		tmp := st.scratch()
		st.store(y, base+lo*o, tmp)
		st.release(tmp)
	}
}

// epiloguePass applies the epilogue to the whole output, for the paths
// that have no blocks of their own to apply it on.
func epiloguePass(y []float32, ep *ConvEpilogue) {
	if ep.Residual != nil {
		Binary(BinAdd, y, y, ep.Residual[:len(y)])
	}
	if ep.Activate {
		ep.Act.Forward(y, y)
	}
	if ep.out16.on() {
		bf16StagePass(y, &ep.out16)
	}
}
