package kernels

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// Level is a family of kernel variants, each written for one instruction
// set. Every kernel has a Generic (pure Go) variant; the others exist where
// assembly pays.
type Level int

const (
	// Generic is the pure-Go reference every other variant must agree with.
	Generic Level = iota
	// AVX2 is AVX2 with FMA3: eight float32 lanes, sixteen vector registers.
	AVX2
	// AVX512 is AVX-512 F, BW, VL and DQ: sixteen float32 lanes, thirty-two
	// registers and mask registers for tails.
	AVX512
	// AVX512BF16 is AVX512 with AVX512_BF16 (VDPBF16PS): the BF16 GEMM and
	// convolutions multiply bfloat16 pairs natively instead of widening
	// them to float32. A level of its own so that a CPU with it can still
	// run, and test, the AVX-512 code of CPUs without it.
	AVX512BF16
	// AMX is AVX512BF16 with Advanced Matrix Extensions (AMX-TILE, AMX-BF16
	// and AMX-INT8) that the OS lets this process use. A kernel without an
	// AMX variant runs its AVX512BF16 one (see pick).
	AMX
)

func (l Level) String() string {
	switch l {
	case Generic:
		return "generic"
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	case AVX512BF16:
		return "avx512bf16"
	case AMX:
		return "amx"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// cpuCaps is what this CPU offers the kernels, detected once at start.
type cpuCaps struct {
	best    Level  // the widest level the CPU (and build) supports
	vnni    bool   // AVX512_VNNI, only with AVX512
	amxInt8 bool   // AMX-INT8 (TDPBUSD and kin), only with AMX
	amxSeen bool   // the CPU reports an AMX feature, usable or not
	amxWhy  string // why best is not AMX; empty when it is
	l2      int    // bytes of L2 cache per core, 0 when unknown
}

// level is the variant family kernels dispatch to. It starts at the CPU's
// best, or lower when KILN_ISA asks (to benchmark one path against
// another), and is Generic in a -tags noasm build.
var (
	caps  = detectCPU()
	level = startLevel()
)

func startLevel() Level {
	l, warning := chooseLevel(caps.best, os.Getenv("KILN_ISA"), caps.amxWhy)
	if warning != "" {
		fmt.Fprintln(os.Stderr, "kiln:", warning)
	}
	return l
}

func detectCPU() cpuCaps {
	c := cpuCaps{l2: max(0, cpuid.CPU.Cache.L2)}
	if !asmBuild {
		c.amxWhy = "this build has no assembly: noasm, or not amd64"
		return c
	}
	if cpuid.CPU.Supports(cpuid.AVX2, cpuid.FMA3) {
		c.best = AVX2
	}
	if c.best == AVX2 && cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512VL, cpuid.AVX512DQ) {
		c.best = AVX512
		if cpuid.CPU.Supports(cpuid.AVX512BF16) {
			c.best = AVX512BF16
		}
		c.vnni = cpuid.CPU.Supports(cpuid.AVX512VNNI)
	}
	f := readAMXFacts()
	f.avx512bf16 = c.best == AVX512BF16
	f = askTilePermission(f, countedTilePermission)
	ok, why := amxDecide(f)
	c.amxSeen = f.tile || f.bf16 || f.int8
	c.amxInt8 = f.int8
	if ok {
		c.best = AMX
	} else {
		c.amxWhy = why
	}
	return c
}

// amxFacts is what AMX detection learns from CPUID, XCR0 and the OS, kept
// apart from the decision (amxDecide) so that every way AMX can be unusable
// is tested on any CPU, including the many that have no AMX at all.
type amxFacts struct {
	goos       string // the permission request is Linux's
	avx512bf16 bool   // the level AMX builds on

	// CPUID.(7,0):EDX bits 24, 22 and 25.
	tile, bf16, int8 bool
	// CPUID.1:ECX bit 27: the OS enabled XSAVE, so XGETBV may run.
	osxsave bool
	// XCR0: bits 17 (XTILECFG) and 18 (XTILEDATA) say the OS saves tile
	// state across context switches.
	xcr0 uint64
	// The highest basic CPUID leaf: 0x1D and 0x1E may be beyond it.
	maxLeaf uint32

	// CPUID.(0x1D,0).EAX, the highest tile palette.
	palettes uint32
	// Palette 1, from CPUID.(0x1D,1): EAX[15:0], EAX[31:16], EBX[15:0],
	// EBX[31:16] and ECX[15:0].
	totalTileBytes, bytesPerTile, bytesPerRow, maxNames, maxRows int
	// CPUID.(0x1E,0).EBX[7:0] and EBX[23:8]: the largest K (rows of B) and
	// N (bytes of a B row) one tile multiply takes.
	maxK, maxN int

	permAsked bool   // the OS was asked for tile data permission
	permErr   error  // the request failed
	perm      uint64 // ARCH_GET_XCOMP_PERM's mask after the request
}

// xfeatureTileCfg and xfeatureTileData are the XSAVE state components of the
// tile configuration and the tile registers.
const (
	xfeatureTileCfg  = 17
	xfeatureTileData = 18
)

// readAMXFacts reads the CPU's side of the AMX facts, never running a tile
// instruction: CPUID and XGETBV cannot fault once OSXSAVE is checked.
func readAMXFacts() amxFacts {
	f := amxFacts{goos: runtime.GOOS}
	f.maxLeaf, _, _, _ = cpuidex(0, 0)
	if f.maxLeaf < 7 {
		return f
	}
	_, _, ecx, _ := cpuidex(1, 0)
	f.osxsave = ecx&(1<<27) != 0
	_, _, _, edx := cpuidex(7, 0)
	f.bf16 = edx&(1<<22) != 0
	f.tile = edx&(1<<24) != 0
	f.int8 = edx&(1<<25) != 0
	if f.osxsave {
		f.xcr0 = xgetbv0()
	}
	// Past the highest leaf, Intel CPUs answer with the highest leaf's data:
	// garbage that could pass for a palette.
	if f.maxLeaf >= 0x1E {
		f.palettes, _, _, _ = cpuidex(0x1D, 0)
		if f.palettes >= 1 {
			eax, ebx, ecx, _ := cpuidex(0x1D, 1)
			f.totalTileBytes, f.bytesPerTile = int(eax&0xFFFF), int(eax>>16)
			f.bytesPerRow, f.maxNames = int(ebx&0xFFFF), int(ebx>>16)
			f.maxRows = int(ecx & 0xFFFF)
		}
		_, ebx, _, _ := cpuidex(0x1E, 0)
		f.maxK, f.maxN = int(ebx&0xFF), int(ebx>>8&0xFFFF)
	}
	return f
}

// cpuReason says why the CPU and its XSAVE setup cannot run the AMX
// kernels, or "" when they can and only the OS's permission is left.
func (f amxFacts) cpuReason() string {
	switch {
	case !f.tile:
		return "the CPU lacks AMX-TILE"
	case !f.bf16:
		return "the CPU lacks AMX-BF16"
	case !f.int8:
		return "the CPU lacks AMX-INT8"
	case !f.avx512bf16:
		return "the CPU lacks the AVX512BF16 level beneath AMX"
	case !f.osxsave:
		return "the OS has not enabled XSAVE (OSXSAVE clear)"
	case f.xcr0&(1<<xfeatureTileCfg) == 0 || f.xcr0&(1<<xfeatureTileData) == 0:
		return fmt.Sprintf("the OS does not save tile state (XCR0 %#x lacks bit 17 or 18)", f.xcr0)
	case f.maxLeaf < 0x1E:
		return fmt.Sprintf("CPUID stops at leaf %#x, before the tile leaves 0x1D and 0x1E", f.maxLeaf)
	case f.palettes < 1:
		return "CPUID leaf 0x1D lists no tile palette"
	// The kernels' tile configurations are written for exactly this palette
	// and TMUL; a CPU that differs gets the AVX-512 kernels, not a guess.
	case f.maxNames != 8 || f.maxRows != 16 || f.bytesPerRow != 64 || f.bytesPerTile != 1024 || f.totalTileBytes != 8192:
		return fmt.Sprintf("tile palette 1 is %d tiles of %d rows of %d bytes (%d per tile, %d in all), not 8 of 16 of 64",
			f.maxNames, f.maxRows, f.bytesPerRow, f.bytesPerTile, f.totalTileBytes)
	case f.maxK != 16 || f.maxN != 64:
		return fmt.Sprintf("TMUL takes K up to %d and N up to %d bytes, not 16 and 64", f.maxK, f.maxN)
	}
	return ""
}

// amxDecide reports whether the AMX level is usable given f, and why not
// when it is not.
func amxDecide(f amxFacts) (ok bool, reason string) {
	if r := f.cpuReason(); r != "" {
		return false, r
	}
	switch {
	case f.goos != "linux":
		return false, "tile data permission is requested only on Linux, not " + f.goos
	case !f.permAsked:
		return false, "tile data permission was not requested"
	case f.permErr != nil:
		return false, "the OS refused tile data permission: " + f.permErr.Error()
	case f.perm&(1<<xfeatureTileData) == 0:
		return false, fmt.Sprintf("the OS did not confirm tile data permission (permitted mask %#x)", f.perm)
	}
	return true, ""
}

// askTilePermission completes f with the OS's answer to a tile data
// permission request, made only when everything else AMX needs is there:
// elsewhere it would fail anyway or, granted, enlarge every signal frame of
// the process for nothing.
func askTilePermission(f amxFacts, request func() (uint64, error)) amxFacts {
	if f.permAsked || f.goos != "linux" || f.cpuReason() != "" {
		return f
	}
	f.permAsked = true
	f.perm, f.permErr = request()
	return f
}

// tilePermRequests counts the requests made to the OS, so tests can check
// there is at most one per process and none on a CPU without AMX.
var tilePermRequests int

// countedTilePermission is requestTilePermission, counted. detectCPU is
// its only caller and runs once, while the package initialises.
func countedTilePermission() (uint64, error) {
	tilePermRequests++
	return requestTilePermission()
}

// chooseLevel applies a KILN_ISA request ("generic", "avx2", "avx512",
// "avx512bf16", "amx"; empty for the best) to the best level the CPU
// supports. A request above what the CPU has, or one that names no level,
// gets the best level and a warning to print, since a typo must not
// silently change what runs. amxWhy, why AMX is unusable, goes into the
// warning for a refused "amx": the CPU may have AMX that the OS withholds.
func chooseLevel(best Level, req, amxWhy string) (Level, string) {
	if req == "" {
		return best, ""
	}
	var names []string
	for l := Generic; l < levelCount; l++ {
		if strings.EqualFold(req, l.String()) {
			if l > best {
				why := ""
				if l == AMX && amxWhy != "" {
					why = " (" + amxWhy + ")"
				}
				return best, fmt.Sprintf("KILN_ISA=%s is not available on this CPU or build%s; using %v", req, why, best)
			}
			return l, ""
		}
		names = append(names, l.String())
	}
	return best, fmt.Sprintf("KILN_ISA=%q names no level (%s); using %v", req, strings.Join(names, ", "), best)
}

// Features describes the kernel variants in use and the CPU they run on,
// e.g. "avx512bf16 (vnni) on AMD EPYC 9R14, 2 threads". Programs print it
// so a benchmark or a log says what ran. Where the CPU has AMX that cannot
// be used, it says why, e.g. "[amx unusable: the OS refused tile data
// permission: invalid argument]".
func Features() string {
	var extra []string
	if level >= AMX {
		extra = append(extra, "bf16")
	}
	if level >= AVX512 && caps.vnni {
		extra = append(extra, "vnni")
	}
	if level >= AMX && caps.amxInt8 {
		extra = append(extra, "amx-int8")
	}
	s := level.String()
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	if level < caps.best {
		s += fmt.Sprintf(" [CPU supports %v]", caps.best)
	}
	if caps.amxSeen && caps.best < AMX {
		s += " [amx unusable: " + caps.amxWhy + "]"
	}
	name := strings.TrimSpace(cpuid.CPU.BrandName)
	if name == "" {
		name = "unknown CPU"
	}
	return fmt.Sprintf("%s on %s, %d threads", s, name, Threads())
}

// Levels lists the levels this CPU and build can run, lowest first: the
// values KILN_ISA accepts here. Conformance suites run every kernel
// variant at each of them.
func Levels() []Level {
	var ls []Level
	for l := Generic; l <= caps.best; l++ {
		ls = append(ls, l)
	}
	return ls
}

// pick returns the variant for the dispatch level l from variants, indexed
// by Level, falling back to the widest lower level that has one. Generic
// must always be present.
func pick[F any](l Level, variants [levelCount]F) F {
	for ; l > Generic; l-- {
		if !isNil(variants[l]) {
			return variants[l]
		}
	}
	return variants[Generic]
}

const levelCount = AMX + 1

// isNil reports whether a variant slot is empty; F is a func type, which
// generic code cannot compare with nil directly. It runs only when a
// kernel's variant is chosen, not per call.
func isNil[F any](f F) bool {
	v := reflect.ValueOf(f)
	return !v.IsValid() || v.IsNil()
}

// b2i is 1 for true and 0 for false: a flag for assembly, or an offset.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
