//go:build !noasm

package kernels

import (
	"fmt"
	"syscall"
	"unsafe"
)

// Linux (5.16 on) keeps the tile data state out of a process until it asks:
// the first tile instruction without permission raises SIGILL, which a Go
// program cannot recover from.
const (
	archGetXcompPerm  = 0x1022
	archReqXcompPerm  = 0x1023
	xfeatureXtiledata = 18
)

// requestTilePermission asks for tile data permission for the whole
// process and returns the permitted state mask the kernel reports after.
func requestTilePermission() (uint64, error) {
	if _, _, e := syscall.Syscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0); e != 0 {
		return 0, e
	}
	var mask uint64
	if _, _, e := syscall.Syscall(syscall.SYS_ARCH_PRCTL, archGetXcompPerm, uintptr(unsafe.Pointer(&mask)), 0); e != 0 {
		return 0, fmt.Errorf("ARCH_GET_XCOMP_PERM: %w", e)
	}
	return mask, nil
}
