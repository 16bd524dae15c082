package criteo

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"sort"
)

// A Batch holds B samples in the layout DLRM's forward pass takes.
type Batch struct {
	// Dense is [B, 13] row-major: log(x+1) of the integer features.
	Dense []float32
	// Indices[t] holds the dense id of table t's value for each sample;
	// with one index per table per sample, Offsets is 0, 1, ..., B and
	// serves every table.
	Indices [NumSparse][]int64
	Offsets []int64
	// Labels holds B labels, 0 or 1.
	Labels []float32
	// Lines holds the good line number of each sample.
	Lines []int
}

// Size is the number of samples, B.
func (b *Batch) Size() int { return len(b.Labels) }

// maxGap is the largest stretch of unwanted bytes (skipped bad lines,
// sub-sampled negatives) read through to keep neighbouring lines in one
// ReadAt call.
const maxGap = 64 << 10

// Batches reads the given lines (good line numbers from Select, in any
// order) from r, the file that was scanned, in batches of batchSize; the
// last batch may be smaller. Each batch's bytes are fetched with one ReadAt
// per run of nearby lines, so memory is O(batchSize), and each yielded
// Batch is new: the caller may keep it. A line that no longer parses or
// holds a value the scan did not see (the file changed) ends the
// iteration with an error wrapping ErrBadLine.
func (ix *Index) Batches(r io.ReaderAt, lines []int, batchSize int) iter.Seq2[*Batch, error] {
	return batches([]part{{ix: ix, r: r}}, lines, batchSize)
}

// A part is one scanned file of a data set: its index, the file, and the
// number of its first line among the set's lines.
type part struct {
	ix    *Index
	r     io.ReaderAt
	start int
}

// locate returns the part holding line i of the set and i's number in it.
// parts are in line order and i is in range.
func locate(parts []part, i int) (*part, int) {
	p := sort.Search(len(parts), func(k int) bool { return parts[k].start > i }) - 1
	return &parts[p], i - parts[p].start
}

// batches is Batches over a set of parts whose lines are numbered back to
// back.
func batches(parts []part, lines []int, batchSize int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		if batchSize <= 0 {
			yield(nil, fmt.Errorf("criteo: batch size %d, want > 0", batchSize))
			return
		}
		total := setLen(parts)
		for _, i := range lines {
			if i < 0 || i >= total {
				yield(nil, fmt.Errorf("criteo: line %d out of range [0, %d)", i, total))
				return
			}
		}
		var rd reader
		for start := 0; start < len(lines); start += batchSize {
			b, err := rd.batch(parts, lines[start:min(start+batchSize, len(lines))])
			if !yield(b, err) || err != nil {
				return
			}
		}
	}
}

// setLen is the number of lines of the parts.
func setLen(parts []part) int {
	last := parts[len(parts)-1]
	return last.start + last.ix.Len()
}

// A reader holds the buffers that reading batches reuses: O(batch size).
type reader struct {
	recs  []record
	order []int
	rbuf  []byte
	buf   []byte
}

// maxRecordGap is the largest run of unwanted records (12 bytes each) read
// through to fetch neighbouring records with one ReadAt; maxRecordRun
// bounds one read.
const (
	maxRecordGap = 256
	maxRecordRun = 1 << 14
)

// records fetches the records of lines (set line numbers in range, in any
// order) into rd.recs. Records are read in line order, so that those of
// nearby lines, whatever their place in lines, come with one ReadAt from
// the sidecar.
func (rd *reader) records(parts []part, lines []int) error {
	n := len(lines)
	rd.recs = slices.Grow(rd.recs[:0], n)[:n]
	if len(parts) == 1 && parts[0].ix.mem != nil {
		ix := parts[0].ix
		for j, i := range lines {
			rd.recs[j] = getRecord(ix.mem[i*recordSize:])
		}
		return nil
	}
	rd.order = slices.Grow(rd.order[:0], n)[:n]
	for j := range rd.order {
		rd.order[j] = j
	}
	if !slices.IsSorted(lines) {
		slices.SortFunc(rd.order, func(a, b int) int { return lines[a] - lines[b] })
	}
	for k := 0; k < n; {
		p, first := locate(parts, lines[rd.order[k]])
		last := first
		e := k + 1
		for ; e < n; e++ {
			i := lines[rd.order[e]] - p.start
			if i >= p.ix.n || i-last > maxRecordGap || i-first >= maxRecordRun {
				break
			}
			last = i
		}
		size := (last - first + 1) * recordSize
		if cap(rd.rbuf) < size {
			rd.rbuf = make([]byte, size)
		}
		b := rd.rbuf[:size]
		if err := p.ix.readRecords(first, b); err != nil {
			return err
		}
		for _, j := range rd.order[k:e] {
			rd.recs[j] = getRecord(b[(lines[j]-p.start-first)*recordSize:])
		}
		k = e
	}
	return nil
}

// batch reads lines (set line numbers in range) into a new Batch.
func (rd *reader) batch(parts []part, lines []int) (*Batch, error) {
	if err := rd.records(parts, lines); err != nil {
		return nil, err
	}
	return readBatch(parts, lines, rd.recs, &rd.buf)
}

// readBatch reads lines, whose records are recs, into a new Batch.
func readBatch(parts []part, lines []int, recs []record, buf *[]byte) (*Batch, error) {
	n := len(lines)
	b := &Batch{
		Dense:   make([]float32, n*NumDense),
		Offsets: make([]int64, n+1),
		Labels:  make([]float32, n),
		Lines:   append([]int(nil), lines...),
	}
	for t := range b.Indices {
		b.Indices[t] = make([]int64, n)
	}
	for i := range b.Offsets {
		b.Offsets[i] = int64(i)
	}
	var s Sample
	for k := 0; k < n; {
		// Gather lines k..e-1 of one file whose bytes lie close together
		// in order.
		p, first := locate(parts, lines[k])
		ix := p.ix
		lo := recs[k].off
		hi := lo + int64(recs[k].n)
		e := k + 1
		for ; e < n; e++ {
			i := lines[e] - p.start
			if i < 0 || i >= ix.Len() {
				break
			}
			o, l := recs[e].off, recs[e].n
			if o < hi || o-hi > maxGap || o+int64(l)-lo > 1<<24 {
				break
			}
			hi = o + int64(l)
		}
		if cap(*buf) < int(hi-lo) {
			*buf = make([]byte, hi-lo)
		}
		chunk := (*buf)[:hi-lo]
		// io.ReaderAt may return io.EOF with a full read at the end of
		// the input; only a short read is a failure.
		if m, err := p.r.ReadAt(chunk, lo); m < len(chunk) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%s: reading good line %d at byte %d: %w", ix.file, first, lo, err)
		}
		for j := k; j < e; j++ {
			o, l := recs[j].off, int64(recs[j].n)
			if err := ix.fill(b, j, lines[j]-p.start, chunk[o-lo:o-lo+l], &s); err != nil {
				return nil, err
			}
		}
		k = e
	}
	return b, nil
}

// fill parses good line i of ix's file into row j of b.
func (ix *Index) fill(b *Batch, j, i int, line []byte, s *Sample) error {
	bad := func(err error) error {
		if le, ok := err.(*LineError); ok {
			le.File = ix.file
			le.Err = fmt.Errorf("good line %d changed since the scan: %w", i, le.Err)
			return le
		}
		return err
	}
	if err := ParseLine(line, ix.maxIndRange, s); err != nil {
		return bad(err)
	}
	copy(b.Dense[j*NumDense:], s.Dense[:])
	b.Labels[j] = s.Label
	for t, v := range s.Sparse {
		id, ok := ix.ID(t, v)
		if !ok {
			return bad(&LineError{Field: fieldNames[1+NumDense+t], Err: fmt.Errorf("value %x not in the dictionary", v)})
		}
		b.Indices[t][j] = int64(id)
	}
	return nil
}
