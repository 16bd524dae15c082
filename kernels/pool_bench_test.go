package kernels

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkParallelDispatch times Parallel calls whose chunks do almost
// nothing, on the process's pool (set its size with KILN_NUM_THREADS):
// the cost of handing out the chunks, waking the workers and joining
// them, per call and per chunk, for calls cut into 2 chunks up to one per
// worker. Issue 23 asks this to stay under 2% of a ResNet-50 step at 16
// workers; a step makes a few thousand Parallel calls.
func BenchmarkParallelDispatch(b *testing.B) {
	threads := Threads()
	var sink atomic.Int64
	fn := func(lo, hi int) { sink.Add(int64(hi - lo)) }
	for parts := 2; ; parts *= 2 {
		parts = min(parts, threads)
		b.Run(fmt.Sprintf("chunks=%d", parts), func(b *testing.B) {
			// Work enough that parallelParts allows every chunk.
			work := parts * minChunkWork
			for b.Loop() {
				Parallel(parts, work, fn)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(parts), "ns/chunk")
		})
		if parts == threads {
			break
		}
	}
}
