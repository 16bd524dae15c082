package autograd

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// arenaNet is a small network with the ops of a convolutional training
// step (convolution, batch norm with ReLU, a residual sum, pooling, an
// activation, a broadcast product, a linear layer, softmax and cross
// entropy), for comparing steps run in an arena with steps run without.
type arenaNet struct {
	w1, w2, bnW, bnB, rm, rv, scale, fc, fcB *Tensor
}

func newArenaNet(seed uint64) *arenaNet {
	g := NewGenerator(seed)
	p := func(t *Tensor) *Tensor { return t.SetRequiresGrad(true) }
	n := &arenaNet{
		w1:    p(Randn(g, 6, 3, 3, 3).To(ChannelsLast)),
		w2:    p(Randn(g, 6, 6, 3, 3).To(ChannelsLast)),
		bnW:   p(Rand(g, 6)),
		bnB:   p(Randn(g, 6)),
		rm:    Zeros(6),
		rv:    Ones(6),
		scale: p(Rand(g, 1, 6, 1, 1)),
		fc:    p(Randn(g, 5, 6)),
		fcB:   p(Randn(g, 5)),
	}
	n.w1.SetFormat(ChannelsLast)
	n.w2.SetFormat(ChannelsLast)
	return n
}

func (n *arenaNet) params() []*Tensor {
	return []*Tensor{n.w1, n.w2, n.bnW, n.bnB, n.scale, n.fc, n.fcB}
}

func (n *arenaNet) logits(x *Tensor) *Tensor {
	pad := ConvOptions{Padding: []int{1, 1}}
	h := BatchNormReLU(Conv2d(x, n.w1, nil, pad), n.rm, n.rv, n.bnW, n.bnB, true, 0.1, 1e-5)
	h = AddReLU(Conv2d(h, n.w2, nil, pad), h)
	h = Mul(Sigmoid(MaxPool2d(h, PoolOptions{Kernel: []int{2, 2}, Stride: []int{2, 2}})), n.scale)
	h = Flatten(AdaptiveAvgPool2d(h, 1, 1), 1, -1)
	return Linear(Softmax(h, 1), n.fc, n.fcB)
}

// step runs one training step from input x (already in an arena or not)
// and applies plain SGD; it returns the loss.
func (n *arenaNet) step(x, y *Tensor) float64 {
	loss := CrossEntropy(n.logits(x), y, CrossEntropyOptions{})
	loss.Backward()
	for _, p := range n.params() {
		pd, gd := p.Float32s(), p.Grad().Float32s()
		for i := range pd {
			pd[i] -= 0.1 * gd[i]
		}
		p.ZeroGrad()
	}
	return loss.Item()
}

func arenaBatch(seed uint64) (*Tensor, *Tensor) {
	g := NewGenerator(seed)
	return Randn(g, 4, 3, 8, 8).To(ChannelsLast), RandInt(g, 0, 5, 4)
}

// TestArenaTrainingBitwise: training steps whose activations and
// gradients come from an arena, reset between steps, give the losses and
// parameters of steps without one, bit for bit, in float32 and under BF16
// autocast. The tests run with poisoned allocations, so an op that read
// a reused buffer before writing it would show up here.
func TestArenaTrainingBitwise(t *testing.T) {
	for _, autocast := range []bool{false, true} {
		plain, inArena := newArenaNet(1), newArenaNet(1)
		arena := NewArena(0)
		for s := range 4 {
			x, y := arenaBatch(uint64(10 + s))
			in := x
			if autocast {
				in = Autocast(x)
			}
			want := plain.step(in, y)
			got := inArena.step(arena.In(in), y)
			arena.Reset()
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("autocast %v step %d: loss %v in the arena, %v without", autocast, s, got, want)
			}
		}
		for i, p := range inArena.params() {
			if !bitsEqual(p.Float32s(), plain.params()[i].Float32s()) {
				t.Errorf("autocast %v: parameter %d differs after arena steps", autocast, i)
			}
		}
		for _, b := range [][2]*Tensor{{inArena.rm, plain.rm}, {inArena.rv, plain.rv}} {
			if !bitsEqual(b[0].Float32s(), b[1].Float32s()) {
				t.Errorf("autocast %v: running statistics differ", autocast)
			}
		}
		st := arena.Stats()
		if st.Reused == 0 || st.InUse != 0 || st.Held == 0 {
			t.Errorf("autocast %v: stats %+v: want buffers reused, none in use after Reset", autocast, st)
		}
	}
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestArenaReusesLastFreed: after Reset the next result of a size gets
// the buffer freed last, the one still in cache.
func TestArenaReusesLastFreed(t *testing.T) {
	arena := NewArena(0)
	x := Randn(NewGenerator(3), 1000)
	first := unsafe.SliceData(ReLU(arena.In(x)).Float32s())
	arena.Reset()
	for range 3 {
		y := ReLU(arena.In(x))
		if got := unsafe.SliceData(y.Float32s()); got != first {
			t.Fatalf("result at %p after Reset, want the freed buffer %p", got, first)
		}
		if !bitsEqual(y.Float32s(), ReLU(x).Float32s()) {
			t.Fatal("ReLU in the arena differs")
		}
		arena.Reset()
	}
	if st := arena.Stats(); st.Allocated != 1 || st.Reused != 3 || st.Held != 4032 {
		t.Errorf("stats %+v, want 1 allocated, 3 reused, 4032 bytes held (4000 rounded to cache lines)", st)
	}
}

// TestArenaSplitsAndMerges: memory one buffer freed serves smaller ones,
// and their memory merges again for a buffer of the first size; the
// arena touches no new memory for either.
func TestArenaSplitsAndMerges(t *testing.T) {
	arena := NewArena(0)
	g := NewGenerator(6)
	big, small := Randn(g, 1000), Randn(g, 496) // 4032 and 1984 bytes, rounded to cache lines
	ReLU(arena.In(big))
	arena.Reset()
	for range 2 {
		a, b := ReLU(arena.In(small)), Sigmoid(arena.In(small))
		if !bitsEqual(a.Float32s(), ReLU(small).Float32s()) || !bitsEqual(b.Float32s(), Sigmoid(small).Float32s()) {
			t.Fatal("results in split memory differ")
		}
		arena.Reset()
		if !bitsEqual(ReLU(arena.In(big)).Float32s(), ReLU(big).Float32s()) {
			t.Fatal("result in merged memory differs")
		}
		arena.Reset()
	}
	if st := arena.Stats(); st.Held != 4032 || st.Allocated != 1 || st.Reused != 6 {
		t.Errorf("stats %+v, want 4032 bytes held, 1 buffer that touched new memory, 6 that reused it", st)
	}
}

// TestArenaUseAfterReset: a tensor made in the arena is dead after Reset,
// and every way of reading it says so with ErrReset, views and detached
// tensors included; printing it does not panic.
func TestArenaUseAfterReset(t *testing.T) {
	arena := NewArena(0)
	x := Randn(NewGenerator(4), 2, 3).SetRequiresGrad(true)
	y := Sigmoid(arena.In(x))
	view := Reshape(y, 6)
	det := y.Detach()
	loss := Sum(y, nil, false)
	arena.Reset()
	uses := map[string]func(){
		"op":         func() { ReLU(y) },
		"op on view": func() { Add(view, Ones(6)) },
		"mixed op":   func() { Mul(x, det) },
		"Float32s":   func() { y.Float32s() },
		"Item":       func() { loss.Item() },
		"Data":       func() { view.Data() },
		"Values":     func() { det.Values() },
		"Dense":      func() { y.Dense() },
		"Backward":   func() { loss.Backward() },
		"In":         func() { arena.In(y) },
		"Keep":       func() { arena.Keep(y) },
	}
	for name, use := range uses {
		err := Try(use)
		if !errors.Is(err, ErrReset) {
			t.Errorf("%s after Reset: error %v, want ErrReset", name, err)
		}
	}
	if s := y.String(); !strings.Contains(s, "Arena.Reset") {
		t.Errorf("String of a reset tensor = %q", s)
	}
	// The leaf itself is not the arena's.
	if got := ReLU(x).Numel(); got != 6 {
		t.Fatal(got)
	}
}

// TestArenaLeafGradOutlivesReset: a leaf's gradient computed in the arena
// is the leaf's own memory, untouched by later steps.
func TestArenaLeafGradOutlivesReset(t *testing.T) {
	arena := NewArena(0)
	g := NewGenerator(5)
	x := Randn(g, 64).SetRequiresGrad(true)
	// Identity-like backward: the gradient of Sum is a broadcast of the
	// incoming one, made in the arena.
	Sum(Mul(arena.In(x), arena.In(x)), nil, false).Backward()
	want := append([]float32(nil), x.Grad().Float32s()...)
	arena.Reset()
	for range 3 {
		ReLU(arena.In(Randn(g, 64))) // reuses the step's buffers
		Mul(arena.In(Randn(g, 64)), arena.In(Randn(g, 64)))
		arena.Reset()
	}
	if !bitsEqual(x.Grad().Float32s(), want) {
		t.Fatal("a leaf's gradient changed after the arena was reset and reused")
	}
	if x.Grad().Mode().arena != nil {
		t.Fatal("a leaf's gradient is in the arena")
	}
}

// TestArenaKeep: Keep's copy survives Reset with the same values.
func TestArenaKeep(t *testing.T) {
	arena := NewArena(0)
	x := Randn(NewGenerator(6), 3, 4)
	y := Tanh(arena.In(x))
	k := arena.Keep(y)
	want := append([]float32(nil), y.Float32s()...)
	arena.Reset()
	Tanh(arena.In(Randn(NewGenerator(7), 3, 4))) // overwrites y's buffer
	if !bitsEqual(k.Float32s(), want) || !sameShape(k.Shape(), []int{3, 4}) {
		t.Fatal("Keep's copy changed")
	}
	ReLU(k) // usable after Reset
}

// TestArenaCap: past its cap the arena gives back free memory, then
// lets results come from the heap; results are unchanged.
func TestArenaCap(t *testing.T) {
	arena := NewArena(10_000)
	g := NewGenerator(8)
	a, b := Randn(g, 1000), Randn(g, 1500) // 4032 and 6016 bytes in the arena
	for range 2 {
		ReLU(arena.In(a))
		arena.Reset()
	}
	if st := arena.Stats(); st.Held != 4032 || st.Reused != 1 {
		t.Fatalf("stats %+v", st)
	}
	y := ReLU(arena.In(b)) // the free 4032 and 1984 more
	z := ReLU(arena.In(b)) // 6016 more would pass the cap
	if st := arena.Stats(); st.Held != 6016 || st.Overflowed != 1 {
		t.Fatalf("stats %+v, want 6016 held and one result from the heap", st)
	}
	if !bitsEqual(y.Float32s(), ReLU(b).Float32s()) || !bitsEqual(z.Float32s(), y.Float32s()) {
		t.Fatal("results past the cap differ")
	}
	arena.Reset()
	arena.Free()
	if st := arena.Stats(); st.Held != 0 {
		t.Fatalf("Held %d after Free", st.Held)
	}
	ReLU(arena.In(b)) // the arena fills again
	if st := arena.Stats(); st.Held != 6016 {
		t.Fatalf("Held %d after use", st.Held)
	}
}

// TestArenaMixing: one op cannot take tensors from two arenas, nor from
// two steps of one arena.
func TestArenaMixing(t *testing.T) {
	a1, a2 := NewArena(0), NewArena(0)
	x := Ones(3)
	if err := Try(func() { Add(a1.In(x), a2.In(x)) }); !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), "two arenas") {
		t.Errorf("two arenas: %v", err)
	}
	old := a1.In(x)
	a1.Reset()
	if err := Try(func() { Add(old, a1.In(x)) }); !errors.Is(err, ErrReset) {
		t.Errorf("two steps: %v", err)
	}
}

// TestArenaConcurrent: goroutines training with an arena each get the
// bits they get alone (run under -race by make race).
func TestArenaConcurrent(t *testing.T) {
	want := newArenaNet(2)
	for s := range 3 {
		x, y := arenaBatch(uint64(20 + s))
		want.step(x, y)
	}
	var wg sync.WaitGroup
	nets := make([]*arenaNet, 3)
	for i := range nets {
		nets[i] = newArenaNet(2)
		wg.Go(func() {
			arena := NewArena(0)
			for s := range 3 {
				x, y := arenaBatch(uint64(20 + s))
				nets[i].step(arena.In(x), y)
				arena.Reset()
			}
		})
	}
	wg.Wait()
	for i, n := range nets {
		for j, p := range n.params() {
			if !bitsEqual(p.Float32s(), want.params()[j].Float32s()) {
				t.Errorf("goroutine %d: parameter %d differs", i, j)
			}
		}
	}
}

// seqNet has the ops of a transformer-style block and of DLRM's MLPs:
// matrix products, layer norm, GELU, concatenation, splitting, a
// transpose, embedding lookups, DLRM's interaction and reductions.
type seqNet struct {
	w1, w2, w3, lnW, lnB, emb *Tensor
}

func newSeqNet(seed uint64) *seqNet {
	g := NewGenerator(seed)
	p := func(t *Tensor) *Tensor { return t.SetRequiresGrad(true) }
	return &seqNet{w1: p(Randn(g, 8, 6)), w2: p(Randn(g, 6, 8)), w3: p(Randn(g, 4, 6)), lnW: p(Rand(g, 8)), lnB: p(Randn(g, 8)), emb: p(Randn(g, 10, 4))}
}

func (n *seqNet) params() []*Tensor { return []*Tensor{n.w1, n.w2, n.w3, n.lnW, n.lnB, n.emb} }

func (n *seqNet) loss(x, idx *Tensor) *Tensor {
	h := GELU(LayerNorm(Linear(x, n.w1, nil), []int{8}, n.lnW, n.lnB, 1e-5), "none")
	h = Matmul(h, Transpose(n.w2, 0, 1)) // [5, 6]
	parts := Split(h, 3, 1)
	h = Cat([]*Tensor{parts[1], Embedding(idx, n.emb), parts[0]}, 1) // [5, 3+4+3]
	dots := Interaction(Linear(x, n.w3, nil), []*Tensor{Embedding(idx, n.emb)}, false)
	return Add(Add(Sum(Mul(h, h), nil, false), Sum(Mean(h, []int{0}, false), nil, false)), Sum(dots, nil, false))
}

// TestArenaSequenceBitwise: TestArenaTrainingBitwise for seqNet.
func TestArenaSequenceBitwise(t *testing.T) {
	plain, inArena := newSeqNet(3), newSeqNet(3)
	arena := NewArena(0)
	for s := range 3 {
		g := NewGenerator(uint64(30 + s))
		x, idx := Randn(g, 5, 6), RandInt(g, 0, 10, 5)
		for _, n := range []*seqNet{plain, inArena} {
			in := x
			if n == inArena {
				in = arena.In(x)
			}
			n.loss(in, idx).Backward()
			for _, p := range n.params() {
				pd, gd := p.Float32s(), p.Grad().Float32s()
				for i := range pd {
					pd[i] -= 0.01 * gd[i]
				}
				p.ZeroGrad()
			}
		}
		arena.Reset()
	}
	for i, p := range inArena.params() {
		if !bitsEqual(p.Float32s(), plain.params()[i].Float32s()) {
			t.Errorf("parameter %d differs after arena steps", i)
		}
	}
	if arena.Stats().Reused == 0 {
		t.Error("nothing reused")
	}
}

// TestArenaOnHeap: where the system maps no memory outside the Go heap,
// the arena's regions are heap slices of each buffer's size, and training
// steps still give the bits of steps without an arena, reusing memory.
func TestArenaOnHeap(t *testing.T) {
	defer func(m func(int) []byte) { mapRegion = m }(mapRegion)
	mapRegion = func(int) []byte { return nil }
	plain, inArena := newArenaNet(4), newArenaNet(4)
	arena := NewArena(0)
	for s := range 3 {
		x, y := arenaBatch(uint64(40 + s))
		want, got := plain.step(x, y), inArena.step(arena.In(x), y)
		arena.Reset()
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("step %d: loss %v in a heap arena, %v without", s, got, want)
		}
	}
	st := arena.Stats()
	if st.Reused == 0 || st.Held == 0 || st.Held > 1<<20 {
		t.Errorf("stats %+v: want memory reused and held by size, not in 64 MiB regions", st)
	}
	for _, r := range arena.maps.m {
		if r.mapped {
			t.Fatal("a region is marked mapped")
		}
	}
	arena.Free()
	if st := arena.Stats(); st.Held != 0 || len(arena.maps.m) != 0 {
		t.Errorf("after Free: %+v, %d regions", st, len(arena.maps.m))
	}
}

// TestArenaFreeAndRefill: an arena emptied with Free after every step and
// filled again maps one region at a time, not one more each time.
func TestArenaFreeAndRefill(t *testing.T) {
	arena := NewArena(0)
	x := Randn(NewGenerator(11), 1000)
	for range 50 {
		if !bitsEqual(ReLU(arena.In(x)).Float32s(), ReLU(x).Float32s()) {
			t.Fatal("result differs")
		}
		arena.Reset()
		arena.Free()
	}
	if n := len(arena.maps.m); n != 0 {
		t.Errorf("after Free: %d regions left", n)
	}
	ReLU(arena.In(x))
	if _, ok := arena.maps.m[0]; !ok || len(arena.maps.m) != 1 {
		t.Errorf("after 50 steps each freed, the next region is not region 0 again: %d regions", len(arena.maps.m))
	}
}
