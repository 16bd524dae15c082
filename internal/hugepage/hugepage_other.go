//go:build !linux

package hugepage

import "unsafe"

// Advise does nothing off Linux.
func Advise(p unsafe.Pointer, n int) {}
