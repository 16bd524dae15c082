package autograd

import "syscall"

// mapArena returns size bytes of zeroed memory mapped outside the Go heap,
// or nil when the system refuses (the arena then takes heap memory).
func mapArena(size int) []byte {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	return b
}

// unmapArena returns memory from mapArena to the system.
func unmapArena(b []byte) { _ = syscall.Munmap(b) }
