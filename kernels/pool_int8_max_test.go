package kernels

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMaxU8Conformance runs the running-maximum variant of each level
// against the reference on every length up to 100 (the 32-byte blocks and
// all tails), with bytes past y's end that must not change.
func TestMaxU8Conformance(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	forEachLevel(t, func(t *testing.T, l Level) {
		maxU8 := pick(l, maxU8Variants)
		for n := range 101 {
			buf := make([]uint8, n+8)
			x := make([]uint8, n+8)
			for i := range buf {
				buf[i], x[i] = uint8(rng.Uint32()), uint8(rng.Uint32())
			}
			want := slices.Clone(buf)
			maxU8Go(want[:n], x)
			maxU8(buf[:n], x)
			if !slices.Equal(buf, want) {
				t.Fatalf("length %d: got %v, want %v", n, buf, want)
			}
		}
	})
}
