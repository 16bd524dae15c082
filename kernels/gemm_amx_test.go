package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// withAMXModel runs f with GemmBF16 on its AMX path, the kernel replaced
// by its Go model, on any CPU.
func withAMXModel(f func()) {
	amxEmulate = true
	defer func() { amxEmulate = false }()
	f()
}

// TestGemmBF16AMXPath runs the AMX path's packing, blocking and finishing
// (on the kernel's Go model) against the reference: sizes around the
// strip (32 rows), the block (32 columns), the step (32 depths) and the
// column group (256), every transposition, alpha and beta.
func TestGemmBF16AMXPath(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 17))
	type shape struct{ m, n, k int }
	shapes := []shape{{1, 1, 1}, {1, 32, 2}, {31, 33, 31}, {32, 32, 32}, {33, 31, 33}, {65, 257, 63},
		{5, 300, 70}, {70, 16, 1}, {40, 520, 100}}
	withAMXModel(func() {
		for _, sh := range shapes {
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}} {
					name := fmt.Sprintf("%dx%dx%d/t%v/a%v", sh.m, sh.n, sh.k, tr, ab)
					checkGemmBF16(t, r, name, sh.m, sh.n, sh.k, tr[0], tr[1], ab[0], ab[1])
				}
			}
		}
	})
}

// TestGemmBF16AMXExact gives GemmBF16 small whole numbers, whose products
// and sums are exact in float32 in any order: on the AMX path (the
// kernel where the CPU has AMX, its model elsewhere) the result must equal
// the reference bit for bit, at every thread count.
func TestGemmBF16AMXExact(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	small := func(n int) []uint16 {
		x := make([]uint16, n)
		for i := range x {
			x[i] = BF16FromF32(float32(r.IntN(17) - 8))
		}
		return x
	}
	run := func(t *testing.T) {
		for _, sh := range []struct{ m, n, k int }{{33, 65, 97}, {64, 288, 64}, {7, 40, 1000}} {
			a, b := small(sh.m*sh.k), small(sh.k*sh.n)
			ref := sbgemmArgs{m: sh.m, n: sh.n, k: sh.k, alpha: 1, a: a, lda: sh.k, b: b, ldb: sh.n, c: make([]float32, sh.m*sh.n), ldc: sh.n}
			ref.generic(0, sh.m)
			sameAtEveryThreadCount(t, fmt.Sprintf("AMX GemmBF16 %d×%d×%d", sh.m, sh.n, sh.k), func() [][]float32 {
				c := make([]float32, sh.m*sh.n)
				GemmBF16(false, false, sh.m, sh.n, sh.k, 1, a, sh.k, b, sh.n, 0, c, sh.n)
				if i := firstDiff(c, ref.c); i >= 0 {
					t.Errorf("%d×%d×%d: element %d = %g, reference %g", sh.m, sh.n, sh.k, i, c[i], ref.c[i])
				}
				return [][]float32{c}
			})
		}
	}
	t.Run("model", func(t *testing.T) { withAMXModel(func() { run(t) }) })
	if amxAsmKernel() != nil {
		t.Run("amx", run)
	}
}

// The AMX path allocates nothing per call once its buffers are pooled.
func TestGemmBF16AMXAllocs(t *testing.T) {
	if elemRace {
		t.Skip("the race detector's sync.Pool drops items on purpose")
	}
	r := rand.New(rand.NewPCG(3, 4))
	a, b, c := bf16Rand(r, 100*90), bf16Rand(r, 90*70), make([]float32, 100*70)
	withAMXModel(func() {
		f := func() { GemmBF16(false, true, 100, 70, 90, 1, a, 90, b, 90, 0, c, 70) }
		f()
		if got := testing.AllocsPerRun(10, f); got != 0 {
			t.Errorf("%v allocations per call", got)
		}
	})
}

// TestGemmBF16AMXConcurrent calls the AMX path from many goroutines at
// once while the garbage collector runs and signals preempt them: every
// result must equal the same product computed alone, bit for bit. Where
// the CPU has AMX this is the hardware's tile state surviving goroutines
// moving between threads; elsewhere the model's.
func TestGemmBF16AMXConcurrent(t *testing.T) {
	run := func(t *testing.T) {
		r := rand.New(rand.NewPCG(61, 62))
		type product struct {
			m, n, k int
			a, b    []uint16
			want    []float32
		}
		var ps []product
		for _, sh := range [][3]int{{64, 96, 128}, {33, 70, 300}, {128, 64, 64}, {5, 300, 40}} {
			p := product{m: sh[0], n: sh[1], k: sh[2], a: bf16Rand(r, sh[0]*sh[2]), b: bf16Rand(r, sh[2]*sh[1])}
			p.want = make([]float32, p.m*p.n)
			GemmBF16(false, false, p.m, p.n, p.k, 1, p.a, p.k, p.b, p.n, 0, p.want, p.n)
			ps = append(ps, p)
		}
		calls := 400
		if testing.Short() {
			calls = 50
		}
		stop := make(chan struct{})
		gcDone := make(chan struct{})
		go func() {
			defer close(gcDone)
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
					runtime.GC()
				}
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range calls {
					p := ps[(g+i)%len(ps)]
					c := make([]float32, p.m*p.n)
					GemmBF16(false, false, p.m, p.n, p.k, 1, p.a, p.k, p.b, p.n, 0, c, p.n)
					if j := firstDiff(c, p.want); j >= 0 {
						errs <- fmt.Sprintf("goroutine %d, call %d, %d×%d×%d: element %d = %g, alone %g", g, i, p.m, p.n, p.k, j, c[j], p.want[j])
						return
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		<-gcDone
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
	if amxAsmKernel() != nil {
		t.Run("amx", run)
		return
	}
	t.Run("model", func(t *testing.T) { withAMXModel(func() { run(t) }) })
}

// A packed B above amxKeepB goes back to the garbage collector after its
// call; smaller ones stay pooled for the next.
func TestGemmBF16AMXKeepsSmallB(t *testing.T) {
	defer func(old int) { amxKeepB = old }(amxKeepB)
	r := rand.New(rand.NewPCG(7, 8))
	a, b, c := bf16Rand(r, 40*64), bf16Rand(r, 64*96), make([]float32, 40*96)
	packed := 96 / 32 * (64 / 32) * amxStepWords * 4 // bytes: 3 blocks × 2 steps
	for _, keep := range []bool{true, false} {
		amxKeepB = packed + 64 // the aligned buffer's slack
		if !keep {
			amxKeepB = packed - 1
		}
		heldB := func(drop bool) (held bool) {
			amxBufPool.mu.Lock()
			defer amxBufPool.mu.Unlock()
			for _, buf := range amxBufPool.items {
				held = held || cap(buf.b) > 0
				if drop {
					buf.b = nil
				}
			}
			return held
		}
		heldB(true)
		withAMXModel(func() { GemmBF16(false, false, 40, 96, 64, 1, a, 64, b, 96, 0, c, 96) })
		held := heldB(false)
		if held != keep {
			t.Errorf("amxKeepB %d bytes, packed B %d: pool holds a B %v, want %v", amxKeepB, packed, held, keep)
		}
	}
}

// A small batch on many workers: the units, of smaller column groups,
// reach the workers wherever the blocks allow, and the bits stay those of
// one thread.
func TestGemmBF16AMXSmallBatch(t *testing.T) {
	for _, c := range []struct{ strips, blocks, workers, want int }{
		{64, 64, 16, 8}, // 512 units of full groups
		{1, 32, 16, 2},  // a batch of one, 1024 columns: 16 units of 2 blocks
		{1, 32, 64, 1},  // 32 units, as many as there are blocks
		{2, 8, 16, 1},
		{1, 3, 2, 2},
		{1, 1, 64, 1},
	} {
		g := amxGroup(c.strips, c.blocks, c.workers)
		units := c.strips * ((c.blocks + g - 1) / g)
		if g != c.want || units < min(c.workers, c.strips*c.blocks) {
			t.Errorf("%d strips × %d blocks on %d workers: groups of %d (%d units), want %d", c.strips, c.blocks, c.workers, g, units, c.want)
		}
	}
	r := rand.New(rand.NewPCG(13, 14))
	withAMXModel(func() {
		for _, sh := range []struct{ m, n, k int }{{1, 1000, 300}, {8, 520, 64}, {33, 300, 40}} {
			a, b := bf16Rand(r, sh.m*sh.k), bf16Rand(r, sh.k*sh.n)
			sameAtEveryThreadCount(t, fmt.Sprintf("AMX GemmBF16 %d×%d×%d", sh.m, sh.n, sh.k), func() [][]float32 {
				c := make([]float32, sh.m*sh.n)
				GemmBF16(false, true, sh.m, sh.n, sh.k, 1, a, sh.k, b, sh.k, 0, c, sh.n)
				return [][]float32{c}
			})
		}
	})
}
