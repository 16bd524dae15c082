//go:build !linux

package autograd

// mapArena maps nothing here: the arena's memory comes from the Go heap.
func mapArena(int) []byte { return nil }

func unmapArena([]byte) {}
