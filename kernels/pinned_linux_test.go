//go:build linux

package kernels

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func threadAffinity(t *testing.T) []int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cores []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cores = append(cores, c)
		}
	}
	return cores
}

// TestPoolPins reads back the affinity of a pool's threads: each is pinned
// to its core, and the kernels inside Do see the pool's thread count.
func TestPoolPins(t *testing.T) {
	avail, err := AvailableCores()
	if err != nil {
		t.Fatal(err)
	}
	for _, cores := range [][]int{avail[:1], avail[len(avail)-1:], avail} {
		P, err := NewPool(cores)
		if err != nil {
			t.Fatal(err)
		}
		var leader []int
		var threads int
		var mu sync.Mutex
		seen := map[int][]int{} // thread id → affinity
		P.Do(func() {
			leader, threads = threadAffinity(t), Threads()
			Parallel(64*len(cores), 1<<30, func(lo, hi int) {
				for range 1000 { // keep the chunk long enough for every worker to take one
					_ = gettid()
				}
				a := threadAffinity(t)
				mu.Lock()
				seen[gettid()] = a
				mu.Unlock()
			})
		})
		P.Close()
		if !slices.Equal(leader, cores[:1]) || threads != len(cores) {
			t.Errorf("pool %v: Do ran pinned to %v with %d threads", cores, leader, threads)
		}
		for tid, a := range seen {
			if len(a) != 1 || !slices.Contains(cores, a[0]) {
				t.Errorf("pool %v: a chunk ran on thread %d pinned to %v", cores, tid, a)
			}
		}
	}
	if Threads() != workers.threads {
		t.Errorf("outside a pool Threads() = %d, want the process-wide %d", Threads(), workers.threads)
	}
}

func TestNewPoolErrors(t *testing.T) {
	avail, _ := AvailableCores()
	for _, c := range []struct {
		cores []int
		msg   string
	}{
		{nil, "no cores"},
		{[]int{avail[0], avail[0]}, "listed twice"},
		{[]int{1 << 20}, "core 1048576 is not one this process may run on"},
		{[]int{-1}, "core -1 is not"},
	} {
		if _, err := NewPool(c.cores); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("NewPool(%v) = %v, want an error with %q", c.cores, err, c.msg)
		}
	}
}

// TestPoolsSideBySide runs GEMMs in two single-core pools at once; each
// result matches the process-wide pool's.
func TestPoolsSideBySide(t *testing.T) {
	avail, _ := AvailableCores()
	a, b := avail[0], avail[len(avail)-1]
	P1, err := NewPool([]int{a})
	if err != nil {
		t.Fatal(err)
	}
	defer P1.Close()
	P2, err := NewPool([]int{b})
	if err != nil {
		t.Fatal(err)
	}
	defer P2.Close()
	const m, n, k = 96, 80, 112
	x, y := make([]float32, m*k), make([]float32, k*n)
	for i := range x {
		x[i] = float32(i%13) - 6
	}
	for i := range y {
		y[i] = float32(i%7) - 3
	}
	want := make([]float32, m*n)
	Sgemm(false, false, m, n, k, 1, x, k, y, n, 0, want, n)
	var wg sync.WaitGroup
	for _, P := range []*Pool{P1, P2, P1, P2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make([]float32, m*n)
			for range 20 {
				P.Do(func() { Sgemm(false, false, m, n, k, 1, x, k, y, n, 0, got, n) })
				if !slices.Equal(got, want) {
					t.Errorf("pool %v: GEMM differs from the process-wide pool's", P.Cores())
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestPoolDoPanicsAndNesting(t *testing.T) {
	avail, _ := AvailableCores()
	P, err := NewPool(avail[:1])
	if err != nil {
		t.Fatal(err)
	}
	var inner bool
	P.Do(func() { P.Do(func() { inner = true }) })
	if !inner {
		t.Error("a nested Do did not run")
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("Do re-panicked with %v, want boom", r)
			}
		}()
		P.Do(func() { panic("boom") })
	}()
	P.Close()
	P.Close() // twice is fine
	func() {
		defer func() {
			var e *Error
			if err, _ := recover().(error); !errors.As(err, &e) || !strings.Contains(err.Error(), "closed") {
				t.Errorf("Do after Close: %v", err)
			}
		}()
		P.Do(func() {})
	}()
}

// TestNodeCores: the nodes' cores together are the available cores, each
// once.
func TestNodeCores(t *testing.T) {
	avail, _ := AvailableCores()
	nodes, err := NodeCores()
	if err != nil {
		t.Fatal(err)
	}
	var all []int
	for _, n := range nodes {
		if len(n) == 0 {
			t.Errorf("an empty node in %v", nodes)
		}
		all = append(all, n...)
	}
	slices.Sort(all)
	want := slices.Sorted(slices.Values(avail))
	if !slices.Equal(all, want) {
		t.Errorf("nodes %v, available cores %v", nodes, avail)
	}
	if got := parseCPUList("0-3,8,10-11"); !slices.Equal(got, []int{0, 1, 2, 3, 8, 10, 11}) {
		t.Errorf("parseCPUList = %v", got)
	}
	for _, bad := range []string{"", "a", "3-1", "1-"} {
		if got := parseCPUList(bad); got != nil {
			t.Errorf("parseCPUList(%q) = %v, want nil", bad, got)
		}
	}
}
