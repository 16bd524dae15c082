package kernels

import (
	"fmt"
	"os"
	"reflect"
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
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// cpuCaps is what this CPU offers the kernels, detected once at start.
type cpuCaps struct {
	best Level // the widest level the CPU (and build) supports
	vnni bool  // AVX512_VNNI, only with AVX512
}

// level is the variant family kernels dispatch to. It starts at the CPU's
// best, or lower when KILN_ISA asks (to benchmark one path against
// another), and is Generic in a -tags noasm build.
var (
	caps  = detectCPU()
	level = startLevel()
)

func startLevel() Level {
	l, warning := chooseLevel(caps.best, os.Getenv("KILN_ISA"))
	if warning != "" {
		fmt.Fprintln(os.Stderr, "kiln:", warning)
	}
	return l
}

func detectCPU() cpuCaps {
	var c cpuCaps
	if !asmBuild {
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
	return c
}

// chooseLevel applies a KILN_ISA request ("generic", "avx2", "avx512",
// "avx512bf16"; empty
// for the best) to the best level the CPU supports. A request above what
// the CPU has, or one that names no level, gets the best level and a
// warning to print, since a typo must not silently change what runs.
func chooseLevel(best Level, req string) (Level, string) {
	if req == "" {
		return best, ""
	}
	for l := Generic; l < levelCount; l++ {
		if strings.EqualFold(req, l.String()) {
			if l > best {
				return best, fmt.Sprintf("KILN_ISA=%s is not available on this CPU or build; using %v", req, best)
			}
			return l, ""
		}
	}
	return best, fmt.Sprintf("KILN_ISA=%q names no level (generic, avx2, avx512, avx512bf16); using %v", req, best)
}

// Features describes the kernel variants in use and the CPU they run on,
// e.g. "avx512 (bf16, vnni) on AMD EPYC 9R14, 2 threads". Programs print it
// so a benchmark or a log says what ran.
func Features() string {
	var extra []string
	if level >= AVX512 && caps.vnni {
		extra = append(extra, "vnni")
	}
	s := level.String()
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	if level < caps.best {
		s += fmt.Sprintf(" [CPU supports %v]", caps.best)
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

const levelCount = AVX512BF16 + 1

// isNil reports whether a variant slot is empty; F is a func type, which
// generic code cannot compare with nil directly. It runs only when a
// kernel's variant is chosen, not per call.
func isNil[F any](f F) bool {
	v := reflect.ValueOf(f)
	return !v.IsValid() || v.IsNil()
}
