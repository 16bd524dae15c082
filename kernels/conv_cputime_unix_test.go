//go:build unix

package kernels

import "syscall"

// processCPU returns the CPU time, in seconds, all threads of this process
// have used. On a shared machine a kernel's rate per CPU-second is far
// steadier than its rate per wall-clock second.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
