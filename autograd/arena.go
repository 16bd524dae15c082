package autograd

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kilnml/kiln/internal/hugepage"
	"github.com/kilnml/kiln/internal/spanalloc"
	"github.com/kilnml/kiln/internal/uninit"
)

// ErrReset: a tensor used after the Reset of the Arena its memory came
// from, when that memory may already hold another tensor.
var ErrReset = errors.New("tensor used after its arena was reset")

// An Arena is a caching allocator for the tensors of a computation that
// repeats: the activations and gradients of a training step, the
// intermediate results of an inference request. It is what PyTorch's
// caching allocator is to PyTorch, with the one difference Go imposes:
// Go has no reference counts to say when a tensor dies, so the caller says
// it, for every tensor of a step at once, with Reset.
//
// A computation runs in the arena from the tensor In returns: ops on it,
// and on every result computed from it, take their results' memory from
// the arena, and so does Backward for the gradients it computes on the way
// to the leaves. (That is the ops a training or inference step spends its
// memory on: convolution, normalisation, activations, elementwise and
// broadcast arithmetic, pooling, matrix products, softmax, reductions,
// concatenation, casts, layout changes, DLRM's interaction, and merged
// embedding lookups whose indices are in the arena, as models.DLRM puts
// them. The rest, such as single-table embedding lookups, allocate from
// the Go heap as without an arena; their results still belong to the
// step.) Parameters and their gradients never live in the arena (a leaf's
// gradient is copied out of it), nor do optimizer states. Reset ends the
// step: all memory handed out since the last Reset becomes free, and the
// next step's ops, asking for the same sizes in the same order, get the
// same memory back, still mapped to the process and often still in the
// processor's caches. A buffer is handed out as it was left, never
// zeroed, to ops that overwrite all of it.
//
//	arena := autograd.NewArena(0)
//	for _, batch := range batches {
//		opt.ZeroGrad()
//		loss := autograd.CrossEntropy(model.Forward(arena.In(batch.X)), batch.Y, autograd.CrossEntropyOptions{})
//		loss.Backward()
//		opt.Step()
//		fmt.Println(loss.Item())
//		arena.Reset()
//	}
//
// A tensor made in the arena must not be used after the next Reset: an
// op given one, or a read of its values (Float32s, Item, Data, Dense,
// Values, Backward), panics with an *Error of kind ErrReset rather than
// compute on memory that may already hold the next step's tensors; String
// says it was freed. Keep copies what
// must outlive the step. A slice taken from such a tensor (Float32s,
// Data) is not watched: it is valid until the next Reset or Free, and
// only while the arena or one of its tensors is reachable, because on
// Linux an arena's memory is mapped outside the Go heap (so that the
// collector does not count it as live heap, which would let garbage grow
// as large beside it) and a slice does not keep it alive.
//
// The arena places buffers of every size in a few large regions of memory,
// each buffer in the best-fitting free span, and a freed buffer merges
// with the free memory beside it, so what one step's large buffers freed
// serves another's small ones. Of the spans a buffer fits in it takes the
// one in memory already touched (resident) before fresh memory. The cap
// (NewArena) bounds the memory touched; Free gives the free part back.
//
// Without an arena, ops allocate from the Go heap and the collector frees;
// results are bit for bit the same either way.
//
// An Arena may be used by several goroutines, but a step's tensors belong
// to the one Reset ends: two computations that reset at different times
// need an arena each.
type Arena struct {
	gen   atomic.Uint64 // the step: tensors made in an earlier one are dead
	limit int64

	mu    sync.Mutex
	space spanalloc.Allocator    // where the blocks lie in the regions
	out   []arenaBlock           // handed out this step, in order; size 0 once given back
	index map[unsafe.Pointer]int // where each gradient block is in out
	maps  *arenaMappings
	stats ArenaStats
}

// arenaBlock is one buffer of the arena.
type arenaBlock struct {
	p    unsafe.Pointer  // the first byte handed out
	size int             // bytes asked for, rounded up to 8
	span spanalloc.Block // the memory it takes in its region
	grad bool            // handed out for a gradient: Backward may give it back early
}

// arenaRegionBytes is the size of an arena's regions, but for a buffer
// larger than that, which gets a region of its own size. Only the pages a
// region has handed out are resident, so a large region costs address
// space, not memory, and lets more buffers share free memory.
const arenaRegionBytes = 64 << 20

// arenaMappings is the memory of an arena's regions, by region. It is
// apart from the Arena so that a cleanup can unmap it once the arena is
// unreachable: every tensor made in an arena refers to the arena, so none
// is left then.
type arenaMappings struct {
	sync.Mutex
	m map[int]arenaRegion
}

// arenaRegion is a region's memory: mapped outside the Go heap, or, where
// the system maps none, a heap slice the map keeps alive.
type arenaRegion struct {
	b      []byte
	mapped bool
}

func (m *arenaMappings) release(id int) {
	m.Lock()
	r := m.m[id]
	delete(m.m, id)
	m.Unlock()
	if r.mapped {
		unmapArena(r.b)
	}
}

func (m *arenaMappings) unmapAll() {
	m.Lock()
	defer m.Unlock()
	for id, r := range m.m {
		if r.mapped {
			unmapArena(r.b)
		}
		delete(m.m, id)
	}
}

// ArenaStats counts what an Arena did.
type ArenaStats struct {
	// Held is the bytes of memory the arena has touched and holds, in
	// use and free: what it costs in resident memory.
	Held int64
	// InUse is the bytes handed out since the last Reset and not given
	// back.
	InUse int64
	// Reused counts buffers placed in memory the arena had touched
	// before, Allocated those that touched new memory, and Overflowed
	// those the cap sent to the Go heap instead.
	Reused, Allocated, Overflowed int64
}

// NewArena returns an empty arena that holds at most maxBytes of memory;
// maxBytes ≤ 0 sets no cap. At the cap, the arena first gives back
// regions wholly free, then lets results come from the Go heap as they
// would without it.
func NewArena(maxBytes int64) *Arena {
	a := &Arena{limit: maxBytes, index: map[unsafe.Pointer]int{},
		maps: &arenaMappings{m: map[int]arenaRegion{}}}
	a.gen.Store(1)
	runtime.AddCleanup(a, (*arenaMappings).unmapAll, a.maps)
	return a
}

// In returns a view of t (the same data, shape and format) that starts a
// computation in the arena: see Arena. Gradients flow through the view to
// t, as they would to t itself. The view, like every tensor computed from
// it, is valid until the next Reset.
func (a *Arena) In(t *Tensor) *Tensor {
	if t == nil {
		Fail("Arena.In", "tensor is nil")
	}
	t.checkLive("Arena.In")
	v := t.inMode(Mode{arena: a, gen: a.gen.Load()})
	if t.requiresGrad && !t.mode.noGrad {
		return record("Arena", v, []*Tensor{t}, func(g *Tensor) []*Tensor { return []*Tensor{g} })
	}
	return v
}

// Reset ends the arena's step: the memory of every tensor made in it since
// the last Reset becomes free for the next step, and those tensors are
// dead (see Arena).
func (a *Arena) Reset() {
	a.mu.Lock()
	a.gen.Add(1)
	for i := range a.out {
		if b := a.out[i]; b.size > 0 {
			a.space.Free(b.span)
		}
		a.out[i] = arenaBlock{}
	}
	a.out = a.out[:0]
	clear(a.index)
	a.stats.InUse = 0
	a.mu.Unlock()
}

// Free hands the arena's free memory back, as torch.cuda.empty_cache does
// for PyTorch's allocator: for a program done with the computation that
// wants its memory back. It gives back every region no buffer in use lies
// in, which after a Reset is all of them; the arena fills again as it is
// used.
func (a *Arena) Free() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.shed(-1)
}

// shed gives back wholly free regions until the memory touched is at
// most limit bytes (limit < 0: all of them).
func (a *Arena) shed(limit int64) {
	for _, id := range a.space.FreeRegions() {
		if limit >= 0 && a.space.Touched() <= limit {
			return
		}
		a.space.RemoveRegion(id)
		a.maps.release(id)
	}
}

// Stats returns the arena's counts.
func (a *Arena) Stats() ArenaStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.Held = a.space.Touched()
	return s
}

// Keep returns a copy of t that outlives the arena's Reset: the same
// values, dtype, shape and format in memory of its own, cut off from the
// tape and from the arena's computation. For results a step hands on
// (predictions kept for a metric, a sample to print later).
func (a *Arena) Keep(t *Tensor) *Tensor {
	if t == nil {
		Fail("Arena.Keep", "tensor is nil")
	}
	t.checkLive("Arena.Keep")
	return heapCopy(t)
}

// heapCopy copies t's data into memory of its own on the Go heap, in a
// tensor of t's dtype, shape and format with no mode and no tape.
func heapCopy(t *Tensor) *Tensor {
	k := &Tensor{dtype: t.dtype, shape: cloneInts(t.shape), format: t.format, data: makeUninit(t.dtype, t.Numel())}
	copyData(k.data, t.data)
	return k
}

// take returns the memory of a buffer of size bytes (a multiple of 8),
// or nil when the cap sends it to the heap.
func (a *Arena) take(size int, grad bool) unsafe.Pointer {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Buffers start on cache lines, and large ones one of 64 cache lines
	// further in, in turn, as alloc colours them (see colorSpan).
	need, colour := (size+63)&^63, 0
	if size >= colorMinBytes {
		need += colorSpan
		colour = int(colorNext.Add(1)%(colorSpan/64)) * 64
	}
	before := a.space.Touched()
	span, ok := a.space.Alloc(need, a.room())
	if !ok && a.limit > 0 {
		a.shed(a.limit - int64(need))
		span, ok = a.space.Alloc(need, a.room())
	}
	if !ok {
		if a.limit > 0 && a.space.Touched()+int64(need) > a.limit {
			a.stats.Overflowed++
			return nil
		}
		a.newRegion(need)
		span, _ = a.space.Alloc(need, a.room())
	}
	if a.space.Touched() > before {
		a.stats.Allocated++
	} else {
		a.stats.Reused++
	}
	b := arenaBlock{p: unsafe.Add(a.maps.base(span.Region), span.Off+colour), size: size, span: span, grad: grad}
	if grad { // only gradients come back before Reset
		a.index[b.p] = len(a.out)
	}
	a.out = append(a.out, b)
	a.stats.InUse += int64(size)
	return b.p
}

// room is how many more bytes of memory the cap lets the arena touch; -1
// for no cap.
func (a *Arena) room() int64 {
	if a.limit <= 0 {
		return -1
	}
	return max(a.limit-a.space.Touched(), 0)
}

// newRegion adds a region that holds at least need bytes. Regions are
// mapped outside the Go heap where the system allows: memory an arena
// holds from step to step would otherwise count as live heap, and the
// collector, which lets the heap grow to twice what is live before it
// collects, would let the garbage the rest of the program makes grow by
// as much again. Large regions are advised for huge pages as alloc's
// large tensors are. Where nothing can be mapped a region is a heap
// slice of need bytes: a large heap region would be memory, not just
// address space.
func (a *Arena) newRegion(need int) {
	r := arenaRegion{b: mapRegion(max(need, arenaRegionBytes)), mapped: true}
	switch {
	case r.b == nil:
		r = arenaRegion{b: unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(alloc[int64]((need+7)/8, false)))), need)}
	case need > arenaRegionBytes:
		hugepage.Advise(unsafe.Pointer(unsafe.SliceData(r.b)), len(r.b))
	default:
		// A shared region's first hugepage.MinBytes stay in small pages:
		// an arena that never grows past them (one a request in a
		// server) holds the pages it touches, not 2 MiB ones.
		hugepage.Advise(unsafe.Pointer(&r.b[hugepage.MinBytes]), len(r.b)-hugepage.MinBytes)
	}
	id := a.space.AddRegion(len(r.b))
	a.maps.Lock()
	a.maps.m[id] = r
	a.maps.Unlock()
}

// mapRegion is mapArena, or in tests a stand-in for a system that maps
// nothing.
var mapRegion = mapArena

// base returns the first byte of region id.
func (m *arenaMappings) base(id int) unsafe.Pointer {
	m.Lock()
	defer m.Unlock()
	return unsafe.Pointer(unsafe.SliceData(m.m[id].b))
}

// giveBack frees, before Reset, a gradient buffer Backward is done with:
// only a whole buffer handed out for a gradient this step, so memory an
// activation or a view elsewhere may still hold is never freed early. It
// reports whether it took the buffer.
func (a *Arena) giveBack(p unsafe.Pointer, size int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.index[p]
	if !ok {
		return false
	}
	b := a.out[i]
	if !b.grad || b.size != (size+7)&^7 {
		return false
	}
	delete(a.index, p)
	a.out[i] = arenaBlock{}
	a.space.Free(b.span)
	a.stats.InUse -= int64(b.size)
	return true
}

// arenaSlice returns n elements for a result in mode m: from m's arena
// when it has one (and the cap allows), else from the heap; zeros if zero,
// else arbitrary. grad marks a gradient buffer Backward may give back
// early.
func arenaSlice[T uninit.Elem](m Mode, n int, grad, zero bool) []T {
	if m.arena == nil || n == 0 {
		return alloc[T](n, zero)
	}
	elem := int(unsafe.Sizeof(*new(T)))
	p := m.arena.take((n*elem+7)&^7, grad)
	if p == nil {
		return alloc[T](n, zero)
	}
	s := unsafe.Slice((*T)(p), n)
	if zero {
		clear(s)
	} else {
		uninit.Reused(s)
	}
	return s
}

// arenaMode is the part of m that says where memory comes from: the mode
// of a gradient computed for a tensor in m.
func (m Mode) arenaMode() Mode { return Mode{arena: m.arena, gen: m.gen} }

// live reports whether m's arena step, if any, is still the current one.
func (m Mode) live() bool { return m.arena == nil || m.gen == m.arena.gen.Load() }

// checkLive panics with ErrReset when t's memory may have been handed
// out again by its arena.
func (t *Tensor) checkLive(op string) {
	if !t.mode.live() {
		failReset(op)
	}
}

func failReset(op string) {
	fail(ErrReset, op, "tensor was made in an Arena that has been Reset since, and its memory may hold another tensor now (Arena.Keep copies what must outlive a step)")
}

// releaseArenaGrad offers a gradient's memory back to its arena early; it
// reports whether g's memory was the arena's to take.
func releaseArenaGrad(g *Tensor) bool {
	if g.mode.arena == nil {
		return false
	}
	if p, n := g.storagePtr(); p != nil && g.mode.live() {
		g.mode.arena.giveBack(p, int(n))
	}
	// Arena memory, taken back or not, is never the gradient cache's.
	return true
}

// resultIn returns a tensor of dtype, shape (not copied) and format for
// the result of op in mode m, its memory from m's arena when m has one:
// arbitrary elements for a result the op writes in full, zeros if zero.
func resultIn(op string, m Mode, dtype DType, shape []int, format MemoryFormat, zero bool) *Tensor {
	m = m.arenaMode()
	return &Tensor{dtype: dtype, shape: shape, format: format, data: allocIn(m, dtype, numel(op, shape), zero), mode: m}
}

// gradFor returns a gradient for x with arbitrary elements, for a
// backward that writes all of them: x's shape, dtype and format as given,
// its memory from x's arena when x is in one, else from the gradient
// cache.
func gradFor(x *Tensor, dtype DType, format MemoryFormat) *Tensor {
	m := x.mode.arenaMode()
	g := &Tensor{dtype: dtype, shape: cloneInts(x.shape), format: format, mode: m}
	n := numel("grad", x.shape)
	switch dtype {
	case Float32:
		g.data = gradSlice[float32](m, n)
	case BFloat16:
		g.data = gradSlice[uint16](m, n)
	default:
		panic("autograd: gradFor " + dtype.String())
	}
	return g
}
