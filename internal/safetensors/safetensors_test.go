package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/internal/shape"
)

func TestRoundTrip(t *testing.T) {
	f := &File{Metadata: map[string]string{"format": "pt"}, Tensors: []Tensor{
		{Name: "b", DType: "I64", Shape: []int{2}, Data: make([]byte, 16)},
		{Name: "a", DType: "F32", Shape: []int{1, 3}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{Name: "s", DType: "F32", Shape: []int{}, Data: []byte{0, 0, 128, 63}},
	}}
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	g, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if g.Metadata["format"] != "pt" || len(g.Tensors) != 3 || g.Tensors[0].Name != "a" {
		t.Fatalf("round trip = %+v", g)
	}
	a, _ := g.Get("a")
	if !bytes.Equal(a.Data, f.Tensors[1].Data) || len(a.Shape) != 2 {
		t.Fatalf("a = %+v", a)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

// container builds a file from a header and a data section of body zero
// bytes, whatever the header says.
func container(js string, body int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	return append(append(b, js...), make([]byte, body)...)
}

// decodeBoth decodes b with Decode and with Read, which must agree.
func decodeBoth(t *testing.T, b []byte) (*File, error) {
	t.Helper()
	f, err := Decode(b)
	g, rerr := Read(bytes.NewReader(b), int64(len(b)))
	if fmt.Sprint(err) != fmt.Sprint(rerr) || !reflect.DeepEqual(f, g) {
		t.Fatalf("Decode = %+v, %v; Read = %+v, %v", f, err, g, rerr)
	}
	return f, err
}

func TestDecodeErrors(t *testing.T) {
	good := new(bytes.Buffer)
	Encode(good, &File{Tensors: []Tensor{{Name: "w", DType: "F32", Shape: []int{2}, Data: make([]byte, 8)}}})
	w := func(dtype, shape, offsets string) string {
		return fmt.Sprintf(`"w":{"dtype":%s,"shape":%s,"data_offsets":%s}`, dtype, shape, offsets)
	}
	cases := []struct {
		name   string
		in     []byte
		tensor string // the entry the error must name
		want   string
	}{
		{"empty", nil, "", "file is 0 bytes, too short for the 8-byte header length"},
		{"seven bytes", make([]byte, 7), "", "file is 7 bytes, too short for the 8-byte header length"},
		{"header length over the format's limit", binary.LittleEndian.AppendUint64(nil, 100_000_001), "",
			"header length 100000001 at byte 0 is over the format's limit of 100000000 bytes"},
		{"header past the end", container("{}", 0)[:9], "", "header length 2 at byte 0 exceeds the file (1 bytes after it)"},
		{"truncated", good.Bytes()[:good.Len()-1], "w", "fall outside the 7 data bytes (file truncated at byte"},
		{"bad json", container("{nope", 0), "", "bad JSON header (bytes 8..13)"},
		{"not UTF-8", container("{\"\xff\":{}}", 0), "", "bad JSON header (bytes 8..16): not valid UTF-8"},
		{"header not an object", container(`[1,2]`, 0), "", "bad JSON header (bytes 8..13): not a JSON object"},
		{"more after the header", container(`{} {}`, 0), "", "bad JSON header (bytes 8..13): more JSON after the object"},
		{"duplicate name", container(`{`+w(`"U8"`, `[1]`, `[0,1]`)+`,`+w(`"U8"`, `[1]`, `[1,2]`)+`}`, 2), "",
			`key "w" appears twice`},
		{"entry not an object", container(`{"w":5}`, 0), "w", "bad header entry: not a JSON object"},
		{"duplicate field", container(`{"w":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}}`, 1), "w",
			`bad header entry: key "dtype" appears twice`},
		{"extra field", container(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, 4), "w", "bad header entry: x: unknown field"},
		{"no dtype", container(`{"w":{"shape":[1],"data_offsets":[0,4]}}`, 4), "w", `bad header entry: no "dtype"`},
		{"no shape", container(`{"w":{"dtype":"F32","data_offsets":[0,4]}}`, 4), "w", `bad header entry: no "shape"`},
		{"no offsets", container(`{"w":{"dtype":"F32","shape":[1]}}`, 4), "w", `bad header entry: no "data_offsets"`},
		{"null dtype", container(`{`+w(`null`, `[1]`, `[0,4]`)+`}`, 4), "w", "bad header entry: dtype: null"},
		{"null shape", container(`{`+w(`"F32"`, `null`, `[0,4]`)+`}`, 4), "w", "bad header entry: shape: null"},
		{"null dimension", container(`{`+w(`"F32"`, `[2,null]`, `[0,8]`)+`}`, 8), "w", "shape: null is not a whole number"},
		{"fractional dimension", container(`{`+w(`"F32"`, `[2.5]`, `[0,8]`)+`}`, 8), "w", "shape: 2.5 is not a whole number"},
		{"negative dimension", container(`{`+w(`"F32"`, `[-1]`, `[0,4]`)+`}`, 4), "w", "shape: -1 is not a whole number"},
		{"huge dimension", container(`{`+w(`"F32"`, `[1e30]`, `[0,4]`)+`}`, 4), "w", "shape: 1e30 is not a whole number"},
		// A zero does not excuse the other dimensions (NumPy's rule), so no
		// stride or output size of an empty tensor can wrap.
		{"empty tensor with a huge dimension", container(`{`+w(`"F32"`, `[4611686018427387904,0]`, `[0,0]`)+`}`, 0), "w", "more bytes than an int can count"},
		{"unknown dtype", container(`{`+w(`"Q9"`, `[1]`, `[0,4]`)+`}`, 4), "w", `unknown dtype "Q9"`},
		{"three offsets", container(`{`+w(`"F32"`, `[1]`, `[0,4,8]`)+`}`, 8), "w", "data_offsets [0 4 8] has 3 numbers, want 2"},
		{"one offset", container(`{`+w(`"F32"`, `[1]`, `[4]`)+`}`, 4), "w", "data_offsets [4] has 1 numbers, want 2"},
		{"negative offset", container(`{`+w(`"U8"`, `[0]`, `[-1,-1]`)+`}`, 0), "w", "data_offsets: -1 is not a whole number"},
		{"offsets reversed", container(`{`+w(`"F32"`, `[1]`, `[4,0]`)+`}`, 4), "w", "data offsets [4, 0] end before they begin"},
		{"size mismatch", container(`{`+w(`"F32"`, `[2]`, `[0,4]`)+`}`, 4), "w", "4 data bytes for shape [2] of F32 (want 8)"},
		{"offsets past the data", container(`{`+w(`"F32"`, `[2]`, `[0,8]`)+`}`, 4), "w",
			"data offsets [0, 8] fall outside the 4 data bytes (file truncated at byte 66?)"},
		// 2⁶² float32s are 2⁶⁴ bytes, which wraps to 0 in an int: the empty
		// offsets must not pass for them.
		{"wrapping shape", container(`{`+w(`"F32"`, `[4611686018427387904]`, `[0,0]`)+`}`, 0), "w",
			"shape [4611686018427387904] of F32 has more bytes than an int can count"},
		{"wrapping product", container(`{`+w(`"I64"`, `[2147483648,2147483648]`, `[0,0]`)+`}`, 0), "w",
			"has more bytes than an int can count"},
		{"overlap", container(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8),
			"b", `data offsets [4, 8] overlap tensor "a"'s [0, 8]`},
		{"same bytes", container(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}`, 4),
			"b", `data offsets [0, 4] overlap tensor "a"'s [0, 4]`},
		{"hole", container(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, 12),
			"b", "data offsets [8, 12] leave data bytes [4, 8) to no tensor"},
		{"hole at the start", container(`{`+w(`"F32"`, `[1]`, `[4,8]`)+`}`, 8), "w", "leave data bytes [0, 4) to no tensor"},
		{"trailing bytes", container(`{`+w(`"F32"`, `[1]`, `[0,4]`)+`}`, 5), "", "data bytes [4, 5) belong to no tensor"},
		{"data without tensors", container(`{}`, 1), "", "data bytes [0, 1) belong to no tensor"},
		{"metadata a number", container(`{"__metadata__":1}`, 0), "", "__metadata__ is not a string map: not a JSON object"},
		{"metadata an array", container(`{"__metadata__":["a"]}`, 0), "", "__metadata__ is not a string map: not a JSON object"},
		{"metadata null", container(`{"__metadata__":null}`, 0), "", "__metadata__ is not a string map: not a JSON object"},
		{"metadata not strings", container(`{"__metadata__":{"n":1}}`, 0), "", `__metadata__ is not a string map: "n": json: cannot unmarshal`},
		{"metadata null value", container(`{"__metadata__":{"n":null}}`, 0), "", `__metadata__ is not a string map: "n": null`},
		{"metadata key twice", container(`{"__metadata__":{"n":"1","n":"2"}}`, 0), "", `__metadata__ is not a string map: key "n" appears twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeBoth(t, c.in)
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) || fe.Tensor != c.tensor {
				t.Fatalf("err = %v, want a *FormatError about tensor %q mentioning %q", err, c.tensor, c.want)
			}
		})
	}
}

func TestDecodeOverflowIs(t *testing.T) {
	_, err := Decode(container(`{"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}`, 0))
	if !errors.Is(err, shape.ErrOverflow) {
		t.Errorf("err = %v, want one wrapping shape.ErrOverflow", err)
	}
}

func TestDecodeAccepts(t *testing.T) {
	cases := []struct {
		name  string
		in    []byte
		names []string
	}{
		{"nothing", container(`{}`, 0), nil},
		{"padded header", container(`{}      `, 0), nil},
		{"metadata only", container(`{"__metadata__":{"format":"pt"}}`, 0), nil},
		{"empty tensor with a large dimension", container(`{"w":{"dtype":"F32","shape":[1099511627776,0],"data_offsets":[0,0]}}`, 0),
			[]string{"w"}},
		// Writers order data by dtype alignment, then name; any order that
		// tiles the data is valid.
		{"data out of name order", container(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[8,9]},"b":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, 9),
			[]string{"a", "b"}},
		{"empty tensors share an offset", container(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[1,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"c":{"dtype":"F32","shape":[0,3],"data_offsets":[1,1]}}`, 1),
			[]string{"a", "b", "c"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := decodeBoth(t, c.in)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, x := range f.Tensors {
				names = append(names, x.Name)
				if n, _ := shape.Bytes(x.Shape, ElemSize(x.DType)); n != len(x.Data) {
					t.Errorf("tensor %s: %d bytes for shape %v of %s", x.Name, len(x.Data), x.Shape, x.DType)
				}
			}
			if !slices.Equal(names, c.names) {
				t.Errorf("tensors %v, want %v", names, c.names)
			}
		})
	}
}

// sizeReader is an io.ReaderAt that serves a small file as though it
// were size bytes, zeros past the end, and records the bytes asked for.
type sizeReader struct {
	b    []byte
	read int64
}

func (r *sizeReader) ReadAt(p []byte, off int64) (int, error) {
	r.read += int64(len(p))
	clear(p)
	if off < int64(len(r.b)) {
		copy(p, r.b[off:])
	}
	return len(p), nil
}

// Read checks what the header and its length declare against the file's
// size before it reads, or allocates, what they declare.
func TestReadChecksSizesFirst(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		name    string
		file    []byte
		size    int64
		maxRead int64
		want    string
	}{
		{"header over the limit", binary.LittleEndian.AppendUint64(nil, 1<<40), 2 << 40, 8, "over the format's limit"},
		{"header past the end", binary.LittleEndian.AppendUint64(nil, 99_999_999), 1000, 8, "exceeds the file"},
		{"data past the end", container(`{"w":{"dtype":"F32","shape":[268435456],"data_offsets":[0,1073741824]}}`, 0), 1000, 1000,
			"fall outside the"},
		{"hole in a huge file", container(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 0), 10 * gib, 100,
			"belong to no tensor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &sizeReader{b: c.file}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			_, err := Read(r, c.size)
			runtime.ReadMemStats(&ms)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want mention of %q", err, c.want)
			}
			if r.read > c.maxRead {
				t.Errorf("read %d bytes before refusing the file, want at most %d", r.read, c.maxRead)
			}
			if got := ms.TotalAlloc - before; got > 1<<20 {
				t.Errorf("allocated %d bytes before refusing the file", got)
			}
		})
	}
	// A file that shrank below its stated size is an error, not zeros.
	b := new(bytes.Buffer)
	Encode(b, &File{Tensors: []Tensor{{Name: "w", DType: "F32", Shape: []int{2}, Data: make([]byte, 8)}}})
	if _, err := Read(bytes.NewReader(b.Bytes()[:b.Len()-1]), int64(b.Len())); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Read of a file shorter than its size: %v, want io.ErrUnexpectedEOF", err)
	}
}

// FuzzDecode checks that Decode and Read agree, never panic, and that
// whatever they accept survives a round trip through Encode.
func FuzzDecode(f *testing.F) {
	seeds := []*File{
		{},
		{Metadata: map[string]string{"format": "pt", "kiln.ir": `{"values":[]}`}},
		{Metadata: map[string]string{"format": "pt"}, Tensors: []Tensor{
			{Name: "fc.weight", DType: "F32", Shape: []int{2, 3}, Data: make([]byte, 24)},
			{Name: "fc.bias", DType: "BF16", Shape: []int{2}, Data: []byte{1, 2, 3, 4}},
			{Name: "bn.num_batches_tracked", DType: "I64", Shape: []int{}, Data: make([]byte, 8)},
			{Name: "empty", DType: "U8", Shape: []int{0, 5}, Data: nil},
			{Name: "mask", DType: "BOOL", Shape: []int{3}, Data: []byte{1, 0, 1}},
		}},
	}
	for _, s := range seeds {
		var b bytes.Buffer
		if err := Encode(&b, s); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add(container(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[8,9]},"b":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, 9))
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := decodeBoth(t, b)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := Encode(&out, x); err != nil {
			t.Fatalf("a decoded file does not encode: %v", err)
		}
		y, err := Decode(out.Bytes())
		if err != nil {
			t.Fatalf("re-encoded file does not decode: %v", err)
		}
		if len(x.Metadata) == 0 {
			x.Metadata = nil // Encode leaves out an empty map
		}
		for _, f := range []*File{x, y} {
			for i := range f.Tensors {
				f.Tensors[i].Data = slices.Clip(f.Tensors[i].Data)
				if len(f.Tensors[i].Data) == 0 {
					f.Tensors[i].Data = nil
				}
			}
		}
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("round trip changed the file:\n%+v\n%+v", x, y)
		}
	})
}

func TestEncodeErrors(t *testing.T) {
	cases := []struct {
		name string
		ts   []Tensor
		want string
	}{
		{"duplicate name", []Tensor{{Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{1}}, {Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{2}}},
			`duplicate tensor name "a"`},
		{"bytes do not fit", []Tensor{{Name: "w", DType: "F32", Shape: []int{3}, Data: make([]byte, 8)}}, `tensor "w": 8 bytes do not fit shape [3] of "F32"`},
		{"unknown dtype", []Tensor{{Name: "w", DType: "F31", Shape: []int{1}, Data: make([]byte, 4)}}, `tensor "w": 4 bytes do not fit shape [1] of "F31"`},
		// Two negative dimensions multiply to a size the bytes fit; the
		// file would then fail to load.
		{"negative dimensions", []Tensor{{Name: "w", DType: "F32", Shape: []int{-1, -2}, Data: make([]byte, 8)}}, `tensor "w": shape [-1 -2]: negative dimension -1`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Encode(&buf, &File{Tensors: c.ts})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want mention of %q", err, c.want)
			}
			if buf.Len() != 0 {
				t.Errorf("a rejected container wrote %d bytes", buf.Len())
			}
		})
	}
}

func TestReadWriteFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.safetensors")
	if _, err := ReadFile(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("ReadFile of a missing file: %v, want an error naming it", err)
	}
	bad := filepath.Join(dir, "bad.safetensors")
	if err := os.WriteFile(bad, []byte("not a container"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(bad); err == nil || !strings.HasPrefix(err.Error(), bad+": safetensors: header length") {
		t.Errorf("ReadFile of a bad file: %v, want an error naming the path and the header length", err)
	}
	// A failing writer leaves neither the file nor its temporary behind.
	path := filepath.Join(dir, "out.safetensors")
	err := WriteFile(path, &File{Tensors: []Tensor{{Name: "w", DType: "F32", Shape: []int{2}, Data: make([]byte, 3)}}})
	if err == nil {
		t.Fatal("WriteFile of a tensor whose bytes do not fit its shape: no error")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "missing.safetensors" && e.Name() != "bad.safetensors" {
			t.Errorf("failed write left %s behind", e.Name())
		}
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir", "x.safetensors"), &File{}); err == nil {
		t.Error("WriteFile into a missing directory: no error")
	}
}
