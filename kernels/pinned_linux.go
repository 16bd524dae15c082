//go:build linux

package kernels

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// startMask is the process's affinity mask as it started, read before any
// Pool pinned a thread: a pinned thread that the runtime made the main
// thread's stand-in must not narrow what AvailableCores reports.
var startMask, startMaskErr = func() (unix.CPUSet, error) {
	var set unix.CPUSet
	err := unix.SchedGetaffinity(0, &set)
	return set, err
}()

// pinThread restricts the calling OS thread to core.
func pinThread(core int) error {
	var set unix.CPUSet
	set.Set(core)
	return unix.SchedSetaffinity(0, &set)
}

// unpinThread gives the calling OS thread the process's starting mask
// back, so that it can return to the Go scheduler's other work.
func unpinThread() error {
	set := startMask
	return unix.SchedSetaffinity(0, &set)
}

func gettid() int { return unix.Gettid() }

// AvailableCores returns the cores this process may run on (its affinity
// mask when it started, as taskset or a container set it), one hardware
// thread of every physical core first and their siblings after, so that
// the first n cores of the list are n separate cores where the machine
// has them.
func AvailableCores() ([]int, error) {
	if startMaskErr != nil {
		return nil, fmt.Errorf("reading the CPU affinity: %w", startMaskErr)
	}
	set := startMask
	var cores []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cores = append(cores, c)
		}
	}
	// A core's rank among its siblings: 0 for the first hardware thread
	// of a physical core. Without topology files every core is first.
	rank := map[int]int{}
	for _, c := range cores {
		b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c))
		if err != nil {
			continue
		}
		if sib := parseCPUList(strings.TrimSpace(string(b))); len(sib) > 0 {
			rank[c] = slices.Index(sib, c)
		}
	}
	slices.SortStableFunc(cores, func(a, b int) int { return rank[a] - rank[b] })
	return cores, nil
}

// NodeCores returns the cores of each NUMA node this process may use, in
// AvailableCores' order, nodes in order; a machine (or container) that
// shows no node directory is one node. A Pool within one node keeps its
// threads' memory traffic local.
func NodeCores() ([][]int, error) {
	avail, err := AvailableCores()
	if err != nil {
		return nil, err
	}
	dirs, _ := filepath.Glob("/sys/devices/system/node/node[0-9]*")
	type node struct {
		id   int
		cpus []int
	}
	var nodes []node
	for _, d := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cpulist"))
		if err != nil {
			continue
		}
		nodes = append(nodes, node{id, parseCPUList(strings.TrimSpace(string(b)))})
	}
	slices.SortFunc(nodes, func(a, b node) int { return a.id - b.id })
	var out [][]int
	placed := map[int]bool{}
	for _, n := range nodes {
		var cores []int
		for _, c := range avail {
			if slices.Contains(n.cpus, c) {
				cores = append(cores, c)
				placed[c] = true
			}
		}
		if len(cores) > 0 {
			out = append(out, cores)
		}
	}
	if len(out) == 0 || len(placed) != len(avail) {
		return [][]int{avail}, nil // no topology, or cores it does not place
	}
	return out, nil
}

// parseCPUList reads the kernel's CPU list format ("0-3,8,10-11"); it
// returns nil for anything else.
func parseCPUList(s string) []int {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil
		}
		b := a
		if found {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}
