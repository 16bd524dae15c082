package criteo

import (
	"fmt"
	"math/rand/v2"
)

// KaggleDays is the number of "days" dlrm cuts the Kaggle set into.
const KaggleDays = 7

// A Range is the half-open interval [Start, End) of good line numbers.
type Range struct{ Start, End int }

// Len is End - Start.
func (r Range) Len() int { return r.End - r.Start }

// TerabyteDays is the number of day files of the Criteo Terabyte set,
// day_0 to day_23.
const TerabyteDays = 24

// A Split is dlrm's split of a data set into days: all days but the last
// are training, and the last is halved into Test (the first ⌈half⌉) and
// Val (the rest), as np.array_split of it in two does.
type Split struct {
	Days             []Range
	Train, Test, Val Range
}

// DaySplit lays days of the given line counts back to back and splits
// them as dlrm does: Train is every day but the last, Test and Val are
// the last day's halves. The Terabyte set's days are its 24 files.
func DaySplit(sizes []int) Split {
	s := Split{Days: make([]Range, len(sizes))}
	start := 0
	for d, n := range sizes {
		s.Days[d] = Range{start, start + n}
		start += n
	}
	if len(sizes) == 0 {
		return s
	}
	last := s.Days[len(sizes)-1]
	s.Train = Range{0, last.Start}
	mid := last.Start + (last.Len()+1)/2
	s.Test = Range{last.Start, mid}
	s.Val = Range{mid, last.End}
	return s
}

// KaggleSplit splits n lines as dlrm does for the Kaggle set, which has no
// day files: num_data_per_split, extras = divmod(n, 7), and the first
// extras days get one more line; then DaySplit. With n < 7 the last days
// are empty.
func KaggleSplit(n int) Split {
	per, extras := n/KaggleDays, n%KaggleDays
	sizes := make([]int, KaggleDays)
	for d := range sizes {
		sizes[d] = per
		if d < extras {
			sizes[d]++
		}
	}
	return DaySplit(sizes)
}

// Select returns the lines of r that remain after dropping the fraction
// rate of its negative (label 0) lines, in file order: dlrm's
// --data-sub-sample-rate, which keeps a negative only when a uniform draw u
// in [0, 1) has u >= rate. dlrm draws u from NumPy's global RNG; here u
// for line i is a SplitMix64 hash of (seed, i), so the choice of each line
// is fixed by the seed alone, whatever order or batch size reads it. The
// stream differs from NumPy's: the same rate is dropped in expectation,
// not the same lines. rate <= 0 keeps every line. The slice costs 8 bytes
// a line: Order keeps the same lines without one. The error is a failed
// read of a file-backed Index's sidecar.
func (ix *Index) Select(r Range, rate float64, seed uint64) ([]int, error) {
	return selectLines([]part{{ix: ix}}, r, rate, seed)
}

// selectLines is Select over the lines of parts.
func selectLines(parts []part, r Range, rate float64, seed uint64) ([]int, error) {
	lines := make([]int, 0, r.Len())
	if rate <= 0 {
		for i := r.Start; i < r.End; i++ {
			lines = append(lines, i)
		}
		return lines, nil
	}
	o, err := newOrder(parts, []Range{r}, rate, seed, RandomizeNone)
	if err == nil {
		for i, e := range o.Lines(0) {
			if e != nil {
				err = e
				break
			}
			lines = append(lines, i)
		}
	}
	if err != nil {
		return nil, err
	}
	return lines, nil
}

// uniform maps (seed, i) to a float64 in [0, 1) with SplitMix64's mixer.
func uniform(seed, i uint64) float64 {
	z := seed + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// Randomize names dlrm's --data-randomize orders of the training lines.
const (
	RandomizeTotal = "total" // one permutation of all training lines
	RandomizeDay   = "day"   // each day's lines permuted, the days in order
	RandomizeNone  = "none"  // file order
)

// Shuffle orders the training lines (from Select, in file order) as dlrm's
// --data-randomize does, in place (Order does it without the slice, in
// another order): "total" permutes them all, "day"
// permutes the lines of each of days separately and keeps the days in
// order, "none" leaves them. The permutation is fixed by seed; dlrm's
// comes from NumPy's global RNG, so the orders differ but are alike in
// law. An unknown mode is an error.
func Shuffle(lines []int, days []Range, mode string, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 0x7e57))
	shuffle := func(s []int) { r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] }) }
	switch mode {
	case RandomizeNone:
	case RandomizeTotal:
		shuffle(lines)
	case RandomizeDay:
		start := 0
		for _, d := range days {
			end := start
			for end < len(lines) && lines[end] < d.End {
				end++
			}
			shuffle(lines[start:end])
			start = end
		}
		shuffle(lines[start:]) // lines past the last day, if any
	default:
		return fmt.Errorf("criteo: data randomize %q: want %s, %s or %s", mode, RandomizeTotal, RandomizeDay, RandomizeNone)
	}
	return nil
}
