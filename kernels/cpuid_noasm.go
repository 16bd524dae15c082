//go:build !amd64 || noasm

package kernels

// cpuidex stands in for CPUID where there is no assembly: every leaf reads
// as zero, so the highest leaf is 0 and no AMX feature is seen.
func cpuidex(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32) { return 0, 0, 0, 0 }

// xgetbv0 stands in for XGETBV: no OS-saved state, so no tiles.
func xgetbv0() uint64 { return 0 }
