package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/kernels"
)

// bench times a saved graph on random inputs.
func bench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "FILE [--batch N] [--bag-size L] [--threads T] [--iters K] [--warmup W] [--profile] [--instances N --cores-per-instance C]", stderr)
	batch := fs.Int("batch", 0, "batch size: the first dimension of every input (default: the traced one)")
	bagSize := fs.Int("bag-size", 1, "indices per bag for embedding-bag lookups whose indices and offsets are inputs")
	threads := fs.Int("threads", 0, "kernel threads (default: KILN_NUM_THREADS, else GOMAXPROCS)")
	iters := fs.Int("iters", 20, "timed runs")
	warmup := fs.Int("warmup", 3, "untimed runs first")
	profile := fs.Bool("profile", false, "after the timed runs, time each node over --iters more and print the slowest "+fmt.Sprint(profileTop)+" and the time by op")
	instances := fs.Int("instances", 1, "instances of the graph running at once, each timing --iters runs (with --cores-per-instance)")
	perInstance := fs.Int("cores-per-instance", 0, "pin each instance to this many cores of its own (0: one instance on the process-wide workers)")
	path, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *batch < 0:
		return usagef("--batch %d: want a positive batch size", *batch)
	case *threads < 0:
		return usagef("--threads %d: want a positive thread count", *threads)
	case *iters < 1:
		return usagef("--iters %d: want at least one timed run", *iters)
	case *warmup < 0:
		return usagef("--warmup %d: want zero or more", *warmup)
	case *bagSize < 0:
		return usagef("--bag-size %d: want zero or more", *bagSize)
	case *instances < 1 || *perInstance < 0:
		return usagef("--instances %d --cores-per-instance %d: want 1 or more instances and 0 or more cores", *instances, *perInstance)
	case *instances > 1 && *perInstance == 0:
		return usagef("--instances %d needs --cores-per-instance", *instances)
	case *perInstance > 0 && (*threads > 0 || *profile):
		return usagef("--cores-per-instance sets the threads itself and does not profile")
	}
	// The kernels' worker pool reads its size once, when it first starts,
	// so the setting must come before anything computes: before Load.
	if *threads > 0 {
		os.Setenv("KILN_NUM_THREADS", strconv.Itoa(*threads))
	}
	nthreads := kernels.Threads()
	if *threads > 0 {
		if nthreads != *threads {
			return fmt.Errorf("--threads %d: the kernel worker pool already runs %d threads in this process", *threads, nthreads)
		}
		// As many Go threads as workers, so T workers really run at once
		// and T=1 really is one thread.
		runtime.GOMAXPROCS(*threads)
	}

	g, err := graph.Load(path)
	if err != nil {
		return err
	}
	if len(g.Inputs) == 0 {
		return fmt.Errorf("%s has no inputs to batch", path)
	}
	n := *batch
	if n == 0 {
		if s := g.Values[g.Inputs[0]].Shape; len(s) > 0 {
			n = s[0]
		}
	}
	inputs, err := randomInputs(g, n, *bagSize)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if *perInstance > 0 {
		return benchInstances(stdout, path, g, inputs, n, *instances, *perInstance, *iters, *warmup)
	}
	p, err := graph.Compile(g)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for range *warmup {
		if _, err := p.Run(inputs...); err != nil {
			return fmt.Errorf("running %s at batch %d: %w", path, n, err)
		}
	}
	times := make([]time.Duration, *iters)
	for i := range times {
		start := time.Now()
		_, err := p.Run(inputs...)
		times[i] = time.Since(start)
		if err != nil {
			return fmt.Errorf("running %s at batch %d: %w", path, n, err)
		}
	}
	slices.Sort(times)
	p50 := percentile(times, 50)
	fmt.Fprintf(stdout, "%s: batch %d, threads %d, %d timed runs after %d warm-up\n", path, n, nthreads, *iters, *warmup)
	fmt.Fprintf(stdout, "latency: p50 %v  p90 %v  p99 %v  (min %v, max %v)\n",
		round(p50), round(percentile(times, 90)), round(percentile(times, 99)), round(times[0]), round(times[len(times)-1]))
	fmt.Fprintf(stdout, "throughput: %.1f items/s (batch / median latency)\n", float64(n)/p50.Seconds())
	if !*profile {
		return nil
	}
	// Profiled runs of their own: the per-node timers would bias the
	// latencies above.
	prof, err := p.Profile(*iters, inputs...)
	if err != nil {
		return fmt.Errorf("profiling %s at batch %d: %w", path, n, err)
	}
	fmt.Fprintln(stdout)
	return prof.WriteTable(stdout, profileTop)
}

// benchInstances is bench with instances: each compiled on a pool of its
// own cores, all running at once, each timing iters runs after warmup.
// It reports the latency percentiles over every run and the aggregate
// throughput (items over the wall time of the timed runs).
func benchInstances(stdout io.Writer, path string, g *graph.Graph, inputs []*autograd.Tensor, n, instances, perInstance, iters, warmup int) error {
	pools, err := instancePools(instances, perInstance)
	if err != nil {
		return err
	}
	defer closePools(pools)
	progs := make([]*graph.Program, instances)
	for i, pool := range pools {
		if progs[i], err = graph.Compile(g, graph.WithPool(pool)); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for range warmup {
			if _, err := progs[i].Run(inputs...); err != nil {
				return fmt.Errorf("running %s at batch %d: %w", path, n, err)
			}
		}
	}
	times := make([][]time.Duration, instances)
	errs := make([]error, instances)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range iters {
				t0 := time.Now()
				if _, err := progs[i].Run(inputs...); err != nil {
					errs[i] = err
					return
				}
				times[i] = append(times[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("running %s at batch %d: %w", path, n, err)
	}
	all := slices.Concat(times...)
	slices.Sort(all)
	fmt.Fprintf(stdout, "%s: batch %d, %d instances × %d cores (%v), %d timed runs each after %d warm-up\n",
		path, n, instances, perInstance, poolCores(pools), iters, warmup)
	fmt.Fprintf(stdout, "latency: p50 %v  p90 %v  p99 %v  (min %v, max %v)\n",
		round(percentile(all, 50)), round(percentile(all, 90)), round(percentile(all, 99)), round(all[0]), round(all[len(all)-1]))
	fmt.Fprintf(stdout, "throughput: %.1f items/s (all instances: %d runs of batch %d in %v)\n",
		float64(len(all)*n)/wall.Seconds(), len(all), n, round(wall))
	return nil
}

func poolCores(pools []*kernels.Pool) [][]int {
	out := make([][]int, len(pools))
	for i, p := range pools {
		out[i] = p.Cores()
	}
	return out
}

// profileTop is how many nodes bench --profile lists.
const profileTop = 25

// percentile returns the nearest-rank p-th percentile of sorted times: the
// smallest measured time that at least p% of the runs do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(k, 1)-1]
}

// round keeps four significant digits or so: 12.35ms, 987.6µs.
func round(d time.Duration) time.Duration {
	for unit := time.Duration(1); unit < time.Second; unit *= 10 {
		if d < 10000*unit {
			return d.Round(unit)
		}
	}
	return d.Round(time.Millisecond)
}

// randomInputs makes one tensor per graph input with the input's shape,
// its first dimension set to batch: standard normal values for floating
// inputs; for an integer input that feeds an embedding lookup (directly or
// through reshapes), indices uniform over the table's rows, or bag starts
// of bagSize indices each, as served traffic has (zeros would be valid
// but leave bags empty and tables untouched); for a packed lookup
// (MergedEmbeddingBagPacked, an exported multi-hot DLRM) the tables'
// batch·bagSize indices each, one after another, and their [tables,
// batch+1] offsets; zeros for other integers.
func randomInputs(g *graph.Graph, batch, bagSize int) ([]*autograd.Tensor, error) {
	gen := autograd.NewGenerator(1)
	r := rand.New(rand.NewPCG(1, 2))
	roles := lookupRoles(g)
	ins := make([]*autograd.Tensor, len(g.Inputs))
	for i, id := range g.Inputs {
		v := g.Values[id]
		shape := slices.Clone(v.Shape)
		if len(shape) == 0 {
			return nil, fmt.Errorf("input %s is 0-d and has no batch dimension", v.Name)
		}
		shape[0] = batch
		role, isIndex := roles[id]
		switch {
		case !isIndex:
		case role.packed && role.offsets:
			shape = []int{role.tables, batch + 1}
		case role.packed:
			shape = []int{role.tables * batch * bagSize}
			role.period = batch * bagSize // table by table
		case role.offsets:
			shape = []int{batch + b2i(role.includeLast)}
		case role.bagged:
			shape = []int{batch * bagSize}
		}
		var x *autograd.Tensor
		err := autograd.Try(func() {
			switch v.DType {
			case autograd.Float32:
				x = autograd.Randn(gen, shape...)
			case autograd.BFloat16:
				x = autograd.Cast(autograd.Randn(gen, shape...), autograd.BFloat16)
			case autograd.Int64:
				if isIndex {
					x = autograd.FromInt64(role.fill(r, shape, bagSize), shape...)
					break
				}
				fallthrough
			default:
				x = autograd.Empty(v.DType, shape...)
			}
			x = x.To(v.Format)
		})
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", v.Name, err)
		}
		ins[i] = x
	}
	return ins, nil
}

// lookupRole is what an integer graph input is to the embedding lookup it
// feeds.
type lookupRole struct {
	// rows[j] bounds element i's index, j = (i / period) mod len(rows):
	// one table, or for MergedEmbeddingBagFixed's [B, T, L] indices one
	// table per position t.
	rows   []int
	period int
	// bagged: 1-D indices split into bags by an offsets input.
	bagged bool
	// offsets: the bag starts themselves (with the end when includeLast).
	offsets, includeLast bool
	// packed: MergedEmbeddingBagPacked's operands, every table's indices
	// in one [N] tensor (rows holds each table's row count, one table per
	// period) and [tables, B+1] offsets into it.
	packed bool
	tables int
}

// fill returns the values of an input of this role and shape.
func (l lookupRole) fill(r *rand.Rand, shape []int, bagSize int) []int64 {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]int64, n)
	for i := range v {
		switch {
		case l.offsets && l.packed:
			// Row t is table t's bags, which start where table t−1's end.
			b := shape[1] - 1
			v[i] = int64((i/(b+1)*b + i%(b+1)) * bagSize)
			continue
		case l.offsets:
			v[i] = int64(i * bagSize)
			continue
		}
		v[i] = r.Int64N(int64(l.rows[i/l.period%len(l.rows)]))
	}
	return v
}

// shapeOps pass an index tensor on unchanged in order.
var shapeOps = map[string]bool{"Reshape": true, "View": true, "Flatten": true, "Unsqueeze": true, "Squeeze": true, "Contiguous": true}

// lookupRoles finds, for each integer graph input, the lookup it feeds and
// its place there, following reshapes; inputs it cannot place are left out.
func lookupRoles(g *graph.Graph) map[int]lookupRole {
	readers := map[int][]int{} // value → the nodes reading it, each once
	for k, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != graph.None && !slices.Contains(readers[in], k) {
				readers[in] = append(readers[in], k)
			}
		}
	}
	rowsOf := func(v int) int {
		if s := g.Values[v].Shape; len(s) > 0 {
			return s[0]
		}
		return 0
	}
	roles := map[int]lookupRole{}
	for _, id := range g.Inputs {
		if g.Values[id].DType != autograd.Int64 {
			continue
		}
		v := id
		for len(readers[v]) == 1 {
			n := &g.Nodes[readers[v][0]]
			if shapeOps[n.Op] && len(n.Outputs) == 1 && n.Inputs[0] == v {
				v = n.Outputs[0]
				continue
			}
			pos := slices.Index(n.Inputs, v)
			var role lookupRole
			switch t := len(n.Outputs); {
			case n.Op == "MergedEmbeddingBag" && pos >= t && pos < 2*t:
				role = lookupRole{rows: []int{rowsOf(n.Inputs[pos-t])}, period: 1, bagged: true}
			case n.Op == "MergedEmbeddingBag" && pos >= 2*t:
				role = lookupRole{offsets: true, includeLast: n.Bool("include_last_offset")}
			case n.Op == "MergedEmbeddingBagPacked" && pos == t:
				role = lookupRole{packed: true, tables: t, period: 1}
				for _, tab := range n.Inputs[:t] {
					role.rows = append(role.rows, rowsOf(tab))
				}
			case n.Op == "MergedEmbeddingBagPacked" && pos == t+1:
				role = lookupRole{packed: true, tables: t, offsets: true}
			case n.Op == "MergedEmbeddingBagFixed" && pos == t:
				s := g.Values[v].Shape
				role = lookupRole{period: s[len(s)-1]}
				for _, tab := range n.Inputs[:t] {
					role.rows = append(role.rows, rowsOf(tab))
				}
			case n.Op == "EmbeddingBag" && pos == 0:
				role = lookupRole{rows: []int{rowsOf(n.Inputs[2])}, period: 1, bagged: n.Inputs[1] != graph.None}
			case n.Op == "EmbeddingBag" && pos == 1:
				role = lookupRole{offsets: true}
			case n.Op == "Embedding" && pos == 0:
				role = lookupRole{rows: []int{rowsOf(n.Inputs[1])}, period: 1}
			default:
				break
			}
			if role.offsets || (len(role.rows) > 0 && !slices.Contains(role.rows, 0) && role.period > 0) {
				roles[id] = role
			}
			break
		}
	}
	return roles
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
