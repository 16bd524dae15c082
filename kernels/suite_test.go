package kernels

import (
	"errors"
	"math"
	"testing"
)

// Helpers shared by the conformance suites: every variant of a kernel is
// run at every level the machine supports, on sizes that exercise tails,
// with guard values around its outputs.

// forEachLevel runs fn as a subtest at every level this CPU and build
// support, so one suite checks every variant.
func forEachLevel(t *testing.T, fn func(t *testing.T, l Level)) {
	for _, l := range Levels() {
		t.Run(l.String(), func(t *testing.T) { fn(t, l) })
	}
}

// suiteSizes returns lengths that stress a kernel with vectors of width
// float32 lanes (8 for AVX2, 16 for AVX-512): 1, small primes, one less
// than, equal to and one more than multiples of the width and of an
// unrolled loop of four vectors, and a long prime.
func suiteSizes(width int) []int {
	seen := map[int]bool{}
	var out []int
	add := func(n int) {
		if n > 0 && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, n := range []int{1, 2, 3, 5, 7, 13, 31, 97, 1009} {
		add(n)
	}
	for _, m := range []int{1, 2, 3, 4, 5, 8} {
		for _, d := range []int{-1, 0, 1} {
			add(m*width + d)
			add(4*m*width + d)
		}
	}
	return out
}

// guardValue fills the cells around an output; a kernel that writes past
// its slice changes one.
const guardValue = float32(-7.75e7)

// guarded returns a slice of n elements (zeroed) with guard cells on both
// sides in the same backing array, and a check that fails t when any guard
// changed.
func guarded(t *testing.T, n int) ([]float32, func()) {
	const pad = 19 // odd, so the slice starts off any vector alignment
	buf := make([]float32, n+2*pad)
	for i := range buf {
		buf[i] = guardValue
	}
	s := buf[pad : pad+n : pad+n]
	clear(s)
	return s, func() {
		t.Helper()
		for i, v := range buf {
			if (i < pad || i >= pad+n) && math.Float32bits(v) != math.Float32bits(guardValue) {
				t.Fatalf("guard cell %d (of %d before and after %d elements) overwritten: %v", i, pad, n, v)
			}
		}
	}
}

// misuseCase is a call that must fail: panic with an *Error of kind kind.
type misuseCase struct {
	name string
	kind error
	fn   func()
}

// checkMisuse runs each case as a subtest, failing it unless its call
// panics with an *Error of its kind.
func checkMisuse(t *testing.T, cases []misuseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				e, ok := recover().(*Error)
				if !ok || !errors.Is(e, tc.kind) {
					t.Fatalf("panic %v, want an *Error of kind %v", e, tc.kind)
				}
			}()
			tc.fn()
		})
	}
}
