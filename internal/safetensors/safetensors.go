// Package safetensors reads and writes the safetensors container: an 8-byte
// little-endian header length, a JSON header mapping tensor names to dtype,
// shape and byte offsets (plus an optional "__metadata__" string map), and
// the raw little-endian tensor bytes. Kiln's state dicts, golden test data
// and saved graphs all use it.
package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kilnml/kiln/internal/atomicfile"
	"github.com/kilnml/kiln/internal/shape"
)

// maxHeader is the format's limit on the JSON header, as the reference
// implementation enforces it: a length over it is refused before anything
// is read, so a corrupt length cannot make a reader allocate gigabytes.
const maxHeader = 100_000_000

// A FormatError reports a container that breaks the format: a bad header
// length, header or entry, or data offsets that do not tile the data
// section exactly. Errors reading the file itself are returned as they come.
type FormatError struct {
	Tensor string // the entry at fault; "" when the fault is the file's as a whole
	Msg    string
	Err    error // the cause Msg describes, such as shape.ErrOverflow, or nil
}

func (e *FormatError) Error() string {
	if e.Tensor != "" {
		return fmt.Sprintf("safetensors: tensor %q: %s", e.Tensor, e.Msg)
	}
	return "safetensors: " + e.Msg
}

func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(format string, args ...any) error {
	return &FormatError{Msg: fmt.Sprintf(format, args...)}
}

func tensorErr(name string, err error, format string, args ...any) error {
	return &FormatError{Tensor: name, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Tensor is one named entry: dtype as the format spells it ("F32", "BF16",
// "I64", …), shape, and raw little-endian bytes.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

// File is a whole container.
type File struct {
	Metadata map[string]string
	Tensors  []Tensor // sorted by name after Decode or Read
}

// Get returns the tensor called name.
func (f *File) Get(name string) (Tensor, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// ElemSize returns the byte size of a dtype, or 0 when it is unknown.
func ElemSize(dtype string) int {
	switch dtype {
	case "F64", "I64", "U64":
		return 8
	case "F32", "I32", "U32":
		return 4
	case "F16", "BF16", "I16", "U16":
		return 2
	case "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2":
		return 1
	}
	return 0
}

// entry is one tensor of a parsed header; its data is bytes
// [begin, end) of the data section.
type entry struct {
	name, dtype string
	shape       []int
	begin, end  int
}

// Decode parses a container held in memory. Tensor data aliases b.
func Decode(b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, formatErr("file is %d bytes, too short for the 8-byte header length", len(b))
	}
	n, err := headerLen(b[:8], len(b))
	if err != nil {
		return nil, err
	}
	meta, entries, err := parseHeader(b[8:8+n], len(b)-8-n)
	if err != nil {
		return nil, err
	}
	return assemble(meta, entries, b[8+n:]), nil
}

// Read decodes a container of size bytes read from r, which must hold at
// least that many; tensor data is one allocation of the data section. It checks the
// header length against size and the format's limit before reading the
// header, and the header against size before reading the data, so a
// corrupt file costs no more memory than its own size.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 8 {
		return nil, formatErr("file is %d bytes, too short for the 8-byte header length", size)
	}
	if size > math.MaxInt {
		return nil, formatErr("file is %d bytes, more than this platform can address", size)
	}
	var prefix [8]byte
	if err := readAt(r, prefix[:], 0); err != nil {
		return nil, err
	}
	n, err := headerLen(prefix[:], int(size))
	if err != nil {
		return nil, err
	}
	hdr := make([]byte, n)
	if err := readAt(r, hdr, 8); err != nil {
		return nil, err
	}
	meta, entries, err := parseHeader(hdr, int(size)-8-n)
	if err != nil {
		return nil, err
	}
	data := make([]byte, int(size)-8-n)
	if err := readAt(r, data, int64(8+n)); err != nil {
		return nil, err
	}
	return assemble(meta, entries, data), nil
}

// readAt fills b from r at off; a short read means the file is shorter
// than the size it was said to have.
func readAt(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("safetensors: reading bytes %d..%d: %w", off, off+int64(len(b)), err)
}

// ReadFile reads and decodes the container at path; errors name the path.
func ReadFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, err := Read(f, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// headerLen returns the header length that prefix, the first 8 bytes of a
// file of size bytes, declares, checked against the file and the format.
func headerLen(prefix []byte, size int) (int, error) {
	n := binary.LittleEndian.Uint64(prefix)
	if n > maxHeader {
		return 0, formatErr("header length %d at byte 0 is over the format's limit of %d bytes", n, maxHeader)
	}
	if n > uint64(size-8) {
		return 0, formatErr("header length %d at byte 0 exceeds the file (%d bytes after it)", n, size-8)
	}
	return int(n), nil
}

// parseHeader parses and checks the JSON header hdr of a file whose data
// section is dataLen bytes long. It holds the file to what the reference
// implementation accepts: a UTF-8 JSON object, no key twice, an optional
// "__metadata__" object of strings, and for each tensor exactly "dtype",
// "shape" and "data_offsets", whose offsets tile the data section with no
// overlap, hole or trailing byte.
func parseHeader(hdr []byte, dataLen int) (map[string]string, []entry, error) {
	bad := func(err error) error {
		return &FormatError{Msg: fmt.Sprintf("bad JSON header (bytes 8..%d): %v", 8+len(hdr), err), Err: err}
	}
	if !utf8.Valid(hdr) {
		return nil, nil, bad(errors.New("not valid UTF-8"))
	}
	top, err := members(hdr)
	if err != nil {
		return nil, nil, bad(err)
	}
	var meta map[string]string
	var entries []entry
	for _, m := range top {
		if m.key == "__metadata__" {
			if meta, err = metadata(m.val); err != nil {
				return nil, nil, &FormatError{Msg: fmt.Sprintf("__metadata__ is not a string map: %v", err), Err: err}
			}
			continue
		}
		e, err := parseEntry(m.key, m.val)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	if err := checkLayout(entries, 8+len(hdr), dataLen); err != nil {
		return nil, nil, err
	}
	return meta, entries, nil
}

// parseEntry parses and checks the header entry of tensor name.
func parseEntry(name string, msg json.RawMessage) (entry, error) {
	e := entry{name: name}
	fields, err := members(msg)
	if err != nil {
		return e, tensorErr(name, err, "bad header entry: %v", err)
	}
	var offsets []int
	for _, f := range fields {
		switch f.key {
		case "dtype":
			err = decodeValue(f.val, &e.dtype)
		case "shape":
			e.shape, err = naturals(f.val)
		case "data_offsets":
			offsets, err = naturals(f.val)
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			return e, tensorErr(name, err, "bad header entry: %s: %v", f.key, err)
		}
	}
	for _, f := range []string{"dtype", "shape", "data_offsets"} {
		if !slices.ContainsFunc(fields, func(m member) bool { return m.key == f }) {
			return e, tensorErr(name, nil, "bad header entry: no %q", f)
		}
	}
	size := ElemSize(e.dtype)
	if size == 0 {
		return e, tensorErr(name, nil, "unknown dtype %q", e.dtype)
	}
	nbytes, err := shape.Bytes(e.shape, size)
	if err != nil {
		return e, tensorErr(name, err, "shape %v of %s has more bytes than an int can count or memory can hold", e.shape, e.dtype)
	}
	if len(offsets) != 2 {
		return e, tensorErr(name, nil, "data_offsets %v has %d numbers, want 2 (begin and end)", offsets, len(offsets))
	}
	e.begin, e.end = offsets[0], offsets[1]
	if e.end < e.begin {
		return e, tensorErr(name, nil, "data offsets [%d, %d] end before they begin", e.begin, e.end)
	}
	if e.end-e.begin != nbytes {
		return e, tensorErr(name, nil, "%d data bytes for shape %v of %s (want %d)", e.end-e.begin, e.shape, e.dtype, nbytes)
	}
	return e, nil
}

// checkLayout checks that the tensors' data tile the data section, dataLen
// bytes from file byte start, in offset order: a tensor reading another's bytes, bytes
// no tensor owns and data past the end are all signs of a corrupt or
// doctored file.
func checkLayout(entries []entry, start, dataLen int) error {
	byOffset := slices.Clone(entries)
	slices.SortFunc(byOffset, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), strings.Compare(a.name, b.name))
	})
	pos := 0
	var prev *entry
	for i := range byOffset {
		e := &byOffset[i]
		switch {
		case e.end > dataLen:
			return tensorErr(e.name, nil, "data offsets [%d, %d] fall outside the %d data bytes (file truncated at byte %d?)",
				e.begin, e.end, dataLen, start+dataLen)
		case e.begin < pos:
			return tensorErr(e.name, nil, "data offsets [%d, %d] overlap tensor %q's [%d, %d]",
				e.begin, e.end, prev.name, prev.begin, prev.end)
		case e.begin > pos:
			return tensorErr(e.name, nil, "data offsets [%d, %d] leave data bytes [%d, %d) to no tensor",
				e.begin, e.end, pos, e.begin)
		}
		pos, prev = e.end, e
	}
	if pos != dataLen {
		return formatErr("data bytes [%d, %d) belong to no tensor (trailing bytes after the last one)", pos, dataLen)
	}
	return nil
}

// assemble builds the File whose tensors' data are slices of data.
func assemble(meta map[string]string, entries []entry, data []byte) *File {
	f := &File{Metadata: meta, Tensors: make([]Tensor, len(entries))}
	for i, e := range entries {
		f.Tensors[i] = Tensor{Name: e.name, DType: e.dtype, Shape: e.shape, Data: data[e.begin:e.end:e.end]}
	}
	slices.SortFunc(f.Tensors, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	return f
}

// member is one key and value of a JSON object.
type member struct {
	key string
	val json.RawMessage
}

// members returns the members of the JSON object msg in order. It
// refuses a key given twice, which json.Unmarshal into a map or struct
// silently resolves to the last: two tensors or dtypes under one name are
// a corrupt file, not a choice to make for the user.
func members(msg []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if tok, err := dec.Token(); err != nil {
		return nil, err
	} else if tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var ms []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // the decoder allows only strings as keys
		if seen[key] {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		ms = append(ms, member{key, val})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more JSON after the object")
	}
	return ms, nil
}

// metadata parses the "__metadata__" object.
func metadata(msg json.RawMessage) (map[string]string, error) {
	ms, err := members(msg)
	if err != nil {
		return nil, err
	}
	meta := make(map[string]string, len(ms))
	for _, m := range ms {
		var s string
		if err := decodeValue(m.val, &s); err != nil {
			return nil, fmt.Errorf("%q: %v", m.key, err)
		}
		meta[m.key] = s
	}
	return meta, nil
}

// decodeValue unmarshals msg into v, refusing null, which json.Unmarshal
// accepts for any type by leaving v as it was.
func decodeValue(msg json.RawMessage, v any) error {
	if string(msg) == "null" {
		return errors.New("null")
	}
	return json.Unmarshal(msg, v)
}

// naturals parses a JSON array of non-negative integers, such as a shape.
// Each number is parsed on its own: json.Unmarshal into []int would take
// null for 0.
func naturals(msg json.RawMessage) ([]int, error) {
	var raw []json.RawMessage
	if err := decodeValue(msg, &raw); err != nil {
		return nil, err
	}
	out := make([]int, len(raw))
	for i, r := range raw {
		n, err := strconv.Atoi(string(r))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s is not a whole number from 0 to %d", r, math.MaxInt)
		}
		out[i] = n
	}
	return out, nil
}

// jsonEntry is a tensor's header entry as Encode writes it.
type jsonEntry struct {
	DType   string `json:"dtype"`
	Shape   []int  `json:"shape"`
	Offsets [2]int `json:"data_offsets"`
}

// Encode writes f to w. Tensors are stored in name order, 8-byte aligned as
// the format recommends, and the header is padded with spaces to a multiple
// of 8.
func Encode(w io.Writer, f *File) error {
	ts := append([]Tensor(nil), f.Tensors...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	hdr := map[string]any{}
	if len(f.Metadata) > 0 {
		hdr["__metadata__"] = f.Metadata
	}
	off := 0
	for i, t := range ts {
		switch {
		case t.Name == "__metadata__":
			return fmt.Errorf("safetensors: a tensor may not be called %q, the metadata's key", t.Name)
		case i > 0 && t.Name == ts[i-1].Name:
			return fmt.Errorf("safetensors: duplicate tensor name %q", t.Name)
		}
		nbytes, err := shape.Bytes(t.Shape, ElemSize(t.DType))
		if err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
		}
		if ElemSize(t.DType) == 0 || nbytes != len(t.Data) {
			return fmt.Errorf("safetensors: tensor %q: %d bytes do not fit shape %v of %q", t.Name, len(t.Data), t.Shape, t.DType)
		}
		dims := t.Shape
		if dims == nil {
			dims = []int{}
		}
		hdr[t.Name] = jsonEntry{DType: t.DType, Shape: dims, Offsets: [2]int{off, off + len(t.Data)}}
		off += len(t.Data)
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	if len(js) > maxHeader {
		return fmt.Errorf("safetensors: header of %d bytes is over the format's limit of %d", len(js), maxHeader)
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	for _, t := range ts {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes f to path atomically: into a temporary file in the same
// directory, synced, then renamed over path, so a reader never sees a
// half-written file.
func WriteFile(path string, f *File) error {
	return atomicfile.Write(path, func(w io.Writer) error { return Encode(w, f) })
}
