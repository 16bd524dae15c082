package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestChunks(t *testing.T) {
	for _, c := range []struct{ n, workers, parts, big int }{
		{17, 16, 16, 2}, {3, 2, 2, 2}, {100, 64, 64, 2}, {5, 8, 5, 1}, {64, 64, 64, 1}, {0, 4, 0, 0},
	} {
		cs := Chunks(c.n, c.workers)
		if len(cs) != c.parts {
			t.Errorf("Chunks(%d, %d): %d chunks, want %d", c.n, c.workers, len(cs), c.parts)
		}
		next, most := 0, 0
		for _, ch := range cs {
			if ch.Lo != next || ch.Hi <= ch.Lo {
				t.Errorf("Chunks(%d, %d) = %v: not contiguous", c.n, c.workers, cs)
			}
			next, most = ch.Hi, max(most, ch.Hi-ch.Lo)
		}
		if next != c.n || most != c.big {
			t.Errorf("Chunks(%d, %d) = %v: covers %d, largest %d; want %d, %d", c.n, c.workers, cs, next, most, c.n, c.big)
		}
	}
}

func TestParallelParts(t *testing.T) {
	for _, c := range []struct{ n, work, threads, parts int }{
		{100, minParallelWork - 1, 64, 1},
		{100, minParallelWork, 2, 2},   // two threads split every call they split before
		{100, 1 << 30, 2, 2},           // never more chunks than workers
		{100, minParallelWork, 64, 2},  // a small call on many workers
		{100, 8 * minChunkWork, 64, 8}, // chunks of minChunkWork
		{5, 1 << 30, 64, 5},            // never more chunks than units
		{0, 1 << 30, 64, 0},
	} {
		if got := parallelParts(c.n, c.work, c.threads); got != c.parts {
			t.Errorf("parallelParts(%d, %d, %d) = %d, want %d", c.n, c.work, c.threads, got, c.parts)
		}
	}
}

// gemmShape is one product of a model layer.
type gemmShape struct {
	name    string
	m, n, k int
}

// convGemms returns the three products of a convolution on channels-last
// data (forward, backward to the input, backward to the weight) for a
// batch of n: pixels × output channels × (input channels · taps).
func convGemms(name string, batch, out, cin, cout, kk int) []gemmShape {
	pixels := batch * out * out
	return []gemmShape{
		{name + " forward", pixels, cout, cin * kk * kk},
		{name + " backward-data", pixels, cin * kk * kk, cout},
		{name + " backward-weight", cout, cin * kk * kk, pixels},
	}
}

// linearGemms returns a linear layer's three products at a batch.
func linearGemms(name string, batch, in, out int) []gemmShape {
	return []gemmShape{
		{name + " forward", batch, out, in},
		{name + " backward-data", batch, in, out},
		{name + " backward-weight", out, in, batch},
	}
}

// modelGemms returns the products of every ResNet-50 and DLRM layer at a
// batch: torchvision's ResNet-50 (stride on the 3×3 convolutions) and
// bench's DLRM (13-512-256-64 bottom MLP, 26 tables of 64, 415-512-256-1
// top MLP).
func modelGemms(batch int) []gemmShape {
	ss := convGemms("conv1", batch, 112, 3, 64, 7)
	in, size := 64, 56
	for i, st := range []struct{ mid, blocks int }{{64, 3}, {128, 4}, {256, 6}, {512, 3}} {
		out := size
		if i > 0 {
			out = size / 2
		}
		name := fmt.Sprintf("layer%d", i+1)
		ss = append(ss, convGemms(name+".0.conv1", batch, size, in, st.mid, 1)...)
		ss = append(ss, convGemms(name+".0.conv2", batch, out, st.mid, st.mid, 3)...)
		ss = append(ss, convGemms(name+".conv3", batch, out, st.mid, 4*st.mid, 1)...)
		ss = append(ss, convGemms(name+".0.downsample", batch, out, in, 4*st.mid, 1)...)
		ss = append(ss, convGemms(name+".1.conv1", batch, out, 4*st.mid, st.mid, 1)...)
		ss = append(ss, convGemms(name+".1.conv2", batch, out, st.mid, st.mid, 3)...)
		in, size = 4*st.mid, out
	}
	ss = append(ss, linearGemms("fc", batch, 2048, 1000)...)
	widths := [][]int{{13, 512, 256, 64}, {415, 512, 256, 1}}
	for i, w := range widths {
		for j := 0; j+1 < len(w); j++ {
			ss = append(ss, linearGemms(fmt.Sprintf("dlrm mlp%d.%d", i, j), batch, w[j], w[j+1])...)
		}
	}
	return ss
}

// TestGemmPartition is issue 23's partition test: for every ResNet-50
// and DLRM layer's products at batch 1, 8 and 16, on 16, 32 and 64
// workers, at both tile heights (AVX-512, AVX2), each of the workers the
// product is worth (gemmWorkers: a product too small to share runs on
// one; one with fewer than 4 tiles a worker on as many as its whole tiles
// need) gets a share of C, the busiest at most 1.25 times the mean; a
// product that splits K (gemmSplitK) shares its parts × cells among all
// the workers within 1.25.
func TestGemmPartition(t *testing.T) {
	for _, batch := range []int{1, 8, 16} {
		for _, s := range modelGemms(batch) {
			for _, workers := range []int{16, 32, 64} {
				for _, mr := range []int{2 * gemmMR, gemmMR} {
					mp, np := (s.m+mr-1)/mr, (s.n+gemmNR-1)/gemmNR
					if parts := gemmSplitK(s.m, s.n, s.k); parts > 1 {
						checkSplitK(t, s, batch, mr, workers, parts)
						continue
					}
					w := gemmWorkers(s.m, s.n, s.k, mr, workers)
					if w == 1 {
						continue // too small to share: one thread computes it
					}
					g := gemmPlan(mp, np, w, gemmSplitCols(s.m, s.n, s.k, mr, false, w))
					if g.cells() < w || g.imbalance(w) > gemmBalanced {
						t.Errorf("%s at batch %d (%d×%d×%d, %d-row tiles), %d of %d workers: grid %d×%d of %d×%d panels: %d cells, busiest %.2f× the mean",
							s.name, batch, s.m, s.n, s.k, mr, w, workers, g.gm, g.gn, mp, np, g.cells(), g.imbalance(w))
					}
				}
			}
		}
	}
}

// checkSplitK checks a K-split product's units (parts × cells of C, as
// sgemmSplitK plans them) give every worker work within 1.25 times the
// mean.
func checkSplitK(t *testing.T, s gemmShape, batch, mr, workers, parts int) {
	t.Helper()
	step := (s.k + parts - 1) / parts
	cells := splitKCells(s.m, s.n, s.k, step, mr, parts, workers)
	if r := splitKImbalance(cells, s.k, step, parts, workers); r > gemmBalanced || parts*cells.cells() < workers {
		t.Errorf("%s at batch %d (%d×%d×%d, %d-row tiles), %d workers: %d K parts × %d cells, busiest %.2f× the mean",
			s.name, batch, s.m, s.n, s.k, mr, workers, parts, cells.cells(), r)
	}
}

// Neither the grid nor a K split changes a product's bits: every thread
// count gives one thread's result exactly, on shapes that take the row
// split, the column split, two-dimensional grids at 16 and 64 threads,
// and K split.
func TestSgemmThreadsBitwise(t *testing.T) {
	forEachLevel(t, func(t *testing.T, l Level) {
		grids := 0
		defer func() {
			if l >= AVX2 && grids == 0 {
				t.Errorf("%v: no shape took a two-dimensional grid", l)
			}
		}()
		r := rand.New(rand.NewPCG(5, 6))
		// The last two split K (weight gradients' shapes).
		for _, s := range []struct{ m, n, k int }{{49, 2048, 64}, {1, 1000, 256}, {196, 256, 100}, {50, 70, 300}, {800, 40, 60}, {13, 517, 129},
			{64, 64, 25088}, {64, 147, 12545}} {
			a, b := randSlice(r, s.m*s.k), randSlice(r, s.k*s.n)
			want := make([]float32, s.m*s.n)
			withThreads(1, func() { Sgemm(false, false, s.m, s.n, s.k, 1, a, s.k, b, s.n, 0, want, s.n) })
			for _, threads := range []int{2, 3, 16, 64} {
				mr := 2 * gemmMR
				if l < AVX512 {
					mr = gemmMR
				}
				mp, np := (s.m+mr-1)/mr, (s.n+gemmNR-1)/gemmNR
				w := gemmWorkers(s.m, s.n, s.k, mr, threads)
				if g := gemmPlan(mp, np, w, gemmSplitCols(s.m, s.n, s.k, mr, false, w)); w > 1 && g.gm > 1 && g.gn > 1 {
					grids++
				}
				got := make([]float32, s.m*s.n)
				withThreads(threads, func() { Sgemm(false, false, s.m, s.n, s.k, 1, a, s.k, b, s.n, 0, got, s.n) })
				for i := range got {
					if got[i] != want[i] {
						t.Errorf("%v %d×%d×%d at %d threads: element %d = %g, 1 thread %g", l, s.m, s.n, s.k, threads, i, got[i], want[i])
						break
					}
				}
			}
		}
	})
}
