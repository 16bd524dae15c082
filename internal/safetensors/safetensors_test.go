package safetensors

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestDecodeErrors(t *testing.T) {
	good := new(bytes.Buffer)
	Encode(good, &File{Tensors: []Tensor{{Name: "w", DType: "F32", Shape: []int{2}, Data: make([]byte, 8)}}})
	hdr := func(js string, body int) []byte {
		b := make([]byte, 8, 8+len(js)+body)
		binary.LittleEndian.PutUint64(b, uint64(len(js)))
		return append(append(b, js...), make([]byte, body)...)
	}
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"huge header", hdr("{}", 0)[:8], "exceeds the file"},
		{"truncated", good.Bytes()[:good.Len()-1], `"w"`},
		{"bad json", hdr("{nope", 0), "bad JSON header"},
		{"bad dtype", hdr(`{"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}}`, 4), `unknown dtype "Q9"`},
		{"size mismatch", hdr(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4), "want 8"},
		{"negative shape", hdr(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4), "bad shape"},
		{"extra field", hdr(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, 4), "bad header entry"},
		{"seven bytes", make([]byte, 7), "file is 7 bytes, too short for the 8-byte header length"},
		{"header past the end", hdr("{}", 0)[:9], "header length 2 at byte 0 exceeds the file (1 bytes after it)"},
		{"header not an object", hdr(`[1,2]`, 0), "bad JSON header (bytes 8..13)"},
		{"entry not an object", hdr(`{"w":5}`, 0), `tensor "w": bad header entry`},
		{"metadata not strings", hdr(`{"__metadata__":{"n":1}}`, 0), "__metadata__ is not a string map"},
		{"offsets reversed", hdr(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}`, 4), `tensor "w": data offsets [4, 0] fall outside the 4 data bytes`},
		{"offsets past the data", hdr(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4), "fall outside the 4 data bytes (file truncated at byte 66?)"},
		{"negative offset", hdr(`{"w":{"dtype":"U8","shape":[0],"data_offsets":[-1,0]}}`, 0), "data offsets [-1, 0] fall outside"},
		// 2⁶² float32s are 2⁶⁴ bytes, which wraps to 0 in an int: the empty
		// offsets must not pass for them.
		{"wrapping shape", hdr(`{"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}`, 0), `tensor "w": shape [4611686018427387904] of F32 has more bytes than an int can count`},
		{"wrapping product", hdr(`{"w":{"dtype":"I64","shape":[2147483648,2147483648],"data_offsets":[0,0]}}`, 0), "has more bytes than an int can count"},
	}
	for _, c := range cases {
		_, err := Decode(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want mention of %q", c.name, err, c.want)
		}
	}
	// An empty tensor may have any dimensions beside its zero.
	f, err := Decode(hdr(`{"w":{"dtype":"F32","shape":[4611686018427387904,0],"data_offsets":[0,0]}}`, 0))
	if err != nil || len(f.Tensors) != 1 || len(f.Tensors[0].Data) != 0 {
		t.Errorf("empty tensor with a huge dimension: %+v, %v", f, err)
	}
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
		{"negative dimensions", []Tensor{{Name: "w", DType: "F32", Shape: []int{-1, -2}, Data: make([]byte, 8)}}, `tensor "w": negative dimension in shape [-1 -2]`},
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
