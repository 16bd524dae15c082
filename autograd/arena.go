package autograd

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kilnml/kiln/internal/hugepage"
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
// concatenation, casts, layout changes, DLRM's interaction. The rest, such
// as embedding lookups, allocate from the Go heap as without an arena;
// their results still belong to the step.) Parameters and their
// gradients never live in the arena (a leaf's gradient is copied out of
// it), nor do optimizer states. Reset ends the step: all memory handed out
// since the last Reset goes back to the arena's free lists, and the next
// step's ops get the same buffers back, most recently freed first, while
// they are still in the processor's caches and mapped to the process. A
// buffer is handed out as it was left, never zeroed, to ops that
// overwrite all of it.
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
// Memory is kept by exact size, which suits a step that repeats its
// shapes. The cap (NewArena) bounds what the arena holds; Free gives the
// free part back.
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
	held  int64                  // bytes of the blocks below
	free  map[int][]arenaBlock   // by size in bytes; the last was freed last
	out   []arenaBlock           // handed out this step, in order; size 0 once given back
	index map[unsafe.Pointer]int // where each gradient block is in out
	maps  *arenaMappings
	stats ArenaStats
}

// arenaBlock is one buffer of the arena.
type arenaBlock struct {
	p    unsafe.Pointer // the first byte handed out
	size int            // bytes asked for, rounded up to 8
	grad bool           // handed out for a gradient: Backward may give it back early
}

// arenaMappings is the memory an arena mapped outside the Go heap, by the
// address handed out. It is apart from the Arena so that a cleanup can
// unmap it once the arena is unreachable: every tensor made in an arena
// refers to the arena, so none is left then.
type arenaMappings struct {
	sync.Mutex
	m map[unsafe.Pointer][]byte
}

func (m *arenaMappings) unmap(p unsafe.Pointer) {
	m.Lock()
	b, ok := m.m[p]
	delete(m.m, p)
	m.Unlock()
	if ok {
		unmapArena(b)
	}
}

func (m *arenaMappings) unmapAll() {
	m.Lock()
	defer m.Unlock()
	for p, b := range m.m {
		unmapArena(b)
		delete(m.m, p)
	}
}

// ArenaStats counts what an Arena did.
type ArenaStats struct {
	// Held is the bytes of memory the arena owns: in use and free.
	Held int64
	// InUse is the bytes handed out since the last Reset and not given
	// back.
	InUse int64
	// Reused counts buffers handed out from the free lists, Allocated
	// those newly allocated, and Overflowed those the cap sent to the Go
	// heap instead.
	Reused, Allocated, Overflowed int64
}

// NewArena returns an empty arena that holds at most maxBytes of memory;
// maxBytes ≤ 0 sets no cap. At the cap, the arena first drops free
// buffers of other sizes, then lets results come from the Go heap as they
// would without it.
func NewArena(maxBytes int64) *Arena {
	a := &Arena{limit: maxBytes, free: map[int][]arenaBlock{}, index: map[unsafe.Pointer]int{},
		maps: &arenaMappings{m: map[unsafe.Pointer][]byte{}}}
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
			a.free[b.size] = append(a.free[b.size], b)
		}
		a.out[i] = arenaBlock{}
	}
	a.out = a.out[:0]
	clear(a.index)
	a.stats.InUse = 0
	a.mu.Unlock()
}

// Free hands the arena's free buffers back to the garbage collector, as
// torch.cuda.empty_cache does for PyTorch's allocator: for a program done
// with the computation that wants its memory back. Buffers in use stay
// until Reset frees them; the arena fills again as it is used.
func (a *Arena) Free() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for size, l := range a.free {
		for _, b := range l {
			a.release(b)
		}
		a.held -= int64(size * len(l))
	}
	clear(a.free)
}

// release returns a free block's memory: to the system if the arena mapped
// it, else to the collector (by forgetting it).
func (a *Arena) release(b arenaBlock) { a.maps.unmap(b.p) }

// Stats returns the arena's counts.
func (a *Arena) Stats() ArenaStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.Held = a.held
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
	var b arenaBlock
	if l := a.free[size]; len(l) > 0 {
		b = l[len(l)-1]
		l[len(l)-1] = arenaBlock{}
		a.free[size] = l[:len(l)-1]
		a.stats.Reused++
	} else {
		if a.limit > 0 && a.held+int64(size) > a.limit {
			a.shed(int64(size))
			if a.held+int64(size) > a.limit {
				a.stats.Overflowed++
				return nil
			}
		}
		b = arenaBlock{p: a.newBlock(size), size: size}
		a.held += int64(size)
		a.stats.Allocated++
	}
	b.grad = grad
	if grad { // only gradients come back before Reset
		a.index[b.p] = len(a.out)
	}
	a.out = append(a.out, b)
	a.stats.InUse += int64(size)
	return b.p
}

// newBlock returns size bytes of new memory. It is mapped outside the Go
// heap where the system allows: memory an arena holds from step to step
// would otherwise count as live heap, and the collector, which lets the
// heap grow to twice what is live before it collects, would let the
// garbage the rest of the program makes grow by as much again. Large
// blocks are coloured and advised for huge pages as alloc's are.
func (a *Arena) newBlock(size int) unsafe.Pointer {
	pad := 0
	if size >= colorMinBytes {
		pad = colorSpan
	}
	m := mapArena(size + pad)
	if m == nil {
		return unsafe.Pointer(unsafe.SliceData(alloc[int64](size/8, false)))
	}
	off := 0
	if pad > 0 {
		off = int(colorNext.Add(1)%(colorSpan/64)) * 64
	}
	p := unsafe.Pointer(&m[off])
	if size >= hugepage.MinBytes {
		hugepage.Advise(p, size)
	}
	a.maps.Lock()
	a.maps.m[p] = m
	a.maps.Unlock()
	return p
}

// shed drops free buffers until size more bytes fit under the cap.
func (a *Arena) shed(size int64) {
	for s, l := range a.free {
		for len(l) > 0 && a.held+size > a.limit {
			a.release(l[len(l)-1])
			l[len(l)-1] = arenaBlock{}
			l = l[:len(l)-1]
			a.held -= int64(s)
		}
		a.free[s] = l
		if a.held+size <= a.limit {
			return
		}
	}
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
	a.free[b.size] = append(a.free[b.size], b)
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
