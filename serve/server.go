package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/npy"
	"github.com/kilnml/kiln/kernels"
)

// Options configures a Server. The zero value of a field takes its
// default.
type Options struct {
	// Instances is how many compiled copies of the graph run requests
	// side by side (default: one per pool in Pools, else 1).
	Instances int
	// Pools, when given, are the pools of pinned threads the instances
	// run on, instance i on Pools[i mod len(Pools)] (kernels.NewPool);
	// without them the instances share the kernels' process-wide workers.
	Pools []*kernels.Pool
	// MaxBatch is the most requests joined into one run (default 1: no
	// batching; see the package documentation).
	MaxBatch int
	// MaxWait is how long the first request of a batch waits for others
	// (default 2ms; only with MaxBatch above 1).
	MaxWait time.Duration
	// MaxBodyBytes bounds a request body (default 64 MiB); a larger one
	// gets 413.
	MaxBodyBytes int64
	// Timeout bounds how long a request waits for its turn (default 30s);
	// one that waits longer gets 503.
	Timeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Instances <= 0 {
		o.Instances = max(1, len(o.Pools))
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 2 * time.Millisecond
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 64 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	return o
}

// Server is an http.Handler that runs a graph on request bodies. Close it
// to stop its instances.
type Server struct {
	g        *graph.Graph
	opts     Options
	batching bool
	mux      *http.ServeMux
	metrics  *metrics

	instances []*instance

	queue   chan *job
	mu      sync.RWMutex // guards closed against sends on queue
	closed  bool
	workers sync.WaitGroup
}

// job is one request waiting for, or holding, its outputs.
type job struct {
	inputs []*autograd.Tensor
	key    string // the shapes but for the first dimension: who may share a batch
	rows   int    // first dimension (batching only)
	ctx    context.Context
	done   chan result
}

type result struct {
	outs []*autograd.Tensor
	err  error
}

// runError is a failure of the graph on a request's inputs (the request's
// fault: 422), as opposed to a failure of the server (500).
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// New compiles g once per instance and starts the instances.
func New(g *graph.Graph, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	s := &Server{g: g, opts: opts, metrics: newMetrics(), queue: make(chan *job, 4*opts.Instances*opts.MaxBatch)}
	instances := make([]*instance, opts.Instances)
	for i := range instances {
		var copts []graph.CompileOption
		if len(opts.Pools) > 0 {
			copts = append(copts, graph.WithPool(opts.Pools[i%len(opts.Pools)]))
		}
		compile := func() (*graph.Program, error) { return graph.Compile(g, copts...) }
		p, err := compile()
		if err != nil {
			return nil, err
		}
		instances[i] = &instance{prog: p, compile: compile, seen: map[string]bool{}}
	}
	if opts.MaxBatch > 1 && batchable(g) {
		// The probe runs on a copy of its own, so its plans (batch 1 and
		// 2 of random rows) take no instance's memory.
		probe, err := instances[0].compile()
		if err != nil {
			return nil, err
		}
		s.batching = rowsIndependent(probe, g)
	}
	s.instances = instances
	for _, in := range instances {
		s.workers.Add(1)
		go s.work(in)
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /predict", s.predict)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /metrics", s.metrics.serve)
	return s, nil
}

// batchable reports whether g's inputs can be joined along their first
// dimension: all float, all of rank 1 or more, and traced with one size
// of that dimension.
func batchable(g *graph.Graph) bool {
	first := -1
	for _, id := range g.Inputs {
		v := g.Values[id]
		if (v.DType != autograd.Float32 && v.DType != autograd.BFloat16) || len(v.Shape) == 0 {
			return false
		}
		if first >= 0 && v.Shape[0] != first {
			return false
		}
		first = v.Shape[0]
	}
	return len(g.Inputs) > 0
}

// rowsIndependent probes whether g computes each row of a batch on its
// own: two random rows run together must give each row's results run
// alone, in shape and (to rounding) value. A graph that mixes rows (a
// batch statistic, a product of the batch with itself) would otherwise
// hand one request's numbers to another.
func rowsIndependent(p *graph.Program, g *graph.Graph) bool {
	gen := autograd.NewGenerator(1)
	var one [2][]*autograd.Tensor
	both := make([]*autograd.Tensor, len(g.Inputs))
	for k, id := range g.Inputs {
		v := g.Values[id]
		sh := slices.Clone(v.Shape)
		sh[0] = 2
		x := autograd.Randn(gen, sh...)
		if v.DType == autograd.BFloat16 {
			x = autograd.Cast(x, autograd.BFloat16)
		}
		x = x.To(v.Format)
		both[k] = x
		for r, part := range autograd.SplitSizes(x, []int{1, 1}, 0) {
			one[r] = append(one[r], part.Contiguous().To(v.Format))
		}
	}
	joined, err := runProgram(p, both)
	if err != nil {
		return false
	}
	for r := range one {
		alone, err := runProgram(p, one[r])
		if err != nil || len(alone) != len(joined) {
			return false
		}
		for k, o := range joined {
			sh := o.Shape()
			if len(sh) == 0 || sh[0] != 2 {
				return false
			}
			row := autograd.SplitSizes(o, []int{1, 1}, 0)[r]
			if !slices.Equal(row.Shape(), alone[k].Shape()) || !near(row.Values(), alone[k].Values()) {
				return false
			}
		}
	}
	return true
}

// near reports whether a and b agree to 1e-4 relative, NaN with NaN.
func near(a, b []float64) bool {
	for i := range a {
		if math.IsNaN(a[i]) != math.IsNaN(b[i]) || math.Abs(a[i]-b[i]) > 1e-4*(math.Abs(b[i])+1e-3) {
			return false
		}
	}
	return len(a) == len(b)
}

// Batching reports whether the server joins requests into batches:
// Options.MaxBatch above 1 and a graph that computes each row of its
// first dimension on its own (float inputs, probed when New compiled it).
func (s *Server) Batching() bool { return s.batching }

// ServeHTTP routes /predict, /healthz and /metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops taking requests, lets the queued ones finish and stops the
// instances. Requests after Close get 503. Call it after
// http.Server.Shutdown, which waits for the handlers in flight.
func (s *Server) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.mu.Unlock()
	s.workers.Wait()
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		http.Error(w, "closing", http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ok\n")
}

// httpError is an error with the status it answers with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &httpError{code, fmt.Sprintf(format, args...)}
}

func (s *Server) predict(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code := s.answer(w, r)
	s.metrics.request(code, time.Since(start))
}

// answer handles one /predict request and returns the status it sent.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) int {
	fail := func(err error) int {
		code := http.StatusBadRequest
		var he *httpError
		var re *runError
		switch {
		case errors.As(err, &he):
			code = he.code
		case errors.As(err, &re):
			code = http.StatusUnprocessableEntity
		}
		http.Error(w, err.Error(), code)
		return code
	}
	inputs, err := s.read(w, r)
	if err != nil {
		return fail(err)
	}
	outs, err := s.run(r.Context(), inputs)
	if err != nil {
		return fail(err)
	}
	if wantsNPY(r) && len(outs) == 1 {
		var b strings.Builder
		if err := npy.Encode(&b, outs[0]); err != nil {
			return fail(errorf(http.StatusInternalServerError, "encoding the output: %v", err))
		}
		w.Header().Set("Content-Type", "application/x-npy")
		io.WriteString(w, b.String())
		return http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	encodeJSON(w, s.g, outs)
	return http.StatusOK
}

// read decodes the body by its Content-Type.
func (s *Server) read(w http.ResponseWriter, r *http.Request) ([]*autograd.Tensor, error) {
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	b, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errorf(http.StatusRequestEntityTooLarge, "body over %d bytes", s.opts.MaxBodyBytes)
		}
		return nil, errorf(http.StatusBadRequest, "reading the body: %v", err)
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var xs []*autograd.Tensor
	switch ct {
	case "application/x-npy":
		xs, err = decodeNPY(b, s.g)
	case "application/json", "":
		xs, err = decodeJSON(bytes.NewReader(b), s.g)
	default:
		return nil, errorf(http.StatusUnsupportedMediaType, "Content-Type %q: send application/json or application/x-npy", ct)
	}
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err)
	}
	return xs, nil
}

func wantsNPY(r *http.Request) bool {
	for _, a := range strings.Split(r.Header.Get("Accept"), ",") {
		if t, _, _ := mime.ParseMediaType(strings.TrimSpace(a)); t == "application/x-npy" {
			return true
		}
	}
	return false
}

// run queues inputs for an instance and waits for the outputs, at most
// Options.Timeout for its turn.
func (s *Server) run(ctx context.Context, inputs []*autograd.Tensor) ([]*autograd.Tensor, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	j := &job{inputs: inputs, ctx: ctx, done: make(chan result, 1)}
	if s.batching {
		j.rows = inputs[0].Shape()[0]
		j.key = batchKey(inputs)
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, errorf(http.StatusServiceUnavailable, "the server is closing")
	}
	select {
	case s.queue <- j:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return nil, errorf(http.StatusServiceUnavailable, "no instance free within %v", s.opts.Timeout)
	}
	res := <-j.done
	return res.outs, res.err
}

// batchKey is the inputs' shapes without their first dimension and their
// memory formats.
func batchKey(inputs []*autograd.Tensor) string {
	var b strings.Builder
	for _, x := range inputs {
		fmt.Fprint(&b, x.Shape()[1:], x.Format(), ";")
	}
	return b.String()
}

// maxPlans bounds the input signatures (shapes, dtypes, formats) an
// instance keeps plans for. A Program keeps a plan, with its storage, for
// every signature it meets, and clients choose the batch sizes: past this
// many the instance compiles the graph afresh and lets the old plans go.
const maxPlans = 16

// instance is one compiled copy of the graph and the signatures it has
// planned.
type instance struct {
	prog    *graph.Program
	compile func() (*graph.Program, error)
	seen    map[string]bool
}

// run runs the instance's Program on inputs (runProgram), compiling it
// afresh first when inputs would be one signature too many.
func (in *instance) run(inputs []*autograd.Tensor) ([]*autograd.Tensor, error) {
	key := signature(inputs)
	if !in.seen[key] {
		if len(in.seen) >= maxPlans {
			p, err := in.compile()
			if err != nil {
				return nil, errorf(http.StatusInternalServerError, "compiling the graph again: %v", err)
			}
			in.prog, in.seen = p, map[string]bool{}
		}
		in.seen[key] = true
	}
	return runProgram(in.prog, inputs)
}

// signature is what tells a Program's plans apart: every input's dtype,
// shape and memory format.
func signature(inputs []*autograd.Tensor) string {
	var b strings.Builder
	for _, x := range inputs {
		fmt.Fprint(&b, x.DType(), x.Shape(), x.Format(), ";")
	}
	return b.String()
}

// work is one instance: take a job, gather a batch when batching, run.
func (s *Server) work(p *instance) {
	defer s.workers.Done()
	var held *job // a job taken while gathering that did not fit the batch
	for {
		j := held
		held = nil
		if j == nil {
			var ok bool
			if j, ok = <-s.queue; !ok {
				return
			}
		}
		if j.ctx.Err() != nil {
			j.done <- result{err: errorf(http.StatusServiceUnavailable, "no instance free within %v", s.opts.Timeout)}
			continue
		}
		batch := []*job{j}
		if s.batching {
			batch, held = s.gather(j)
		}
		s.runBatch(p, batch)
	}
}

// gather collects jobs with j's key, up to MaxBatch of them, for at most
// MaxWait; the first job of another key ends the batch and is returned to
// run next.
func (s *Server) gather(j *job) (batch []*job, next *job) {
	batch = []*job{j}
	timer := time.NewTimer(s.opts.MaxWait)
	defer timer.Stop()
	for len(batch) < s.opts.MaxBatch {
		select {
		case k, ok := <-s.queue:
			if !ok {
				return batch, nil
			}
			if k.key != j.key {
				return batch, k
			}
			batch = append(batch, k)
		case <-timer.C:
			return batch, nil
		}
	}
	return batch, nil
}

// runBatch runs the jobs as one joined batch, or alone when there is one
// or the graph's outputs do not follow the batch. A joined batch is padded
// with zero rows to a power of two, so that batches of any mix of requests
// take a few plans, not one per total (rows are independent where batching
// is on, so the padding changes no request's rows).
func (s *Server) runBatch(p *instance, batch []*job) {
	s.metrics.batch(len(batch))
	if len(batch) == 1 {
		outs, err := p.run(batch[0].inputs)
		batch[0].done <- result{outs, err}
		return
	}
	joined := make([]*autograd.Tensor, len(batch[0].inputs))
	sizes := make([]int, len(batch), len(batch)+1)
	total := 0
	for i, j := range batch {
		sizes[i] = j.rows
		total += j.rows
	}
	padded := 1
	for padded < total {
		padded *= 2
	}
	for k := range joined {
		parts := make([]*autograd.Tensor, len(batch), len(batch)+1)
		for i, j := range batch {
			parts[i] = j.inputs[k]
		}
		if padded > total {
			parts = append(parts, zeroRows(parts[0], padded-total))
		}
		joined[k] = autograd.Cat(parts, 0)
	}
	if padded > total {
		sizes = append(sizes, padded-total)
	}
	outs, err := p.run(joined)
	follows := err == nil && !slices.ContainsFunc(outs, func(o *autograd.Tensor) bool {
		sh := o.Shape()
		return len(sh) == 0 || sh[0] != padded
	})
	if !follows {
		// An error may be one request's (a shape the graph cannot take
		// that others share only by key), and outputs that do not follow
		// the batch cannot be split: run each alone.
		for _, j := range batch {
			outs, err := p.run(j.inputs)
			j.done <- result{outs, err}
		}
		return
	}
	split := make([][]*autograd.Tensor, len(batch))
	for _, o := range outs {
		for i, part := range autograd.SplitSizes(o, sizes, 0)[:len(batch)] {
			split[i] = append(split[i], part.Clone())
		}
	}
	for i, j := range batch {
		j.done <- result{outs: split[i]}
	}
}

// zeroRows is n rows of zeros shaped, typed and laid out as x's rows.
func zeroRows(x *autograd.Tensor, n int) *autograd.Tensor {
	sh := x.Shape()
	sh[0] = n
	z := autograd.Zeros(sh...)
	if x.DType() != z.DType() {
		z = autograd.Cast(z, x.DType())
	}
	return z.To(x.Format())
}

// runProgram runs p and returns copies of its outputs (p overwrites its
// own on the next run): a graph error as a *runError, and a panic that is
// not a misuse (a bug) as a 500 rather than the end of the server.
func runProgram(p *graph.Program, inputs []*autograd.Tensor) (outs []*autograd.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, errorf(http.StatusInternalServerError, "internal error running the graph: %v", r)
		}
	}()
	var runErr error
	misuse := autograd.Try(func() {
		var res []*autograd.Tensor
		if res, runErr = p.Run(inputs...); runErr != nil {
			return
		}
		outs = make([]*autograd.Tensor, len(res))
		for i, o := range res {
			outs[i] = o.Clone()
		}
	})
	switch {
	case misuse != nil:
		return nil, &runError{misuse}
	case runErr != nil:
		return nil, &runError{runErr}
	}
	return outs, nil
}
