package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestStreamedOutput checks the kernels on spans large enough to stream
// their output (stream_amd64.go), with a destination that starts off a
// 32-byte boundary and a length that leaves a tail, in place and not,
// against the reference.
func TestStreamedOutput(t *testing.T) {
	const n = 5<<20 + 37 // over the streaming threshold per thread, odd tail
	r := rand.New(rand.NewPCG(91, 92))
	a, b := randSlice(r, n), randSlice(r, n)
	want := make([]float32, n)
	got := make([]float32, n+3)[3:] // 12 bytes past an allocation's alignment
	check := func(name string) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("%s: element %d = %v, want %v", name, i, got[i], want[i])
			}
		}
	}
	for _, l := range Levels() {
		for _, act := range []Act{{Fn: ActReLU}, {Fn: ActSigmoid}} {
			act.forward(want, a)
			restore := useActLevel(l)
			act.Forward(got, a)
			check(l.String() + " " + act.Fn.String())
			copy(got, a)
			act.Forward(got, got)
			check(l.String() + " " + act.Fn.String() + " in place")
			restore()
		}
		for _, op := range []BinOp{BinAdd, BinDiv} {
			binarySame(op, want, a, b)
			restore := useBinLevel(l)
			Binary(op, got, a, b)
			check(l.String() + " " + op.String())
			restore()
		}
	}
}
