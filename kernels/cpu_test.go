package kernels

import (
	"encoding/binary"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/cpuid/v2"
)

func TestChooseLevel(t *testing.T) {
	const why = "the OS refused tile data permission: invalid argument"
	cases := []struct {
		best Level
		req  string
		want Level
	}{
		{AVX512, "", AVX512},
		{AMX, "", AMX},
		{AMX, "amx", AMX},
		{AMX, "AVX512BF16", AVX512BF16},
		{AVX512BF16, "amx", AVX512BF16}, // AMX unusable: the warning says why
		{AVX2, "amx", AVX2},
		{AVX512BF16, "avx512", AVX512},
		{AVX512, "avx512bf16", AVX512}, // AVX-512 without AVX512_BF16
		{AVX512, "avx2", AVX2},
		{AVX512, "GENERIC", Generic},
		{AVX2, "avx512", AVX2}, // not above what the CPU has
		{AVX512, "sse", AVX512},
		{Generic, "avx2", Generic},
	}
	for _, c := range cases {
		got, warning := chooseLevel(c.best, c.req, why)
		if got != c.want {
			t.Errorf("chooseLevel(%v, %q) = %v, want %v", c.best, c.req, got, c.want)
		}
		// Every request that is not honoured as asked says so.
		if honoured := c.req == "" || strings.EqualFold(c.req, got.String()); honoured != (warning == "") {
			t.Errorf("chooseLevel(%v, %q) warning %q", c.best, c.req, warning)
		}
		if strings.EqualFold(c.req, "amx") && c.best < AMX && !strings.Contains(warning, why) {
			t.Errorf("chooseLevel(%v, %q) warning %q does not say why AMX is unusable", c.best, c.req, warning)
		}
	}
	// The list of levels in the warning for an unknown name is complete.
	if _, warning := chooseLevel(AMX, "sse", ""); !strings.Contains(warning, "avx512bf16, amx)") {
		t.Errorf("chooseLevel(amx, \"sse\") warning %q does not list every level", warning)
	}
}

// goodAMX is a Sapphire Rapids as seen on Linux after a granted request.
func goodAMX() amxFacts {
	return amxFacts{
		goos: "linux", avx512bf16: true,
		tile: true, bf16: true, int8: true,
		osxsave: true, xcr0: 0x602e7, maxLeaf: 0x20,
		palettes: 1, totalTileBytes: 8192, bytesPerTile: 1024, bytesPerRow: 64, maxNames: 8, maxRows: 16,
		maxK: 16, maxN: 64,
		permAsked: true, perm: 0x600e7,
	}
}

func TestAMXDecide(t *testing.T) {
	if ok, why := amxDecide(goodAMX()); !ok {
		t.Fatalf("amxDecide(Sapphire Rapids) refused: %s", why)
	}
	cases := []struct {
		name   string
		change func(*amxFacts)
		reason string // a part of the reason given
	}{
		{"no AMX-TILE", func(f *amxFacts) { f.tile = false }, "AMX-TILE"},
		{"no AMX-BF16", func(f *amxFacts) { f.bf16 = false }, "AMX-BF16"},
		{"no AMX-INT8", func(f *amxFacts) { f.int8 = false }, "AMX-INT8"},
		{"no AVX512_BF16", func(f *amxFacts) { f.avx512bf16 = false }, "AVX512BF16"},
		{"no OSXSAVE", func(f *amxFacts) { f.osxsave = false }, "XSAVE"},
		{"XCR0 bit 17 clear", func(f *amxFacts) { f.xcr0 &^= 1 << 17 }, "XCR0 0x402e7"},
		{"XCR0 bit 18 clear", func(f *amxFacts) { f.xcr0 &^= 1 << 18 }, "XCR0 0x202e7"},
		{"no leaf 0x1E", func(f *amxFacts) { f.maxLeaf = 0x1D }, "leaf 0x1d"},
		{"no palette", func(f *amxFacts) { f.palettes = 0 }, "no tile palette"},
		{"4 tiles", func(f *amxFacts) { f.maxNames = 4 }, "4 tiles"},
		{"8 rows", func(f *amxFacts) { f.maxRows = 8 }, "of 8 rows"},
		{"32-byte rows", func(f *amxFacts) { f.bytesPerRow = 32 }, "of 32 bytes"},
		{"2 KiB tiles", func(f *amxFacts) { f.bytesPerTile = 2048 }, "2048 per tile"},
		{"16 KiB of tiles", func(f *amxFacts) { f.totalTileBytes = 16384 }, "16384 in all"},
		{"TMUL K 8", func(f *amxFacts) { f.maxK = 8 }, "K up to 8"},
		{"TMUL N 32", func(f *amxFacts) { f.maxN = 32 }, "N up to 32"},
		{"not Linux", func(f *amxFacts) { f.goos = "darwin" }, "only on Linux, not darwin"},
		{"not asked", func(f *amxFacts) { f.permAsked = false }, "not requested"},
		{"refused", func(f *amxFacts) { f.permErr, f.perm = syscall.EINVAL, 0x200e7 }, "refused tile data permission: invalid argument"},
		{"not confirmed", func(f *amxFacts) { f.perm = 0x200e7 }, "did not confirm tile data permission (permitted mask 0x200e7)"},
	}
	for _, c := range cases {
		f := goodAMX()
		c.change(&f)
		ok, why := amxDecide(f)
		if ok || !strings.Contains(why, c.reason) {
			t.Errorf("%s: amxDecide = %v, %q; want refused with %q", c.name, ok, why, c.reason)
		}
	}
}

// TestAMXPermissionAskedOnlyWhenUsable checks the OS is asked only when
// everything else AMX needs is there, and once.
func TestAMXPermissionAskedOnlyWhenUsable(t *testing.T) {
	calls := 0
	granted := func() (uint64, error) { calls++; return 0x600e7, nil }
	f := goodAMX()
	f.permAsked, f.perm = false, 0
	f = askTilePermission(askTilePermission(f, granted), granted)
	if ok, why := amxDecide(f); calls != 1 || !ok {
		t.Errorf("usable AMX: %d requests, amxDecide = %v, %q; want 1 request and AMX", calls, ok, why)
	}

	calls = 0
	refused := func() (uint64, error) { calls++; return 0, errors.New("operation not permitted") }
	f = goodAMX()
	f.permAsked, f.perm = false, 0
	if ok, why := amxDecide(askTilePermission(f, refused)); calls != 1 || ok || !strings.Contains(why, "not permitted") {
		t.Errorf("refused: %d requests, amxDecide = %v, %q", calls, ok, why)
	}

	for name, change := range map[string]func(*amxFacts){
		"no AMX-TILE": func(f *amxFacts) { f.tile = false },
		"XCR0":        func(f *amxFacts) { f.xcr0 = 0xe7 },
		"palette":     func(f *amxFacts) { f.maxRows = 8 },
		"not Linux":   func(f *amxFacts) { f.goos = "windows" },
	} {
		calls = 0
		f := goodAMX()
		f.permAsked, f.perm = false, 0
		change(&f)
		if askTilePermission(f, granted); calls != 0 {
			t.Errorf("%s: the OS was asked for tile permission", name)
		}
	}
}

// TestAMXDetectedHere checks detection on the CPU the tests run on: AMX is
// the best level exactly when the CPU has every AMX feature, and a CPU
// without AMX-TILE is never the cause of a permission request.
func TestAMXDetectedHere(t *testing.T) {
	if tilePermRequests > 1 {
		t.Errorf("%d tile permission requests, want at most 1", tilePermRequests)
	}
	if (caps.best == AMX) != (caps.amxWhy == "") {
		t.Errorf("best level %v with AMX reason %q", caps.best, caps.amxWhy)
	}
	if !asmBuild {
		if caps.best == AMX || tilePermRequests != 0 {
			t.Errorf("a build without assembly has level %v after %d permission requests", caps.best, tilePermRequests)
		}
		return
	}
	f := readAMXFacts()
	if f.tile != cpuid.CPU.Supports(cpuid.AMXTILE) || f.bf16 != cpuid.CPU.Supports(cpuid.AMXBF16) || f.int8 != cpuid.CPU.Supports(cpuid.AMXINT8) {
		t.Errorf("raw CPUID says AMX tile %v, bf16 %v, int8 %v; klauspost/cpuid disagrees", f.tile, f.bf16, f.int8)
	}
	if caps.amxSeen != (f.tile || f.bf16 || f.int8) || caps.amxInt8 != f.int8 {
		t.Errorf("caps amxSeen %v, amxInt8 %v from facts %+v", caps.amxSeen, caps.amxInt8, f)
	}
	if !f.tile {
		if caps.best == AMX || tilePermRequests != 0 || !strings.Contains(caps.amxWhy, "AMX-TILE") {
			t.Errorf("no AMX-TILE, yet level %v, %d permission requests, reason %q", caps.best, tilePermRequests, caps.amxWhy)
		}
		if strings.Contains(Features(), "amx") {
			t.Errorf("Features() = %q mentions AMX on a CPU without it", Features())
		}
	}
	t.Logf("AMX: best %v, reason %q, facts %+v", caps.best, caps.amxWhy, f)
}

// TestCPUIDRaw checks the assembly CPUID and XGETBV against what
// klauspost/cpuid and the AVX levels already established.
func TestCPUIDRaw(t *testing.T) {
	if !asmBuild {
		t.Skip("no assembly in this build")
	}
	maxLeaf, ebx, ecx, edx := cpuidex(0, 0)
	if maxLeaf < 7 {
		t.Errorf("CPUID highest leaf %#x, want at least 7", maxLeaf)
	}
	var vendor [12]byte
	binary.LittleEndian.PutUint32(vendor[0:], ebx)
	binary.LittleEndian.PutUint32(vendor[4:], edx)
	binary.LittleEndian.PutUint32(vendor[8:], ecx)
	if string(vendor[:]) != cpuid.CPU.VendorString {
		t.Errorf("CPUID vendor %q, klauspost/cpuid says %q", vendor[:], cpuid.CPU.VendorString)
	}
	if caps.best >= AVX2 {
		// AVX needs the OS to save x87, SSE and AVX state: XCR0 bits 0-2.
		if xcr0 := xgetbv0(); xcr0&7 != 7 {
			t.Errorf("XCR0 = %#x on a CPU running AVX, want bits 0, 1 and 2 set", xcr0)
		}
	}
	if caps.best >= AVX512 {
		// AVX-512 needs opmask and the upper ZMM state too: bits 5-7.
		if xcr0 := xgetbv0(); xcr0&0xe0 != 0xe0 {
			t.Errorf("XCR0 = %#x on a CPU running AVX-512, want bits 5, 6 and 7 set", xcr0)
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
	for l, want := range map[Level]string{Generic: "generic", AVX2: "avx2", AVX512: "avx2", AMX: "avx2"} {
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
