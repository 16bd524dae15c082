package autograd

import (
	"fmt"

	"github.com/kilnml/kiln/internal/shape"
	"gorgonia.org/tensor"
)

var denseTypes = map[DType]tensor.Dtype{
	Float32:  tensor.Float32,
	BFloat16: tensor.Uint16,
	Int8:     tensor.Int8,
	Uint8:    tensor.Uint8,
	Int32:    tensor.Int32,
	Int64:    tensor.Int64,
}

// Dense returns a *tensor.Dense that shares t's memory. BFloat16 travels as
// Uint16 bits. A channels-last tensor comes back as its physical NHWC (or
// NDHWC) array with a thunked transpose to the logical NCHW shape, so the
// Dense's Shape is the logical one and no data moves.
func (t *Tensor) Dense() *tensor.Dense {
	t.checkLive("Dense")
	order := physicalOrder(t.format, len(t.shape))
	phys := make([]int, len(order))
	for i, d := range order {
		phys[i] = t.shape[d]
	}
	// No dimensions make a scalar Dense, which still shares the one-element
	// backing slice.
	d := tensor.New(tensor.WithShape(phys...), tensor.WithBacking(t.data))
	if t.format != Contiguous {
		inv := make([]int, len(order))
		for i, dim := range order {
			inv[dim] = i
		}
		if err := d.T(inv...); err != nil {
			panic(err) // the permutation is built above and always valid
		}
	}
	return d
}

// FromDense wraps a *tensor.Dense's memory as a Tensor without copying.
// Uint16 is read as BFloat16. A Dense that is a plain row-major array gives a
// contiguous tensor; one that is the transposed view Dense produces for a
// channels-last tensor gives a channels-last tensor. Other views (slices,
// arbitrary transposes) must be materialised first.
func FromDense(d *tensor.Dense) (*Tensor, error) {
	if d == nil {
		return nil, fmt.Errorf("autograd: FromDense: nil Dense")
	}
	var dtype DType = -1
	for k, v := range denseTypes {
		if v == d.Dtype() {
			dtype = k
		}
	}
	if dtype < 0 {
		return nil, fmt.Errorf("autograd: FromDense: dtype %v has no Kiln equivalent", d.Dtype())
	}
	if d.IsView() {
		return nil, fmt.Errorf("autograd: FromDense: a sliced view cannot be shared without a copy; call Materialize first")
	}
	dims := []int(d.Shape().Clone())
	format := Contiguous
	if d.IsMaterializable() {
		format = channelsLastOf(d)
		if format == Contiguous {
			return nil, fmt.Errorf("autograd: FromDense: a transposed Dense of shape %v is not a channels-last layout; call Materialize first", dims)
		}
	}
	if d.IsScalar() {
		dims = []int{}
	}
	// gorgonia counts a shape's elements in wrapping int arithmetic, so a
	// Dense can hold 16 elements under a shape that claims 2^64+16.
	n, err := shape.Numel(dims)
	if err != nil {
		return nil, fmt.Errorf("autograd: FromDense: %w", err)
	}
	data := denseBacking(d, dtype)
	if dataLen(data) != n {
		return nil, fmt.Errorf("autograd: FromDense: backing has %d elements, shape %v needs %d", dataLen(data), dims, n)
	}
	return &Tensor{dtype: dtype, shape: dims, format: format, data: data}, nil
}

// channelsLastOf recognises the strides of a transposed Dense that views an
// NHWC (or NDHWC) array as NCHW (NCDHW).
func channelsLastOf(d *tensor.Dense) MemoryFormat {
	shape := []int(d.Shape())
	for _, f := range []MemoryFormat{ChannelsLast, ChannelsLast3d} {
		if len(shape) != f.rank() {
			continue
		}
		if sameShape(d.Strides(), stridesOf(shape, f)) {
			return f
		}
	}
	return Contiguous
}

// denseBacking returns d's backing slice. Data would return a scalar
// Dense's value instead of its one-element slice.
func denseBacking(d *tensor.Dense, dtype DType) any {
	switch dtype {
	case Float32:
		return d.Float32s()
	case BFloat16:
		return d.Uint16s()
	case Int8:
		return d.Int8s()
	case Uint8:
		return d.Uint8s()
	case Int32:
		return d.Int32s()
	}
	return d.Int64s()
}
