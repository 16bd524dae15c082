package quant

import (
	"fmt"
	"math"
)

// Observer collects the range of the values one tensor takes during
// calibration. Implementations are not safe for concurrent use: an observer
// belongs to one recorded op's one input or output.
type Observer interface {
	// Observe folds a batch into the range. A NaN or infinity is an error
	// and leaves the observer as it was: a range containing one would give
	// no usable scale.
	Observe(x []float32) error
	// Range returns the range to quantize; ok is false before any value has
	// been observed.
	Range() (min, max float32, ok bool)
}

// The algorithm names of IPEX 1.10's confs.
const (
	algoMinMax        = "min_max"
	algoMovingAverage = "moving_averager_min_max"
	algoHistogram     = "histogram"
)

// NewObserver returns a fresh observer for one of IPEX 1.10's algorithms.
func NewObserver(algorithm string) (Observer, error) {
	switch algorithm {
	case algoMinMax:
		return &minMaxObserver{}, nil
	case algoMovingAverage:
		return &minMaxObserver{moving: true}, nil
	case algoHistogram:
		return newHistogramObserver(), nil
	}
	return nil, fmt.Errorf("quant: unknown observer algorithm %q (want %q, %q or %q)",
		algorithm, algoMinMax, algoMovingAverage, algoHistogram)
}

// aminmax returns the extremes of a batch, or an error naming its first
// value that is not finite. Calibration runs it over every activation of
// every batch, so the loop tests nothing per element: v − v is 0 for a
// finite v and NaN for NaN and ±Inf, and one sum of them tells whether a
// second pass must find the culprit.
func aminmax(x []float32) (lo, hi float32, err error) {
	lo, hi = float32(math.Inf(1)), float32(math.Inf(-1))
	var bad float32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
		bad += v - v
	}
	if bad != 0 || bad != bad {
		for i, v := range x {
			if v-v != 0 || v != v {
				return 0, 0, fmt.Errorf("quant: observed value %d is %v", i, v)
			}
		}
	}
	return lo, hi, nil
}

// minMaxObserver is torch.ao's MinMaxObserver, the running extremes, or with
// moving set its MovingAverageMinMaxObserver. The average's update is
// x + c·(x_batch − x), not the algebraically equal (1−c)·x + c·x_batch, in
// float32 as PyTorch computes it, so that confs agree with IPEX's to the bit.
type minMaxObserver struct {
	lo, hi float32
	seen   bool
	moving bool
}

// movingAverageConstant is torch.ao's default averaging_constant, which
// IPEX 1.10 uses unchanged.
const movingAverageConstant = float32(0.01)

func (o *minMaxObserver) Observe(x []float32) error {
	if len(x) == 0 {
		return nil
	}
	lo, hi, err := aminmax(x)
	if err != nil {
		return err
	}
	switch {
	case !o.seen:
		o.lo, o.hi, o.seen = lo, hi, true
	case o.moving:
		// Each product is rounded on its own (no fused multiply-add), as
		// PyTorch's separate tensor ops round it.
		o.lo += float32(movingAverageConstant * (lo - o.lo))
		o.hi += float32(movingAverageConstant * (hi - o.hi))
	default:
		o.lo, o.hi = min(o.lo, lo), max(o.hi, hi)
	}
	return nil
}

func (o *minMaxObserver) Range() (float32, float32, bool) { return o.lo, o.hi, o.seen }

// The histogram observer's shape, torch.ao's HistogramObserver defaults
// (which IPEX 1.10 uses): 2048 source bins, re-gridded at 128 times that
// resolution when a batch widens the range, searched for the best 256-level
// (quint8) range.
const (
	histBins     = 2048
	histUpsample = 128
	histDstBins  = 256
)

// histogramObserver ports PyTorch 1.13's HistogramObserver (forward,
// _adjust_min_max, _combine_histograms, _non_linear_param_search and
// _compute_quantization_error), including its float32 tensor arithmetic,
// the float64 steps where it uses Python floats or double cumulative sums,
// and its quirks, so that a conf calibrated here matches one calibrated by
// PyTorch: torch.histc is given int(min) and int(max), truncated toward
// zero, as bin edges, so values outside the truncated range are not
// counted, and a range inside (−1, 1) falls back to the batch's own extremes.
type histogramObserver struct {
	hist   []float32
	lo, hi float32
	seen   bool
}

func newHistogramObserver() *histogramObserver {
	return &histogramObserver{hist: make([]float32, histBins)}
}

func (o *histogramObserver) Observe(x []float32) error {
	if len(x) == 0 {
		return nil
	}
	lo, hi, err := aminmax(x)
	if err != nil {
		return err
	}
	if !o.seen || o.lo == o.hi {
		// A range of one value cannot be re-gridded; PyTorch starts afresh.
		o.lo, o.hi, o.seen = lo, hi, true
		histc(o.hist, x, lo, hi)
		return nil
	}
	clo, chi := min(lo, o.lo), max(hi, o.hi)
	hbw := (o.hi - o.lo) / float32(histBins*histUpsample)
	down64 := math.Ceil(float64((chi - clo) / float32(histBins*hbw)))
	if hbw == 0 || !(down64 < 1<<31) {
		// The old range is too narrow to be re-gridded onto the new one
		// (PyTorch fails here, dividing by zero or allocating without
		// bound): its mass is a point at its minimum.
		o.collapse(x, clo, chi)
		return nil
	}
	down := int(down64)
	e := float32(float32(down)*float32(histBins*hbw)) - (chi - clo)
	chi += e
	start := int(math.RoundToEven(float64((o.lo - clo) / hbw)))
	combined := make([]float32, histBins)
	histc(combined, x, clo, chi)
	if clo == o.lo && chi == o.hi {
		for i, v := range o.hist {
			combined[i] += v
		}
	} else {
		combineHistograms(combined, o.hist, down, start)
	}
	o.hist, o.lo, o.hi = combined, clo, chi
	return nil
}

// collapse rebuilds the histogram over [lo, hi] from x and puts the old
// histogram's whole mass into the bin where its minimum falls.
func (o *histogramObserver) collapse(x []float32, lo, hi float32) {
	var total float32
	for _, v := range o.hist {
		total += v
	}
	combined := make([]float32, histBins)
	histc(combined, x, lo, hi)
	bin := int(float64(o.lo-lo) / float64(hi-lo) * histBins)
	combined[min(max(bin, 0), histBins-1)] += total
	o.hist, o.lo, o.hi = combined, lo, hi
}

// histc overwrites hist with torch.histc(x, len(hist), min=int(lo),
// max=int(hi)) of PyTorch 1.13 on the CPU: linear bin selection in float32
// without the local search torch.histogram does, values outside the edges
// dropped, and the last bin closed on the right.
func histc(hist, x []float32, lo, hi float32) {
	clear(hist)
	left, right := math.Trunc(float64(lo)), math.Trunc(float64(hi))
	if left == right {
		// histc's own fallback: the batch's extremes, whatever range the
		// caller meant.
		xlo, xhi, _ := aminmax(x)
		left, right = float64(xlo), float64(xhi)
	}
	if left == right {
		left, right = left-1, right+1
	}
	l, r := float32(left), float32(right)
	n := len(hist)
	width := r - l
	for _, v := range x {
		if !(v >= l && v <= r) {
			continue
		}
		pos := 0
		if width > 0 {
			pos = int(float32(float32(v-l)*float32(n)) / width)
		}
		if pos >= n {
			pos = n - 1
		}
		hist[pos]++
	}
}

// combineHistograms adds old, which covers the fine grid of histBins×
// histUpsample cells from cell start on, to hist, whose bins are down fine
// cells each: PyTorch's _combine_histograms. It builds the upsampled old
// histogram's running sums in float64, as torch.cumsum(dtype=double) does,
// without materialising the len(hist)·down-cell array PyTorch allocates.
func combineHistograms(hist, old []float32, down, start int) {
	fine := len(old) * histUpsample
	prefix := make([]float64, fine+1)
	var acc float64
	for k := range fine {
		acc += float64(old[k/histUpsample])
		prefix[k+1] = acc
	}
	integral := func(i int) float64 { // cumulative sum through fine cell (i+1)·down − 1
		return prefix[min(max((i+1)*down-start, 0), fine)]
	}
	var shifted float32 // PyTorch keeps the shifted sums in a float32 tensor
	for i := range hist {
		in := integral(i)
		hist[i] += float32((in - float64(shifted)) / histUpsample)
		shifted = float32(in)
	}
}

// Range returns the range _non_linear_param_search chooses: the one that
// minimises the L2 error of quantizing the histogram to 256 levels,
// trimming outliers from either end.
func (o *histogramObserver) Range() (float32, float32, bool) {
	if !o.seen {
		return 0, 0, false
	}
	binWidth := (o.hi - o.lo) / histBins
	total := float64(cascadeSum(o.hist))
	csum := make([]float32, histBins)
	var acc float64 // torch.cumsum accumulates float32 in double on the CPU
	for i, v := range o.hist {
		acc += float64(v)
		csum[i] = float32(acc)
	}
	const stepsize = 1e-5
	alpha, beta := 0.0, 1.0
	startBin, endBin := 0, histBins-1
	normMin := math.Inf(1)
	for alpha < beta {
		nextAlpha, nextBeta := alpha+stepsize, beta-stepsize
		// PyTorch compares a float32 element with a Python float in float32.
		l, r := startBin, endBin
		for l < endBin && csum[l] < float32(nextAlpha*total) {
			l++
		}
		for r > startBin && csum[r] > float32(nextBeta*total) {
			r--
		}
		nextStart, nextEnd := startBin, endBin
		if l-startBin > endBin-r {
			nextStart, alpha = l, nextAlpha
		} else {
			nextEnd, beta = r, nextBeta
		}
		if nextStart == startBin && nextEnd == endBin {
			continue
		}
		norm := o.quantizationError(nextStart, nextEnd)
		if norm > normMin {
			break
		}
		normMin, startBin, endBin = norm, nextStart, nextEnd
	}
	return o.lo + float32(binWidth*float32(startBin)), o.lo + float32(binWidth*float32(endBin+1)), true
}

// quantizationError is _compute_quantization_error: the L2 error of
// quantizing the histogram, each bin's values spread uniformly, with bins
// startBin..endBin mapped onto the 256 levels.
func (o *histogramObserver) quantizationError(startBin, endBin int) float64 {
	bw := (float64(o.hi) - float64(o.lo)) / histBins
	dbw := bw * float64(endBin-startBin+1) / histDstBins
	if dbw == 0 {
		return 0
	}
	bw32, dbw32, half := float32(bw), float32(dbw), float32(dbw/2)
	// The middle term's norm is a 0-d tensor in PyTorch, shared by all bins.
	inner := cubeDiff(-half, half)
	norm := make([]float32, histBins)
	for src, count := range o.hist {
		begin := float32(float32(src-startBin) * bw32)
		end := begin + bw32
		dBegin := min(max(floorDiv(begin, dbw32), 0), histDstBins-1)
		dEnd := min(max(floorDiv(end, dbw32), 0), histDstBins-1)
		beginCenter := float32((dBegin + 0.5) * dbw32)
		endCenter := float32(dEnd*dbw32) + half
		density := count / bw32
		n := density * cubeDiff(begin-beginCenter, half)
		n += float32((dEnd - dBegin - 1) * float32(density*inner))
		n += density * cubeDiff(-half, end-endCenter)
		norm[src] = n
	}
	return float64(cascadeSum(norm))
}

// cubeDiff is (e³ − b³)/3, the integral of x² over [b, e], in PyTorch's
// order of float32 operations.
func cubeDiff(b, e float32) float32 {
	return (float32(float32(e*e)*e) - float32(float32(b*b)*b)) / 3
}

// floorDiv is PyTorch's float32 div(a, b, rounding_mode="floor"): floor of
// (a − fmod(a, b))/b, which can differ from floor(a/b) by one where a/b
// rounds up across an integer.
func floorDiv(a, b float32) float32 {
	if b == 0 {
		return a / b
	}
	mod := float32(math.Mod(float64(a), float64(b)))
	div := (a - mod) / b
	if mod != 0 && (b < 0) != (mod < 0) {
		div--
	}
	if div == 0 {
		return float32(math.Copysign(0, float64(a/b)))
	}
	f := float32(math.Floor(float64(div)))
	if div-f > 0.5 {
		f++
	}
	return f
}

// cascadeSum is ATen 1.13's float32 torch.sum of a contiguous vector on an
// AVX2 CPU: 8-lane vector accumulators, four interleaved rows of them,
// summed in a cascade of levels of 16 steps, then the rows, the scalar tail
// and the lanes in order. The histogram search compares sums, so its choice
// of range depends on their last bits.
func cascadeSum(x []float32) float32 {
	const lanes = 8
	if len(x) < lanes {
		return rowSum(x, 1)[0]
	}
	nvec := len(x) / lanes
	vec := rowSum(x[:nvec*lanes], lanes)
	var total float32
	for _, v := range x[nvec*lanes:] {
		total += v
	}
	for _, v := range vec {
		total += v
	}
	return total
}

// rowSum is ATen's row_sum over len(x)/lanes vectors of lanes values: four
// interleaved accumulators (multi_row_sum), the leftover vectors added to the
// first, then the other three added to it.
func rowSum(x []float32, lanes int) []float32 {
	const ilp, levels = 4, 4
	size := len(x) / lanes
	rows := size / ilp
	power := max(4, ceilLog2(rows)/levels)
	step := 1 << power
	mask := step - 1
	var acc [levels][ilp][]float32
	for j := range acc {
		for k := range acc[j] {
			acc[j][k] = make([]float32, lanes)
		}
	}
	load := func(dst []float32, vec int) {
		for l := range dst {
			dst[l] += x[vec*lanes+l]
		}
	}
	i := 0
	for i+step <= rows {
		for range step {
			for k := range ilp {
				load(acc[0][k], i*ilp+k)
			}
			i++
		}
		for j := 1; j < levels; j++ {
			for k := range ilp {
				for l := range lanes {
					acc[j][k][l] += acc[j-1][k][l]
					acc[j-1][k][l] = 0
				}
			}
			if i&(mask<<(j*power)) != 0 {
				break
			}
		}
	}
	for ; i < rows; i++ {
		for k := range ilp {
			load(acc[0][k], i*ilp+k)
		}
	}
	for j := 1; j < levels; j++ {
		for k := range ilp {
			for l := range lanes {
				acc[0][k][l] += acc[j][k][l]
			}
		}
	}
	sum := acc[0][0]
	for v := rows * ilp; v < size; v++ {
		load(sum, v)
	}
	for k := 1; k < ilp; k++ {
		for l := range lanes {
			sum[l] += acc[0][k][l]
		}
	}
	return sum
}

// ceilLog2 is ATen's utils::CeilLog2: 0 for 0 and 1.
func ceilLog2(n int) int {
	if n <= 1 {
		return 0
	}
	p := 0
	for 1<<p < n {
		p++
	}
	return p
}
