package autograd

import (
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/kilnml/kiln/internal/hugepage"
	"github.com/kilnml/kiln/internal/shape"
	"github.com/kilnml/kiln/internal/uninit"
	"github.com/kilnml/kiln/kernels"
)

// Tensor is an n-dimensional array with a dtype, a logical shape and a
// memory format, optionally tracked by autograd.
//
// The zero Tensor is not usable; make tensors with the constructors (Zeros,
// FromFloat32, Randn, …) or as the results of operations.
type Tensor struct {
	dtype  DType
	shape  []int
	format MemoryFormat
	// data is []float32, []uint16 (BFloat16), []int8, []uint8, []int32 or
	// []int64 in the physical order given by format.
	data any

	requiresGrad bool
	grad         *Tensor
	sparseGrad   *sparseEntries    // instead of grad, after a sparse embedding lookup
	sparseUpdate func(*SparseGrad) // takes each lookup's sparse gradient instead of sparseGrad
	gradHooks    []*gradHook       // run once Backward has finished t's gradient
	node         *node             // the op that made this tensor; nil for leaves
	mode         Mode              // the computation t belongs to
}

// numel is the product of dims, counted by shape.Numel, panicking with
// op's name on a negative dimension or a product past shape.MaxElements
// (which in plain int arithmetic would wrap to a small, wrong size that
// later indexes out of bounds).
func numel(op string, dims []int) int {
	n, err := shape.Numel(dims)
	if err != nil {
		failShape(op, "%v", err)
	}
	return n
}

// meta returns a tensor with t's dtype, shape and format but no data, for
// backward closures that need to know what a gradient must look like
// without keeping t's storage alive.
func (t *Tensor) meta() *Tensor {
	return &Tensor{dtype: t.dtype, shape: t.shape, format: t.format, mode: t.mode.arenaMode()}
}

// makeData allocates n zeroed elements of dtype for a tensor whose shape
// has been checked, by empty for shapes callers pass and by construction
// for those derived from existing tensors.
func makeData(dtype DType, n int) any { return allocIn(Mode{}, dtype, n, true) }

// makeUninit is makeData for results the op writes in full before anyone
// reads them (see internal/uninit): their elements are arbitrary.
func makeUninit(dtype DType, n int) any { return allocIn(Mode{}, dtype, n, false) }

// makeUninitIn is makeUninit for a result in mode m: its memory comes
// from m's arena when m has one (see Arena).
func makeUninitIn(m Mode, dtype DType, n int) any { return allocIn(m, dtype, n, false) }

// allocIn returns n elements of dtype for a result in mode m, from m's
// arena when it has one, else from the heap: zeros if zero, else
// arbitrary.
func allocIn(m Mode, dtype DType, n int, zero bool) any {
	switch dtype {
	case Float32:
		return arenaSlice[float32](m, n, false, zero)
	case BFloat16:
		return arenaSlice[uint16](m, n, false, zero)
	case Int8:
		return arenaSlice[int8](m, n, false, zero)
	case Uint8:
		return arenaSlice[uint8](m, n, false, zero)
	case Int32:
		return arenaSlice[int32](m, n, false, zero)
	case Int64:
		return arenaSlice[int64](m, n, false, zero)
	}
	panic(fmt.Sprintf("autograd: allocIn of %v", dtype))
}

func alloc[T uninit.Elem](n int, zero bool) []T {
	var v []T
	// Large tensors start at one of 64 cache lines past a page boundary,
	// in turn (colour): Go puts every allocation above 32 KiB on a page
	// boundary, so element i of any two same-shaped tensors would sit
	// at one offset in their pages, in the same L1 set, and a kernel
	// reading row b of many of them at once (DLRM's interaction: 27
	// features of [2048, 64]) had them evict each other: 7.5 → 5.0 ms
	// for its forward and backward on Zen 4.
	elem := int(unsafe.Sizeof(*new(T)))
	pad := 0
	if n*elem >= colorMinBytes {
		pad = colorSpan / elem
	}
	if zero {
		v = make([]T, n+pad)
	} else {
		v = uninit.Slice[T](n + pad)
	}
	if pad > 0 {
		off := int(colorNext.Add(1)%(colorSpan/64)) * 64 / elem
		v = v[off : off+n : off+n]
	}
	if size := n * elem; size >= hugepage.MinBytes {
		// Big tensors (embedding tables, large activations) are read
		// all over; see hugepage.
		hugepage.Advise(unsafe.Pointer(unsafe.SliceData(v)), size)
	}
	return v
}

// uninitF32 is makeUninit's float32 slice.
func uninitF32(n int) []float32 { return alloc[float32](n, false) }

// storage returns the address and byte length of the array behind t's data
// from its first element to the array's end (its capacity), so two views of
// one array overlap; (0, 0) for no data.
func (t *Tensor) storage() (uintptr, uintptr) {
	p, n := t.storagePtr()
	return uintptr(p), n
}

// storagePtr is storage with the address as a pointer.
func (t *Tensor) storagePtr() (unsafe.Pointer, uintptr) {
	span := func(p unsafe.Pointer, n, size int) (unsafe.Pointer, uintptr) {
		if n == 0 {
			return nil, 0
		}
		return p, uintptr(n * size)
	}
	switch d := t.data.(type) {
	case []float32:
		return span(unsafe.Pointer(unsafe.SliceData(d)), cap(d), 4)
	case []uint16:
		return span(unsafe.Pointer(unsafe.SliceData(d)), cap(d), 2)
	case []int8:
		return span(unsafe.Pointer(unsafe.SliceData(d)), cap(d), 1)
	case []uint8:
		return span(unsafe.Pointer(unsafe.SliceData(d)), cap(d), 1)
	case []int32:
		return span(unsafe.Pointer(unsafe.SliceData(d)), cap(d), 4)
	case []int64:
		return span(unsafe.Pointer(unsafe.SliceData(d)), cap(d), 8)
	}
	return nil, 0
}

func dataLen(data any) int {
	switch d := data.(type) {
	case []float32:
		return len(d)
	case []uint16:
		return len(d)
	case []int8:
		return len(d)
	case []uint8:
		return len(d)
	case []int32:
		return len(d)
	case []int64:
		return len(d)
	}
	return -1
}

// Empty returns a tensor of dtype and shape whose elements are zero. It is
// the base constructor; Zeros is the float32 shorthand.
func Empty(dtype DType, shape ...int) *Tensor { return empty("Empty", dtype, shape) }

// Zeros returns a float32 tensor of zeros.
func Zeros(shape ...int) *Tensor { return empty("Zeros", Float32, shape) }

// Ones returns a float32 tensor of ones.
func Ones(shape ...int) *Tensor { return full("Ones", 1, shape) }

// Full returns a float32 tensor with every element set to v.
func Full(v float32, shape ...int) *Tensor { return full("Full", v, shape) }

// empty is Empty for op, which names the constructor a bad shape was
// passed to.
func empty(op string, dtype DType, dims []int) *Tensor {
	if dtype < Float32 || dtype > Int64 {
		failDType(op, "unknown dtype %v", dtype)
	}
	n := numel(op, dims)
	// shape.MaxElements is also the most bytes Go allocates: a bigger
	// tensor would die in make with an untyped runtime panic.
	if n > shape.MaxElements/dtype.Size() {
		failShape(op, "%d elements of %v are more than can be allocated", n, dtype)
	}
	return &Tensor{dtype: dtype, shape: cloneInts(dims), data: makeData(dtype, n)}
}

func full(op string, v float32, dims []int) *Tensor {
	t := empty(op, Float32, dims)
	d := t.data.([]float32)
	for i := range d {
		d[i] = v
	}
	return t
}

// ZerosLike returns a tensor of zeros with t's dtype, shape and format.
func ZerosLike(t *Tensor) *Tensor {
	z := Empty(t.dtype, t.shape...)
	z.format = t.format
	return z
}

// OnesLike returns a float32 tensor of ones with t's shape and format.
func OnesLike(t *Tensor) *Tensor {
	o := Ones(t.shape...)
	o.format = t.format
	return o
}

func fromSlice(op string, dtype DType, data any, shape []int) *Tensor {
	if len(shape) == 0 {
		shape = []int{dataLen(data)} // Scalar makes 0-d tensors
	}
	if n := numel(op, shape); n != dataLen(data) {
		failShape(op, "%d elements do not fill shape %v (%d elements)", dataLen(data), shape, n)
	}
	return &Tensor{dtype: dtype, shape: cloneInts(shape), data: data}
}

// FromFloat32 wraps data, in row-major order, as a float32 tensor of the
// given shape without copying. With no shape the tensor is 1-D.
func FromFloat32(data []float32, shape ...int) *Tensor {
	return fromSlice("FromFloat32", Float32, data, shape)
}

// FromBFloat16 wraps bfloat16 bits as a BFloat16 tensor without copying.
func FromBFloat16(data []uint16, shape ...int) *Tensor {
	return fromSlice("FromBFloat16", BFloat16, data, shape)
}

// FromInt8 wraps data as an Int8 tensor without copying.
func FromInt8(data []int8, shape ...int) *Tensor { return fromSlice("FromInt8", Int8, data, shape) }

// FromUint8 wraps data as a Uint8 tensor without copying.
func FromUint8(data []uint8, shape ...int) *Tensor { return fromSlice("FromUint8", Uint8, data, shape) }

// FromInt32 wraps data as an Int32 tensor without copying.
func FromInt32(data []int32, shape ...int) *Tensor { return fromSlice("FromInt32", Int32, data, shape) }

// FromInt64 wraps data as an Int64 tensor without copying.
func FromInt64(data []int64, shape ...int) *Tensor { return fromSlice("FromInt64", Int64, data, shape) }

// Scalar returns a 0-dimensional float32 tensor holding v.
func Scalar(v float32) *Tensor { return &Tensor{dtype: Float32, shape: []int{}, data: []float32{v}} }

// Arange returns the 1-D tensor [start, start+step, …) stopping before end,
// like torch.arange. dtype may be any type; the values are computed in
// float64 and converted.
func Arange(start, end, step float64, dtype DType) *Tensor {
	finite := !math.IsNaN(start+end+step) && !math.IsInf(start, 0) && !math.IsInf(end, 0) && !math.IsInf(step, 0)
	if step == 0 || !finite {
		Fail("Arange", "step must be non-zero and bounds finite (start=%v end=%v step=%v)", start, end, step)
	}
	count := math.Ceil((end - start) / step)
	// Converting a count beyond int's range is implementation-defined in
	// Go (it gives a negative number on amd64), so check it as a float.
	if count > shape.MaxElements {
		failShape("Arange", "[%v, %v) in steps of %v has %.4g elements, too many to allocate", start, end, step, count)
	}
	n := max(int(count), 0)
	t := Empty(dtype, n)
	for i := 0; i < n; i++ {
		t.setFloat(i, start+float64(i)*step)
	}
	return t
}

// DType returns the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Shape returns a copy of the logical shape.
func (t *Tensor) Shape() []int { return cloneInts(t.shape) }

// Dim returns the size of dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int { return t.shape[normDim("Dim", i, len(t.shape))] }

// NDim returns the number of dimensions.
func (t *Tensor) NDim() int { return len(t.shape) }

// Numel returns the number of elements.
func (t *Tensor) Numel() int { return dataLen(t.data) }

// Format returns the memory format.
func (t *Tensor) Format() MemoryFormat { return t.format }

func (t *Tensor) wrongType(want string) {
	failDType("access", "tensor is %v, not %s", t.dtype, want)
}

// Float32s returns the backing slice of a Float32 tensor in physical
// (memory-format) order. Writes through it change the tensor.
func (t *Tensor) Float32s() []float32 {
	t.checkLive("Float32s")
	d, ok := t.data.([]float32)
	if !ok {
		t.wrongType("float32")
	}
	return d
}

// BFloat16s returns the backing bfloat16 bits of a BFloat16 tensor.
func (t *Tensor) BFloat16s() []uint16 {
	t.checkLive("BFloat16s")
	d, ok := t.data.([]uint16)
	if !ok {
		t.wrongType("bfloat16")
	}
	return d
}

// Int8s returns the backing slice of an Int8 tensor.
func (t *Tensor) Int8s() []int8 {
	t.checkLive("Int8s")
	d, ok := t.data.([]int8)
	if !ok {
		t.wrongType("int8")
	}
	return d
}

// Uint8s returns the backing slice of a Uint8 tensor.
func (t *Tensor) Uint8s() []uint8 {
	t.checkLive("Uint8s")
	d, ok := t.data.([]uint8)
	if !ok {
		t.wrongType("uint8")
	}
	return d
}

// Int32s returns the backing slice of an Int32 tensor.
func (t *Tensor) Int32s() []int32 {
	t.checkLive("Int32s")
	d, ok := t.data.([]int32)
	if !ok {
		t.wrongType("int32")
	}
	return d
}

// Int64s returns the backing slice of an Int64 tensor.
func (t *Tensor) Int64s() []int64 {
	t.checkLive("Int64s")
	d, ok := t.data.([]int64)
	if !ok {
		t.wrongType("int64")
	}
	return d
}

// Data returns the backing slice whatever the dtype.
func (t *Tensor) Data() any {
	t.checkLive("Data")
	return t.data
}

// Item returns the value of a one-element tensor as float64.
func (t *Tensor) Item() float64 {
	t.checkLive("Item")
	if t.Numel() != 1 {
		failShape("Item", "tensor of shape %v has %d elements, want 1", t.shape, t.Numel())
	}
	return t.floatAt(0)
}

// floatAt reads physical element i as float64, whatever the dtype.
func (t *Tensor) floatAt(i int) float64 {
	switch d := t.data.(type) {
	case []float32:
		return float64(d[i])
	case []uint16:
		return float64(kernels.F32FromBF16(d[i]))
	case []int8:
		return float64(d[i])
	case []uint8:
		return float64(d[i])
	case []int32:
		return float64(d[i])
	case []int64:
		return float64(d[i])
	}
	panic("unreachable")
}

// setFloat writes v to physical element i, converting to the dtype
// (integers truncate toward zero, as a C cast does).
func (t *Tensor) setFloat(i int, v float64) {
	switch d := t.data.(type) {
	case []float32:
		d[i] = float32(v)
	case []uint16:
		d[i] = kernels.BF16FromF32(float32(v))
	case []int8:
		d[i] = int8(v)
	case []uint8:
		d[i] = uint8(v)
	case []int32:
		d[i] = int32(v)
	case []int64:
		d[i] = int64(v)
	}
}

// Strides returns the logical strides in elements, as PyTorch reports them:
// for a channels-last NCHW tensor they are (H·W·C, 1, W·C, C).
func (t *Tensor) Strides() []int { return stridesOf(t.shape, t.format) }

func stridesOf(shape []int, f MemoryFormat) []int {
	st := make([]int, len(shape))
	perm := physicalOrder(f, len(shape))
	s := 1
	for i := len(perm) - 1; i >= 0; i-- {
		st[perm[i]] = s
		s *= shape[perm[i]]
	}
	return st
}

// physicalOrder lists the logical dimensions in the order they are laid out
// in memory, outermost first.
func physicalOrder(f MemoryFormat, ndim int) []int {
	switch f {
	case ChannelsLast:
		return []int{0, 2, 3, 1}
	case ChannelsLast3d:
		return []int{0, 2, 3, 4, 1}
	}
	p := make([]int, ndim)
	for i := range p {
		p[i] = i
	}
	return p
}

// IsContiguous reports whether the elements are in row-major order of the
// logical shape.
func (t *Tensor) IsContiguous() bool { return t.format == Contiguous }

// reformat returns a copy of t's data laid out in format f (t unchanged).
func (t *Tensor) reformat(f MemoryFormat) *Tensor {
	m := t.mode.arenaMode()
	out := &Tensor{dtype: t.dtype, shape: cloneInts(t.shape), format: f, data: makeUninitIn(m, t.dtype, t.Numel()), mode: m}
	t.reformatInto(out)
	return out
}

// rowMajor returns t, or a contiguous copy of t in another format.
func rowMajor(t *Tensor) *Tensor {
	if t.format == Contiguous {
		return t
	}
	return t.reformat(Contiguous)
}

// reformatInto copies t's data into out, a tensor of t's dtype and shape,
// laid out in out's format.
func (t *Tensor) reformatInto(out *Tensor) {
	if out.format == t.format {
		copyData(out.data, t.data)
		return
	}
	src := stridesOf(t.shape, t.format)
	dst := stridesOf(t.shape, out.format)
	switch s := t.data.(type) {
	case []float32:
		strideCopy(out.data.([]float32), s, t.shape, dst, src)
	case []uint16:
		strideCopy(out.data.([]uint16), s, t.shape, dst, src)
	case []int8:
		strideCopy(out.data.([]int8), s, t.shape, dst, src)
	case []uint8:
		strideCopy(out.data.([]uint8), s, t.shape, dst, src)
	case []int32:
		strideCopy(out.data.([]int32), s, t.shape, dst, src)
	case []int64:
		strideCopy(out.data.([]int64), s, t.shape, dst, src)
	}
}

// strideCopy copies every element of shape from src (with srcStrides) into
// dst (with dstStrides).
func strideCopy[T any](dst, src []T, shape, dstStrides, srcStrides []int) {
	n := len(shape)
	if n == 0 {
		if len(dst) > 0 {
			dst[0] = src[0]
		}
		return
	}
	for _, d := range shape {
		if d == 0 {
			return
		}
	}
	idx := make([]int, n)
	di, si := 0, 0
	last := n - 1
	for {
		// The innermost dimension runs as a plain loop.
		ds, ss := dstStrides[last], srcStrides[last]
		for k := 0; k < shape[last]; k++ {
			dst[di+k*ds] = src[si+k*ss]
		}
		d := last - 1
		for ; d >= 0; d-- {
			idx[d]++
			di += dstStrides[d]
			si += srcStrides[d]
			if idx[d] < shape[d] {
				break
			}
			di -= idx[d] * dstStrides[d]
			si -= idx[d] * srcStrides[d]
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

func copyData(dst, src any) {
	switch d := dst.(type) {
	case []float32:
		copy(d, src.([]float32))
	case []uint16:
		copy(d, src.([]uint16))
	case []int8:
		copy(d, src.([]int8))
	case []uint8:
		copy(d, src.([]uint8))
	case []int32:
		copy(d, src.([]int32))
	case []int64:
		copy(d, src.([]int64))
	}
}

// ContiguousFloat32s returns t's float32 elements in row-major logical
// order: the backing slice itself when t is contiguous, else a copy.
func (t *Tensor) ContiguousFloat32s() []float32 { return rowMajor(t).Float32s() }

// Values returns every element in row-major logical order as float64, a
// convenience for tests and printing.
func (t *Tensor) Values() []float64 {
	t.checkLive("Values")
	c := rowMajor(t)
	v := make([]float64, c.Numel())
	for i := range v {
		v[i] = c.floatAt(i)
	}
	return v
}

// String prints the tensor's shape, dtype and format, its gradient state and
// (up to a few elements per dimension) its values in logical order.
func (t *Tensor) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tensor(shape=%v, dtype=%v, format=%v", t.shape, t.dtype, t.format)
	if t.requiresGrad {
		if t.node != nil {
			fmt.Fprintf(&b, ", grad_fn=%s", t.node.op)
		} else {
			b.WriteString(", requires_grad=true")
		}
	}
	if !t.mode.live() {
		b.WriteString(", freed by Arena.Reset)")
		return b.String()
	}
	b.WriteString(")\n")
	vals := t.Values()
	writeNested(&b, vals, t.shape, t.dtype.IsFloat())
	return b.String()
}

const printEdge = 3 // elements shown at each end of a long dimension

func writeNested(b *strings.Builder, vals []float64, shape []int, float bool) {
	if len(shape) == 0 {
		writeValue(b, vals[0], float)
		return
	}
	inner := 1
	for _, d := range shape[1:] {
		inner *= d
	}
	b.WriteByte('[')
	n := shape[0]
	for k, i := range shownIndices(n) {
		if k > 0 {
			b.WriteString(", ")
		}
		if i < 0 {
			b.WriteString("...")
			continue
		}
		if len(shape) == 1 {
			writeValue(b, vals[i], float)
		} else {
			writeNested(b, vals[i*inner:(i+1)*inner], shape[1:], float)
		}
	}
	b.WriteByte(']')
}

// shownIndices lists the indices printed along a dimension of size n, with
// -1 standing for the elided middle.
func shownIndices(n int) []int {
	var idx []int
	for i := 0; i < n; i++ {
		if n > 2*printEdge && i == printEdge {
			idx = append(idx, -1)
			i = n - printEdge
		}
		idx = append(idx, i)
	}
	return idx
}

func writeValue(b *strings.Builder, v float64, float bool) {
	if float {
		fmt.Fprintf(b, "%.4g", v)
	} else {
		fmt.Fprintf(b, "%d", int64(v))
	}
}

func cloneInts(s []int) []int { return append([]int(nil), s...) }

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// normDim maps a possibly negative dimension index into [0, ndim).
func normDim(op string, d, ndim int) int {
	if d < -ndim || d >= ndim || (ndim == 0 && d != 0 && d != -1) {
		failIndex(op, "dimension %d out of range for a %d-D tensor", d, ndim)
	}
	if d < 0 {
		d += ndim
	}
	return d
}

// Tensors of colorMinBytes and more are coloured: allocated colorSpan
// bytes longer and started at the next of its 64 cache lines.
const (
	colorMinBytes = 64 << 10
	colorSpan     = 4 << 10
)

var colorNext atomic.Uint32
