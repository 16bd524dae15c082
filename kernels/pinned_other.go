//go:build !linux

package kernels

import (
	"errors"
	"runtime"
)

var errNoAffinity = errors.New("pinning threads to cores is implemented for Linux only")

func pinThread(core int) error { return errNoAffinity }

func unpinThread() error { return errNoAffinity }

func gettid() int { return 0 }

// AvailableCores returns 0 … NumCPU−1; pinning them needs Linux, so
// NewPool fails elsewhere.
func AvailableCores() ([]int, error) {
	cores := make([]int, runtime.NumCPU())
	for i := range cores {
		cores[i] = i
	}
	return cores, nil
}

// NodeCores returns AvailableCores as one node.
func NodeCores() ([][]int, error) {
	avail, err := AvailableCores()
	return [][]int{avail}, err
}
