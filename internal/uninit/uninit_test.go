package uninit

import (
	"math"
	"runtime"
	"testing"
)

func TestSlice(t *testing.T) {
	for _, n := range []int{0, 1, 3, 17, 1 << 10, 1<<15 + 1, 1 << 20} {
		f := Slice[float32](n)
		if len(f) != n || cap(f) != n || f == nil {
			t.Fatalf("Slice[float32](%d): len %d cap %d nil %v", n, len(f), cap(f), f == nil)
		}
		for i := range f {
			f[i] = float32(i)
		}
		runtime.GC() // the memory must stay live and unmoved while referenced
		for i, v := range f {
			if v != float32(i) {
				t.Fatalf("Slice[float32](%d)[%d] = %v after a collection", n, i, v)
			}
		}
	}
}

func TestPoison(t *testing.T) {
	Poison(true)
	defer Poison(false)
	for _, n := range []int{1, 5, 1 << 16} {
		for i, v := range Slice[float32](n) {
			if !math.IsNaN(float64(v)) {
				t.Fatalf("poisoned float32 %d of %d = %v, want NaN", i, n, v)
			}
		}
		for i, v := range Slice[uint16](n) {
			if v != 0xFFFF { // a bfloat16 NaN
				t.Fatalf("poisoned uint16 %d of %d = %#x", i, n, v)
			}
		}
		for i, v := range Slice[int64](n) {
			if v != -1 {
				t.Fatalf("poisoned int64 %d of %d = %d", i, n, v)
			}
		}
	}
}

func TestReused(t *testing.T) {
	s := []uint16{1, 2, 3}
	Reused(s) // poison off: left alone
	if s[0] != 1 || s[2] != 3 {
		t.Fatalf("Reused changed %v with poison off", s)
	}
	Poison(true)
	defer Poison(false)
	Reused(s)
	f := []float32{1, 2}
	Reused(f)
	Reused([]float32{}) // nothing to fill
	if s[0] != 0xFFFF || s[2] != 0xFFFF || !math.IsNaN(float64(f[1])) {
		t.Fatalf("Reused with poison on left %v and %v", s, f)
	}
}
