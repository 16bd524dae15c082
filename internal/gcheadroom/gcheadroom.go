// Package gcheadroom sizes the garbage collector's headroom for programs
// whose heap is mostly long-lived parameters, such as DLRM's embedding
// tables. Go lets the heap grow by GOGC percent of the live heap before it
// collects (100 % by default), so a process holding 650 MB of tables could
// reach 1.3 GB while a training step's few tens of megabytes of garbage wait
// for collection. Since the tables hold no pointers the collector does not
// scan them, and collecting more often costs little: steps even get faster,
// their buffers coming back warm from the heap rather than freshly faulted
// in from the OS.
package gcheadroom

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
)

// DLRM is the garbage examples/dlrm allows: a few training steps' worth
// of a DLRM at batch 2048 whose tensors come from an arena (about 1.5 MB
// of heap a step: the small parameters' gradients and bookkeeping) and
// that has no table gradient to keep (fused sparse updates).
const DLRM = 8 << 20

// Percentage bounds of Set: below the lower one collections come so often
// that they cost more than the memory they save; above the upper one is
// Go's default.
const (
	minPercent = 1
	maxPercent = 100
)

// Set collects once, returning the free heap to the system (building a
// model leaves freed copies of its parameters behind), and sets the GC
// percentage so that about garbage bytes of garbage may build up between
// collections on top of the live heap measured then, within 1 % and
// 100 % of it, and returns the percentage set. It does nothing, returning -1, when the GOGC environment variable is
// set: the user's choice wins.
func Set(garbage uint64) int {
	if os.Getenv("GOGC") != "" {
		return -1
	}
	debug.FreeOSMemory()
	live := liveHeap()
	pct := maxPercent
	if live > 0 {
		pct = int(min(max(100*garbage/live, minPercent), maxPercent))
	}
	debug.SetGCPercent(pct)
	return pct
}

// liveHeap returns the heap marked live by the last collection.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
