package kernels

import (
	"strings"
	"testing"
)

func TestChooseLevel(t *testing.T) {
	cases := []struct {
		best Level
		req  string
		want Level
	}{
		{AVX512, "", AVX512},
		{AVX512, "avx2", AVX2},
		{AVX512, "GENERIC", Generic},
		{AVX2, "avx512", AVX2}, // not above what the CPU has
		{AVX512, "sse", AVX512},
		{Generic, "avx2", Generic},
	}
	for _, c := range cases {
		if got := chooseLevel(c.best, c.req); got != c.want {
			t.Errorf("chooseLevel(%v, %q) = %v, want %v", c.best, c.req, got, c.want)
		}
	}
}

func TestFeaturesNamesLevel(t *testing.T) {
	f := Features()
	if !strings.HasPrefix(f, level.String()) || !strings.Contains(f, "threads") {
		t.Errorf("Features() = %q, want it to start with %q and give the thread count", f, level)
	}
	if !asmBuild && level != Generic {
		t.Errorf("noasm build runs %v, want generic", level)
	}
}
