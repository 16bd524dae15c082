package kernels

// The bfloat16 output stage of the convolutions' and GEMMs' epilogues. A
// BF16 convolution accumulates in float32; its result is rounded to
// bfloat16 and then, in a fused graph node, a residual is added and an
// activation applied, each rounded again as the separate BF16 ops would
// round it. Running that stage on each finished float32 block while it is
// in cache replaces three passes over memory (round, add, activate) with
// none.

// ConvEpilogueBF16 is ConvEpilogue for a bfloat16 convolution: after the
// result is rounded to bfloat16, add Residual (laid out as the output),
// then apply Act when Activate is set. The result is that of
// ConvForwardBF16To followed by BinaryBF16(BinAdd, y, y, Residual) and
// Act.ForwardBF16(y, y), bit for bit.
type ConvEpilogueBF16 struct {
	Residual []uint16
	Act      Act
	Activate bool
}

// bf16Stage is the bfloat16 output stage carried by a float32 epilogue:
// finished float32 values are rounded into y (laid out as the float32
// result), then res is added and act applied, each rounded. The zero value
// (nil y) does nothing.
type bf16Stage struct {
	y        []uint16
	res      []uint16
	act      Act
	activate bool
}

func (b *bf16Stage) on() bool { return b.y != nil }

// kernelMode returns the mode in which the direct kernel runs b in
// registers, bit 0 the rectifier and bit 1 the residual, or −1 where b
// needs the float32 path (an activation other than ReLU).
func (b *bf16Stage) kernelMode() int {
	mode := 0
	if b.activate {
		if b.act.Fn != ActReLU {
			return -1
		}
		mode |= 1
	}
	if b.res != nil {
		mode |= 2
	}
	return mode
}

// store runs the stage on row, finished float32 values of elements
// [off, off+len(row)) of the result; row is overwritten. tmp is scratch
// for the widened residual. A fused kernel of the level (bf16Fused) takes
// the common stages sixteen elements at a time; elsewhere the
// intermediate roundings happen in float32 (roundBF16Impl), a narrowing
// and widening in one pass, and the last is the narrowing into y.
func (b *bf16Stage) store(row []float32, off int, tmp *[2][bf16Stretch]float32) {
	for i := 0; i < len(row); i += bf16Stretch {
		k := min(i+bf16Stretch, len(row))
		f, y := row[i:k], b.y[off+i:off+k]
		var res []uint16
		if b.res != nil {
			res = b.res[off+i : off+k]
		}
		if n := b.fused(y, f, res); n > 0 {
			f, y = f[n:], y[n:]
			if res != nil {
				res = res[n:]
			}
		}
		if len(f) == 0 {
			continue
		}
		if res != nil || b.activate {
			roundBF16Impl(f)
		}
		if res != nil {
			r := tmp[0][:len(f)]
			bf16ToF32Impl(r, res)
			binarySameImpl(BinAdd, f, f, r)
			// A sum of two bfloat16 values is a multiple of the least
			// one, so it never rounds to −0 from below: the rectifier
			// commutes with the rounding (AddReLUBF16), which the
			// narrowing below then does.
			if b.activate && b.act.Fn != ActReLU {
				roundBF16Impl(f)
			}
		}
		if b.activate {
			actForwardImpl(b.act, f, f)
		}
		f32ToBF16Impl(y, f)
	}
}

// bf16Fused holds the level's fused stage kernels (nil where it has
// none), each doing the first len(y)&^15 elements: a rectified result, a
// residual sum, and a rectified residual sum.
var bf16Fused = bf16FusedFor(level)

type bf16FusedKernels struct {
	relu         func(y []uint16, f []float32)
	add, addReLU func(y []uint16, f []float32, res []uint16)
}

func bf16FusedFor(l Level) bf16FusedKernels {
	switch {
	case l >= AVX512:
		return bf16FusedKernels{relu: bf16ReLUStageAVX512Span, add: bf16AddStageAVX512Span, addReLU: bf16AddReLUStageAVX512Span}
	case l >= AVX2:
		return bf16FusedKernels{relu: bf16ReLUStageAVX2Span, add: bf16AddStageAVX2Span, addReLU: bf16AddReLUStageAVX2Span}
	}
	return bf16FusedKernels{}
}

// fused runs the stage on a leading part of f with one of bf16Fused's
// kernels, where one fits it, and returns how many elements it did.
func (b *bf16Stage) fused(y []uint16, f []float32, res []uint16) int {
	n := len(f) &^ 15
	relu := b.activate && b.act.Fn == ActReLU
	k := &bf16Fused
	switch {
	case n == 0:
		return 0
	case res == nil && relu && k.relu != nil:
		k.relu(y[:n], f[:n])
	case res != nil && !b.activate && k.add != nil:
		k.add(y[:n], f[:n], res[:n])
	case res != nil && relu && k.addReLU != nil:
		k.addReLU(y[:n], f[:n], res[:n])
	default:
		return 0
	}
	return n
}

// scratch returns the residual's widening buffer, nil when there is no
// residual (release accepts that).
func (b *bf16Stage) scratch() *[2][bf16Stretch]float32 {
	if b.res == nil {
		return nil
	}
	return getStretches()
}

func (b *bf16Stage) release(tmp *[2][bf16Stretch]float32) {
	if tmp != nil {
		bf16Stretches.put(tmp)
	}
}

// bf16StagePass runs b over the whole float32 result acc, split across
// the worker pool: the stage of the paths with no blocks of their own.
func bf16StagePass(acc []float32, b *bf16Stage) {
	j := bf16Jobs.get()
	j.stage, j.acc = *b, acc
	Parallel(len(acc), len(acc)*(binCost+2), j.stageFn)
	j.stage, j.acc = bf16Stage{}, nil
	j.release()
}

func (j *bf16Job) runStage(lo, hi int) {
	tmp := j.stage.scratch()
	j.stage.store(j.acc[lo:hi], lo, tmp)
	j.stage.release(tmp)
}

// ConvWeightsBF16 are a bfloat16 convolution's filters prepared once for
// inference. Where the BF16 convolution runs natively (AVX512_BF16,
// channels-last, one group) they are packed for its kernels, each layout
// on the first forward that reads it, from that forward's w: packing
// weights per call was a third of a batch-1 ResNet-50 forward. On CPUs
// where the BF16 convolution widens its operands to run the float32
// kernels, they are widened and packed at once, so a forward widens only
// its input. Elsewhere there is nothing to prepare and
// PrepareConvWeightsBF16 returns nil. After the weights change, prepare
// them again.
type ConvWeightsBF16 struct {
	s   ConvShape
	wf  []float32
	cw  *ConvWeights
	nat *convBF16Packed
}

// PrepareConvWeightsBF16 prepares w (ConvForwardBF16's weight layout) for
// convolutions of s's geometry, or returns nil where the forward has no use
// for prepared weights.
func PrepareConvWeightsBF16(s *ConvShape, w []uint16) *ConvWeightsBF16 {
	if len(w) < s.wLen() {
		fail(ErrShape, "PrepareConvWeightsBF16", "w has %d elements, want %d for %d×%d×%v", len(w), s.wLen(), s.O, s.C, s.Kernel)
	}
	if convBF16Native(s) {
		return &ConvWeightsBF16{s: *s, nat: new(convBF16Packed)}
	}
	wf := make([]float32, s.wLen())
	BF16ToF32(wf, w[:s.wLen()])
	return &ConvWeightsBF16{s: *s, wf: wf, cw: PackConvWeights(s, wf)}
}

// Fits reports whether cw was prepared for s's weight geometry.
func (cw *ConvWeightsBF16) Fits(s *ConvShape) bool {
	return cw.s.C == s.C && cw.s.O == s.O && cw.s.Groups == s.Groups && cw.s.Kernel == s.Kernel && cw.s.ChannelsLast == s.ChannelsLast
}

// ConvForwardEpilogueBF16To computes y = ep(round(conv(x, w) + bias)) for
// bfloat16 x, w, y and float32 bias (nil for none), accumulating in
// float32; see ConvEpilogueBF16. cw, when not nil, holds w prepared by
// PrepareConvWeightsBF16 for s. y is overwritten.
func ConvForwardEpilogueBF16To(s *ConvShape, x, w []uint16, cw *ConvWeightsBF16, bias []float32, y []uint16, ep ConvEpilogueBF16) {
	const op = "ConvForwardEpilogueBF16To"
	nb := 0
	if bias != nil {
		nb = s.O
	}
	s.check(op, convLen{"x", len(x), s.xLen()}, convLen{"w", len(w), s.wLen()},
		convLen{"y", len(y), s.yLen()}, convLen{"bias", len(bias), nb})
	if ep.Residual != nil && len(ep.Residual) < s.yLen() {
		fail(ErrShape, op, "residual has %d elements, the output %d", len(ep.Residual), s.yLen())
	}
	if ep.Activate {
		ep.Act.check(op)
	}
	if cw != nil && !cw.Fits(s) {
		fail(ErrShape, op, "weights prepared for %d→%d %v (groups %d, channels-last %v), convolution is %d→%d %v (groups %d, channels-last %v)",
			cw.s.C, cw.s.O, cw.s.Kernel, cw.s.Groups, cw.s.ChannelsLast, s.C, s.O, s.Kernel, s.Groups, s.ChannelsLast)
	}
	if s.N == 0 {
		return
	}
	y = y[:s.yLen()]
	stage := bf16Stage{y: y, res: ep.Residual, act: ep.Act, activate: ep.Activate}
	if stage.res != nil {
		stage.res = stage.res[:len(y)]
	}
	if convBF16Native(s) {
		// The stage runs on each block of the result as it is finished.
		c := getConvBF16(s)
		defer c.release()
		if cw != nil {
			c.pre = cw.nat
		}
		c.staged, c.gemmEp.stage = true, stage
		c.forward(x[:s.xLen()], w[:s.wLen()], bias, nil)
		return
	}
	acc := f32Scratch(len(y))
	defer releaseF32Scratch(acc)
	// The float32 kernels on the widened operands, the stage in their
	// epilogue: the products ConvForwardBF16 would take, summed in the
	// float32 convolution's order.
	var wf []float32
	var packed *PackedB
	if cw != nil {
		wf = cw.wf
		if cw.cw != nil {
			packed = cw.cw.pb
		}
	} else {
		ws := widenedOperand(w[:s.wLen()])
		defer releaseF32Scratch(ws)
		wf = *ws
	}
	// A 1×1 stride-1 convolution is one product with the input as it
	// stands for A, which the GEMM widens as it packs it.
	if s.pointwise() && s.ChannelsLast && s.Groups == 1 &&
		sgemmBF16A(s.N*s.outSize(), s.O, s.C, x, s.C, true, wf, s.C, packed, *acc, s.O, Epilogue{Bias: bias, out16: stage}) {
		return
	}
	if s.ChannelsLast {
		convForwardInput(s, nil, x, wf, packed, bias, *acc, ConvEpilogue{out16: stage})
		return
	}
	xf := widenedOperand(x[:s.xLen()])
	defer releaseF32Scratch(xf)
	convForwardEpilogue(s, *xf, wf, packed, bias, *acc, ConvEpilogue{out16: stage})
}
