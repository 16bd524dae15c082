package autograd

import (
	"fmt"
	"testing"
	"unsafe"
)

// TestAllocColours checks that consecutive large tensors start at
// different cache lines of their pages, and that every allocation, large
// or small, holds exactly its elements inside its memory (zeroed when
// asked).
func TestAllocColours(t *testing.T) {
	cases := []struct {
		name   string
		alloc  func(n int, zero bool) (unsafe.Pointer, int, int, bool)
		elem   int
		n      int
		colour bool
	}{
		{"float32 1 MiB", allocCase[float32], 4, 1 << 18, true},
		{"bfloat16 64 KiB", allocCase[uint16], 2, 1 << 15, true},
		{"int8 just under 64 KiB", allocCase[int8], 1, 64<<10 - 1, false},
		{"int64 100 KiB", allocCase[int64], 8, 12800, true},
		{"float32 small", allocCase[float32], 4, 100, false},
	}
	for _, c := range cases {
		for _, zero := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s zero=%v", c.name, zero), func(t *testing.T) {
				offsets := map[uintptr]bool{}
				for range 8 {
					p, n, capacity, zeroed := c.alloc(c.n, zero)
					if n != c.n || capacity != c.n {
						t.Fatalf("len %d cap %d, want %d", n, capacity, c.n)
					}
					if zero && !zeroed {
						t.Fatal("a zeroed allocation holds non-zero elements")
					}
					off := uintptr(p) % 4096
					if c.colour && off%64 != 0 {
						t.Fatalf("starts at byte %d of its page, not on a cache line", off)
					}
					offsets[off] = true
				}
				if c.colour && len(offsets) < 8 {
					t.Errorf("8 allocations start at %d offsets in their pages, want 8", len(offsets))
				}
			})
		}
	}
}

func allocCase[T float32 | uint16 | int8 | int64](n int, zero bool) (unsafe.Pointer, int, int, bool) {
	v := alloc[T](n, zero)
	// Write every element: the slice must lie inside its allocation.
	zeroed := true
	for i := range v {
		zeroed = zeroed && v[i] == 0
		v[i] = 1
	}
	return unsafe.Pointer(unsafe.SliceData(v)), len(v), cap(v), zeroed
}
