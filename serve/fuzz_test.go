package serve

import (
	"bytes"
	"testing"
)

// FuzzDecodeJSON feeds request bodies to the JSON decoder: whatever it is
// handed, it returns inputs or an error, never a panic.
func FuzzDecodeJSON(f *testing.F) {
	_, g := mlp(f)
	for _, seed := range []string{
		`{"inputs": [{"shape": [1, 8], "data": [1, 2, 3, 4, 5, 6, 7, 8]}]}`,
		`{"inputs": [{"shape": [2, 8], "dtype": "float32", "data": []}]}`,
		`{"inputs": [{"shape": [1, 8], "data": ["NaN", "Infinity", "-Infinity", 1e40, -0, 5, 6, 7]}]}`,
		`{"inputs": [{"shape": [4294967296, 4294967296], "data": [1]}]}`,
		`{"inputs": [{"shape": [0, 8], "data": []}]}`,
		`{"inputs": []}`,
		`[1, 2]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		xs, err := decodeJSON(bytes.NewReader(b), g)
		if err == nil && len(xs) != 1 {
			t.Fatalf("%d inputs and no error", len(xs))
		}
	})
}
