package kiln

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// NonFiniteError reports the first tensor element found to be NaN or
// infinite.
type NonFiniteError struct {
	// Name is the tensor's state-dict name, e.g. "layer1.0.conv1.weight".
	Name string
	// Kind says what the tensor is: "parameter" or "gradient" (the
	// parameter's) for CheckFinite, what the caller said for
	// CheckFiniteTensors.
	Kind string
	// Index is the element's position in the tensor's logical row-major
	// order (as in PyTorch's t.flatten()), whatever its memory format.
	Index int
	// Value is the element: NaN, +Inf or -Inf.
	Value float32
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("%s %s holds %v at index %d", e.Kind, e.Name, e.Value, e.Index)
}

// CheckFinite returns a *NonFiniteError for the first parameter of m, or
// gradient of one, that holds a NaN or an infinity, and nil when all are
// finite. Parameters are visited in nn.NamedParameters order, each before
// its gradient, so the error names the earliest layer that went wrong.
// Float32 and BFloat16 tensors (split master weights' BF16 halves
// included) are checked; other dtypes cannot hold a NaN.
//
// It reads each tensor once and allocates nothing per element, so a
// training loop can afford to call it after every step: a diverged run
// then stops at the step that diverged, before it saves anything.
func CheckFinite(m nn.Module) error {
	for _, p := range nn.NamedParameters(m) {
		if err := checkFinite("parameter", p.Name, p.Tensor); err != nil {
			return err
		}
		if err := checkFinite("gradient", p.Name, p.Tensor.Grad()); err != nil {
			return err
		}
	}
	return nil
}

// CheckFiniteTensors is CheckFinite for any named tensors, such as
// optimizer state or a state dict about to be saved; kind goes into the
// error's Kind.
func CheckFiniteTensors(kind string, ts []nn.NamedTensor) error {
	for _, nt := range ts {
		if err := checkFinite(kind, nt.Name, nt.Tensor); err != nil {
			return err
		}
	}
	return nil
}

// checkFinite returns a *NonFiniteError for t's first non-finite element;
// a nil t (a parameter with no gradient yet) is fine.
func checkFinite(kind, name string, t *autograd.Tensor) error {
	if t == nil {
		return nil
	}
	i, v := -1, float32(0)
	switch d := t.Data().(type) {
	case []float32:
		if i = firstNonFinite32(d); i >= 0 {
			v = d[i]
		}
	case []uint16: // bfloat16: the top half of a float32
		if i = firstNonFiniteBF16(d); i >= 0 {
			v = math.Float32frombits(uint32(d[i]) << 16)
		}
	}
	if i < 0 {
		return nil
	}
	return &NonFiniteError{Name: name, Kind: kind, Index: logicalIndex(t, i), Value: v}
}

// firstNonFinite32 returns the index of d's first NaN or infinity, or -1.
// An element is non-finite exactly when its exponent bits are all ones.
func firstNonFinite32(d []float32) int {
	const exp = 0x7f800000
	for i, x := range d {
		if math.Float32bits(x)&exp == exp {
			return i
		}
	}
	return -1
}

// firstNonFiniteBF16 is firstNonFinite32 for bfloat16 bits.
func firstNonFiniteBF16(d []uint16) int {
	const exp = 0x7f80
	for i, x := range d {
		if x&exp == exp {
			return i
		}
	}
	return -1
}

// logicalIndex turns physical index i of t's storage into its index in
// logical row-major order, which differs for channels-last tensors.
func logicalIndex(t *autograd.Tensor, i int) int {
	shape, strides := t.Shape(), t.Strides()
	logical := 0
	for d, n := range shape {
		logical = logical*n + i/strides[d]%n
	}
	return logical
}
