package criteo

import (
	"fmt"
	"io"
	"iter"
	"math/bits"
)

// A Permutation is a keyed bijection of [0, n): a balanced Feistel network
// over the smallest even power of two (at least 4) not below n, keyed by a
// seed, restricted to [0, n) by cycle walking (an image past n is encrypted
// again until it falls inside; since the network permutes its domain, the
// walk ends, after fewer than four steps on average). It takes no memory
// per element: At computes the image of one index.
type Permutation struct {
	n    uint64
	half uint // bits in each half
	mask uint64
	keys [feistelRounds]uint64
}

const feistelRounds = 6

// NewPermutation returns the permutation of [0, n) that seed selects.
func NewPermutation(n int, seed uint64) Permutation {
	p := Permutation{n: uint64(max(n, 0))}
	b := uint(bits.Len64(max(p.n, 2) - 1)) // bits to hold n-1
	p.half = (b + 1) / 2
	p.mask = 1<<p.half - 1
	for r := range p.keys {
		p.keys[r] = mix64(seed ^ mix64(uint64(r+1)*0x9e3779b97f4a7c15))
	}
	return p
}

// Len is n.
func (p Permutation) Len() int { return int(p.n) }

// At returns the image of i, in [0, n), for i in [0, n).
func (p Permutation) At(i int) int {
	x := uint64(i)
	if p.n <= 1 {
		return i
	}
	for {
		x = p.encrypt(x)
		if x < p.n {
			return int(x)
		}
	}
}

func (p Permutation) encrypt(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for _, k := range p.keys {
		l, r = r, (l^mix64(r^k))&p.mask
	}
	return l<<p.half | r
}

// An Order is a lazy sequence of lines of a data set: the training lines
// in dlrm's --data-randomize order with --data-sub-sample-rate applied, or
// plain test or validation lines in file order. It holds no per-line
// state: a line's place comes from a Permutation, its label (for
// sub-sampling) from its record, read when the line is reached, so that
// its memory is O(1) and that of reading it O(batch size) whatever the
// number of lines.
//
// The lines are those of days, back-to-back ranges in line order. A line
// i is kept unless it is a negative and uniform(seed, i) < rate, the rule
// of Select. The kept lines come in the order mode names:
// RandomizeTotal permutes all the lines of the days with one Permutation,
// RandomizeDay permutes each day's lines with its own and keeps the days
// in order, RandomizeNone keeps file order. The orders are fixed by the
// seed; they are not NumPy's (dlrm's) orders, nor those of Shuffle.
type Order struct {
	parts []part
	segs  []segment
	rate  float64
	seed  uint64
	mode  string
	kept  int
}

// A segment is a range of lines read in one permutation: all training
// lines for RandomizeTotal, one day otherwise.
type segment struct {
	r        Range
	perm     Permutation
	shuffled bool
	kept     int // lines of r kept
	before   int // lines kept in the earlier segments
}

// line is the number of the line at place q of the segment.
func (s *segment) line(q int) int {
	if s.shuffled {
		q = s.perm.At(q)
	}
	return s.r.Start + q
}

// Order returns the lines of days (back-to-back ranges of the set's lines,
// in order: the training days are Split().Days without the last) with
// negatives sub-sampled at rate and ordered by mode, both fixed by seed;
// see Order. Counting the kept lines reads every record's label once,
// in file order, unless rate <= 0. The test lines are
// s.Order([]Range{s.Split().Test}, 0, 0, RandomizeNone).
func (s *DaySet) Order(days []Range, rate float64, seed uint64, mode string) (*Order, error) {
	return newOrder(s.parts, days, rate, seed, mode)
}

// Order is DaySet.Order over the lines of ix, read from r, the file that
// was scanned.
func (ix *Index) Order(r io.ReaderAt, days []Range, rate float64, seed uint64, mode string) (*Order, error) {
	return newOrder([]part{{ix: ix, r: r}}, days, rate, seed, mode)
}

func newOrder(parts []part, days []Range, rate float64, seed uint64, mode string) (*Order, error) {
	o := &Order{parts: parts, rate: rate, seed: seed, mode: mode}
	total := setLen(parts)
	for d, r := range days {
		if r.Start < 0 || r.End < r.Start || r.End > total {
			return nil, fmt.Errorf("criteo: day %d, lines [%d, %d), is not within [0, %d)", d, r.Start, r.End, total)
		}
		if d > 0 && r.Start != days[d-1].End {
			return nil, fmt.Errorf("criteo: day %d starts at line %d, not where day %d ends (%d)", d, r.Start, d-1, days[d-1].End)
		}
	}
	switch mode {
	case RandomizeTotal:
		if len(days) > 0 {
			r := Range{days[0].Start, days[len(days)-1].End}
			o.segs = []segment{{r: r, perm: NewPermutation(r.Len(), mix64(seed^0x746f74616c)), shuffled: true}}
		}
	case RandomizeDay, RandomizeNone:
		for d, r := range days {
			o.segs = append(o.segs, segment{r: r, perm: NewPermutation(r.Len(), mix64(seed^mix64(uint64(d)+0x646179))),
				shuffled: mode == RandomizeDay})
		}
	default:
		return nil, fmt.Errorf("criteo: data randomize %q: want %s, %s or %s", mode, RandomizeTotal, RandomizeDay, RandomizeNone)
	}
	var rd reader
	var lines []int
	for k := range o.segs {
		sg := &o.segs[k]
		sg.before = o.kept
		if rate <= 0 {
			sg.kept = sg.r.Len()
		} else {
			// The kept lines of a segment do not depend on its order: count
			// them in file order, a sequential read of the records.
			for q := sg.r.Start; q < sg.r.End; q += len(lines) {
				lines = lines[:0]
				for i := q; i < min(q+maxRecordRun, sg.r.End); i++ {
					lines = append(lines, i)
				}
				if err := rd.records(parts, lines); err != nil {
					return nil, err
				}
				for j, i := range lines {
					if o.keep(i, rd.recs[j].label) {
						sg.kept++
					}
				}
			}
		}
		o.kept += sg.kept
	}
	return o, nil
}

// keep says whether line i with the given label is kept: dlrm's
// --data-sub-sample-rate drops a negative whose draw is below rate.
func (o *Order) keep(i, label int) bool {
	return o.rate <= 0 || label == 1 || uniform(o.seed, uint64(i)) >= o.rate
}

// Len is the number of kept lines.
func (o *Order) Len() int { return o.kept }

// Mode is the order's --data-randomize mode.
func (o *Order) Mode() string { return o.mode }

// walk calls fn with the kept lines from the from-th on, in order, in
// chunks of at most chunk lines with their records, until fn returns
// false. The slices are reused by the next call. Without sub-sampling it
// starts at the from-th line at once; with it, the lines of from's
// segment before it are walked (their labels read) and counted.
func (o *Order) walk(from, chunk int, fn func(lines []int, recs []record) bool) error {
	if from >= o.kept {
		return nil
	}
	s := 0
	for o.segs[s].before+o.segs[s].kept <= from {
		s++
	}
	skip, q := from-o.segs[s].before, 0
	if o.rate <= 0 {
		q, skip = skip, 0
	}
	var rd reader
	lines := make([]int, 0, chunk)
	for ; s < len(o.segs); s, q = s+1, 0 {
		sg := &o.segs[s]
		for q < sg.r.Len() {
			lines = lines[:0]
			for end := min(q+chunk, sg.r.Len()); q < end; q++ {
				lines = append(lines, sg.line(q))
			}
			if err := rd.records(o.parts, lines); err != nil {
				return err
			}
			m := 0
			for j, i := range lines {
				if !o.keep(i, rd.recs[j].label) {
					continue
				}
				if skip > 0 {
					skip--
					continue
				}
				lines[m], rd.recs[m] = i, rd.recs[j]
				m++
			}
			if m > 0 && !fn(lines[:m], rd.recs[:m]) {
				return nil
			}
		}
	}
	return nil
}

// Lines yields the kept lines in order from the from-th on (0 for all).
func (o *Order) Lines(from int) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		if from < 0 {
			yield(0, fmt.Errorf("criteo: first line %d, want >= 0", from))
			return
		}
		stopped := false
		err := o.walk(from, 4096, func(lines []int, _ []record) bool {
			for _, i := range lines {
				if !yield(i, nil) {
					stopped = true
					return false
				}
			}
			return true
		})
		if err != nil && !stopped {
			yield(0, err)
		}
	}
}

// Batches reads the kept lines from the from-th on (a resumed epoch's
// first undone batch times batchSize) in batches of batchSize, the last
// maybe smaller: the batches are those of an iteration from 0 without its
// first from lines. Memory is O(batchSize): the lines' records and bytes
// are read per batch, nearby ones with one ReadAt (see Batches), and each
// yielded Batch is new.
func (o *Order) Batches(batchSize, from int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		if batchSize <= 0 {
			yield(nil, fmt.Errorf("criteo: batch size %d, want > 0", batchSize))
			return
		}
		if from < 0 {
			yield(nil, fmt.Errorf("criteo: first line %d, want >= 0", from))
			return
		}
		var (
			lines   = make([]int, 0, 2*batchSize)
			recs    = make([]record, 0, 2*batchSize)
			buf     []byte
			stopped bool
		)
		emit := func(n int) bool {
			b, err := readBatch(o.parts, lines[:n], recs[:n], &buf)
			if !yield(b, err) || err != nil {
				stopped = true
				return false
			}
			m := copy(lines, lines[n:])
			copy(recs, recs[n:])
			lines, recs = lines[:m], recs[:m]
			return true
		}
		err := o.walk(from, batchSize, func(ls []int, rs []record) bool {
			lines, recs = append(lines, ls...), append(recs, rs...)
			for len(lines) >= batchSize {
				if !emit(batchSize) {
					return false
				}
			}
			return true
		})
		if stopped {
			return
		}
		if err != nil {
			yield(nil, err)
			return
		}
		if len(lines) > 0 {
			emit(len(lines))
		}
	}
}
