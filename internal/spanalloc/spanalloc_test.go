package spanalloc

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPlacement: where blocks go, step by step, from one allocator.
func TestPlacement(t *testing.T) {
	var a Allocator
	r0 := a.AddRegion(1000)
	alloc := func(size int, grow int64) Block {
		t.Helper()
		b, ok := a.Alloc(size, grow)
		if !ok {
			t.Fatalf("no room for %d bytes (grow %d); free %v", size, grow, a.free)
		}
		return b
	}
	x := alloc(100, -1)
	y := alloc(200, -1)
	z := alloc(300, -1)
	if x != (Block{r0, 0, 100}) || y != (Block{r0, 100, 200}) || z != (Block{r0, 300, 300}) {
		t.Fatalf("fresh region: %v %v %v, want back to back from 0", x, y, z)
	}
	if a.Touched() != 600 || a.InUse() != 600 {
		t.Fatalf("touched %d, in use %d; want 600, 600", a.Touched(), a.InUse())
	}
	a.Free(y)
	// 150 fits in y's 200 (touched) and in the tail (new): touched wins.
	if b := alloc(150, -1); b != (Block{r0, 100, 150}) {
		t.Fatalf("got %v, want y's span", b)
	}
	// 60 fits only the tail now.
	if b := alloc(60, -1); b != (Block{r0, 600, 60}) || a.Touched() != 660 {
		t.Fatalf("got %v, touched %d", b, a.Touched())
	}
	// No growth allowed: the 50 left of y's span fits 40, not 80.
	if b := alloc(40, 0); b != (Block{r0, 250, 40}) {
		t.Fatalf("got %v, want the rest of y's span", b)
	}
	if _, ok := a.Alloc(80, 0); ok {
		t.Fatal("80 bytes placed without touching new memory")
	}
	if b, ok := a.Alloc(400, -1); ok {
		t.Fatalf("400 bytes placed at %v with 340 the largest free span", b)
	}
}

// TestMerge: freed neighbours merge, before, after and on both sides;
// regions never merge with each other.
func TestMerge(t *testing.T) {
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}} {
		var a Allocator
		a.AddRegion(300)
		r1 := a.AddRegion(300)
		var bs []Block
		for range 3 {
			b, _ := a.Alloc(100, -1)
			bs = append(bs, b)
		}
		for _, i := range order {
			a.Free(bs[i])
		}
		if want := []Block{{0, 0, 300}, {r1, 0, 300}}; !slices.Equal(a.free, want) {
			t.Errorf("freed in order %v: free %v, want %v", order, a.free, want)
		}
		if ids := a.FreeRegions(); !slices.Equal(ids, []int{0, 1}) {
			t.Errorf("free regions %v", ids)
		}
	}
}

// TestRegions: a block too large for the first region goes to the next;
// removing a free region forgets its touched memory.
func TestRegions(t *testing.T) {
	var a Allocator
	a.AddRegion(100)
	if _, ok := a.Alloc(150, -1); ok {
		t.Fatal("150 bytes placed in a 100-byte region")
	}
	r1 := a.AddRegion(200)
	b, ok := a.Alloc(150, -1)
	if !ok || b.Region != r1 {
		t.Fatalf("got %v, %v; want region %d", b, ok, r1)
	}
	small, _ := a.Alloc(80, -1) // region 1 has 50 left: region 0
	if small.Region != 0 || a.Touched() != 230 {
		t.Fatalf("got %v, touched %d", small, a.Touched())
	}
	if ids := a.FreeRegions(); len(ids) != 0 {
		t.Fatalf("free regions %v with both in use", ids)
	}
	a.Free(small)
	a.RemoveRegion(0)
	if a.Touched() != 150 || a.InUse() != 150 {
		t.Fatalf("touched %d, in use %d after removing region 0", a.Touched(), a.InUse())
	}
	if _, ok := a.Alloc(60, -1); ok {
		t.Fatal("placed 60 bytes with only 50 free")
	}
	// Region 0's id is taken again, its span in order among the free ones.
	if id := a.AddRegion(70); id != 0 {
		t.Fatalf("new region got id %d, want the removed region's 0", id)
	}
	if b, ok := a.Alloc(60, -1); !ok || b != (Block{0, 0, 60}) || !slices.IsSortedFunc(a.free, func(x, y Block) int { return x.Region - y.Region }) {
		t.Fatalf("got %v, %v; free %v", b, ok, a.free)
	}
}

// TestMisuse: freeing what is not in use, and removing a region in use,
// panic rather than corrupt the free list.
func TestMisuse(t *testing.T) {
	cases := map[string]func(a *Allocator, b Block){
		"double free":      func(a *Allocator, b Block) { a.Free(b); a.Free(b) },
		"free of free":     func(a *Allocator, b Block) { a.Free(Block{Region: 0, Off: 200, Size: 50}) },
		"outside region":   func(a *Allocator, b Block) { a.Free(Block{Region: 0, Off: 900, Size: 200}) },
		"remove in use":    func(a *Allocator, b Block) { a.RemoveRegion(0) },
		"empty block":      func(a *Allocator, b Block) { a.Alloc(0, -1) },
		"empty region":     func(a *Allocator, b Block) { a.AddRegion(0) },
		"overlapping free": func(a *Allocator, b Block) { a.Free(Block{Region: 0, Off: 120, Size: 100}) },
	}
	for name, f := range cases {
		var a Allocator
		a.AddRegion(1000)
		b, _ := a.Alloc(100, -1)
		a.Alloc(50, -1)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f(&a, b)
		}()
	}
}

// TestRandom checks random allocations and frees against a byte map:
// blocks never overlap or leave their region, free spans are never left
// side by side unmerged, and the counts agree with the map.
func TestRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var a Allocator
	sizes := []int{4096, 1000, 7000}
	owner := make([][]int, len(sizes)) // owner[region][byte]: block number + 1, 0 free
	for i, n := range sizes {
		a.AddRegion(n)
		owner[i] = make([]int, n)
	}
	var live []Block
	top := make([]int, len(sizes))
	for step := range 20000 {
		if len(live) > 0 && r.IntN(2) == 0 {
			k := r.IntN(len(live))
			b := live[k]
			live = slices.Delete(live, k, k+1)
			a.Free(b)
			clear(owner[b.Region][b.Off : b.Off+b.Size])
		} else {
			size := 1 + r.IntN(900)
			b, ok := a.Alloc(size, -1)
			if !ok {
				if hasRun(owner, size) {
					t.Fatalf("step %d: no room for %d bytes, but a free run exists", step, size)
				}
				continue
			}
			if b.Size != size || b.Off < 0 || b.Off+size > sizes[b.Region] {
				t.Fatalf("step %d: block %v for %d bytes", step, b, size)
			}
			for i := b.Off; i < b.Off+size; i++ {
				if owner[b.Region][i] != 0 {
					t.Fatalf("step %d: block %v overlaps a block in use", step, b)
				}
				owner[b.Region][i] = step + 1
			}
			top[b.Region] = max(top[b.Region], b.Off+size)
			live = append(live, b)
		}
		var used, touched int64
		for i := range sizes {
			for _, o := range owner[i] {
				if o != 0 {
					used++
				}
			}
			touched += int64(top[i])
		}
		if a.InUse() != used || a.Touched() != touched {
			t.Fatalf("step %d: in use %d, touched %d; the map says %d, %d", step, a.InUse(), a.Touched(), used, touched)
		}
		for i := 1; i < len(a.free); i++ {
			p, s := a.free[i-1], a.free[i]
			if p.Region == s.Region && p.Off+p.Size >= s.Off {
				t.Fatalf("step %d: free spans %v and %v touch or overlap", step, p, s)
			}
		}
	}
}

// hasRun reports whether some region has size free bytes in a row.
func hasRun(owner [][]int, size int) bool {
	for _, o := range owner {
		run := 0
		for _, v := range o {
			if v == 0 {
				run++
				if run >= size {
					return true
				}
			} else {
				run = 0
			}
		}
	}
	return false
}
