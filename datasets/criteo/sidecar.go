package criteo

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// An Index saves to a sidecar file beside the data so that a second run
// skips the first pass (a few minutes for Kaggle's 45 million lines), and
// a file-backed Index reads its per-line records from it on demand. The
// layout, little-endian:
//
//	"KILNCRIX", version u32
//	source size i64, source modification time i64 (Unix ns),
//	max index range i64, skip-bad-lines u8
//	records [lines]{offset i64, length u32 with the label in bit 31},
//	  the first at byte 37 (headerSize)
//	lines u64
//	bad-line count u64, kept u32, kept line numbers [kept]i64
//	per feature: values u32, then the raw values [values]u32 in id order
//	records end u64 (37 + 12·lines)
//	SHA-256 of all the above
//
// The records come first so that a scan streams them to the file as it
// reads the lines, knowing their number only at the end; the records end
// is last so that a reader finds the line count from the file's size. The
// size, time and options let ScanFile tell a sidecar of this file, as it
// is now, scanned this way, from a stale one; the checksum catches a
// damaged one. Version 1 sidecars (all records in one array) are read as
// bad and scanned over.

// SidecarSuffix is appended to a data file's path to name its sidecar.
const SidecarSuffix = ".kiln-index"

const (
	sidecarMagic   = "KILNCRIX"
	sidecarVersion = 2
	// headerSize is where the records start.
	headerSize = 8 + 4 + 3*8 + 1
	// trailerMin is the smallest trailer after the records: the line
	// count, the bad-line counts and the empty dictionaries.
	trailerMin = 8 + 8 + 4 + NumSparse*4
)

// ErrBadSidecar is matched by the errors of ReadIndex for a file that is
// not a sidecar, is damaged or is truncated.
var ErrBadSidecar = errors.New("not a valid Criteo index sidecar")

// sidecarKey is what a sidecar must match to stand for a scan.
type sidecarKey struct {
	size, modTime int64
	maxIndRange   int64
	skipBadLines  bool
}

func keyOf(fi os.FileInfo, opts ScanOptions) sidecarKey {
	return sidecarKey{size: fi.Size(), modTime: fi.ModTime().UnixNano(), maxIndRange: int64(opts.MaxIndRange), skipBadLines: opts.SkipBadLines}
}

// ScanFile is Scan of the file at path, through its sidecar: when
// path+SidecarSuffix holds the index of the file as it is now, scanned
// with the same MaxIndRange and SkipBadLines, it is used instead of
// scanning the data (after a streaming check of its checksum); otherwise
// the file is scanned and the sidecar (re)written, atomically, the records
// streamed to it as the lines are read. The returned Index keeps the
// sidecar open and reads the per-line records from it on demand, so its
// memory is that of the dictionaries alone, whatever the number of lines;
// Close closes it. A sidecar that cannot be written (a read-only folder)
// is replaced by an unnamed temporary file, deleted when closed: it only
// saves time. opts.File defaults to path.
func ScanFile(path string, opts ScanOptions) (*Index, error) {
	if opts.File == "" {
		opts.File = path
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	key := keyOf(fi, opts)
	side := path + SidecarSuffix
	if sf, err := os.Open(side); err == nil {
		ix, err := openSidecar(sf, key)
		if err == nil {
			ix.file = opts.File
			return ix, nil
		}
		sf.Close()
	}
	return scanToSidecar(f, side, opts, key)
}

// openSidecar checks that the open sidecar sf is valid and matches key,
// and returns the Index reading its records from sf.
func openSidecar(sf *os.File, key sidecarKey) (*Index, error) {
	fi, err := sf.Stat()
	if err != nil {
		return nil, err
	}
	ix, k, err := openIndex(sf, fi.Size())
	if err != nil {
		return nil, err
	}
	if k != key {
		return nil, fmt.Errorf("%w: stale", ErrBadSidecar)
	}
	ix.side, ix.recName = sf, sf.Name()
	return ix, nil
}

// scanToSidecar scans f into a new sidecar at side, written through a
// temporary file renamed over it so that a reader never sees half a
// sidecar, and returns the Index reading from it. Where no file can be
// made beside the data, the records go to an unnamed temporary file.
func scanToSidecar(f *os.File, side string, opts ScanOptions, key sidecarKey) (*Index, error) {
	named := true
	tmp, err := os.CreateTemp(filepath.Dir(side), "."+filepath.Base(side)+".tmp*")
	if err != nil {
		named = false
		if tmp, err = os.CreateTemp("", "kiln-criteo-index*"); err != nil {
			return Scan(f, opts) // nowhere to write: records in memory
		}
		os.Remove(tmp.Name()) // unnamed: gone when closed
	}
	fail := func(err error) (*Index, error) {
		tmp.Close()
		if named {
			os.Remove(tmp.Name())
		}
		return nil, err
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	hw := &hashWriter{w: bw, h: sha256.New()}
	writeHeader(hw, key)
	ix, err := scan(f, opts, hw)
	if err != nil {
		return fail(err)
	}
	if err := ix.writeTrailer(hw); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if named {
		// Best effort: a sidecar that cannot be synced or renamed costs a
		// rescan next time; the open file still holds the records.
		if tmp.Sync() != nil || os.Rename(tmp.Name(), side) != nil {
			os.Remove(tmp.Name())
		}
	}
	ix.side, ix.recs, ix.base, ix.recName = tmp, tmp, headerSize, side
	return ix, nil
}

// WriteTo writes ix in the sidecar layout, with no source file recorded
// (size and time 0), for ReadIndex.
func (ix *Index) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	hw := &hashWriter{w: cw, h: sha256.New()}
	writeHeader(hw, sidecarKey{maxIndRange: int64(ix.maxIndRange)})
	if ix.mem != nil {
		hw.bytes(ix.mem)
	} else {
		block := make([]byte, 64<<10/recordSize*recordSize)
		for i := 0; i < ix.n && hw.err == nil; {
			b := block[:min(len(block), (ix.n-i)*recordSize)]
			if err := ix.readRecords(i, b); err != nil {
				return cw.n, err
			}
			hw.bytes(b)
			i += len(b) / recordSize
		}
	}
	err := ix.writeTrailer(hw)
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// hashWriter writes little-endian values to w and into a running SHA-256.
type hashWriter struct {
	w   io.Writer
	h   hash.Hash
	err error
	buf [8]byte
}

func (hw *hashWriter) bytes(b []byte) {
	if hw.err != nil {
		return
	}
	hw.h.Write(b)
	_, hw.err = hw.w.Write(b)
}

// Write is bytes as an io.Writer, for scan's records.
func (hw *hashWriter) Write(b []byte) (int, error) {
	hw.bytes(b)
	if hw.err != nil {
		return 0, hw.err
	}
	return len(b), nil
}

func (hw *hashWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(hw.buf[:], v)
	hw.bytes(hw.buf[:8])
}

func (hw *hashWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(hw.buf[:], v)
	hw.bytes(hw.buf[:4])
}

// chunked writes n values through put into blocks, so large arrays cost
// few Write calls.
func chunked[T any](hw *hashWriter, vs []T, size int, put func([]byte, T)) {
	block := make([]byte, 0, 64<<10)
	for _, v := range vs {
		if len(block)+size > cap(block) {
			hw.bytes(block)
			block = block[:0]
		}
		block = block[:len(block)+size]
		put(block[len(block)-size:], v)
	}
	hw.bytes(block)
}

func writeHeader(hw *hashWriter, key sidecarKey) {
	hw.bytes([]byte(sidecarMagic))
	hw.u32(sidecarVersion)
	hw.u64(uint64(key.size))
	hw.u64(uint64(key.modTime))
	hw.u64(uint64(key.maxIndRange))
	hw.bytes([]byte{b2u8(key.skipBadLines)})
}

// writeTrailer writes what follows the records, the checksum included.
func (ix *Index) writeTrailer(hw *hashWriter) error {
	hw.u64(uint64(ix.n))
	hw.u64(uint64(ix.badCount))
	hw.u32(uint32(len(ix.badLines)))
	for _, l := range ix.badLines {
		hw.u64(uint64(l))
	}
	for t := range ix.vocab {
		raw := make([]uint32, len(ix.vocab[t]))
		for v, id := range ix.vocab[t] {
			raw[id] = v
		}
		hw.u32(uint32(len(raw)))
		chunked(hw, raw, 4, binary.LittleEndian.PutUint32)
	}
	hw.u64(uint64(headerSize + int64(ix.n)*recordSize))
	if hw.err != nil {
		return hw.err
	}
	_, err := hw.w.Write(hw.h.Sum(nil))
	return err
}

func b2u8(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// ReadIndex reads an Index that WriteTo or ScanFile wrote, into memory
// (12 bytes a line). A stream that is not one, is damaged or ends early
// gives an error matching ErrBadSidecar and naming what is wrong.
func ReadIndex(r io.Reader) (*Index, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	ix, _, err := openIndex(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	ix.mem, ix.recs = b[headerSize:headerSize+ix.n*recordSize], nil
	return ix, nil
}

// hashReader reads little-endian values from r into a running SHA-256,
// keeping the first error.
type hashReader struct {
	r   io.Reader
	h   hash.Hash
	err error
	buf [8]byte
}

func (hr *hashReader) bytes(b []byte) {
	if hr.err != nil {
		return
	}
	if _, err := io.ReadFull(hr.r, b); err != nil {
		hr.err = fmt.Errorf("%w: truncated (%v)", ErrBadSidecar, err)
		return
	}
	hr.h.Write(b)
}

func (hr *hashReader) u64() uint64 {
	hr.bytes(hr.buf[:8])
	return binary.LittleEndian.Uint64(hr.buf[:8])
}

func (hr *hashReader) u32() uint32 {
	hr.bytes(hr.buf[:4])
	return binary.LittleEndian.Uint32(hr.buf[:4])
}

// count reads a length and checks it against limit, so that a damaged
// header cannot make the reader allocate without bound before the
// checksum is reached.
func (hr *hashReader) count(what string, v uint64, limit uint64) int {
	if hr.err == nil && v > limit {
		hr.err = fmt.Errorf("%w: %s %d is past the limit %d", ErrBadSidecar, what, v, limit)
	}
	if hr.err != nil {
		return 0
	}
	return int(v)
}

// readChunked reads n values of size bytes through get.
func readChunked[T any](hr *hashReader, n, size int, get func([]byte) T) []T {
	out := make([]T, 0, min(n, 1<<20))
	block := make([]byte, 64<<10/size*size)
	for len(out) < n && hr.err == nil {
		b := block[:min(len(block), (n-len(out))*size)]
		hr.bytes(b)
		for i := 0; i < len(b) && hr.err == nil; i += size {
			out = append(out, get(b[i:i+size]))
		}
	}
	return out
}

// maxSidecarLines bounds the line count a sidecar may claim: a terabyte
// day file has about 200 million.
const maxSidecarLines = 1 << 36

// openIndex checks the sidecar of size bytes in r in one streaming pass
// (its checksum over the records too, in O(1) memory) and returns its
// Index, with the dictionaries and bad lines in memory and the records
// left in r at headerSize, and the key it was written for.
func openIndex(r io.ReaderAt, size int64) (*Index, sidecarKey, error) {
	var key sidecarKey
	var head [12]byte
	if m, _ := r.ReadAt(head[:], 0); m < len(head) {
		return nil, key, fmt.Errorf("%w: truncated (%d bytes)", ErrBadSidecar, size)
	}
	if string(head[:8]) != sidecarMagic {
		return nil, key, fmt.Errorf("%w: starts with %q, not %q", ErrBadSidecar, head[:8], sidecarMagic)
	}
	if v := binary.LittleEndian.Uint32(head[8:]); v != sidecarVersion {
		return nil, key, fmt.Errorf("%w: version %d, this reader knows %d", ErrBadSidecar, v, sidecarVersion)
	}
	body := size - sha256.Size // what the checksum covers
	if body < headerSize+trailerMin+8 {
		return nil, key, fmt.Errorf("%w: truncated (%d bytes)", ErrBadSidecar, size)
	}
	var foot [8]byte
	if m, _ := r.ReadAt(foot[:], body-8); m < len(foot) {
		return nil, key, fmt.Errorf("%w: truncated before its records end", ErrBadSidecar)
	}
	end := binary.LittleEndian.Uint64(foot[:])
	if end < headerSize || (end-headerSize)%recordSize != 0 || end > uint64(body-8-trailerMin) {
		return nil, key, fmt.Errorf("%w: records end at byte %d, in a file of %d bytes", ErrBadSidecar, end, size)
	}
	n := int((end - headerSize) / recordSize)

	hr := &hashReader{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, body), 1<<16), h: sha256.New()}
	hr.bytes(head[:])
	key.size, key.modTime, key.maxIndRange = int64(hr.u64()), int64(hr.u64()), int64(hr.u64())
	var flag [1]byte
	hr.bytes(flag[:])
	key.skipBadLines = flag[0] == 1
	ix := &Index{maxIndRange: int(key.maxIndRange), n: n, recs: r, base: headerSize}
	block := make([]byte, 64<<10/recordSize*recordSize)
	for left := n * recordSize; left > 0 && hr.err == nil; {
		b := block[:min(len(block), left)]
		hr.bytes(b)
		left -= len(b)
	}
	if lines := hr.u64(); hr.err == nil && lines != uint64(n) {
		hr.err = fmt.Errorf("%w: %d lines, but records for %d", ErrBadSidecar, lines, n)
	}
	ix.badCount = hr.count("bad-line count", hr.u64(), maxSidecarLines)
	kept := hr.count("kept bad lines", uint64(hr.u32()), maxBadLinesKept)
	for range kept {
		ix.badLines = append(ix.badLines, int(hr.u64()))
	}
	for t := range ix.vocab {
		m := hr.count(fmt.Sprintf("feature C%d's vocabulary", t+1), uint64(hr.u32()), uint64(n)+1)
		raw := readChunked(hr, m, 4, binary.LittleEndian.Uint32)
		ix.vocab[t] = make(map[uint32]int32, len(raw))
		for id, v := range raw {
			ix.vocab[t][v] = int32(id)
		}
		if hr.err == nil && len(ix.vocab[t]) != len(raw) {
			hr.err = fmt.Errorf("%w: feature C%d's vocabulary repeats a value", ErrBadSidecar, t+1)
		}
	}
	if e := hr.u64(); hr.err == nil && e != end {
		hr.err = fmt.Errorf("%w: the trailer does not end where the records end says", ErrBadSidecar)
	}
	if hr.err == nil {
		var extra [1]byte
		if m, _ := hr.r.Read(extra[:]); m > 0 {
			hr.err = fmt.Errorf("%w: the trailer does not end where the records end says", ErrBadSidecar)
		}
	}
	if hr.err != nil {
		return nil, key, hr.err
	}
	want := hr.h.Sum(nil)
	got := make([]byte, len(want))
	if m, _ := r.ReadAt(got, body); m < len(got) {
		return nil, key, fmt.Errorf("%w: truncated before its checksum", ErrBadSidecar)
	}
	if !slices.Equal(got, want) {
		return nil, key, fmt.Errorf("%w: checksum mismatch (the file is damaged)", ErrBadSidecar)
	}
	return ix, key, nil
}
