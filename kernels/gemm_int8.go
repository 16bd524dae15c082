package kernels

import (
	"math"
	"unsafe"
)

// The INT8 GEMM multiplies uint8 activations (per-tensor zero point z_x) by
// int8 weights (zero point 0, one scale per output channel) into exact
// int32 sums, then turns each sum into a float32 output as a quantized
// Linear or convolution does:
//
//	acc  = Σ_p x_q[i,p]·w_q[c,p] − z_x·Σ_p w_q[c,p]        (int32)
//	y    = float32(acc)·float32(s_x·s_w[c]), then + b[c]   (two roundings, no FMA)
//	y   += r  or  float32(r_q − z_r)·s_r                   (optional residual)
//	y    = act(y)  or  y / d                               (optional)
//	out  = y, or its quantization to uint8 or int8
//
// Only the int32 sums differ between variants (Go loops, AVX2 VPMADDWD,
// AVX-512 VNNI VPDPBUSD); integer addition is associative, so the sums are
// equal whatever the order, blocking or thread split, and the float32
// steps after them are the same Go code at every level. Every variant
// therefore agrees with the reference bit for bit.
//
// The sums wrap modulo 2³² as they accumulate (VPDPBUSD and VPADDD do not
// saturate) and are exact once the true value fits in int32: with
// |x_q − z_x| ≤ 255 and |w_q| ≤ 128 that holds for K ≤ Int8MaxK.

// Int8MaxK is the longest depth the INT8 GEMM takes: 255·128·K must stay
// below 2³¹ so that no int32 sum can overflow.
const Int8MaxK = (1<<31 - 1) / (255 * 128)

// int8PanelWidth is the number of output channels in a packed weight
// panel: two ZMM registers of sixteen int32 sums.
const int8PanelWidth = 32

// int8MR is the number of rows of A a strip of the GEMM covers: the 12×32
// VNNI micro-kernel's tile height (the 6×64 VNNI and the AVX2 ones do two
// halves of six).
const int8MR = 12

// PackedInt8 is an int8 weight matrix of N output channels by K depths,
// packed once by PackInt8 for GemmU8S8 and its kin, with the per-channel
// weight sums the zero-point correction needs. It is read-only once made,
// so any number of goroutines may use it at once.
type PackedInt8 struct {
	n, k int
	kg   int // groups of four depths: ⌈k/4⌉
	// data holds panels of 32 channels; in panel p, group g, channel c,
	// depth 4g+e is at p·kg·128 + g·128 + 4c + e. Depths past k and
	// channels past n are zero, so the kernels may read them freely.
	data []int8
	// sums[c] is Σ_p w[c,p], zero past n.
	sums []int32
}

// N returns the number of output channels.
func (p *PackedInt8) N() int { return p.n }

// K returns the depth.
func (p *PackedInt8) K() int { return p.k }

// panels returns the number of 32-channel panels.
func (p *PackedInt8) panels() int { return (p.n + int8PanelWidth - 1) / int8PanelWidth }

// PackInt8 packs the n×k row-major int8 weight w (row c is output channel
// c, as in a Linear weight or a channels-last convolution weight
// [O][KH·KW·C]; rows ldw elements apart) for GemmU8S8. k must not exceed
// Int8MaxK. It is one of the constructors that return new memory.
func PackInt8(n, k int, w []int8, ldw int) *PackedInt8 {
	if n < 0 || k < 0 {
		fail(ErrShape, "PackInt8", "negative size %d×%d", n, k)
	}
	if k > Int8MaxK {
		fail(ErrShape, "PackInt8", "depth %d exceeds %d, past which int32 sums could overflow", k, Int8MaxK)
	}
	if n > 0 && k > 0 {
		if ldw < k {
			fail(ErrShape, "PackInt8", "weight leading dimension %d < %d columns", ldw, k)
		}
		if len(w) < (n-1)*ldw+k {
			fail(ErrShape, "PackInt8", "weight has %d elements, needs %d", len(w), (n-1)*ldw+k)
		}
	}
	p := &PackedInt8{n: n, k: k, kg: (k + 3) / 4}
	np := p.panels()
	p.data = alignedInt8(np * p.kg * 4 * int8PanelWidth)
	p.sums = make([]int32, np*int8PanelWidth)
	p.fill(w, ldw)
	return p
}

// fill packs w into p's panels, whose padding (depths past k, channels
// past n) stays zero, and sums each channel.
func (p *PackedInt8) fill(w []int8, ldw int) {
	for c := 0; c < p.n; c++ {
		panel := p.data[c/int8PanelWidth*p.kg*4*int8PanelWidth:]
		lane := 4 * (c % int8PanelWidth)
		var sum int32
		for q, v := range w[c*ldw : c*ldw+p.k] {
			panel[q/4*4*int8PanelWidth+lane+q%4] = v
			sum += int32(v)
		}
		p.sums[c] = sum
	}
}

// RepackInt8 is PackInt8 into p's memory when p was packed for the same
// n and k, so that a weight that changes every call (the second operand
// of a product of two activations) is packed without allocating; else it
// is PackInt8.
func RepackInt8(p *PackedInt8, n, k int, w []int8, ldw int) *PackedInt8 {
	if p == nil || p.n != n || p.k != k || n == 0 || k == 0 {
		return PackInt8(n, k, w, ldw)
	}
	if ldw < k || len(w) < (n-1)*ldw+k {
		fail(ErrShape, "RepackInt8", "weight of %d elements, leading dimension %d, for %d×%d", len(w), ldw, n, k)
	}
	p.fill(w, ldw)
	return p
}

// alignedInt8 returns n zeroed bytes starting on a cache line.
func alignedInt8(n int) []int8 {
	buf := make([]int8, n+64)
	off := 0
	if len(buf) > 0 {
		if r := uintptr(unsafe.Pointer(&buf[0])) & 63; r != 0 {
			off = int(64 - r)
		}
	}
	return buf[off : off+n : off+n]
}

// Int8Epilogue is what the INT8 GEMM does with each int32 sum: the
// dequantization to float32, bias, residual, activation or division, and
// for GemmU8S8ToU8 and GemmU8S8ToS8 the output's quantization. Its steps,
// in order, are those of the package comment above the INT8 GEMM.
type Int8Epilogue struct {
	// Scale is the activations' scale s_x and WScales the weights' scale
	// per output channel (at least n values); both positive and finite.
	// Their product is rounded to float32 once (float32 multiplication is
	// correctly rounded, so this is float32(s_x·s_w[c]) taken exactly).
	Scale   float32
	WScales []float32
	// Bias[c] is added to channel c (n values); nil adds nothing.
	Bias []float32
	// Residual, when non-nil, is added after the bias: element (i, c) of
	// the output gets Residual[i·ldc+c], so it is laid out as C. With
	// ResidualU8 instead the residual is quantized: it adds
	// float32(r_q − ResidualZero)·ResidualScale, rounded, then added. At
	// most one of the two may be set.
	Residual      []float32
	ResidualU8    []uint8
	ResidualScale float32
	ResidualZero  int32
	// Act is applied next when Activate is set, by Kiln's float32 kernel
	// (Act.Forward), so the results are those of the float32 graph;
	// otherwise, when Divide is set, every value is divided by Divisor.
	// Activate and Divide exclude each other.
	Act      Act
	Activate bool
	Divisor  float32
	Divide   bool
	// RowAdd, when non-nil, holds one int32 per row of A (at least m),
	// added to every sum of that row before dequantization: the exact
	// correction for a second operand with a zero point of its own, as a
	// product of two activations needs (−z_b·Σ_p(x[i,p] − z_x)). The
	// convolutions take none.
	RowAdd []int32
	// OutScale and OutZero quantize the result for GemmU8S8ToU8 and
	// GemmU8S8ToS8, as QuantizeU8 and QuantizeS8 do; GemmU8S8 ignores them.
	OutScale float32
	OutZero  int32
}

// GemmU8S8 computes the m×n float32 C = epilogue(A·Wᵀ) of the INT8 GEMM:
// A is m×k uint8 row-major (rows lda bytes apart) with zero point zA in
// [0, 255], W the packed n×k int8 weight, and C row-major with rows ldc
// floats apart; only the first n columns of each row are written. Int8
// activations run through it as uint8 with 128 added to every value and to
// their zero point.
//
// Large products are split across the worker pool; the result does not
// depend on the number of threads or on the kernel level.
func GemmU8S8(m int, a []uint8, lda int, zA int32, pw *PackedInt8, c []float32, ldc int, ep Int8Epilogue) {
	gemmU8S8Entry(u8s8StripImpl, "GemmU8S8", m, a, lda, zA, pw, int8Out{f32: c, ldc: ldc, n: len(c)}, &ep)
}

// GemmU8S8ToU8 is GemmU8S8 with the result quantized to uint8 with
// ep.OutScale and ep.OutZero, rows of C ldc bytes apart.
func GemmU8S8ToU8(m int, a []uint8, lda int, zA int32, pw *PackedInt8, c []uint8, ldc int, ep Int8Epilogue) {
	gemmU8S8Entry(u8s8StripImpl, "GemmU8S8ToU8", m, a, lda, zA, pw, int8Out{u8: c, ldc: ldc, n: len(c), quant: true}, &ep)
}

// GemmU8S8ToS8 is GemmU8S8 with the result quantized to int8 with
// ep.OutScale and ep.OutZero, rows of C ldc bytes apart.
func GemmU8S8ToS8(m int, a []uint8, lda int, zA int32, pw *PackedInt8, c []int8, ldc int, ep Int8Epilogue) {
	gemmU8S8Entry(u8s8StripImpl, "GemmU8S8ToS8", m, a, lda, zA, pw, int8Out{s8: c, ldc: ldc, n: len(c), quant: true, signed: true}, &ep)
}

// int8Out is the GEMM's output: one of f32, u8 and s8, n elements long.
type int8Out struct {
	f32           []float32
	u8            []uint8
	s8            []int8
	ldc, n        int
	quant, signed bool
	inv           float32 // 1/OutScale, when quantizing
}

// int8StripFunc computes the int32 sums of one strip: A's rows [i, i+rows)
// (rows ≤ int8MR) times the panels [p0, p0+np) of the weight over the
// depth groups [g0, g0+gc), into s.acc (row stride np·32), added to what
// is there when add is set. Channels past n come out as sums of zeros.
type int8StripFunc func(g *int8Call, s *int8Scratch, i, rows, p0, np, g0, gc int, add bool)

// u8s8StripImpl is the variant in use; the table is in gemm_int8_amd64.go
// and gemm_int8_noasm.go.
var (
	u8s8StripImpl   = pick(level, u8s8StripVariants)
	int8DequantImpl = pick(level, int8DequantVariants)
	int8FinishImpl  = pick(level, int8FinishVariants)
)

func gemmU8S8Entry(strip int8StripFunc, op string, m int, a []uint8, lda int, zA int32, pw *PackedInt8, out int8Out, ep *Int8Epilogue) {
	if pw == nil {
		fail(ErrArgument, op, "nil packed weight")
	}
	n, k := pw.n, pw.k
	if m < 0 {
		fail(ErrShape, op, "negative row count %d", m)
	}
	if zA < u8Min || zA > u8Max {
		fail(ErrArgument, op, "activation zero point %d is outside [0, 255]", zA)
	}
	if m > 0 && k > 0 {
		if lda < k {
			fail(ErrShape, op, "A leading dimension %d < %d columns", lda, k)
		}
		if len(a) < (m-1)*lda+k {
			fail(ErrShape, op, "A has %d elements, needs %d", len(a), (m-1)*lda+k)
		}
	}
	if m > 0 && n > 0 {
		if out.ldc < n {
			fail(ErrShape, op, "C leading dimension %d < %d columns", out.ldc, n)
		}
		if out.n < (m-1)*out.ldc+n {
			fail(ErrShape, op, "C has %d elements, needs %d", out.n, (m-1)*out.ldc+n)
		}
	}
	ep.check(op, m, n, out.ldc)
	runInt8(op, m, a, lda, zA, pw, out, ep, strip, nil)
}

// runInt8 computes the checked product: rows of A read from a (lda apart)
// by strip, or, when ind is not nil, the pixels of an indirect
// convolution.
func runInt8(op string, m int, a []uint8, lda int, zA int32, pw *PackedInt8, out int8Out, ep *Int8Epilogue, strip int8StripFunc, ind *convIndirect) {
	if out.quant {
		lo, hi := int32(u8Min), int32(u8Max)
		if out.signed {
			lo, hi = s8Min, s8Max
		}
		out.inv = quantParams(op+" output", ep.OutScale, ep.OutZero, lo, hi)
	}
	n := pw.n
	if m == 0 || n == 0 {
		return
	}
	g := int8Calls.get()
	g.m, g.a, g.lda, g.zA, g.pw, g.out, g.ep, g.strip, g.ind = m, a, lda, zA, pw, out, *ep, strip, ind
	np := pw.panels()
	g.corr = growInt32(g.corr, np*int8PanelWidth)
	g.cs = growFloat32(g.cs, n)
	for c := range g.corr {
		g.corr[c] = zA * pw.sums[c]
	}
	var csMax, biasMax float32
	for c, sw := range ep.WScales[:n] {
		g.cs[c] = ep.Scale * sw
		csMax = max(csMax, g.cs[c])
	}
	if out.quant {
		for _, b := range ep.Bias {
			if !(b >= -maxFloat32 && b <= maxFloat32) {
				biasMax = float32(math.Inf(1))
				break
			}
			biasMax = max(biasMax, b, -b)
		}
		g.fast = int8FastQuant(csMax, biasMax, ep.ResidualScale, out.inv)
	}
	g.start()
	*g = int8Call{run: g.run, corr: g.corr, cs: g.cs}
	int8Calls.put(g)
}

func (ep *Int8Epilogue) check(op string, m, n, ldc int) {
	if !(ep.Scale > 0) || ep.Scale > maxFloat32 {
		fail(ErrArgument, op, "activation scale %v is not positive and finite", ep.Scale)
	}
	if len(ep.WScales) < n {
		fail(ErrShape, op, "%d weight scales for %d channels", len(ep.WScales), n)
	}
	for c, s := range ep.WScales[:n] {
		if !(s > 0) || s > maxFloat32 {
			fail(ErrArgument, op, "weight scale %d is %v, not positive and finite", c, s)
		}
	}
	if ep.Bias != nil && len(ep.Bias) < n {
		fail(ErrShape, op, "bias has %d elements for %d channels", len(ep.Bias), n)
	}
	need := 0
	if m > 0 && n > 0 {
		need = (m-1)*ldc + n
	}
	switch {
	case ep.Residual != nil && ep.ResidualU8 != nil:
		fail(ErrArgument, op, "both a float32 and a uint8 residual")
	case ep.Residual != nil && len(ep.Residual) < need:
		fail(ErrShape, op, "residual has %d elements, needs %d", len(ep.Residual), need)
	case ep.ResidualU8 != nil:
		if len(ep.ResidualU8) < need {
			fail(ErrShape, op, "residual has %d elements, needs %d", len(ep.ResidualU8), need)
		}
		quantParams(op+" residual", ep.ResidualScale, ep.ResidualZero, u8Min, u8Max)
	}
	if ep.RowAdd != nil && len(ep.RowAdd) < m {
		fail(ErrShape, op, "%d row corrections for %d rows", len(ep.RowAdd), m)
	}
	if ep.Activate && ep.Divide {
		fail(ErrArgument, op, "both an activation and a division")
	}
	if ep.Activate {
		ep.Act.check(op + " epilogue")
	}
}

const maxFloat32 = 3.40282346638528859811704183484516925440e+38

func growInt32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

func growFloat32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// int8Call is one GEMM's arguments, pooled with its part method bound once
// so that a call allocates nothing once the pool is warm.
type int8Call struct {
	m     int
	a     []uint8
	lda   int
	zA    int32
	pw    *PackedInt8
	out   int8Out
	ep    Int8Epilogue
	strip int8StripFunc
	ind   *convIndirect // not nil: an indirect convolution, A unused
	corr  []int32       // zA·Σw per channel (panels' width)
	cs    []float32     // float32(s_x·s_w[c]) per channel
	fast  bool          // int8Finish.fast holds for the whole call
	// The split: strips of int8MR rows, blocks of width panels.
	strips, width int
	run           func(lo, hi int)
}

var int8Calls = freeList[int8Call]{New: func() *int8Call {
	g := new(int8Call)
	g.run = g.part
	return g
}}

// int8Scratch is one thread's working space, pooled.
type int8Scratch struct {
	acc  []int32   // the int32 sums of a strip: int8MR rows of a column block
	y    []float32 // one row of float32 results before quantization
	r    []float32 // one row of a uint8 residual, dequantized
	a    []uint8   // a strip of A copied where it cannot be read in place
	a16  []uint16  // a strip of A widened to 16 bits (the AVX2 kernel's)
	zero []float32 // zeros, never written: the bias of a call without one
	// rowOff holds where an indirect convolution's strip reads its pixels.
	rowOff [int8MR]int
	fin    int8Finish // the one-pass epilogue's operands
}

var int8Scratches = freeList[int8Scratch]{New: newOf[int8Scratch]}

// zeros returns n zero floats.
func (s *int8Scratch) zeros(n int) []float32 {
	if cap(s.zero) < n {
		s.zero = make([]float32, n)
	}
	return s.zero[:n]
}

// Blocking: a column block of B (all of K) stays in L2 while every strip
// of A's rows walks it, and the micro-kernels walk each strip's depth in
// one pass, the sums in registers. Larger blocks cut the times A streams
// past (once per block) until B and A's strips no longer share L2: half
// of it measured best on a 1 MiB L2 (Cascade Lake, 4096³, best of runs:
// 76% → 81% of peak against 256 KiB blocks and 512-byte K blocks).
var int8BlockBytes = min(1<<20, max(256<<10, caps.l2/2))

// int8KGroups is the most depth groups (16384 depths) a strip's
// micro-kernels walk in one call, the sums in registers throughout;
// deeper products add the calls' sums. Shorter calls measured slower:
// each stores and reloads the sums, and the two halves of a strip walk
// B twice either way.
const int8KGroups = 4096

// int8SerialWork is the product size (multiply-adds) below which the GEMM
// runs on the calling thread; VPDPBUSD does four times the FP32 GEMM's
// work a cycle, so the threshold is four times its gemmSerialWork.
const int8SerialWork = 1 << 21

// start splits the product across the pool in units of one strip of
// rows by one block of panels. A block is as wide as fits int8BlockBytes
// of weight in L2, and narrower (down to one pair of panels) when there
// would otherwise be too few units for the threads to finish together:
// the chunks Parallel hands out are equal in units, not in time.
func (g *int8Call) start() {
	g.strips = (g.m + int8MR - 1) / int8MR
	np := g.pw.panels()
	// An even width, at least a pair: the micro-kernels take panels in
	// pairs and an odd one costs a broadcast of A per two products.
	g.width = max(2, int8BlockBytes/max(1, g.pw.kg*4*int8PanelWidth)) &^ 1
	g.width = min(g.width, np)
	work := g.m * g.pw.n * g.pw.k
	t := Threads()
	if work < int8SerialWork {
		t = 1
	}
	for t > 1 && g.width > 2 && g.strips*ceilDiv(np, g.width) < 4*t {
		g.width = (g.width/2 + 1) &^ 1
	}
	// Blocks of equal width (a pair more at most): workers take whole
	// blocks of units, and 8 panels as blocks of 6 and 2 left one worker
	// a quarter of the products (a 3×3 INT8 layer at 14², batch 1, ran
	// 1.3× faster on two threads than on one).
	g.width = min(np, (ceilDiv(np, ceilDiv(np, g.width))+1)&^1)
	units := g.strips * ceilDiv(np, g.width)
	if t == 1 {
		g.run(0, units)
		return
	}
	Parallel(units, work, g.run)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// part computes the units [lo, hi): unit u is strip u mod strips of
// block u / strips, so that a thread's consecutive units share a block
// of weights in L2 while its strips of A stream past.
func (g *int8Call) part(lo, hi int) {
	kg := g.pw.kg
	np := g.pw.panels()
	s := int8Scratches.get()
	s.acc = growInt32(s.acc, int8MR*g.width*int8PanelWidth)
	s.y = growFloat32(s.y, g.width*int8PanelWidth)
	if g.ep.ResidualU8 != nil {
		s.r = growFloat32(s.r, g.width*int8PanelWidth)
	}
	for u := lo; u < hi; u++ {
		pc := u / g.strips * g.width
		npc := min(g.width, np-pc)
		i := u % g.strips * int8MR
		rows := min(int8MR, g.m-i)
		g.prefetchOut(i, rows, pc, npc)
		switch {
		case g.ind != nil:
			g.ind.strip(g, s, i, rows, pc, npc)
		case kg == 0:
			clear(s.acc)
		default:
			for gc := 0; gc < kg; gc += int8KGroups {
				g.strip(g, s, i, rows, pc, npc, gc, min(int8KGroups, kg-gc), gc > 0)
			}
		}
		g.finish(s, i, rows, pc, npc)
	}
	int8Scratches.put(s)
}

// prefetchOut asks for the lines of the output that finish will store
// for the strip's rows [i, i+rows), panels [p0, p0+np), so that they
// arrive while the micro-kernel runs.
func (g *int8Call) prefetchOut(i, rows, p0, np int) {
	out := &g.out
	j0 := p0 * int8PanelWidth
	w := min(np*int8PanelWidth, g.pw.n-j0)
	off := i*out.ldc + j0
	switch {
	case out.f32 != nil:
		prefetchRows(unsafe.Pointer(&out.f32[off]), 4*w, 4*out.ldc, rows)
	case out.u8 != nil:
		prefetchRows(unsafe.Pointer(&out.u8[off]), w, out.ldc, rows)
	case out.s8 != nil:
		prefetchRows(unsafe.Pointer(&out.s8[off]), w, out.ldc, rows)
	}
}

// finish runs the epilogue on the strip's rows [i, i+rows), panels
// [p0, p0+np), whose int32 sums are in s.acc.
func (g *int8Call) finish(s *int8Scratch, i, rows, p0, np int) {
	ep, out := &g.ep, &g.out
	j0 := p0 * int8PanelWidth
	w := min(np*int8PanelWidth, g.pw.n-j0)
	var bias []float32
	if ep.Bias != nil {
		bias = ep.Bias[j0 : j0+w]
	}
	corr, cs := g.corr[j0:j0+w], g.cs[j0:j0+w]
	if out.quant && ep.Residual == nil && !ep.Divide && (!ep.Activate || ep.Act.Fn == ActReLU) {
		g.finishQuantized(s, i, rows, np, j0, w, bias)
		return
	}
	for r := 0; r < rows; r++ {
		off := (i+r)*out.ldc + j0
		y := s.y[:w]
		if !out.quant {
			y = out.f32[off : off+w]
		}
		acc := s.acc[r*np*int8PanelWidth:][:w]
		ep.addRow(acc, i+r)
		int8DequantImpl(y, acc, corr, cs, bias)
		ep.post(y, off, s.r)
		switch {
		case !out.quant:
		case out.signed:
			quantS8Impl(out.s8[off:off+w], y, out.inv, ep.OutZero)
		default:
			quantU8Impl(out.u8[off:off+w], y, out.inv, ep.OutZero)
		}
	}
}

// addRow adds row i's correction, if any, to its sums acc.
func (ep *Int8Epilogue) addRow(acc []int32, i int) {
	if ep.RowAdd == nil {
		return
	}
	d := ep.RowAdd[i]
	for c := range acc {
		acc[c] += d
	}
}

// finishQuantized is finish for a quantized result that int8Finish
// covers: one pass over the strip.
func (g *int8Call) finishQuantized(s *int8Scratch, i, rows, np, j0, w int, bias []float32) {
	ep, out := &g.ep, &g.out
	ld := np * int8PanelWidth
	if ep.RowAdd != nil {
		for r := range rows {
			ep.addRow(s.acc[r*ld:][:w], i+r)
		}
	}
	if bias == nil && g.fast {
		// y + 0 is y (−0 becomes +0, which quantizes alike), and the fast
		// steps all add a bias.
		bias = s.zeros(w)
	}
	f := &s.fin
	*f = int8Finish{acc: s.acc, accLd: ld, corr: g.corr[j0 : j0+w], cs: g.cs[j0 : j0+w], bias: bias,
		rows: rows, n: w, ld: out.ldc, inv: out.inv, zo: ep.OutZero, lo: u8Min, hi: u8Max,
		sr: ep.ResidualScale, zr: ep.ResidualZero, fast: g.fast}
	if out.signed {
		f.lo, f.hi = s8Min, s8Max
	}
	if ep.Activate {
		f.lo = max(f.lo, ep.OutZero)
	}
	off, size := i*out.ldc+j0, (rows-1)*out.ldc+w
	if ep.ResidualU8 != nil {
		f.rq = ep.ResidualU8[off : off+size]
	}
	var dst []uint8
	if out.signed {
		dst = unsafe.Slice((*uint8)(unsafe.Pointer(&out.s8[off : off+size][0])), size)
	} else {
		dst = out.u8[off : off+size]
	}
	int8FinishImpl(dst, f)
	*f = int8Finish{}
}

// int8Finish is the epilogue of a quantized result in one pass, for the
// common case of no float32 residual and no activation but ReLU: ReLU
// before quantizing to [lo, hi] with zero point zo is quantizing to
// [max(lo, zo), hi] (a NaN, a negative and zero all give zo), so it needs
// no pass of its own. It covers rows rows of n results: row r's sums at
// acc[r·accLd:], its output (and residual) at r·ld.
type int8Finish struct {
	acc, corr  []int32
	cs, bias   []float32 // bias nil: none
	rq         []uint8   // nil: no residual
	rows, n    int
	accLd, ld  int
	sr         float32
	zr         int32
	inv        float32
	zo, lo, hi int32
	// fast promises that every |y·inv| is below 2³⁰ (int8FastQuant), so
	// a kernel may round before it clamps; the results are the same.
	fast bool
}

// int8FastQuant reports whether every value an epilogue quantizes,
// y·inv with y = float32(s)·cs + bias + residual for any int32 s, stays
// below 2³⁰ in magnitude: csMax and biasMax are the largest |cs[c]| and
// |bias[c]|, sr the residual's scale (0 for none). NaN or infinite
// operands report false.
func int8FastQuant(csMax, biasMax, sr, inv float32) bool {
	for _, v := range [...]float32{csMax, biasMax, sr, inv} {
		if !(v >= 0 && v <= maxFloat32) {
			return false
		}
	}
	// 2³¹ bounds |float32(s)|; 256 bounds |r_q − z_r|; the 1% covers the
	// roundings of each step.
	y := float64(csMax)*(1<<31) + float64(biasMax) + 256*float64(sr)
	return y*float64(inv)*1.01 < 1<<30
}

// check panics unless dst, the sums and the residual hold f's rows: the
// assembly reads them unchecked.
func (f *int8Finish) check(dst []uint8) {
	if f.rows <= 0 || f.n <= 0 {
		return
	}
	need := (f.rows-1)*f.ld + f.n
	if len(dst) < need || len(f.acc) < (f.rows-1)*f.accLd+f.n || len(f.corr) < f.n || len(f.cs) < f.n ||
		(f.bias != nil && len(f.bias) < f.n) || (f.rq != nil && len(f.rq) < need) || f.ld < f.n || f.accLd < f.n {
		panic("kernels: int8Finish operands too short")
	}
}

// int8FinishGo computes each row's results from its sums as the separate
// passes do: int8Dequant's two roundings, the residual's DequantizeU8
// rounding and its sum, then quantizeOne to [lo, hi], storing the low
// byte.
func int8FinishGo(dst []uint8, f *int8Finish) {
	f.check(dst)
	n := f.n
	corr, cs := f.corr[:n], f.cs[:n]
	for r := range f.rows {
		acc, out := f.acc[r*f.accLd:][:n], dst[r*f.ld:][:n]
		var rq []uint8
		if f.rq != nil {
			rq = f.rq[r*f.ld:][:n]
		}
		for c := range out {
			y := float32(acc[c]-corr[c]) * cs[c]
			if f.bias != nil {
				y = float32(y) + f.bias[c]
			}
			if rq != nil {
				y = float32(y) + float32(float32(int32(rq[c])-f.zr)*f.sr)
			}
			out[c] = uint8(quantizeOne(y, f.inv, f.zo, f.lo, f.hi))
		}
	}
}

// int8Dequant sets y[c] = float32(acc[c] − corr[c])·cs[c] + bias[c], the
// product rounded before the bias is added (the explicit conversion keeps
// the compiler from fusing them).
func int8Dequant(y []float32, acc, corr []int32, cs, bias []float32) {
	acc, corr, cs = acc[:len(y)], corr[:len(y)], cs[:len(y)]
	if bias == nil {
		for c := range y {
			y[c] = float32(acc[c]-corr[c]) * cs[c]
		}
		return
	}
	bias = bias[:len(y)]
	for c := range y {
		y[c] = float32(float32(acc[c]-corr[c])*cs[c]) + bias[c]
	}
}

// post runs the epilogue's float32 steps after the bias on one row
// segment y, element off of C; scratch holds at least len(y) floats when
// the residual is quantized. Its dequantization is DequantizeU8's
// float32(r_q − z_r)·s_r, rounded before the sum.
func (ep *Int8Epilogue) post(y []float32, off int, scratch []float32) {
	switch {
	case ep.Residual != nil:
		binarySameImpl(BinAdd, y, y, ep.Residual[off:off+len(y)])
	case ep.ResidualU8 != nil:
		r := scratch[:len(y)]
		dequantU8Impl(r, ep.ResidualU8[off:off+len(y)], ep.ResidualScale, ep.ResidualZero)
		binarySameImpl(BinAdd, y, y, r)
	}
	switch {
	case ep.Activate:
		actForwardImpl(ep.Act, y, y)
	case ep.Divide:
		d := ep.Divisor
		for c := range y {
			y[c] /= d
		}
	}
}

// u8s8StripGeneric is the reference: the sums of int8StripFunc as plain
// loops over rows, depths and the 32 channels of a panel.
func u8s8StripGeneric(g *int8Call, s *int8Scratch, i, rows, p0, np, g0, gc int, add bool) {
	pw := g.pw
	ld := np * int8PanelWidth
	q0, q1 := 4*g0, min(4*(g0+gc), pw.k)
	for r := 0; r < rows; r++ {
		arow := g.a[(i+r)*g.lda : (i+r)*g.lda+pw.k]
		for p := 0; p < np; p++ {
			acc := s.acc[r*ld+p*int8PanelWidth:][:int8PanelWidth]
			if !add {
				clear(acc)
			}
			panel := pw.data[(p0+p)*pw.kg*4*int8PanelWidth:]
			for q := q0; q < q1; q++ {
				x := int32(arow[q])
				grp := panel[q/4*4*int8PanelWidth+q%4:]
				for c := range acc {
					acc[c] += x * int32(grp[4*c])
				}
			}
		}
	}
}
