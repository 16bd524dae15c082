//go:build amd64 && !noasm

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestInteractionStreamedGrads checks the assembly backwards' streamed
// stores (large, aligned gradients) against their cached ones, bit for
// bit, with guard cells around every gradient: whole blocks streamed and
// a rest stored as usual (d = 80: a 16-column rest on AVX-512), several
// features' blocks, at every assembly level the CPU has.
func TestInteractionStreamedGrads(t *testing.T) {
	defer func(m int) { streamMinBytes = m }(streamMinBytes)
	for _, l := range []Level{AVX2, AVX512} {
		if l > level {
			continue
		}
		t.Run(l.String(), func(t *testing.T) {
			defer useInteractionLevel(l)()
			testStreamedGrads(t)
		})
	}
}

func testStreamedGrads(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	for _, s := range []InteractionShape{
		{Batch: 40, Dim: 64, Features: 27},
		{Batch: 9, Dim: 80, Features: 6, Self: true},
		{Batch: 5, Dim: 128, Features: 4},
	} {
		t.Run(fmt.Sprintf("B%d_d%d_F%d", s.Batch, s.Dim, s.Features), func(t *testing.T) {
			c := newInteractionCase(r, s)
			run := func(minBytes int) [][]float32 {
				streamMinBytes = minBytes
				grads := make([][]float32, s.Features)
				for f := range grads {
					grads[f] = alignedGuarded(s.Batch * s.Dim)
				}
				if got := streamable(grads, s.Dim); got != (minBytes == 0) {
					t.Fatalf("streamable = %v with a minimum of %d bytes", got, minBytes)
				}
				InteractionBackward(s, c.feats, c.dout, grads)
				for f, g := range grads {
					full := unsafe.Slice(unsafe.SliceData(g), len(g)+16)
					for i, v := range full[len(g):] {
						if v != guardValue {
							t.Fatalf("gradient %d: guard cell %d past the end changed", f, i)
						}
					}
				}
				return grads
			}
			want, got := run(1<<62), run(0)
			for f := range want {
				sameBits32(t, fmt.Sprintf("streamed gradient %d", f), got[f], want[f])
			}
		})
	}
}

// alignedGuarded returns n floats starting on a 64-byte boundary,
// followed by 16 guard cells.
func alignedGuarded(n int) []float32 {
	b := make([]float32, n+32)
	off := int((64 - uintptr(unsafe.Pointer(&b[0]))%64) % 64 / 4)
	for i := range b {
		b[i] = guardValue
	}
	return b[off : off+n : off+n]
}
