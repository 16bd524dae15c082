package criteo

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A Trace is one table's access distribution for dlrm's
// --data-generation=synthetic, as dlrm_data_pytorch.py's
// read_dist_from_file reads it from a dist_emb_j.log file: three lines of
// comma-separated numbers,
//
//	unique accesses: the table's rows in order of first access
//	stack distances: the distinct LRU stack distances seen, increasing,
//	                 0 standing for a first access
//	cumulative distribution: P(distance ≤ each of them), increasing to 1
//
// An access's stack distance is its row's depth in the stack of rows seen
// so far, most recent on top at depth 1.
type Trace struct {
	Unique    []int64
	Distances []int
	CDF       []float64
}

// cdfSlack is how far below 1 the last cumulative probability may end:
// dlrm writes sums of float64 frequencies, which can fall short by a few
// ulps.
const cdfSlack = 1e-6

// ReadTraceFile reads the trace file at path; errors name it.
func ReadTraceFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr, err := ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tr, nil
}

// ReadTrace reads a trace in dlrm's dist_emb_j.log format. Numbers are
// separated by commas and optional spaces; blank lines after the third
// are ignored. A malformed file gives an error naming the line and the
// number (1-based) at fault: a number that does not parse, stack
// distances that are negative, not increasing, or deeper than there are
// unique accesses, a distribution with another count than the distances,
// outside [0, 1], decreasing, or not ending at 1.
func ReadTrace(r io.Reader) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<30)
	var lines []string
	for sc.Scan() {
		if len(lines) == 3 {
			if strings.TrimSpace(sc.Text()) != "" {
				return nil, fmt.Errorf("line %d: a trace has three lines, found more", len(lines)+1)
			}
			continue
		}
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(lines) < 3 {
		return nil, fmt.Errorf("%d lines; a trace has three: unique accesses, stack distances, cumulative distribution", len(lines))
	}
	bad := func(line, field int, format string, args ...any) error {
		return fmt.Errorf("line %d, number %d: "+format, append([]any{line, field}, args...)...)
	}
	fields := func(line int) ([]string, error) {
		fs := strings.Split(lines[line-1], ",")
		for i := range fs {
			fs[i] = strings.TrimSpace(fs[i])
			if fs[i] == "" {
				return nil, bad(line, i+1, "empty")
			}
		}
		return fs, nil
	}
	tr := &Trace{}
	fs, err := fields(1)
	if err != nil {
		return nil, err
	}
	for i, f := range fs {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, bad(1, i+1, "unique access %q is not an integer", f)
		}
		tr.Unique = append(tr.Unique, v)
	}
	if fs, err = fields(2); err != nil {
		return nil, err
	}
	for i, f := range fs {
		v, err := strconv.Atoi(f)
		switch {
		case err != nil:
			return nil, bad(2, i+1, "stack distance %q is not an integer", f)
		case v < 0:
			return nil, bad(2, i+1, "stack distance %d is negative", v)
		case i > 0 && v <= tr.Distances[i-1]:
			return nil, bad(2, i+1, "stack distance %d does not follow %d in increasing order", v, tr.Distances[i-1])
		case v > len(tr.Unique):
			return nil, bad(2, i+1, "stack distance %d is deeper than the %d unique accesses", v, len(tr.Unique))
		}
		tr.Distances = append(tr.Distances, v)
	}
	if fs, err = fields(3); err != nil {
		return nil, err
	}
	if len(fs) != len(tr.Distances) {
		return nil, fmt.Errorf("line 3: %d cumulative probabilities for %d stack distances", len(fs), len(tr.Distances))
	}
	for i, f := range fs {
		v, err := strconv.ParseFloat(f, 64)
		switch {
		case err != nil:
			return nil, bad(3, i+1, "cumulative probability %q is not a number", f)
		case !(v >= 0 && v <= 1+cdfSlack):
			return nil, bad(3, i+1, "cumulative probability %v is outside [0, 1]", v)
		case i > 0 && v < tr.CDF[i-1]:
			return nil, bad(3, i+1, "cumulative probability %v is below the one before, %v", v, tr.CDF[i-1])
		case i == len(fs)-1 && v < 1-cdfSlack:
			return nil, bad(3, i+1, "the distribution ends at %v, not 1", v)
		}
		tr.CDF = append(tr.CDF, v)
	}
	return tr, nil
}

// TraceFile returns the trace file of table t for --data-trace-file path,
// as dlrm's generate_synthetic_input_batch names it: every "j" replaced by
// t, so dist_emb_j.log names dist_emb_0.log, dist_emb_1.log, …. dlrm
// replaces the letter in the whole path; here only in the file's name, so
// that a directory with a j in its name still works.
func TraceFile(path string, t int) string {
	dir, name := filepath.Split(path)
	return dir + strings.ReplaceAll(name, "j", strconv.Itoa(t))
}

// ReadTraceFiles reads the trace file of each of tables tables.
func ReadTraceFiles(path string, tables int) ([]*Trace, error) {
	out := make([]*Trace, tables)
	for t := range out {
		tr, err := ReadTraceFile(TraceFile(path, t))
		if err != nil {
			return nil, err
		}
		out[t] = tr
	}
	return out, nil
}

// distance draws a stack distance as dlrm's generate_stack_distance does,
// with seen first accesses so far: until seen reaches the largest
// distance, only distances up to seen are drawn (u is scaled into the
// mass of the distances ≤ seen); after that, with padding, a first access
// (the first distance) is never drawn again. A u past the last cumulative
// probability (one short of 1 by rounding) takes the last distance.
func (tr *Trace) distance(rng *rand.Rand, seen int, padding bool) int {
	u := rng.Float64()
	n := len(tr.Distances)
	if seen < tr.Distances[n-1] {
		// The last distance ≤ seen; dlrm's bisect gives −1, Python's last
		// element, when there is none.
		j := sort.SearchInts(tr.Distances, seen+1) - 1
		if j < 0 {
			j = n - 1
		}
		u *= tr.CDF[j]
	} else if padding {
		u = (1-tr.CDF[0])*u + tr.CDF[0]
	}
	j := sort.SearchFloat64s(tr.CDF, u) // the first with u ≤ CDF[j]
	return tr.Distances[min(j, n-1)]
}

// lru is the stack of trace_generate_lru for one short trace: the unique
// accesses in order, least recent first, each access moving its row to the
// top. It records only what has moved: rows not yet accessed stay in place
// in Unique, so a trace of n accesses costs O(n²), not O(len(Unique)).
type lru struct {
	tr      *Trace
	taken   []int   // positions in Unique of the rows that have moved, sorted
	top     []int64 // the moved rows, least recent first
	touched int     // first accesses made
}

// access returns the row at stack distance sd (0: the least recent, which
// is the next unaccessed row while there is one) and moves it to the top.
func (s *lru) access(sd int) int64 {
	l := len(s.tr.Unique)
	q := l - sd // position from the bottom
	if sd == 0 {
		q = 0
		s.touched++
	}
	rest := l - len(s.top) // rows still in place, at the bottom
	var v int64
	if q >= rest {
		k := q - rest
		v = s.top[k]
		s.top = append(s.top[:k], s.top[k+1:]...)
	} else {
		// The q-th row in place: skip the positions that have moved.
		p := q
		for _, m := range s.taken {
			if m > p {
				break
			}
			p++
		}
		v = s.tr.Unique[p]
		k := sort.SearchInts(s.taken, p)
		s.taken = append(s.taken, 0)
		copy(s.taken[k+1:], s.taken[k:])
		s.taken[k] = p
	}
	s.top = append(s.top, v)
	return v
}

// Generate appends n accesses drawn as dlrm's trace_generate_lru draws
// them, starting from the trace's unique accesses with none yet made: each
// access draws a stack distance (see the distance rules above), takes the
// row at that depth, or the least recently used row for a first access,
// and moves it to the top. padding is --data-trace-enable-padding.
func (tr *Trace) Generate(rng *rand.Rand, n int, padding bool, dst []int64) []int64 {
	s := lru{tr: tr}
	for range n {
		dst = append(dst, s.access(tr.distance(rng, s.touched, padding)))
	}
	return dst
}

// StackDistances returns each access's LRU stack distance in accesses
// (0 for a row's first access), the profile dlrm's trace_profile makes of
// a trace. It takes O(n·distinct rows) time.
func StackDistances(accesses []int64) []int {
	var stack []int64 // most recent last
	out := make([]int, len(accesses))
	for i, v := range accesses {
		k := len(stack) - 1
		for k >= 0 && stack[k] != v {
			k--
		}
		if k < 0 {
			stack = append(stack, v)
			continue
		}
		out[i] = len(stack) - k
		copy(stack[k:], stack[k+1:])
		stack[len(stack)-1] = v
	}
	return out
}

// bagFromTrace draws a bag of size accesses from tr and appends it to dst
// as the synthetic generator does: sorted, duplicates merged, and, when
// the trace's rows do not fit a table of rows rows, taken modulo rows.
// (dlrm merges before the modulo, so its bags can repeat an index after
// it; here the modulo comes first and bags stay distinct.)
func bagFromTrace(tr *Trace, rng *rand.Rand, size, rows int, padding bool, dst []int64) []int64 {
	start := len(dst)
	dst = tr.Generate(rng, size, padding, dst)
	for i := start; i < len(dst); i++ {
		if dst[i] < 0 || dst[i] >= int64(rows) {
			dst[i] = (dst[i]%int64(rows) + int64(rows)) % int64(rows)
		}
	}
	return dst
}

// Fits reports whether every unique access is a row of a table of rows
// rows; the synthetic generator takes the others modulo rows.
func (tr *Trace) Fits(rows int) bool {
	for _, v := range tr.Unique {
		if v < 0 || v >= int64(rows) {
			return false
		}
	}
	return true
}
