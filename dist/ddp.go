package dist

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
)

// DefaultBucketBytes is the gradient bytes (float32 on the wire) one
// allreduce carries, PyTorch DDP's bucket_cap_mb=25.
const DefaultBucketBytes = 25 << 20

// DefaultTimeout is how long a collective may take before DataParallel
// aborts the world, PyTorch's default process-group timeout.
const DefaultTimeout = 10 * time.Minute

// Options configures DataParallel. The zero value is PyTorch DDP's
// defaults.
type Options struct {
	// BucketBytes caps the float32 gradient bytes of one allreduce; 0 means
	// DefaultBucketBytes. Buckets are filled exactly, a parameter's
	// gradient split across two where it does not fit, so a step makes
	// ⌈gradient bytes / BucketBytes⌉ allreduce calls.
	BucketBytes int
	// NoOverlap reduces every bucket in Sync instead of starting each
	// during Backward, for measuring what the overlap buys.
	NoOverlap bool
	// Timeout bounds the wait for each collective; 0 means DefaultTimeout.
	// A collective that does not finish in time aborts the world (MPI:
	// MPI_Abort, so a dead peer ends the job instead of hanging it) with a
	// message naming the bucket.
	Timeout time.Duration
	// Split is the model's split master weights (amp.SplitModule), whose
	// bottom halves rank 0 broadcasts with the parameters; nil for a model
	// that is not split. The Tops' bfloat16 gradients are reduced in
	// float32 and rounded once.
	Split *amp.SplitModel
	// KeepBuffers leaves each rank's buffers (batch-norm running
	// statistics) its own; by default Sync broadcasts rank 0's, as
	// DDP's broadcast_buffers=True does before each forward pass.
	KeepBuffers bool
	// Trace, when set, is told when each bucket's allreduce starts and
	// when Sync has its result.
	Trace func(Event)
}

// An Event is a moment in a bucket's reduction, for tracing overlap.
type Event struct {
	Kind   EventKind
	Bucket int
	Bytes  int // float32 bytes on the wire
	Time   time.Time
}

// EventKind says what happened to a bucket.
type EventKind uint8

const (
	// Launched: the bucket's allreduce was started.
	Launched EventKind = iota + 1
	// Reduced: Sync has the bucket's result.
	Reduced
)

func (k EventKind) String() string {
	switch k {
	case Launched:
		return "launched"
	case Reduced:
		return "reduced"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// DataParallel keeps one model's replicas on the ranks of a Communicator
// in step, as PyTorch's DistributedDataParallel does. Each rank runs the
// forward and backward pass on its own shard of a batch; Sync, called
// between Backward and the optimizer step, leaves every rank with the
// mean of the ranks' gradients, so the step is the same everywhere and
// the parameters stay bitwise equal.
//
// Dense gradients travel in buckets of BucketBytes, filled in reverse
// parameter order (the order backward produces them): a bucket's
// allreduce starts on the communicator as soon as Backward has finished
// its last gradient, overlapping the rest of the backward pass; buckets
// always start in the same order on every rank. Row-sparse gradients of
// sparse embedding tables are gathered across ranks in Sync (every rank's
// rows, summed and divided by the world size). A fused sparse update
// (optim.FuseSparse), which updates a table inside Backward from the
// local gradient, would let the replicas drift and must not be used.
type DataParallel struct {
	comm    Communicator
	opt     Options
	params  []*autograd.Tensor // dense, in bucket order (reverse registration)
	names   []string           // their names
	sparse  []*autograd.Tensor
	buffers []*autograd.Tensor
	offsets []int // params[i] starts at element offsets[i] of the concatenation
	buckets []*bucket
	byParam map[*autograd.Tensor]int
	removes []func()

	mu         sync.Mutex
	ready      []bool // per param, this step
	nextLaunch int
	paused     bool
	err        error // a misuse seen in a hook, reported by Sync
}

// bucket is elements [lo, hi) of the concatenated gradients.
type bucket struct {
	lo, hi  int
	params  []int // the params it holds a part of
	pending int   // of which still to be ready this step
	// stage holds the float32 values of the bucket's bfloat16 gradients
	// (at their offsets in the bucket); float32 gradients are reduced
	// where they lie. nil when the bucket has none.
	stage []float32
	req   *Request
}

// NewDataParallel broadcasts rank 0's parameters, buffers and split bottom
// halves to every rank and hooks the parameters' gradients. Make it after
// the model is in its final form (after kiln.Optimize or amp.SplitModule,
// which replace parameters) and before the optimizer's first step; it must
// be made on every rank, in the same order as the other collectives.
func NewDataParallel(comm Communicator, m nn.Module, opt Options) (*DataParallel, error) {
	if opt.BucketBytes == 0 {
		opt.BucketBytes = DefaultBucketBytes
	}
	if opt.BucketBytes < 4 {
		return nil, fmt.Errorf("dist: DataParallel: BucketBytes %d holds no float32", opt.BucketBytes)
	}
	if opt.Timeout == 0 {
		opt.Timeout = DefaultTimeout
	}
	d := &DataParallel{comm: comm, opt: opt, byParam: map[*autograd.Tensor]int{}}
	sparse := sparseTables(m)
	seen := map[*autograd.Tensor]bool{}
	named := nn.NamedParameters(m)
	var all []*autograd.Tensor
	for _, p := range named {
		t := p.Tensor
		if seen[t] {
			continue // a tied weight: one gradient
		}
		seen[t] = true
		all = append(all, t)
		switch dt := t.DType(); {
		case !t.RequiresGrad():
		case dt != autograd.Float32 && dt != autograd.BFloat16:
			return nil, fmt.Errorf("dist: DataParallel: parameter %s is %v; gradients can be reduced for float32 and bfloat16 parameters only", p.Name, dt)
		case sparse[t]:
			d.sparse = append(d.sparse, t)
		default:
			d.params = append(d.params, t)
			d.names = append(d.names, p.Name)
		}
	}
	slices.Reverse(d.params)
	slices.Reverse(d.names)
	for _, b := range nn.NamedBuffers(m) {
		d.buffers = append(d.buffers, b.Tensor)
	}
	if err := d.broadcastStart(all); err != nil {
		return nil, err
	}
	d.plan()
	for i, p := range d.params {
		d.byParam[p] = i
		if !opt.NoOverlap && comm.Size() > 1 {
			d.removes = append(d.removes, p.AddGradHook(d.gradReady))
		}
	}
	d.ready = make([]bool, len(d.params))
	return d, nil
}

// alone reports a world of one, where there is nothing to reduce: the
// gradients are already the mean.
func (d *DataParallel) alone() bool { return d.comm.Size() == 1 }

// sparseTables returns the tables of m's sparse embedding lookups.
func sparseTables(m nn.Module) map[*autograd.Tensor]bool {
	s := map[*autograd.Tensor]bool{}
	for _, nm := range nn.NamedModules(m) {
		on := false
		switch e := nm.Module.(type) {
		case *nn.Embedding:
			on = e.Sparse
		case *nn.EmbeddingBag:
			on = e.Sparse
		}
		if on {
			for _, p := range nn.Parameters(nm.Module) {
				s[p] = true
			}
		}
	}
	return s
}

// broadcastStart copies rank 0's parameters, buffers and bottom halves to
// every rank.
func (d *DataParallel) broadcastStart(params []*autograd.Tensor) error {
	for _, t := range append(slices.Clone(params), d.buffers...) {
		b, err := tensorBuffer(t)
		if err != nil {
			return err
		}
		if err := d.comm.Bcast(b, 0); err != nil {
			return fmt.Errorf("dist: DataParallel: broadcasting rank 0's parameters: %w", err)
		}
	}
	if d.opt.Split != nil {
		for _, s := range d.opt.Split.Params() {
			if err := d.comm.Bcast(BFloat16s(s.Param.Bottom), 0); err != nil {
				return fmt.Errorf("dist: DataParallel: broadcasting rank 0's split bottom of %s: %w", s.Name, err)
			}
		}
	}
	return nil
}

// tensorBuffer wraps t's storage.
func tensorBuffer(t *autograd.Tensor) (Buffer, error) {
	switch s := t.Data().(type) {
	case []float32:
		return Float32s(s), nil
	case []uint16:
		return BFloat16s(s), nil
	case []int64:
		return Int64s(s), nil
	case []uint8:
		return Bytes(s), nil
	}
	return Buffer{}, fmt.Errorf("dist: DataParallel: cannot send %v tensors", t.DType())
}

// plan cuts the concatenated dense gradients into buckets.
func (d *DataParallel) plan() {
	d.offsets = make([]int, len(d.params)+1)
	for i, p := range d.params {
		d.offsets[i+1] = d.offsets[i] + p.Numel()
	}
	total, capacity := d.offsets[len(d.params)], d.opt.BucketBytes/4
	for lo := 0; lo < total; lo += capacity {
		b := &bucket{lo: lo, hi: min(lo+capacity, total)}
		first, _ := slices.BinarySearch(d.offsets, b.lo+1)
		for i := first - 1; i < len(d.params) && d.offsets[i] < b.hi; i++ {
			if d.offsets[i+1] > d.offsets[i] {
				b.params = append(b.params, i)
			}
		}
		d.buckets = append(d.buckets, b)
	}
	d.reset()
}

// reset readies the buckets for the next step.
func (d *DataParallel) reset() {
	for _, b := range d.buckets {
		b.pending, b.req = len(b.params), nil
	}
	clear(d.ready)
	d.nextLaunch, d.err = 0, nil
}

// NumBuckets returns the number of allreduce calls a step makes for the
// dense gradients.
func (d *DataParallel) NumBuckets() int { return len(d.buckets) }

// NoSync runs fn, typically forward and backward passes of micro-batches,
// without reducing their gradients, which accumulate: the next Backward
// outside NoSync and Sync reduce the sum, as PyTorch DDP's no_sync().
func (d *DataParallel) NoSync(fn func()) {
	d.mu.Lock()
	d.paused = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.paused = false
		d.mu.Unlock()
	}()
	fn()
}

// gradReady is the hook of every dense parameter: it copies the gradient
// into its buckets and starts each bucket that is complete, in order.
func (d *DataParallel) gradReady(p *autograd.Tensor) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused {
		return
	}
	i := d.byParam[p]
	if d.ready[i] {
		if d.err == nil {
			d.err = errors.New("dist: DataParallel: a second Backward reached the parameters before Sync; run all but the last micro-batch inside NoSync")
		}
		return
	}
	d.ready[i] = true
	for _, b := range d.bucketsOf(i) {
		d.fill(b, i)
		b.pending--
	}
	d.launchReady(false)
}

// bucketsOf returns the buckets holding a part of param i.
func (d *DataParallel) bucketsOf(i int) []*bucket {
	capacity := d.opt.BucketBytes / 4
	lo, hi := d.offsets[i]/capacity, (d.offsets[i+1]-1)/capacity
	if d.offsets[i+1] == d.offsets[i] {
		return nil
	}
	return d.buckets[lo : hi+1]
}

// fill readies param i's part of bucket b: a bfloat16 gradient widened
// into the bucket's stage (a float32 one is reduced in place).
func (d *DataParallel) fill(b *bucket, i int) {
	g := d.params[i].Grad()
	if g.DType() != autograd.BFloat16 {
		return
	}
	plo, phi := d.offsets[i], d.offsets[i+1]
	lo, hi := max(plo, b.lo), min(phi, b.hi)
	if b.stage == nil {
		b.stage = make([]float32, b.hi-b.lo)
	}
	kernels.BF16ToF32(b.stage[lo-b.lo:hi-b.lo], g.BFloat16s()[lo-plo:hi-plo])
}

// parts returns bucket b's gradients in bucket order: the float32 ones
// themselves, the bfloat16 ones' stage.
func (d *DataParallel) parts(b *bucket) [][]float32 {
	parts := make([][]float32, 0, len(b.params))
	for _, i := range b.params {
		plo, phi := d.offsets[i], d.offsets[i+1]
		lo, hi := max(plo, b.lo), min(phi, b.hi)
		if g := d.params[i].Grad(); g.DType() == autograd.Float32 {
			parts = append(parts, g.Float32s()[lo-plo:hi-plo])
		} else {
			parts = append(parts, b.stage[lo-b.lo:hi-b.lo])
		}
	}
	return parts
}

// launchReady starts the complete buckets from nextLaunch on, in order;
// with all, every remaining bucket, filling what no hook filled.
func (d *DataParallel) launchReady(all bool) {
	for d.nextLaunch < len(d.buckets) {
		b := d.buckets[d.nextLaunch]
		if b.pending > 0 && !all {
			return
		}
		if b.pending > 0 {
			for _, i := range b.params {
				if !d.ready[i] {
					// No gradient on this rank (or no hook, NoOverlap):
					// it counts as zeros.
					if p := d.params[i]; p.Grad() == nil {
						p.SetGrad(autograd.ZerosLike(p))
					}
					d.fill(b, i)
				}
			}
		}
		b.req = d.comm.Iallreduce(Float32Parts(d.parts(b)...), Mean)
		d.trace(Launched, d.nextLaunch)
		d.nextLaunch++
	}
}

func (d *DataParallel) trace(k EventKind, b int) {
	if d.opt.Trace != nil {
		d.opt.Trace(Event{Kind: k, Bucket: b, Bytes: 4 * (d.buckets[b].hi - d.buckets[b].lo), Time: time.Now()})
	}
}

// Sync finishes the gradient reduction of a step: it starts the buckets
// Backward did not (all of them with NoOverlap; those of parameters that
// got no gradient on this rank, which count as zeros), waits for every
// bucket, writes the mean gradients back into the parameters, gathers the
// sparse gradients and, unless KeepBuffers, broadcasts rank 0's buffers.
// Call it on every rank after Backward and before the optimizer step.
//
// A collective that does not finish within the timeout aborts the world
// and returns an error wrapping ErrTimeout; with MPI the process exits.
func (d *DataParallel) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.reset()
	if d.err != nil || d.alone() {
		return d.err
	}
	d.launchReady(true)
	for k, b := range d.buckets {
		if err := d.wait(b.req, d.bucketName(k)); err != nil {
			return err
		}
		d.trace(Reduced, k)
	}
	for i, p := range d.params {
		d.unfill(i, p)
	}
	if len(d.sparse) > 0 {
		if err := d.gatherSparse(); err != nil {
			return err
		}
	}
	if !d.opt.KeepBuffers {
		if err := d.broadcastBuffers(); err != nil {
			return err
		}
	}
	return nil
}

// broadcastBuffers copies rank 0's buffers to every rank, one Bcast per
// element type for all of them: ResNet-18's 60 batch-norm buffers one by
// one cost a round trip each, every step.
func (d *DataParallel) broadcastBuffers() error {
	var f32 []float32
	var i64 []int64
	var others []*autograd.Tensor
	for _, t := range d.buffers {
		switch v := t.Data().(type) {
		case []float32:
			f32 = append(f32, v...)
		case []int64:
			i64 = append(i64, v...)
		default:
			others = append(others, t)
		}
	}
	err := d.wait(d.async(func() error {
		if err := d.comm.Bcast(Float32s(f32), 0); err != nil {
			return err
		}
		if err := d.comm.Bcast(Int64s(i64), 0); err != nil {
			return err
		}
		for _, t := range others {
			b, err := tensorBuffer(t)
			if err != nil {
				return err
			}
			if err := d.comm.Bcast(b, 0); err != nil {
				return err
			}
		}
		return nil
	}), "the broadcast of rank 0's buffers")
	if err != nil || d.comm.Rank() == 0 {
		return err
	}
	for _, t := range d.buffers {
		switch v := t.Data().(type) {
		case []float32:
			f32 = f32[copy(v, f32):]
		case []int64:
			i64 = i64[copy(v, i64):]
		}
	}
	return nil
}

// async runs a blocking collective on a goroutine so that wait can time
// it.
func (d *DataParallel) async(f func() error) *Request {
	r := newRequest()
	go func() { r.finish(f()) }()
	return r
}

// wait waits for r within the timeout; past it, it aborts the world
// naming what hung.
func (d *DataParallel) wait(r *Request, what string) error {
	t := time.NewTimer(d.opt.Timeout)
	defer t.Stop()
	select {
	case <-r.Done():
		if r.err != nil {
			return fmt.Errorf("dist: DataParallel: %s: %w", what, r.err)
		}
		return nil
	case <-t.C:
		reason := fmt.Sprintf("rank %d: the allreduce of %s did not finish within %v (a rank died or stopped calling Sync)", d.comm.Rank(), what, d.opt.Timeout)
		d.comm.Abort(1, reason)
		return fmt.Errorf("%w: %s", ErrTimeout, reason)
	}
}

// bucketName names bucket k for a timeout's message.
func (d *DataParallel) bucketName(k int) string {
	b := d.buckets[k]
	return fmt.Sprintf("bucket %d of %d (%d bytes: gradients of %s to %s)",
		k, len(d.buckets), 4*(b.hi-b.lo), d.names[b.params[0]], d.names[b.params[len(b.params)-1]])
}

// unfill rounds param i's reduced gradient back into bfloat16; a float32
// one was reduced in place.
func (d *DataParallel) unfill(i int, p *autograd.Tensor) {
	g := p.Grad()
	if g.DType() != autograd.BFloat16 {
		return
	}
	plo := d.offsets[i]
	for _, b := range d.bucketsOf(i) {
		lo, hi := max(plo, b.lo), min(d.offsets[i+1], b.hi)
		kernels.F32ToBF16(g.BFloat16s()[lo-plo:hi-plo], b.stage[lo-b.lo:hi-b.lo])
	}
}

// gatherSparse replaces each sparse table's row-sparse gradient with the
// mean over ranks: every rank's rows, in rank order, coalesced (rows that
// several ranks touched are summed), divided by the world size. All
// tables travel together: three collectives a step, not three a table
// (DLRM has 26).
func (d *DataParallel) gatherSparse() error {
	nt, size := len(d.sparse), d.comm.Size()
	counts := make([]int64, nt)
	var idx []int64
	var vals []float32
	for t, p := range d.sparse {
		if g := p.SparseGrad(); g != nil {
			counts[t] = int64(len(g.Indices))
			idx = append(idx, g.Indices...)
			vals = append(vals, g.Values.ContiguousFloat32s()...)
		}
	}
	all := make([]int64, size*nt) // all[r*nt+t]: rank r's rows of table t
	err := d.wait(d.async(func() error { return d.comm.Allgather(Int64s(counts), Int64s(all)) }), "the sparse gradients' row counts")
	if err != nil {
		return err
	}
	dims := make([]int, nt)
	for t, p := range d.sparse {
		dims[t] = p.Shape()[1]
	}
	rowCounts, valCounts := make([]int, size), make([]int, size)
	rows, width := 0, 0
	for r := range size {
		for t := range nt {
			c := int(all[r*nt+t])
			rowCounts[r] += c
			valCounts[r] += c * dims[t]
		}
		rows, width = rows+rowCounts[r], width+valCounts[r]
	}
	allIdx, allVals := make([]int64, rows), make([]float32, width)
	err = d.wait(d.async(func() error {
		if err := d.comm.Allgatherv(Int64s(idx), Int64s(allIdx), rowCounts); err != nil {
			return err
		}
		return d.comm.Allgatherv(Float32s(vals), Float32s(allVals), valCounts)
	}), "the sparse gradients' rows")
	if err != nil {
		return err
	}
	// Table t's rows from each rank, in rank order.
	tIdx, tVals := make([][]int64, nt), make([][]float32, nt)
	ri, rv := 0, 0
	for r := range size {
		for t := range nt {
			c := int(all[r*nt+t])
			tIdx[t] = append(tIdx[t], allIdx[ri:ri+c]...)
			tVals[t] = append(tVals[t], allVals[rv:rv+c*dims[t]]...)
			ri, rv = ri+c, rv+c*dims[t]
		}
	}
	for t, p := range d.sparse {
		if len(tIdx[t]) == 0 {
			p.SetSparseGrad(nil)
			continue
		}
		g := autograd.NewSparseGrad(p.Shape()[0], tIdx[t], autograd.FromFloat32(tVals[t], len(tIdx[t]), dims[t]))
		v := g.Values.Float32s()
		for i := range v {
			v[i] /= float32(size)
		}
		p.SetSparseGrad(g)
	}
	return nil
}

// Close removes the gradient hooks; the model trains alone again.
func (d *DataParallel) Close() {
	for _, r := range d.removes {
		r()
	}
	d.removes = nil
}
