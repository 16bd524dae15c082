package autograd

import (
	"fmt"
	"reflect"

	"github.com/kilnml/kiln/kernels"
)

// Kiln has no strided views: a tensor's memory is always dense in one of
// three layouts (contiguous, channels-last, channels-last-3d). Shape ops
// therefore share memory where the result is dense in one of those layouts
// (a reshape of a contiguous tensor, a permutation that lands on a known
// layout, a chunk that is one run of memory) and copy otherwise.

// Shape ops move elements of every dtype alike: they copy, never compute,
// so a bfloat16 tensor needs no round trip through float32, and the 8-bit
// tensors of a quantized model and the int64 indices of an embedding are
// reshaped, permuted and cut as they are.

// checkMovable fails unless t is a non-nil tensor of a known dtype.
func checkMovable(op, what string, t *Tensor) {
	if t == nil {
		Fail(op, "%s is nil", what)
	}
	if t.dtype < Float32 || t.dtype > Int64 {
		failDType(op, "%s has unknown dtype %v", what, t.dtype)
	}
}

// shapeAlias returns a tensor sharing t's data, with the given shape and
// format.
func shapeAlias(t *Tensor, shape []int, f MemoryFormat) *Tensor {
	return &Tensor{dtype: t.dtype, shape: cloneInts(shape), format: f, data: t.data, mode: t.mode.arenaMode()}
}

// sliceData returns data[lo:hi], capped at hi, for storage of any dtype.
func sliceData(data any, lo, hi int) any {
	return reflect.ValueOf(data).Slice3(lo, hi, hi).Interface()
}

// stridedCopyData is kernels.StridedCopy for storage of any dtype; dst and
// src start at offsets dstOff and srcOff. Float32 and bfloat16, the
// activations of a model, take the kernels' parallel walks; the integer
// dtypes (quantized weights, indices) are copied by one goroutine.
func stridedCopyData(dst any, dstOff int, src any, srcOff int, shape, dstStrides, srcStrides []int) {
	switch d := dst.(type) {
	case []float32:
		kernels.StridedCopy(d[dstOff:], src.([]float32)[srcOff:], shape, dstStrides, srcStrides)
	case []uint16:
		kernels.StridedCopyBF16(d[dstOff:], src.([]uint16)[srcOff:], shape, dstStrides, srcStrides)
	case []int8:
		stridedCopyOf(d, dstOff, src, srcOff, shape, dstStrides, srcStrides)
	case []uint8:
		stridedCopyOf(d, dstOff, src, srcOff, shape, dstStrides, srcStrides)
	case []int32:
		stridedCopyOf(d, dstOff, src, srcOff, shape, dstStrides, srcStrides)
	case []int64:
		stridedCopyOf(d, dstOff, src, srcOff, shape, dstStrides, srcStrides)
	default:
		panic(fmt.Sprintf("autograd: stridedCopyData of %T", dst))
	}
}

// stridedCopyOf is stridedCopyData for a dst of element type T; src must
// hold T too.
func stridedCopyOf[T any](dst []T, dstOff int, src any, srcOff int, shape, dstStrides, srcStrides []int) {
	strideCopy(dst[dstOff:], src.([]T)[srcOff:], shape, dstStrides, srcStrides)
}

// shapeDenseFormat returns the layout whose strides for shape are strides
// (on every dimension of size above 1, which alone decide where elements
// lie), trying prefer first, then contiguous, channels-last and
// channels-last-3d. ok is false when strides are none of them.
func shapeDenseFormat(shape, strides []int, prefer MemoryFormat) (MemoryFormat, bool) {
	for _, f := range []MemoryFormat{prefer, Contiguous, ChannelsLast, ChannelsLast3d} {
		if r := f.rank(); r != 0 && r != len(shape) {
			continue
		}
		want := stridesOf(shape, f)
		match := true
		for i, n := range shape {
			if n == 0 {
				return f, true // no elements: every layout is the same
			}
			if n > 1 && strides[i] != want[i] {
				match = false
			}
		}
		if match {
			return f, true
		}
	}
	return Contiguous, false
}

// shapeRowMajor reports whether t's elements lie in row-major order of its
// shape: t is contiguous, or channels-last with the channel or spatial
// dimensions of size 1.
func shapeRowMajor(t *Tensor) bool {
	if t.format == Contiguous {
		return true
	}
	f, ok := shapeDenseFormat(t.shape, t.Strides(), Contiguous)
	return ok && f == Contiguous
}

// shapeInfer resolves a requested shape (one -1 allowed) for x's elements.
// The known sizes are counted through numel, so a shape whose product
// wraps around to x's element count is refused instead of becoming a
// tensor that claims more elements than it holds.
func shapeInfer(op string, x *Tensor, shape []int) []int {
	out := cloneInts(shape)
	infer := -1
	for i, d := range shape {
		switch {
		case d == -1:
			if infer >= 0 {
				failShape(op, "only one dimension can be inferred, got shape %v", shape)
			}
			infer = i
			out[i] = 1
		case d < 0:
			failShape(op, "invalid dimension %d in shape %v", d, shape)
		}
	}
	known := numel(op, out)
	n := numel(op, x.shape) // x may be a type without data
	if infer >= 0 {
		if known == 0 {
			failShape(op, "cannot reshape a tensor of %d elements (shape %v) into shape %v: the size of -1 is ambiguous", n, x.shape, shape)
		}
		if n%known != 0 {
			failShape(op, "shape %v is invalid for a tensor of %d elements (shape %v)", shape, n, x.shape)
		}
		out[infer] = n / known
		return out
	}
	if known != n {
		failShape(op, "shape %v is invalid for a tensor of %d elements (shape %v)", shape, n, x.shape)
	}
	return out
}

// Reshape returns x with a new shape holding the same elements in the same
// row-major order, like torch.reshape. One dimension may be -1, inferred
// from the others. A contiguous x is not copied: the result shares its
// memory. A channels-last x is copied to row-major order first (PyTorch
// would return a strided view for some shapes; Kiln has no strided views),
// except that reshaping to its own shape keeps it as it is.
func Reshape(x *Tensor, shape ...int) *Tensor { return shapeReshape("Reshape", x, shape, false) }

// View is Reshape without the copy, like torch.Tensor.view: the result
// always shares x's memory, so x's elements must already be in row-major
// order (contiguous, or channels-last with sizes that make it row-major).
// Viewing any other channels-last tensor fails, naming its memory format;
// reshaping it to its own shape is allowed.
func View(x *Tensor, shape ...int) *Tensor { return shapeReshape("View", x, shape, true) }

func shapeReshape(op string, x *Tensor, shape []int, view bool) *Tensor {
	checkMovable(op, "input", x)
	target := shapeInfer(op, x, shape)
	var out *Tensor
	switch {
	case sameShape(target, x.shape):
		out = shapeAlias(x, target, x.format)
	case shapeRowMajor(x):
		out = shapeAlias(x, target, Contiguous)
	case view:
		failShape(op, "tensor of shape %v is %v, so its memory is not in row-major order and cannot be viewed as shape %v; use Reshape, which copies",
			x.shape, x.format, shape)
	default:
		out = shapeAlias(x.reformat(Contiguous), target, Contiguous)
	}
	if traced(x) && op != "Flatten" {
		// The shape as asked, −1 included, so a graph traced at one batch
		// size runs at another when the code left the batch free.
		trace("Reshape", reshapeAttrs{shape}, []*Tensor{x}, []*Tensor{out})
	}
	return record(op+"Backward", out, []*Tensor{x}, func(g *Tensor) []*Tensor {
		return []*Tensor{shapeUnreshape(g, x)}
	})
}

// shapeUnreshape gives a gradient of a reshaped x back x's shape, in x's
// format.
func shapeUnreshape(g, x *Tensor) *Tensor {
	var gx *Tensor
	switch {
	case sameShape(g.shape, x.shape):
		gx = g
	case shapeRowMajor(g):
		gx = shapeAlias(g, x.shape, Contiguous)
	default:
		gx = shapeAlias(g.reformat(Contiguous), x.shape, Contiguous)
	}
	if gx.format != x.format {
		gx = gx.reformat(x.format)
	}
	return gx
}

// Flatten merges dimensions startDim through endDim (inclusive, negative
// counting from the end) into one, like torch.flatten; it reshapes, so it
// copies only a channels-last x. When startDim and endDim name the same
// dimension x itself is returned, and a 0-d x gives shape [1], as in
// PyTorch.
func Flatten(x *Tensor, startDim, endDim int) *Tensor {
	const op = "Flatten"
	checkMovable(op, "input", x)
	s, e, shape := flattenShape(x, startDim, endDim)
	if x.NDim() == 0 {
		return Reshape(x, 1)
	}
	if s == e {
		return x
	}
	out := shapeReshape(op, x, shape, false)
	if traced(x) {
		trace(op, flattenAttrs{s, e}, []*Tensor{x}, []*Tensor{out})
	}
	return out
}

// flattenShape checks Flatten's dimensions for x and returns them
// non-negative, with the result's shape.
func flattenShape(x *Tensor, startDim, endDim int) (s, e int, shape []int) {
	const op = "Flatten"
	s, e = shapeDim(op, x, startDim), shapeDim(op, x, endDim)
	if x.NDim() == 0 {
		return s, e, []int{1}
	}
	if s > e {
		failShape(op, "start dimension %d comes after end dimension %d for shape %v", startDim, endDim, x.shape)
	}
	shape = cloneInts(x.shape[:s])
	shape = append(shape, numel(op, x.shape[s:e+1]))
	return s, e, append(shape, x.shape[e+1:]...)
}

// shapeDim normalises dimension d of x, accepting 0 and -1 for a 0-d x as
// PyTorch does.
func shapeDim(op string, x *Tensor, d int) int {
	nd := max(x.NDim(), 1)
	if d < -nd || d >= nd {
		failIndex(op, "dimension %d out of range for a %d-D tensor of shape %v", d, x.NDim(), x.shape)
	}
	if d < 0 {
		d += nd
	}
	return d
}

// Transpose swaps dimensions dim0 and dim1 of x, like torch.transpose.
// Permute's rules for memory decide whether the result is copied.
func Transpose(x *Tensor, dim0, dim1 int) *Tensor {
	const op = "Transpose"
	checkMovable(op, "input", x)
	d0, d1 := shapeDim(op, x, dim0), shapeDim(op, x, dim1)
	perm := make([]int, x.NDim())
	for i := range perm {
		perm[i] = i
	}
	if x.NDim() > 0 {
		perm[d0], perm[d1] = perm[d1], perm[d0]
	}
	return shapePermute(op, x, perm)
}

// Permute reorders x's dimensions, like torch.permute: dimension i of the
// result is dimension dims[i] of x (negative counting from the end). When
// the reordered strides are those of a contiguous, channels-last or
// channels-last-3d tensor the result shares x's memory in that format (so
// permuting an NHWC tensor by 0, 3, 1, 2 gives a channels-last NCHW tensor
// with no copy, as PyTorch does); otherwise it is a contiguous copy, where
// PyTorch would return a strided view.
func Permute(x *Tensor, dims ...int) *Tensor {
	const op = "Permute"
	checkMovable(op, "input", x)
	return shapePermute(op, x, permuteDims(x, dims))
}

// permuteDims checks Permute's dims for x and returns them non-negative.
func permuteDims(x *Tensor, dims []int) []int {
	const op = "Permute"
	if len(dims) != x.NDim() {
		failShape(op, "dims %v has %d entries for a %d-D tensor of shape %v", dims, len(dims), x.NDim(), x.shape)
	}
	perm := make([]int, len(dims))
	seen := make([]bool, len(dims))
	for i, d := range dims {
		p := shapeDim(op, x, d)
		if seen[p] {
			failShape(op, "dimension %d appears more than once in dims %v", p, dims)
		}
		seen[p] = true
		perm[i] = p
	}
	return perm
}

// shapePermute returns x with dimension i of the result being perm[i] of x.
func shapePermute(op string, x *Tensor, perm []int) *Tensor {
	out := shapePermuted(x, perm, Contiguous)
	if traced(x) {
		trace("Permute", permuteAttrs{perm}, []*Tensor{x}, []*Tensor{out})
	}
	return record(op+"Backward", out, []*Tensor{x}, func(g *Tensor) []*Tensor {
		inv := make([]int, len(perm))
		for i, p := range perm {
			inv[p] = i
		}
		return []*Tensor{shapePermuted(g, inv, x.format)}
	})
}

// shapePermuted reorders t's dimensions by perm without recording: it
// shares t's memory when the permuted strides form a dense layout (prefer
// first), else copies into layout prefer.
func shapePermuted(t *Tensor, perm []int, prefer MemoryFormat) *Tensor {
	shape, strides := permutedStrides(t, perm)
	if f, ok := shapeDenseFormat(shape, strides, prefer); ok {
		return shapeAlias(t, shape, f)
	}
	if r := prefer.rank(); r != 0 && r != len(shape) {
		prefer = Contiguous
	}
	out := resultIn("permute", t.mode, t.dtype, shape, prefer, false)
	bindPermute(t, out, strides)()
	return out
}

// permutedStrides returns the shape of t with dimension i being perm[i]
// of t, and the strides of t's elements in that shape.
func permutedStrides(t *Tensor, perm []int) (shape, strides []int) {
	shape, strides = make([]int, len(perm)), make([]int, len(perm))
	ts := t.Strides()
	for i, p := range perm {
		shape[i], strides[i] = t.shape[p], ts[p]
	}
	return shape, strides
}

// bindPermute binds the copy of x's elements, lying at strides src in
// y's shape (permutedStrides), into y's layout; nil unless y has x's
// dtype.
func bindPermute(x, y *Tensor, src []int) func() {
	if !movableTo(y, x) {
		return nil
	}
	ys := y.Strides()
	return func() { stridedCopyData(y.data, 0, x.data, 0, y.shape, ys, src) }
}

// movableTo reports whether shape ops can copy elements of each of ts
// into t, or back: all have t's dtype.
func movableTo(t *Tensor, ts ...*Tensor) bool {
	for _, u := range ts {
		if u.dtype != t.dtype {
			return false
		}
	}
	return true
}

// Cat concatenates tensors along dim, like torch.cat. All must have one
// dtype, except that float32 and bfloat16 mix (concatenating in float32,
// as PyTorch promotes them), with the same number of dimensions and the same sizes except along dim.
// The result is channels-last (or channels-last-3d) when every input is, as
// in PyTorch, and contiguous otherwise. Unlike PyTorch, Cat does not skip
// 1-D empty tensors of a different rank.
func Cat(xs []*Tensor, dim int) *Tensor {
	const op = "Cat"
	d, t := catType(xs, dim)
	for _, x := range xs {
		if x.dtype != t.DType {
			// float32 with bfloat16 concatenates in float32, as PyTorch's
			// type promotion does.
			wide := make([]*Tensor, len(xs))
			for i, x := range xs {
				wide[i] = Cast(x, Float32)
			}
			return Cat(wide, dim)
		}
	}
	dim = d
	// The pieces tile the result: every element is written.
	out := resultIn(op, modeOf(xs...), t.DType, t.Shape, t.Format, false)
	bindPieces(dim, out, xs, true)()
	inputs := append([]*Tensor(nil), xs...)
	if traced(inputs...) {
		trace(op, dimAttrs{dim}, inputs, []*Tensor{out})
	}
	return record(op+"Backward", out, inputs, func(g *Tensor) []*Tensor {
		gs := g.Strides()
		grads := make([]*Tensor, len(inputs))
		off := 0
		for i, x := range inputs {
			if x.requiresGrad {
				gx := gradFor(x, g.dtype, x.format) // written in full below
				if x.Numel() > 0 {
					stridedCopyData(gx.data, 0, g.data, off*gs[dim], x.shape, gx.Strides(), gs)
				}
				grads[i] = gx
			}
			off += x.shape[dim]
		}
		return grads
	})
}

// catType checks Cat's operands and dim and returns dim non-negative and
// the result's type: float32 for a mix of dtypes.
func catType(xs []*Tensor, dim int) (int, TensorType) {
	const op = "Cat"
	if len(xs) == 0 {
		failShape(op, "expected a non-empty list of tensors")
	}
	dtype := xs[0].dtype
	for i, x := range xs {
		checkMovable(op, fmt.Sprintf("tensor %d", i), x)
		if x.NDim() == 0 {
			failShape(op, "tensor %d is 0-d; zero-dimensional tensors cannot be concatenated", i)
		}
		if x.dtype != dtype {
			if !x.dtype.IsFloat() || !xs[0].dtype.IsFloat() {
				failDType(op, "tensor %d has dtype %v, tensor 0 %v; only float32 and bfloat16 mix", i, x.dtype, xs[0].dtype)
			}
			dtype = Float32
		}
	}
	x0 := xs[0]
	nd := x0.NDim()
	if dim < -nd || dim >= nd {
		failIndex(op, "dimension %d out of range for %d-D tensors (tensor 0 has shape %v)", dim, nd, x0.shape)
	}
	if dim < 0 {
		dim += nd
	}
	outShape := cloneInts(x0.shape)
	outShape[dim] = 0
	format := x0.format
	for i, x := range xs {
		if x.NDim() != nd {
			failShape(op, "tensor %d has %d dimensions (shape %v) but tensor 0 has %d (shape %v)", i, x.NDim(), x.shape, nd, x0.shape)
		}
		for d := range nd {
			if d != dim && x.shape[d] != x0.shape[d] {
				failShape(op, "sizes must match except in dimension %d: tensor %d has shape %v, tensor 0 has shape %v", dim, i, x.shape, x0.shape)
			}
		}
		// Counted through numel, so many long operands cannot wrap around.
		outShape[dim] = numel(op, []int{outShape[dim] + x.shape[dim]})
		if x.format != format {
			format = Contiguous
		}
	}
	return dim, TensorType{DType: dtype, Shape: outShape, Format: format}
}

// Split cuts x along dim into chunks of splitSize (the last one smaller
// when the size does not divide evenly), like torch.split with an int.
// Each chunk keeps x's memory format; a chunk that is one run of x's memory
// (along dim 0 of a contiguous tensor, say) shares it, the others are
// copies. The gradient each chunk passes back is x-sized, zero outside the
// chunk; the tape adds them up.
func Split(x *Tensor, splitSize int, dim int) []*Tensor {
	const op = "Split"
	checkMovable(op, "input", x)
	if x.NDim() == 0 {
		failShape(op, "cannot split a 0-d tensor")
	}
	d := shapeDim(op, x, dim)
	n := x.shape[d]
	if splitSize < 0 || (splitSize == 0 && n != 0) {
		failShape(op, "split size must be positive (or 0 for a dimension of size 0), got %d for dimension %d of size %d", splitSize, d, n)
	}
	sizes := []int{n}
	if n > 0 {
		sizes = sizes[:0]
		for lo := 0; lo < n; lo += splitSize {
			sizes = append(sizes, min(splitSize, n-lo))
		}
	}
	return shapeSplit(op, x, sizes, d)
}

// SplitSizes cuts x along dim into chunks of the given sizes, which must
// be non-negative and add up to x's size along dim, like torch.split with
// a list. Chunks behave as Split's do.
func SplitSizes(x *Tensor, sizes []int, dim int) []*Tensor {
	checkMovable("SplitSizes", "input", x)
	return shapeSplit("SplitSizes", x, sizes, splitSizesDim(x, sizes, dim))
}

// splitSizesDim checks SplitSizes's sizes and dim for x and returns dim
// non-negative.
func splitSizesDim(x *Tensor, sizes []int, dim int) int {
	const op = "SplitSizes"
	if x.NDim() == 0 {
		failShape(op, "cannot split a 0-d tensor")
	}
	d := shapeDim(op, x, dim)
	total := 0
	for _, s := range sizes {
		if s < 0 {
			failShape(op, "sizes %v must be non-negative", sizes)
		}
		// Past the dimension's size the total stops growing, so huge
		// sizes cannot wrap it around to the right sum.
		if s > x.shape[d]-total {
			total = x.shape[d] + 1
		} else {
			total += s
		}
	}
	if len(sizes) == 0 || total != x.shape[d] {
		failShape(op, "sizes %v must add up to %d, the size of dimension %d of shape %v", sizes, x.shape[d], d, x.shape)
	}
	return d
}

func shapeSplit(op string, x *Tensor, sizes []int, dim int) []*Tensor {
	xs := x.Strides()
	// A chunk is one run of x's memory when every dimension laid out
	// outside dim has size 1.
	run := true
	for _, p := range physicalOrder(x.format, x.NDim()) {
		if p == dim {
			break
		}
		run = run && x.shape[p] == 1
	}
	chunks := make([]*Tensor, len(sizes))
	off := 0
	for i, size := range sizes {
		shape := cloneInts(x.shape)
		shape[dim] = size
		n, start := numel(op, shape), off*xs[dim]
		var data any
		if run && n > 0 {
			data = sliceData(x.data, start, start+n)
		} else {
			data = makeData(x.dtype, n) // copied into below unless run
		}
		chunks[i] = &Tensor{dtype: x.dtype, shape: shape, format: x.format, data: data}
		off += size
	}
	if !run {
		bindSplit(dim, x, chunks)()
	}
	off = 0
	for i, c := range chunks {
		if i == len(sizes)-1 && traced(x) {
			trace("Split", splitAttrs{sizes, dim}, []*Tensor{x}, chunks)
		}
		lo := off
		chunks[i] = record(op+"Backward", c, []*Tensor{x}, func(g *Tensor) []*Tensor {
			gx := resultIn(op, g.mode, g.dtype, cloneInts(x.shape), x.format, true)
			if g.Numel() > 0 {
				stridedCopyData(gx.data, lo*xs[dim], g.data, 0, g.shape, xs, g.Strides())
			}
			return []*Tensor{gx}
		})
		off += c.shape[dim]
	}
	return chunks
}

// bindPieces binds the copies between whole and parts, the pieces whole
// is cut into along dim, in order: parts into whole (Cat) when gather,
// else whole into parts (Split). It returns nil unless all have one
// dtype.
func bindPieces(dim int, whole *Tensor, parts []*Tensor, gather bool) func() {
	if !movableTo(whole, parts...) {
		return nil
	}
	ws, ps := whole.Strides(), make([][]int, len(parts))
	for i, p := range parts {
		ps[i] = p.Strides()
	}
	return func() {
		off := 0
		for i, p := range parts {
			switch {
			case p.Numel() == 0:
			case gather:
				stridedCopyData(whole.data, off*ws[dim], p.data, 0, p.shape, ws, ps[i])
			default:
				stridedCopyData(p.data, 0, whole.data, off*ws[dim], p.shape, ps[i], ws)
			}
			off += p.shape[dim]
		}
	}
}

// bindSplit is bindPieces for Split, whose chunks have x's layout.
func bindSplit(dim int, x *Tensor, chunks []*Tensor) func() {
	for _, c := range chunks {
		if c.format != x.format {
			return nil
		}
	}
	return bindPieces(dim, x, chunks, false)
}

func init() {
	defineBind("Permute", func(attrs any, ins, outs []*Tensor, _ []bool) func() {
		_, src := permutedStrides(ins[0], permuteDims(ins[0], attrs.(permuteAttrs).Dims))
		return bindPermute(ins[0], outs[0], src)
	})
	defineBind("Cat", func(attrs any, ins, outs []*Tensor, _ []bool) func() {
		return bindPieces(shapeDim("Cat", outs[0], attrs.(dimAttrs).Dim), outs[0], ins, true)
	})
	defineBind("Split", func(attrs any, ins, outs []*Tensor, _ []bool) func() {
		return bindSplit(shapeDim("Split", ins[0], attrs.(splitAttrs).Dim), ins[0], outs)
	})
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		x := in[0]
		s, f := shapeInfer("Reshape", x, attrs.(reshapeAttrs).Shape), Contiguous
		if sameShape(s, x.shape) {
			f = x.format
		}
		return []TensorType{{DType: x.dtype, Shape: s, Format: f}}
	}, "Reshape")
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		at := attrs.(flattenAttrs)
		_, _, s := flattenShape(in[0], at.StartDim, at.EndDim)
		return []TensorType{{DType: in[0].dtype, Shape: s}}
	}, "Flatten")
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		x := in[0]
		perm := permuteDims(x, attrs.(permuteAttrs).Dims)
		s := make([]int, len(perm))
		for i, p := range perm {
			s[i] = x.shape[p]
		}
		return []TensorType{{DType: x.dtype, Shape: s}}
	}, "Permute")
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		_, t := catType(in, attrs.(dimAttrs).Dim)
		return []TensorType{t}
	}, "Cat")
	registerInfer(func(_ string, attrs any, in []*Tensor) []TensorType {
		at := attrs.(splitAttrs)
		x, sizes := in[0], at.Sizes
		d := splitSizesDim(x, sizes, at.Dim)
		ts := make([]TensorType, len(sizes))
		for i, n := range sizes {
			ts[i] = TensorType{DType: x.dtype, Shape: cloneInts(x.shape), Format: x.format}
			ts[i].Shape[d] = n
		}
		return ts
	}, "Split")
	defineEager("Reshape", reshapeAttrs{}, func(a any, in []*Tensor) []*Tensor { return one(Reshape(in[0], a.(reshapeAttrs).Shape...)) })
	defineEager("Flatten", flattenAttrs{}, func(a any, in []*Tensor) []*Tensor {
		at := a.(flattenAttrs)
		return one(Flatten(in[0], at.StartDim, at.EndDim))
	})
	defineEager("Permute", permuteAttrs{}, func(a any, in []*Tensor) []*Tensor { return one(Permute(in[0], a.(permuteAttrs).Dims...)) })
	defineEager("Cat", dimAttrs{}, func(a any, in []*Tensor) []*Tensor { return one(Cat(in, a.(dimAttrs).Dim)) })
	defineEager("Split", splitAttrs{}, func(a any, in []*Tensor) []*Tensor {
		at := a.(splitAttrs)
		return SplitSizes(in[0], at.Sizes, at.Dim)
	})
}

// The attribute structs of the shape ops; dimAttrs serves Cat and the
// softmaxes.
type (
	reshapeAttrs struct{ Shape []int }
	flattenAttrs struct{ StartDim, EndDim int }
	permuteAttrs struct{ Dims []int }
	dimAttrs     struct{ Dim int }
	splitAttrs   struct {
		Sizes []int
		Dim   int
	}
)
