package dist

import (
	"fmt"
	"os"
)

// copyBuffer copies src into dst from element off on; both have one dtype.
func copyBuffer(dst Buffer, off int, src Buffer) {
	switch d := dst.data.(type) {
	case []float32:
		copy(d[off:], src.data.([]float32))
	case []float64:
		copy(d[off:], src.data.([]float64))
	case []uint16:
		copy(d[off:], src.data.([]uint16))
	case []int64:
		copy(d[off:], src.data.([]int64))
	case []byte:
		copy(d[off:], src.data.([]byte))
	}
}

// number is what Allreduce can add.
type number interface{ float32 | float64 | int64 }

// reduceInto sets dst[i] = op over srcs[r][i], r in rank order, for i in
// [lo, hi): the same additions in the same order on every rank.
func reduceInto[T number](dst []T, srcs [][]T, lo, hi int, op Op) {
	for i := lo; i < hi; i++ {
		s := srcs[0][i]
		for _, src := range srcs[1:] {
			s += src[i]
		}
		if op == Mean {
			s /= T(len(srcs))
		}
		dst[i] = s
	}
}

// divide divides every element by n: Mean of a backend that only sums.
func divide(buf Buffer, n int) {
	switch d := buf.data.(type) {
	case [][]float32:
		for _, p := range d {
			divide(Float32s(p), n)
		}
	case []float32:
		for i := range d {
			d[i] /= float32(n)
		}
	case []float64:
		for i := range d {
			d[i] /= float64(n)
		}
	case []int64:
		for i := range d {
			d[i] /= int64(n)
		}
	}
}

// checkReduce returns an error unless Allreduce can combine buf with op.
func checkReduce(buf Buffer, op Op) error {
	if op != Sum && op != Mean {
		return fmt.Errorf("dist: Allreduce: unknown op %v", op)
	}
	if buf.dtype == Uint8 {
		return fmt.Errorf("dist: Allreduce: cannot add %v buffers", buf.dtype)
	}
	return nil
}

// abortProcess ends this process, the whole of a world of one.
func abortProcess(code int, reason string) {
	fmt.Fprintf(os.Stderr, "dist: abort: %s\n", reason)
	os.Exit(code)
}

// packed returns buf as one slice: buf itself, or its parts packed into
// *scratch (grown as needed), with unpack to copy the result back into
// the parts.
func packed(buf Buffer, scratch *[]float32) (flat Buffer, unpack func()) {
	parts, ok := buf.data.([][]float32)
	if !ok {
		return buf, func() {}
	}
	if cap(*scratch) < buf.n {
		*scratch = make([]float32, buf.n)
	}
	s := (*scratch)[:buf.n]
	gatherParts(s, parts, 0)
	return Float32s(s), func() { scatterParts(parts, 0, s) }
}

// gatherParts copies elements [off, off+len(dst)) of the parts'
// concatenation into dst.
func gatherParts(dst []float32, parts [][]float32, off int) {
	for _, p := range parts {
		if len(dst) == 0 {
			return
		}
		if off >= len(p) {
			off -= len(p)
			continue
		}
		n := copy(dst, p[off:])
		dst, off = dst[n:], 0
	}
}

// scatterParts copies src into elements [off, off+len(src)) of the parts'
// concatenation.
func scatterParts(parts [][]float32, off int, src []float32) {
	for _, p := range parts {
		if len(src) == 0 {
			return
		}
		if off >= len(p) {
			off -= len(p)
			continue
		}
		n := copy(p[off:], src)
		src, off = src[n:], 0
	}
}
