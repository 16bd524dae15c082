package nn_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/nn"
)

// TestErrorKinds checks that nn's misuse panics are *nn.Error values that
// read "nn: Op: …", carry autograd's kinds and that autograd.Try converts.
func TestErrorKinds(t *testing.T) {
	cases := []struct {
		name string
		f    func()
		kind error
		want string
	}{
		{"argument", func() { nn.NewLinear(autograd.NewGenerator(1), -1, 2, nn.LinearOptions{}) }, autograd.ErrArgument, "nn: NewLinear: negative size"},
		{"shape", func() { nn.Fans(autograd.Zeros(3)) }, autograd.ErrShape, "nn: Fans: fan in and fan out"},
		{"index", func() { nn.NewSequential().At(2) }, autograd.ErrIndex, "nn: Sequential.At: index 2 out of range"},
		{"dtype", func() { nn.Uniform(autograd.NewGenerator(1), autograd.Empty(autograd.Int64, 2, 2), 0, 1) }, autograd.ErrDType, "nn: Uniform: cannot initialise a int64 tensor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := autograd.Try(c.f)
			var ne *nn.Error
			if !errors.As(err, &ne) || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want an *nn.Error of kind %v containing %q", err, c.kind, c.want)
			}
		})
	}
}

// TestFileErrors checks that state-dict reading and loading fail with an
// *nn.FileError naming the file and, for a bad entry, the tensor, and that
// errors.As reaches the cause.
func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	if err := nn.SaveTensors(good, []nn.NamedTensor{{Name: "w", Tensor: autograd.Zeros(2, 2)}}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing.safetensors")
	garbage := write("garbage.safetensors", []byte("not a safetensors file at all"))
	badEntry := write("bad-entry.safetensors", bytes.Replace(raw, []byte(`"F32"`), []byte(`"Q32"`), 1))
	isFormat := func(err error) bool { var fe *safetensors.FormatError; return errors.As(err, &fe) }
	cases := []struct {
		name, path, field string
		cause             func(error) bool
	}{
		{"missing", missing, "", func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
		{"garbage", garbage, "", isFormat},
		{"bad entry", badEntry, "w", func(error) bool { return true }},
	}
	load := map[string]func(string) error{
		"ReadTensors":   func(p string) error { _, err := nn.ReadTensors(p); return err },
		"LoadStateDict": func(p string) error { return nn.LoadStateDict(nn.NewSequential(), p) },
	}
	for _, c := range cases {
		for fn, f := range load {
			t.Run(fn+"/"+c.name, func(t *testing.T) {
				err := f(c.path)
				var fe *nn.FileError
				if !errors.As(err, &fe) || fe.File != c.path || fe.Field != c.field || !c.cause(err) {
					t.Fatalf("error %v (%#v), want an *nn.FileError for %s, field %q, with its cause", err, fe, c.path, c.field)
				}
				if !strings.HasPrefix(err.Error(), "nn: ") || !strings.Contains(err.Error(), c.path) {
					t.Errorf("message %q does not start with nn: and name the file", err)
				}
				if c.field != "" && !strings.Contains(err.Error(), `"`+c.field+`"`) {
					t.Errorf("message %q does not name the tensor", err)
				}
			})
		}
	}
}
