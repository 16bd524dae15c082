package criteo

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
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

// recordSize is the size of a good line's record: its byte offset (int64)
// and its length (uint32, newline included) with the label in the top bit,
// little-endian.
const recordSize = 12

// labelBit marks a positive line in a record's length word.
const labelBit = 1 << 31

// An Index is the result of the first pass over a Kaggle file: for each
// categorical feature a dictionary from raw value to dense id, and for each
// good line a record of its byte offset, length and label, so that lines
// can be read back in any order with ReadAt. Lines are numbered
// 0..Len()-1 in file order, bad lines skipped.
//
// The records of an Index from ScanFile stay on disk, in its sidecar, and
// are read on demand: its memory is the dictionaries alone. Those of an
// Index from Scan or ReadIndex are held in memory, 12 bytes a line.
type Index struct {
	file        string
	maxIndRange int
	vocab       [NumSparse]map[uint32]int32
	n           int
	mem         []byte      // the records in memory (Scan, ReadIndex), or nil
	recs        io.ReaderAt // where the records are when mem is nil
	base        int64       // the offset of record 0 in recs
	recName     string      // names recs in errors
	side        *os.File    // the open sidecar, closed by Close
	badCount    int
	badLines    []int
}

// Scan reads a Kaggle TSV stream once and builds its Index. Memory grows
// with the vocabulary and by 12 bytes per line (the records, held in
// memory), never with the line contents; ScanFile keeps the records on
// disk instead. The first bad line is returned as a *LineError unless
// opts.SkipBadLines is set; a read error is returned wrapped with the file
// name.
func Scan(r io.Reader, opts ScanOptions) (*Index, error) {
	var mem memRecords
	ix, err := scan(r, opts, &mem)
	if err != nil {
		return nil, err
	}
	ix.mem = append(mem.b, make([]byte, 0)...) // non-nil even without lines: in memory
	ix.recs = nil
	return ix, nil
}

type memRecords struct{ b []byte }

func (m *memRecords) Write(p []byte) (int, error) {
	m.b = append(m.b, p...)
	return len(p), nil
}

// scan is Scan writing each good line's record to w, in blocks, as the
// lines are read: the returned Index has the dictionaries, the line and
// bad-line counts but no records.
func scan(r io.Reader, opts ScanOptions, w io.Writer) (*Index, error) {
	ix := &Index{file: opts.File, maxIndRange: opts.MaxIndRange}
	for t := range ix.vocab {
		ix.vocab[t] = make(map[uint32]int32)
	}
	br := bufio.NewReaderSize(r, 1<<16)
	block := make([]byte, 0, 64<<10/recordSize*recordSize)
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
		perr := ParseLine(line, opts.MaxIndRange, &s)
		if perr == nil && len(line) >= labelBit {
			perr = &LineError{Field: "line", Err: fmt.Errorf("%d bytes long, past the limit of 2 GiB", len(line))}
		}
		if perr != nil {
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
			if len(block) == cap(block) {
				if _, err := w.Write(block); err != nil {
					return nil, err
				}
				block = block[:0]
			}
			block = block[:len(block)+recordSize]
			putRecord(block[len(block)-recordSize:], off, len(line), int(s.Label))
			ix.add(&s)
		}
		off += int64(len(line))
		if err == io.EOF {
			break
		}
	}
	if _, err := w.Write(block); err != nil {
		return nil, err
	}
	return ix, nil
}

func putRecord(b []byte, off int64, n, label int) {
	binary.LittleEndian.PutUint64(b, uint64(off))
	l := uint32(n)
	if label == 1 {
		l |= labelBit
	}
	binary.LittleEndian.PutUint32(b[8:], l)
}

// A record is a good line's place in its file and its label.
type record struct {
	off   int64
	n     int
	label int
}

func getRecord(b []byte) record {
	l := binary.LittleEndian.Uint32(b[8:])
	return record{off: int64(binary.LittleEndian.Uint64(b)), n: int(l &^ labelBit), label: int(l >> 31)}
}

func (ix *Index) add(s *Sample) {
	ix.n++
	for t, v := range s.Sparse {
		if _, ok := ix.vocab[t][v]; !ok {
			ix.vocab[t][v] = int32(len(ix.vocab[t]))
		}
	}
}

// readRecords reads the records of lines i..i+len(dst)/recordSize-1 into
// dst.
func (ix *Index) readRecords(i int, dst []byte) error {
	if ix.mem != nil {
		copy(dst, ix.mem[i*recordSize:])
		return nil
	}
	at := ix.base + int64(i)*recordSize
	if m, err := ix.recs.ReadAt(dst, at); m < len(dst) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%s: reading the index records of good lines %d.. of %s: %w", ix.recName, i, ix.file, err)
	}
	return nil
}

// record returns good line i's record.
func (ix *Index) record(i int) (record, error) {
	if ix.mem != nil {
		return getRecord(ix.mem[i*recordSize:]), nil
	}
	var b [recordSize]byte
	if err := ix.readRecords(i, b[:]); err != nil {
		return record{}, err
	}
	return getRecord(b[:]), nil
}

// checkedRecord is record for the exported accessors: a line out of
// range is an error too.
func (ix *Index) checkedRecord(i int) (record, error) {
	if i < 0 || i >= ix.n {
		return record{}, fmt.Errorf("criteo: %s: good line %d out of range [0, %d)", ix.file, i, ix.n)
	}
	return ix.record(i)
}

// Len is the number of good lines.
func (ix *Index) Len() int { return ix.n }

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

// Label returns good line i's label, 0 or 1. For an Index from ScanFile
// it reads the line's record from the sidecar: the error is that read's,
// or a line out of range.
func (ix *Index) Label(i int) (int, error) {
	r, err := ix.checkedRecord(i)
	return r.label, err
}

// Offset returns good line i's byte offset and length, newline included.
// Like Label, it may read the sidecar.
func (ix *Index) Offset(i int) (off int64, n int, err error) {
	r, err := ix.checkedRecord(i)
	return r.off, r.n, err
}

// BadLines returns how many bad lines a scan with SkipBadLines skipped and
// the 1-based numbers of the first ten.
func (ix *Index) BadLines() (count int, first []int) { return ix.badCount, ix.badLines }

// MaxIndRange is the modulo applied to categoricals (0: none).
func (ix *Index) MaxIndRange() int { return ix.maxIndRange }

// Close closes the sidecar that an Index from ScanFile reads its records
// from; the Index is unusable after. It does nothing for an in-memory
// Index.
func (ix *Index) Close() error {
	if ix.side == nil {
		return nil
	}
	err := ix.side.Close()
	ix.side = nil
	return err
}
