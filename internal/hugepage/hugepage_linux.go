package hugepage

import (
	"syscall"
	"unsafe"
)

const size = 2 << 20 // x86-64 and arm64 transparent huge pages

// Advise marks the whole 2 MiB pages inside the n bytes at p for huge
// pages, so that the kernel backs them with huge pages when they are first
// touched. Smaller spans, and a kernel that refuses, are left as they are:
// the advice changes speed, never contents.
func Advise(p unsafe.Pointer, n int) {
	if n < MinBytes {
		return
	}
	base := uintptr(p)
	lo := (base + size - 1) &^ (size - 1)
	hi := (base + uintptr(n)) &^ (size - 1)
	if hi <= lo {
		return
	}
	b := unsafe.Slice((*byte)(p), n)[lo-base : hi-base]
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE)
}
