package quant

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzReadConf feeds ReadConf arbitrary bytes: a conf is a file users
// exchange, so it must fail with an error, never panic; and a conf it
// accepts must write and read back to itself.
func FuzzReadConf(f *testing.F) {
	f.Add([]byte(ipexConf))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"id": 0}]`))
	f.Add([]byte(ipexConf[:len(ipexConf)/2]))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadConf(bytes.NewReader(data))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := c.Write(&b); err != nil {
			t.Fatalf("an accepted conf does not write: %v", err)
		}
		again, err := ReadConf(&b)
		if err != nil {
			t.Fatalf("a written conf does not read back: %v\n%s", err, b.String())
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("a conf read back differs:\n%+v\n%+v", again, c)
		}
	})
}
