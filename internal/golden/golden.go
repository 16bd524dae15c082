// Package golden loads the PyTorch reference values that the generator
// scripts under testdata/golden write, and compares Kiln's results with
// them in tests.
package golden

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/internal/tensorcodec"
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
		x, err := tensorcodec.Decode(e)
		if err != nil {
			t.Fatalf("golden: %s: tensor %q: %v", name, e.Name, err)
		}
		s[e.Name] = x
	}
	return s
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

// AssertWithin fails the test unless got has want's shape and every element
// is within atol of want. It is for values that are zero in exact arithmetic
// (the gradient of a bias that a batch norm cancels), where only rounding
// noise is left to compare and a relative tolerance means nothing.
func AssertWithin(t testing.TB, what string, got, want *autograd.Tensor, atol float64) {
	t.Helper()
	if got == nil || fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
		t.Errorf("%s: got %v, want shape %v", what, got, want.Shape())
		return
	}
	gv, wv := got.Values(), want.Values()
	for i := range wv {
		if d := math.Abs(gv[i] - wv[i]); !(d <= atol) {
			t.Errorf("%s: element %d: got %.8g, want %.8g (atol %g)", what, i, gv[i], wv[i], atol)
			return
		}
	}
}
