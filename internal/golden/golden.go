// Package golden loads the PyTorch reference values that the generator
// scripts under testdata/golden write, and compares Kiln's results with
// them in tests.
package golden

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/safetensors"
)

// Dir is the absolute path of testdata/golden in the module.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "golden")
}

// Set is one golden file's tensors by name.
type Set map[string]*autograd.Tensor

// Load reads testdata/golden/name (e.g. "activation.safetensors") and fails
// the test if it cannot.
func Load(t testing.TB, name string) Set {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join(Dir(), name))
	if err != nil {
		t.Fatalf("golden: %v (regenerate with `make golden`)", err)
	}
	s := Set{}
	for _, e := range f.Tensors {
		x, err := ToTensor(e)
		if err != nil {
			t.Fatalf("golden: %s: %v", name, err)
		}
		s[e.Name] = x
	}
	return s
}

// ToTensor converts a safetensors entry into a contiguous Kiln tensor.
func ToTensor(e safetensors.Tensor) (*autograd.Tensor, error) {
	n := 1
	for _, d := range e.Shape {
		n *= d
	}
	b := e.Data
	switch e.DType {
	case "F32":
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return goldenFloat32(v, e.Shape), nil
	case "F64":
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
		return goldenFloat32(v, e.Shape), nil
	case "BF16":
		v := make([]uint16, n)
		for i := range v {
			v[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		return autograd.FromBFloat16(v, e.Shape...), nil
	case "I64":
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		return autograd.FromInt64(v, e.Shape...), nil
	case "I32":
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return autograd.FromInt32(v, e.Shape...), nil
	case "I8":
		v := make([]int8, n)
		for i := range v {
			v[i] = int8(b[i])
		}
		return autograd.FromInt8(v, e.Shape...), nil
	case "U8", "BOOL":
		return autograd.FromUint8(append([]uint8(nil), b...), e.Shape...), nil
	}
	return nil, fmt.Errorf("tensor %q: unsupported dtype %s", e.Name, e.DType)
}

// goldenFloat32 wraps v with shape; an empty shape is a 0-d tensor, which
// FromFloat32 (giving 1-D without a shape) cannot make.
func goldenFloat32(v []float32, shape []int) *autograd.Tensor {
	if len(shape) == 0 {
		return autograd.Scalar(v[0])
	}
	return autograd.FromFloat32(v, shape...)
}

// Get returns the tensor called name, failing the test if it is missing.
func (s Set) Get(t testing.TB, name string) *autograd.Tensor {
	t.Helper()
	x, ok := s[name]
	if !ok {
		t.Fatalf("golden: no tensor %q (have %d, e.g. %v)", name, len(s), s.someNames(5))
	}
	return x
}

// Cases lists the distinct case prefixes: the part of each name before its
// last dot, sorted.
func (s Set) Cases() []string {
	seen := map[string]bool{}
	for name := range s {
		if i := strings.LastIndex(name, "."); i > 0 {
			seen[name[:i]] = true
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s Set) someNames(n int) []string {
	var out []string
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// Close reports whether got matches want in shape and in values: every
// element within rtol of want, relative to the larger of |want| and the
// tensor's largest magnitude times rtol's own scale, i.e.
// |got-want| <= rtol*(|want| + max|want|·1e-2). The max|want| term keeps
// elements near zero (where cancellation leaves absolute, not relative,
// error) from failing a test whose tensor is right to rtol overall.
// got may be in any memory format; values are compared in logical order.
func Close(got, want *autograd.Tensor, rtol float64) error {
	if got == nil {
		return fmt.Errorf("got nil tensor, want shape %v", want.Shape())
	}
	gs, ws := got.Shape(), want.Shape()
	if fmt.Sprint(gs) != fmt.Sprint(ws) {
		return fmt.Errorf("shape %v, want %v", gs, ws)
	}
	gv, wv := got.Values(), want.Values()
	scale := 0.0
	for _, w := range wv {
		scale = math.Max(scale, math.Abs(w))
	}
	worst, at := 0.0, -1
	for i := range wv {
		d := math.Abs(gv[i] - wv[i])
		tol := rtol * (math.Abs(wv[i]) + 1e-2*scale)
		if math.IsNaN(gv[i]) != math.IsNaN(wv[i]) || d > tol {
			if at < 0 || d/tol > worst {
				worst, at = d/tol, i
			}
		}
	}
	if at >= 0 {
		return fmt.Errorf("element %d: got %.8g, want %.8g (rtol %g, max |want| %.4g)", at, gv[at], wv[at], rtol, scale)
	}
	return nil
}

// AssertClose fails the test when Close reports a mismatch.
func AssertClose(t testing.TB, what string, got, want *autograd.Tensor, rtol float64) {
	t.Helper()
	if err := Close(got, want, rtol); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}
