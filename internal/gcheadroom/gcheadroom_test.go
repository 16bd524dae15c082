package gcheadroom

import (
	"runtime"
	"runtime/debug"
	"testing"
)

var held []byte

func TestSet(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	held = make([]byte, 256<<20) // a heap of parameters
	defer func() { held = nil; runtime.GC() }()
	for _, c := range []struct {
		garbage uint64
		want    int
	}{
		{32 << 20, 12}, // 32 MiB over a heap of about 256 MiB
		{1 << 20, 1},   // never below 1 %
		{1 << 40, 100}, // never above Go's default
	} {
		if got := Set(c.garbage); got < c.want-1 || got > c.want {
			t.Errorf("Set(%d) = %d %%, want about %d %%", c.garbage, got, c.want)
		}
		if got := debug.SetGCPercent(100); got != Set(c.garbage) {
			t.Errorf("Set(%d) left the GC percentage at %d", c.garbage, got)
		}
	}
}

func TestSetLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "300")
	before := debug.SetGCPercent(77)
	defer debug.SetGCPercent(before)
	if got := Set(1 << 20); got != -1 {
		t.Errorf("with GOGC set, Set = %d, want -1", got)
	}
	if got := debug.SetGCPercent(before); got != 77 {
		t.Errorf("with GOGC set, the percentage changed to %d", got)
	}
}
