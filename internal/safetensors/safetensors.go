// Package safetensors reads and writes the safetensors container: an 8-byte
// little-endian header length, a JSON header mapping tensor names to dtype,
// shape and byte offsets (plus an optional "__metadata__" string map), and
// the raw little-endian tensor bytes. Kiln's state dicts, golden test data
// and saved graphs all use it.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// maxHeader bounds the JSON header so a corrupt length cannot make Decode
// allocate gigabytes.
const maxHeader = 100 << 20

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
	Tensors  []Tensor // sorted by name after Decode
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

type entry struct {
	DType   string `json:"dtype"`
	Shape   []int  `json:"shape"`
	Offsets [2]int `json:"data_offsets"`
}

// Decode parses a container held in memory. Tensor data aliases b.
func Decode(b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("safetensors: file is %d bytes, too short for the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader || n > uint64(len(b)-8) {
		return nil, fmt.Errorf("safetensors: header length %d at byte 0 exceeds the file (%d bytes after it)", n, len(b)-8)
	}
	hdr := b[8 : 8+n]
	body := b[8+n:]
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("safetensors: bad JSON header (bytes 8..%d): %v", 8+n, err)
	}
	f := &File{}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, fmt.Errorf("safetensors: __metadata__ is not a string map: %v", err)
			}
			continue
		}
		var e entry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: bad header entry: %v", name, err)
		}
		size := ElemSize(e.DType)
		if size == 0 {
			return nil, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", name, e.DType)
		}
		count, empty := 1, false
		for _, d := range e.Shape {
			if d < 0 {
				return nil, fmt.Errorf("safetensors: tensor %q: bad shape %v", name, e.Shape)
			}
			empty = empty || d == 0
		}
		for _, d := range e.Shape {
			if empty {
				count = 0
				break
			}
			// An overflowing count*size could wrap around to the size the
			// offsets give.
			if count > math.MaxInt/size/d {
				return nil, fmt.Errorf("safetensors: tensor %q: shape %v of %s has more bytes than an int can count", name, e.Shape, e.DType)
			}
			count *= d
		}
		start, end := e.Offsets[0], e.Offsets[1]
		if start < 0 || end < start || end > len(body) {
			return nil, fmt.Errorf("safetensors: tensor %q: data offsets [%d, %d] fall outside the %d data bytes (file truncated at byte %d?)", name, start, end, len(body), len(b))
		}
		if end-start != count*size {
			return nil, fmt.Errorf("safetensors: tensor %q: %d data bytes for shape %v of %s (want %d)", name, end-start, e.Shape, e.DType, count*size)
		}
		if e.Shape == nil {
			e.Shape = []int{}
		}
		f.Tensors = append(f.Tensors, Tensor{Name: name, DType: e.DType, Shape: e.Shape, Data: body[start:end:end]})
	}
	sort.Slice(f.Tensors, func(i, j int) bool { return f.Tensors[i].Name < f.Tensors[j].Name })
	return f, nil
}

// ReadFile reads and decodes the container at path; errors name the path.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
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
		if i > 0 && t.Name == ts[i-1].Name {
			return fmt.Errorf("safetensors: duplicate tensor name %q", t.Name)
		}
		size := ElemSize(t.DType)
		count := 1
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("safetensors: tensor %q: negative dimension in shape %v", t.Name, t.Shape)
			}
			count *= d
		}
		if size == 0 || count*size != len(t.Data) {
			return fmt.Errorf("safetensors: tensor %q: %d bytes do not fit shape %v of %q", t.Name, len(t.Data), t.Shape, t.DType)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[t.Name] = entry{DType: t.DType, Shape: shape, Offsets: [2]int{off, off + len(t.Data)}}
		off += len(t.Data)
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
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
	return WriteAtomic(path, func(w io.Writer) error { return Encode(w, f) })
}

// WriteAtomic creates path (mode 0644) by calling write on a temporary file
// beside it, syncing and renaming it into place; on any error the temporary
// file is removed and path is untouched.
func WriteAtomic(path string, write func(w io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file private (0600); a saved model is meant to
	// be shared like any file the user writes.
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
