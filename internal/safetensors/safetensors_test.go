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
	}
	for _, c := range cases {
		_, err := Decode(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want mention of %q", c.name, err, c.want)
		}
	}
}
