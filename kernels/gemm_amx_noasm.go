//go:build noasm || !amd64

package kernels

func amxAsmKernel() amxStripFunc { return nil }

func amxPackRows(panel []uint32, src []uint16, ldb, pairs, w int) bool { return false }

func amxPeakLoopFor() func(int) float64 { return nil }
