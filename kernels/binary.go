package kernels

import (
	"fmt"
)

// BinOp names an elementwise arithmetic operation of two float32 operands:
// autograd's Add, Sub, Mul and Div and their broadcasting forms.
type BinOp uint8

// The operations, each one IEEE float32 operation per element, so every
// variant gives the same bits.
const (
	BinAdd BinOp = iota // a + b
	BinSub              // a − b
	BinMul              // a · b
	BinDiv              // a / b
	binOpCount
)

var binNames = [...]string{"Add", "Sub", "Mul", "Div"}

func (op BinOp) String() string {
	if op < binOpCount {
		return binNames[op]
	}
	return fmt.Sprintf("BinOp(%d)", int(op))
}

func (op BinOp) check(fn string) {
	if op >= binOpCount {
		fail(ErrArgument, fn, "unknown operation %v", op)
	}
}

// binCost is the rough work per element handed to Parallel: the operations
// are memory bound.
const binCost = 2

// Binary sets dst[i] = a[i] op b[i]. The slices must have the same length;
// dst may be a or b. Large slices are split across the worker pool.
func Binary(op BinOp, dst, a, b []float32) {
	op.check("Binary")
	n := len(dst)
	if len(a) != n || len(b) != n {
		fail(ErrShape, fmt.Sprintf("Binary(%v)", op), "dst has %d elements, a %d, b %d", n, len(a), len(b))
	}
	j := binJobs.get()
	j.op, j.dst, j.a, j.b = op, dst, a, b
	Parallel(n, n*binCost, j.same)
	j.release()
}

// BinaryScalar sets dst[i] = a[i] op s, or dst[i] = s op a[i] when
// scalarLeft: one operand broadcast from a single element. The slices must
// have the same length; dst may be a.
func BinaryScalar(op BinOp, dst, a []float32, s float32, scalarLeft bool) {
	op.check("BinaryScalar")
	n := len(dst)
	if len(a) != n {
		fail(ErrShape, fmt.Sprintf("BinaryScalar(%v)", op), "dst has %d elements, a %d", n, len(a))
	}
	j := binJobs.get()
	j.op, j.dst, j.a, j.s, j.left = op, dst, a, s, scalarLeft
	Parallel(n, n*binCost, j.scalar)
	j.release()
}

// BinaryStrided sets dst[i·ds] = a[i·as] op b[i·bs] for i < n: one run of
// a broadcast walk, where a stride of 0 repeats an element. Strides must not
// be negative and every slice must hold its last element. It runs on the
// calling goroutine: the walk it serves is split by its caller, if at all.
// dst may overlap a or b only where they are read at the same index.
func BinaryStrided(op BinOp, n int, dst []float32, ds int, a []float32, as int, b []float32, bs int) {
	op.check("BinaryStrided")
	if n <= 0 {
		return
	}
	if ds < 0 || as < 0 || bs < 0 || (n-1)*ds >= len(dst) || (n-1)*as >= len(a) || (n-1)*bs >= len(b) {
		fail(ErrShape, fmt.Sprintf("BinaryStrided(%v)", op), "%d elements with strides %d, %d, %d do not fit slices of %d, %d, %d",
			n, ds, as, bs, len(dst), len(a), len(b))
	}
	switch {
	case ds == 1 && as == 1 && bs == 1:
		binarySameImpl(op, dst[:n], a[:n], b[:n])
	case ds == 1 && as == 1 && bs == 0:
		binaryScalarImpl(op, dst[:n], a[:n], b[0], false)
	case ds == 1 && as == 0 && bs == 1:
		binaryScalarImpl(op, dst[:n], b[:n], a[0], true)
	default:
		binaryStridedImpl(op, n, dst, ds, a, as, b, bs)
	}
}

// The variants by level: the Generic ones below are the reference.
func binarySameFor(l Level) func(op BinOp, dst, a, b []float32) {
	return pick(l, [levelCount]func(BinOp, []float32, []float32, []float32){Generic: binarySame, AVX2: binarySameAVX2})
}

func binaryScalarFor(l Level) func(op BinOp, dst, a []float32, s float32, left bool) {
	return pick(l, [levelCount]func(BinOp, []float32, []float32, float32, bool){Generic: binaryScalar, AVX2: binaryScalarAVX2})
}

func binaryStridedFor(l Level) func(op BinOp, n int, dst []float32, ds int, a []float32, as int, b []float32, bs int) {
	return pick(l, [levelCount]func(BinOp, int, []float32, int, []float32, int, []float32, int){
		Generic: binaryStrided, AVX2: binaryStridedAVX2})
}

var (
	binarySameImpl    = binarySameFor(level)
	binaryScalarImpl  = binaryScalarFor(level)
	binaryStridedImpl = binaryStridedFor(level)
)

// binJob holds one call's operands for the worker pool; pooled, with its
// span methods bound once, so a call allocates nothing.
type binJob struct {
	op                    BinOp
	dst, a, b             []float32
	s                     float32
	left                  bool
	same, scalar, addReLU func(lo, hi int)
}

var binJobs = freeList[binJob]{New: func() *binJob {
	j := new(binJob)
	j.same, j.scalar, j.addReLU = j.runSame, j.runScalar, j.runAddReLU
	return j
}}

// AddReLU sets dst[i] = max(0, a[i] + b[i]), exactly Binary(BinAdd)
// followed by ReLU, in one pass over memory: each L1-sized stretch is
// rectified right after it is summed. dst may be a or b.
func AddReLU(dst, a, b []float32) {
	n := len(dst)
	if len(a) != n || len(b) != n {
		fail(ErrShape, "AddReLU", "dst has %d elements, a %d, b %d", n, len(a), len(b))
	}
	j := binJobs.get()
	j.dst, j.a, j.b = dst, a, b
	Parallel(n, n*(binCost+1), j.addReLU)
	j.release()
}

// addReLUChunk is the stretch AddReLU sums and rectifies at a time: small
// enough to stay in L1 between the two, too small for streaming stores.
const addReLUChunk = 2048

func (j *binJob) runAddReLU(lo, hi int) {
	relu := Act{Fn: ActReLU}
	for i := lo; i < hi; i += addReLUChunk {
		k := min(i+addReLUChunk, hi)
		d := j.dst[i:k]
		binarySameImpl(BinAdd, d, j.a[i:k], j.b[i:k])
		actForwardImpl(relu, d, d)
	}
}

func (j *binJob) runSame(lo, hi int) { binarySameImpl(j.op, j.dst[lo:hi], j.a[lo:hi], j.b[lo:hi]) }

func (j *binJob) runScalar(lo, hi int) {
	binaryScalarImpl(j.op, j.dst[lo:hi], j.a[lo:hi], j.s, j.left)
}

func (j *binJob) release() {
	j.dst, j.a, j.b = nil, nil, nil
	binJobs.put(j)
}

// binarySame is the reference of Binary on one span.
func binarySame(op BinOp, dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	switch op {
	case BinAdd:
		for i := range dst {
			dst[i] = a[i] + b[i]
		}
	case BinSub:
		for i := range dst {
			dst[i] = a[i] - b[i]
		}
	case BinMul:
		for i := range dst {
			dst[i] = a[i] * b[i]
		}
	case BinDiv:
		for i := range dst {
			dst[i] = a[i] / b[i]
		}
	}
}

// binaryScalar is the reference of BinaryScalar on one span.
func binaryScalar(op BinOp, dst, a []float32, s float32, left bool) {
	a = a[:len(dst)]
	switch {
	case op == BinAdd:
		for i := range dst {
			dst[i] = a[i] + s
		}
	case op == BinMul:
		for i := range dst {
			dst[i] = a[i] * s
		}
	case op == BinSub && !left:
		for i := range dst {
			dst[i] = a[i] - s
		}
	case op == BinSub:
		for i := range dst {
			dst[i] = s - a[i]
		}
	case op == BinDiv && !left:
		for i := range dst {
			dst[i] = a[i] / s
		}
	case op == BinDiv:
		for i := range dst {
			dst[i] = s / a[i]
		}
	}
}

// binaryStrided is the reference of BinaryStrided.
func binaryStrided(op BinOp, n int, dst []float32, ds int, a []float32, as int, b []float32, bs int) {
	o, i, k := 0, 0, 0
	for range n {
		x, y := a[i], b[k]
		var r float32
		switch op {
		case BinAdd:
			r = x + y
		case BinSub:
			r = x - y
		case BinMul:
			r = x * y
		case BinDiv:
			r = x / y
		}
		dst[o] = r
		o += ds
		i += as
		k += bs
	}
}
