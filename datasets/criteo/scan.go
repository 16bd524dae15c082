package criteo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ScanOptions configure Scan.
type ScanOptions struct {
	// File names the input in errors ("train.txt").
	File string
	// MaxIndRange, when positive, reduces every categorical modulo it
	// before the dictionary lookup (dlrm's --max-ind-range).
	MaxIndRange int
	// SkipBadLines counts bad lines and leaves them out of the index
	// instead of failing on the first (--skip-bad-lines).
	SkipBadLines bool
}

// maxBadLinesKept is how many bad line numbers an Index remembers.
const maxBadLinesKept = 10

// An Index is the result of the first pass over a Kaggle file: for each
// categorical feature a dictionary from raw value to dense id, and for each
// good line its byte offset, length and label, so that lines can be read
// back in any order with ReadAt. Lines are numbered 0..Len()-1 in file
// order, bad lines skipped.
type Index struct {
	file        string
	maxIndRange int
	vocab       [NumSparse]map[uint32]int32
	offsets     []int64
	lengths     []uint32
	labels      []uint64 // bit i is line i's label
	badCount    int
	badLines    []int
}

// Scan reads a Kaggle TSV stream once and builds its Index. Memory grows
// with the vocabulary and by 12 bytes and a bit per line, never with the
// line contents. The first bad line is returned as a *LineError unless
// opts.SkipBadLines is set; a read error is returned wrapped with the file
// name.
func Scan(r io.Reader, opts ScanOptions) (*Index, error) {
	ix := &Index{file: opts.File, maxIndRange: opts.MaxIndRange}
	for t := range ix.vocab {
		ix.vocab[t] = make(map[uint32]int32)
	}
	br := bufio.NewReaderSize(r, 1<<16)
	var (
		off    int64
		lineNo int
		s      Sample
		long   []byte
	)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it (Kaggle lines are
			// a few hundred bytes, so this is for corrupt input).
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s: %w", opts.File, err)
		}
		if len(line) == 0 { // end of input
			break
		}
		lineNo++
		if perr := ParseLine(line, opts.MaxIndRange, &s); perr != nil {
			le := perr.(*LineError)
			le.File, le.Line = opts.File, lineNo
			if !opts.SkipBadLines {
				return nil, le
			}
			ix.badCount++
			if len(ix.badLines) < maxBadLinesKept {
				ix.badLines = append(ix.badLines, lineNo)
			}
		} else {
			ix.add(off, len(line), &s)
		}
		off += int64(len(line))
		if err == io.EOF {
			break
		}
	}
	return ix, nil
}

func (ix *Index) add(off int64, n int, s *Sample) {
	i := len(ix.offsets)
	ix.offsets = append(ix.offsets, off)
	ix.lengths = append(ix.lengths, uint32(n))
	if i%64 == 0 {
		ix.labels = append(ix.labels, 0)
	}
	if s.Label == 1 {
		ix.labels[i/64] |= 1 << (i % 64)
	}
	for t, v := range s.Sparse {
		if _, ok := ix.vocab[t][v]; !ok {
			ix.vocab[t][v] = int32(len(ix.vocab[t]))
		}
	}
}

// Len is the number of good lines.
func (ix *Index) Len() int { return len(ix.offsets) }

// Counts returns each categorical feature's number of distinct values
// (dlrm's counts), the row count of its embedding table.
func (ix *Index) Counts() [NumSparse]int {
	var c [NumSparse]int
	for t, m := range ix.vocab {
		c[t] = len(m)
	}
	return c
}

// ID returns the dense id of raw value v (already reduced modulo the max
// index range) in table t, and whether the scan saw it.
func (ix *Index) ID(t int, v uint32) (int32, bool) {
	id, ok := ix.vocab[t][v]
	return id, ok
}

// Label returns good line i's label, 0 or 1.
func (ix *Index) Label(i int) int { return int(ix.labels[i/64] >> (i % 64) & 1) }

// Offset returns good line i's byte offset and length, newline included.
func (ix *Index) Offset(i int) (off int64, n int) { return ix.offsets[i], int(ix.lengths[i]) }

// BadLines returns how many bad lines a scan with SkipBadLines skipped and
// the 1-based numbers of the first ten.
func (ix *Index) BadLines() (count int, first []int) { return ix.badCount, ix.badLines }

// MaxIndRange is the modulo applied to categoricals (0: none).
func (ix *Index) MaxIndRange() int { return ix.maxIndRange }
