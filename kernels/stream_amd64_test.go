//go:build amd64 && !noasm

package kernels

import "testing"

// TestStreamStore checks each level's non-temporal copy on whole blocks.
func TestStreamStore(t *testing.T) {
	src := make([]float32, 4*streamBlock)
	for i := range src {
		src[i] = float32(i) + 0.5
	}
	for _, l := range Levels() {
		if l == Generic {
			continue
		}
		store := pick(l, [levelCount]func(dst, src []float32){Generic: streamStoreAVX2, AVX2: streamStoreAVX2, AVX512: streamStoreAVX512})
		buf := alignedFloats(len(src) + 16)
		dst := buf[16:] // still 64-byte aligned
		store(dst[:len(src)-streamBlock], src)
		storeFence()
		for i, v := range dst {
			want := float32(0)
			if i < len(src)-streamBlock {
				want = src[i]
			}
			if v != want {
				t.Fatalf("%v: dst[%d] = %v, want %v", l, i, v, want)
			}
		}
	}
}
