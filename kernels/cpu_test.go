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
		{AVX512BF16, "avx512", AVX512},
		{AVX512, "avx512bf16", AVX512}, // AVX-512 without AVX512_BF16
		{AVX512, "avx2", AVX2},
		{AVX512, "GENERIC", Generic},
		{AVX2, "avx512", AVX2}, // not above what the CPU has
		{AVX512, "sse", AVX512},
		{Generic, "avx2", Generic},
	}
	for _, c := range cases {
		got, warning := chooseLevel(c.best, c.req)
		if got != c.want {
			t.Errorf("chooseLevel(%v, %q) = %v, want %v", c.best, c.req, got, c.want)
		}
		// Every request that is not honoured as asked says so.
		if honoured := c.req == "" || strings.EqualFold(c.req, got.String()); honoured != (warning == "") {
			t.Errorf("chooseLevel(%v, %q) warning %q", c.best, c.req, warning)
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

func TestPickFallsBack(t *testing.T) {
	v := [levelCount]func() string{Generic: func() string { return "generic" }, AVX2: func() string { return "avx2" }}
	for l, want := range map[Level]string{Generic: "generic", AVX2: "avx2", AVX512: "avx2"} {
		if got := pick(l, v)(); got != want {
			t.Errorf("pick(%v) runs %s, want %s", l, got, want)
		}
	}
}

func TestGuardedCatchesOverrun(t *testing.T) {
	s, _ := guarded(t, 5)
	full := s[:cap(s)]
	if len(full) != 5 {
		t.Fatalf("guarded slice has capacity %d, want 5 so appends cannot reach the guards", len(full))
	}
	if len(suiteSizes(8)) < 20 {
		t.Fatalf("suiteSizes(8) = %v, too few sizes", suiteSizes(8))
	}
}
