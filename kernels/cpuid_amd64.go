//go:build amd64 && !noasm

package kernels

// cpuidex runs CPUID for a leaf and subleaf. klauspost/cpuid reports
// feature flags but not the tile palette (leaf 0x1D, subleaf 1) or the
// TMUL limits (leaf 0x1E) that decide whether AMX kernels fit this CPU.
func cpuidex(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)

// xgetbv0 returns XCR0, the state components the OS saves on a context
// switch. XGETBV faults unless CPUID reports OSXSAVE, so check that first.
func xgetbv0() uint64
