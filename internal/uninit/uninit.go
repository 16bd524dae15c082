// Package uninit allocates memory that its caller writes in full before
// reading: the outputs of kernels that store every element (a GEMM with
// beta 0, an elementwise map, a cast, a copy). Go zeroes every allocation,
// and for the megabytes of a training step's activations and gradients
// that zeroing is a tenth of the step, spent on memory about to be
// overwritten. This is torch.empty's contract, not torch.zeros'.
//
// The memory comes from runtime.mallocgc with needzero false, which the
// runtime keeps callable from other packages (go.dev/issue/67401); it is
// ordinary garbage-collected, pointer-free memory. What a caller reads
// before writing is whatever an earlier, dead allocation left there, so
// tests run with Poison on: every allocation is then filled with 0xFF
// bytes (NaN in float32 and bfloat16, −1 in the integer types), and a
// result that depended on zeroed memory shows up as NaN or −1.
package uninit

import (
	"sync/atomic"
	"unsafe"
)

//go:linkname mallocgc runtime.mallocgc
func mallocgc(size uintptr, typ unsafe.Pointer, needzero bool) unsafe.Pointer

var poison atomic.Bool

// Poison turns filling every later allocation with 0xFF bytes on or off.
// For tests: it makes reading memory before writing it visible.
func Poison(on bool) { poison.Store(on) }

// Elem is the element types an allocation can hold: pointer-free numbers.
type Elem interface {
	~float32 | ~float64 | ~uint16 | ~int8 | ~uint8 | ~int32 | ~int64
}

// Slice returns a slice of n elements (len and cap n) whose contents are
// arbitrary. n must be a checked, non-negative size whose byte count does
// not overflow; n = 0 gives an empty, non-nil slice, as make does.
func Slice[T Elem](n int) []T {
	if n == 0 {
		return make([]T, 0)
	}
	size := uintptr(n) * unsafe.Sizeof(*new(T))
	p := mallocgc(size, nil, false) // nil type: no pointers for the collector to scan
	if poison.Load() {
		b := unsafe.Slice((*byte)(p), size)
		for i := range b {
			b[i] = 0xFF
		}
	}
	return unsafe.Slice((*T)(p), n)
}

// Reused marks s, memory a pool hands out again, as Slice's memory: with
// Poison on it is filled with 0xFF bytes, so a result that reads what an
// earlier user left there shows up in tests as it would for a fresh
// allocation.
func Reused[T Elem](s []T) {
	if poison.Load() && len(s) > 0 {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), uintptr(len(s))*unsafe.Sizeof(s[0]))
		for i := range b {
			b[i] = 0xFF
		}
	}
}

// RunPoisoned runs a package's tests with Poison on, for its TestMain:
// an op that reads memory from Slice before writing it then fails them.
func RunPoisoned(m interface{ Run() int }) int {
	Poison(true)
	return m.Run()
}
