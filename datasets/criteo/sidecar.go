package criteo

import (
	"bufio"
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
// skips the first pass (a few minutes for Kaggle's 45 million lines). The
// layout, little-endian:
//
//	"KILNCRIX", version u32
//	source size i64, source modification time i64 (Unix ns),
//	max index range i64, skip-bad-lines u8
//	lines u64, offsets [lines]i64, lengths [lines]u32,
//	label words [⌈lines/64⌉]u64
//	bad-line count u64, kept u32, kept line numbers [kept]i64
//	per feature: values u32, then the raw values [values]u32 in id order
//	SHA-256 of all the above
//
// The size, time and options let ScanFile tell a sidecar of this file, as
// it is now, scanned this way, from a stale one; the checksum catches a
// damaged one.

// SidecarSuffix is appended to a data file's path to name its sidecar.
const SidecarSuffix = ".kiln-index"

const (
	sidecarMagic   = "KILNCRIX"
	sidecarVersion = 1
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
// with the same MaxIndRange and SkipBadLines, it is read instead of the
// data; otherwise the file is scanned and the sidecar (re)written,
// atomically. A sidecar that cannot be written (a read-only folder) is
// skipped silently: it only saves time. opts.File defaults to path.
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
		ix, k, err := readIndex(bufio.NewReaderSize(sf, 1<<20))
		sf.Close()
		if err == nil && k == key {
			ix.file = opts.File
			return ix, nil
		}
	}
	ix, err := Scan(f, opts)
	if err != nil {
		return nil, err
	}
	_ = writeSidecar(side, ix, key) // best effort: a missing sidecar costs a rescan, nothing more
	return ix, nil
}

// writeSidecar writes ix to path through a temporary file renamed over it,
// so that a reader never sees half a sidecar.
func writeSidecar(path string, ix *Index, key sidecarKey) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(tmp, 1<<20)
	err = ix.write(w, key)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// WriteTo writes ix in the sidecar layout, with no source file recorded
// (size and time 0), for ReadIndex.
func (ix *Index) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	err := ix.write(cw, sidecarKey{maxIndRange: int64(ix.maxIndRange)})
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

func (ix *Index) write(w io.Writer, key sidecarKey) error {
	hw := &hashWriter{w: w, h: sha256.New()}
	hw.bytes([]byte(sidecarMagic))
	hw.u32(sidecarVersion)
	hw.u64(uint64(key.size))
	hw.u64(uint64(key.modTime))
	hw.u64(uint64(key.maxIndRange))
	hw.bytes([]byte{b2u8(key.skipBadLines)})
	hw.u64(uint64(len(ix.offsets)))
	chunked(hw, ix.offsets, 8, func(b []byte, v int64) { binary.LittleEndian.PutUint64(b, uint64(v)) })
	chunked(hw, ix.lengths, 4, binary.LittleEndian.PutUint32)
	chunked(hw, ix.labels, 8, binary.LittleEndian.PutUint64)
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
	if hw.err != nil {
		return hw.err
	}
	_, err := w.Write(hw.h.Sum(nil))
	return err
}

func b2u8(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// ReadIndex reads an Index that WriteTo or ScanFile wrote. A stream that
// is not one, is damaged or ends early gives an error matching
// ErrBadSidecar and naming what is wrong.
func ReadIndex(r io.Reader) (*Index, error) {
	ix, _, err := readIndex(r)
	return ix, err
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

func readIndex(r io.Reader) (*Index, sidecarKey, error) {
	hr := &hashReader{r: r, h: sha256.New()}
	var key sidecarKey
	magic := make([]byte, len(sidecarMagic))
	hr.bytes(magic)
	if hr.err == nil && string(magic) != sidecarMagic {
		return nil, key, fmt.Errorf("%w: starts with %q, not %q", ErrBadSidecar, magic, sidecarMagic)
	}
	if v := hr.u32(); hr.err == nil && v != sidecarVersion {
		return nil, key, fmt.Errorf("%w: version %d, this reader knows %d", ErrBadSidecar, v, sidecarVersion)
	}
	key.size, key.modTime, key.maxIndRange = int64(hr.u64()), int64(hr.u64()), int64(hr.u64())
	var flag [1]byte
	hr.bytes(flag[:])
	key.skipBadLines = flag[0] == 1
	ix := &Index{maxIndRange: int(key.maxIndRange)}
	n := hr.count("line count", hr.u64(), maxSidecarLines)
	ix.offsets = readChunked(hr, n, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
	ix.lengths = readChunked(hr, n, 4, binary.LittleEndian.Uint32)
	ix.labels = readChunked(hr, (n+63)/64, 8, binary.LittleEndian.Uint64)
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
	if hr.err != nil {
		return nil, key, hr.err
	}
	want := hr.h.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil {
		return nil, key, fmt.Errorf("%w: truncated before its checksum", ErrBadSidecar)
	}
	if !slices.Equal(got, want) {
		return nil, key, fmt.Errorf("%w: checksum mismatch (the file is damaged)", ErrBadSidecar)
	}
	return ix, key, nil
}
