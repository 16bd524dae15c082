package dist

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
	"github.com/kilnml/kiln/optim"
)

// counting counts a communicator's Iallreduce calls.
type counting struct {
	Communicator
	n atomic.Int64
}

func (c *counting) Iallreduce(buf Buffer, op Op) *Request {
	c.n.Add(1)
	return c.Communicator.Iallreduce(buf, op)
}

// rows returns rows [lo, hi) of a [n, ...] float32 tensor as a new
// tensor.
func rows(x *autograd.Tensor, lo, hi int) *autograd.Tensor {
	shape := x.Shape()
	per := x.Numel() / shape[0]
	shape[0] = hi - lo
	return autograd.FromFloat32(append([]float32(nil), x.ContiguousFloat32s()[lo*per:hi*per]...), shape...)
}

func mlp(seed uint64) *nn.Sequential {
	g := autograd.NewGenerator(seed)
	return nn.NewSequential(
		nn.NewLinear(g, 6, 32, nn.LinearOptions{}), nn.NewTanh(),
		nn.NewLinear(g, 32, 32, nn.LinearOptions{}), nn.NewTanh(),
		nn.NewLinear(g, 32, 3, nn.LinearOptions{}))
}

// flat returns a module's parameters end to end.
func flat(m nn.Module) []float32 {
	var v []float32
	for _, p := range nn.Parameters(m) {
		v = append(v, p.ContiguousFloat32s()...)
	}
	return v
}

// relDiff returns ‖a−b‖₂ / ‖b‖₂.
func relDiff(a, b []float32) float64 {
	var d, n float64
	for i := range a {
		e := float64(a[i]) - float64(b[i])
		d += e * e
		n += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(d / n)
}

func bitwiseEqual(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// stepRecorder collects each rank's parameters after each step.
type stepRecorder struct {
	mu    sync.Mutex
	steps [][][]float32 // [rank][step]
}

func newRecorder(ranks int) *stepRecorder { return &stepRecorder{steps: make([][][]float32, ranks)} }

func (s *stepRecorder) add(rank int, v []float32) {
	s.mu.Lock()
	s.steps[rank] = append(s.steps[rank], v)
	s.mu.Unlock()
}

// checkInStep fails unless every rank had the same parameters after every
// step.
func (s *stepRecorder) checkInStep(t *testing.T) {
	t.Helper()
	for r := 1; r < len(s.steps); r++ {
		for k := range s.steps[0] {
			if !bitwiseEqual(s.steps[r][k], s.steps[0][k]) {
				t.Fatalf("after step %d rank %d's parameters differ from rank 0's", k, r)
			}
		}
	}
}

// mlpRun is an MLP equivalence run: steps steps of an optimizer on
// batches of 8, in one process or shared by ranks.
type mlpRun struct {
	xs, ys []*autograd.Tensor
	steps  int
	newOpt func([]*autograd.Tensor) (optim.Optimizer, error)
}

const mlpSteps, mlpBatch = 100, 8

// newMLPRun is the run: 100 steps of SGD with momentum.
func newMLPRun() *mlpRun {
	return newMLPRunOf(mlpSteps, func(p []*autograd.Tensor) (optim.Optimizer, error) {
		return optim.NewSGD(p, optim.SGDOptions{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4})
	})
}

func newMLPRunOf(steps int, newOpt func([]*autograd.Tensor) (optim.Optimizer, error)) *mlpRun {
	data := autograd.NewGenerator(99)
	r := &mlpRun{steps: steps, newOpt: newOpt}
	for range steps {
		r.xs = append(r.xs, autograd.Randn(data, mlpBatch, 6))
		r.ys = append(r.ys, autograd.Randn(data, mlpBatch, 3))
	}
	return r
}

// train trains m on rows [lo, hi) of each batch, calling sync between
// Backward and Step and after with m's parameters after each step.
func (r *mlpRun) train(t *testing.T, m nn.Layer, lo, hi int, sync func() error, after func([]float32)) {
	opt, err := r.newOpt(nn.Parameters(m))
	if err != nil {
		t.Fatal(err)
	}
	for k := range r.steps {
		opt.ZeroGrad()
		autograd.MSELoss(m.Forward(rows(r.xs[k], lo, hi)), rows(r.ys[k], lo, hi), autograd.ReductionMean).Backward()
		if err := sync(); err != nil {
			t.Fatal(err)
		}
		opt.Step()
		after(flat(m))
	}
}

// reference is one process's parameters after the run.
func (r *mlpRun) reference(t *testing.T) []float32 {
	m := mlp(1)
	r.train(t, m, 0, mlpBatch, func() error { return nil }, func([]float32) {})
	return flat(m)
}

// rank trains c's replica (from its own initial weights: rank 0's must
// win) and returns its Iallreduce calls and buckets.
func (r *mlpRun) rank(t *testing.T, c Communicator, bucketBytes int, after func([]float32)) (calls int64, buckets int) {
	cc := &counting{Communicator: c}
	m := mlp(uint64(1 + c.Rank()))
	dp, err := NewDataParallel(cc, m, Options{BucketBytes: bucketBytes})
	if err != nil {
		t.Fatal(err)
	}
	per := mlpBatch / c.Size()
	lo := c.Rank() * per
	r.train(t, m, lo, lo+per, dp.Sync, after)
	return cc.n.Load(), dp.NumBuckets()
}

// checkCalls fails unless a run made ⌈gradient bytes / bucket bytes⌉
// allreduce calls a step.
func checkCalls(t *testing.T, calls int64, buckets, steps, gradBytes, bucketBytes int) {
	t.Helper()
	if bucketBytes == 0 {
		bucketBytes = DefaultBucketBytes
	}
	want := (gradBytes + bucketBytes - 1) / bucketBytes
	if buckets != want || calls != int64(steps*want) {
		t.Errorf("%d buckets, %d allreduce calls in %d steps; want %d a step", buckets, calls, steps, want)
	}
}

// 100 SGD steps of an MLP on 2 and 4 ranks equal one process at the same
// global batch; the ranks stay bitwise equal; a step makes
// ⌈gradient bytes / bucket bytes⌉ allreduce calls.
func TestDataParallelMLP(t *testing.T) {
	run := newMLPRun()
	want := run.reference(t)
	for _, tc := range []struct{ ranks, bucketBytes int }{{2, 0}, {2, 1000}, {4, 4 * 99}} {
		t.Run(fmt.Sprintf("%d ranks, %d-byte buckets", tc.ranks, tc.bucketBytes), func(t *testing.T) {
			rec := newRecorder(tc.ranks)
			var calls int64
			var buckets int
			world(t, tc.ranks, func(c Communicator) {
				n, b := run.rank(t, c, tc.bucketBytes, func(p []float32) { rec.add(c.Rank(), p) })
				if c.Rank() == 0 {
					calls, buckets = n, b
				}
			})
			rec.checkInStep(t)
			checkCalls(t, calls, buckets, mlpSteps, 4*len(want), tc.bucketBytes)
			if d := relDiff(rec.steps[0][mlpSteps-1], want); d > 1e-5 {
				t.Errorf("after %d steps the parameters differ from one process's by %.3g relative", mlpSteps, d)
			}
		})
	}
}

// resnetRun is the ResNet-18 equivalence run: 20 SGD steps (4 with
// -short) at 32², batches of 4 shared by 2 ranks.
type resnetRun struct {
	steps  int
	xs     []*autograd.Tensor
	labels [][]int64
}

const resnetBatch, resnetRanks = 4, 2

var resnetSGD = optim.SGDOptions{LR: 0.01, Momentum: 0.9}

func newResNetRun() *resnetRun {
	r := &resnetRun{steps: 20}
	if testing.Short() {
		r.steps = 4
	}
	data := autograd.NewGenerator(5)
	for range r.steps {
		r.xs = append(r.xs, autograd.Randn(data, resnetBatch, 3, 32, 32))
		var l []int64
		for range resnetBatch {
			l = append(l, int64(data.IntN(10)))
		}
		r.labels = append(r.labels, l)
	}
	return r
}

func resnet18(seed uint64) *models.ResNet {
	return models.ResNet18(autograd.NewGenerator(seed), models.ResNetOptions{NumClasses: 10})
}

func (r *resnetRun) loss(m *models.ResNet, k, lo, hi int) *autograd.Tensor {
	return autograd.CrossEntropy(m.Forward(rows(r.xs[k], lo, hi)), autograd.FromInt64(r.labels[k][lo:hi], hi-lo), autograd.CrossEntropyOptions{})
}

// reference is one process that runs the ranks' halves of each batch as
// micro-batches and averages their gradients: batch normalisation
// normalises over each rank's half, as in PyTorch DDP without
// SyncBatchNorm, so the global batch in one piece is a different
// computation.
func (r *resnetRun) reference() []float32 {
	m := resnet18(7)
	opt, _ := optim.NewSGD(nn.Parameters(m), resnetSGD)
	half := autograd.Scalar(1.0 / resnetRanks)
	for k := range r.steps {
		opt.ZeroGrad()
		for q := range resnetRanks {
			autograd.Mul(r.loss(m, k, q*resnetBatch/resnetRanks, (q+1)*resnetBatch/resnetRanks), half).Backward()
		}
		opt.Step()
	}
	return flat(m)
}

// rank trains c's replica, calling after with its parameters after each
// step.
func (r *resnetRun) rank(t *testing.T, c Communicator, after func([]float32)) {
	m := resnet18(uint64(7 + c.Rank()))
	dp, err := NewDataParallel(c, m, Options{BucketBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := optim.NewSGD(nn.Parameters(m), resnetSGD)
	lo := c.Rank() * resnetBatch / resnetRanks
	for k := range r.steps {
		opt.ZeroGrad()
		r.loss(m, k, lo, lo+resnetBatch/resnetRanks).Backward()
		if err := dp.Sync(); err != nil {
			t.Fatal(err)
		}
		opt.Step()
		after(flat(m))
	}
}

// 20 steps of ResNet-18 at 32² on 2 ranks equal one process (see
// resnetRun.reference); the ranks stay bitwise equal.
func TestDataParallelResNet18(t *testing.T) {
	run := newResNetRun()
	want := run.reference()
	rec := newRecorder(resnetRanks)
	world(t, resnetRanks, func(c Communicator) {
		run.rank(t, c, func(p []float32) { rec.add(c.Rank(), p) })
	})
	rec.checkInStep(t)
	if d := relDiff(rec.steps[0][run.steps-1], want); d > 1e-5 {
		t.Errorf("after %d steps the parameters differ from one process's by %.3g relative", run.steps, d)
	}
}

// The first bucket's allreduce starts inside Backward, before the
// gradients of the first layers exist.
func TestDataParallelOverlap(t *testing.T) {
	world(t, 2, func(c Communicator) {
		m := mlp(1)
		var launchedIn, launchedAfter int
		inBackward := false
		dp, err := NewDataParallel(c, m, Options{BucketBytes: 4 * 200, Trace: func(e Event) {
			if e.Kind != Launched {
				return
			}
			if inBackward {
				launchedIn++
			} else {
				launchedAfter++
			}
		}})
		if err != nil {
			t.Error(err)
			return
		}
		x := autograd.Randn(autograd.NewGenerator(uint64(c.Rank())), 4, 6)
		l := autograd.Sum(m.Forward(x), nil, false)
		inBackward = true
		l.Backward()
		inBackward = false
		if err := dp.Sync(); err != nil {
			t.Error(err)
		}
		if launchedIn == 0 || launchedIn+launchedAfter != dp.NumBuckets() {
			t.Errorf("rank %d: %d of %d buckets launched during Backward, %d after", c.Rank(), launchedIn, dp.NumBuckets(), launchedAfter)
		}
	})
}

// Micro-batches inside NoSync accumulate; the last Backward and Sync
// reduce the sum. A second Backward outside NoSync is an error.
func TestDataParallelNoSync(t *testing.T) {
	x := autograd.Randn(autograd.NewGenerator(3), 4, 6)
	ref := mlp(1)
	for range 3 {
		autograd.Sum(ref.Forward(x), nil, false).Backward()
	}
	want := flat(gradients(ref))
	world(t, 2, func(c Communicator) {
		m := mlp(1)
		dp, _ := NewDataParallel(c, m, Options{BucketBytes: 4 * 300})
		dp.NoSync(func() {
			for range 2 {
				autograd.Sum(m.Forward(x), nil, false).Backward()
			}
		})
		autograd.Sum(m.Forward(x), nil, false).Backward()
		if err := dp.Sync(); err != nil {
			t.Error(err)
		}
		if d := relDiff(flat(gradients(m)), want); d > 1e-6 {
			t.Errorf("rank %d: accumulated gradients differ by %.3g", c.Rank(), d)
		}
		autograd.Sum(m.Forward(x), nil, false).Backward()
		autograd.Sum(m.Forward(x), nil, false).Backward()
		if err := dp.Sync(); err == nil {
			t.Errorf("rank %d: two Backwards before Sync: no error", c.Rank())
		}
	})
}

// gradients returns a module holding m's gradients as parameters, for
// flat.
func gradients(m nn.Module) nn.Module {
	s := &nn.Sequential{}
	for i, p := range nn.Parameters(m) {
		s.RegisterParameter(fmt.Sprint(i), p.Grad().Detach())
	}
	return s
}

// A rank that stops calling Sync makes the other's Sync fail with
// ErrTimeout, naming the bucket, within the timeout.
func TestDataParallelTimeout(t *testing.T) {
	start := time.Now()
	world(t, 2, func(c Communicator) {
		m := mlp(1)
		dp, _ := NewDataParallel(c, m, Options{Timeout: 300 * time.Millisecond})
		if c.Rank() == 1 {
			return // dies before the first step
		}
		autograd.Sum(m.Forward(autograd.Randn(autograd.NewGenerator(1), 2, 6)), nil, false).Backward()
		err := dp.Sync()
		if !errors.Is(err, ErrTimeout) {
			t.Errorf("got %v, want ErrTimeout", err)
		}
		t.Log(err)
	})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the failure took %v", d)
	}
}

// sparseModel is a bag of sparse embeddings feeding a linear layer.
type sparseModel struct {
	nn.Base
	emb *nn.EmbeddingBag
	out *nn.Linear
}

func newSparseModel(seed uint64) *sparseModel {
	g := autograd.NewGenerator(seed)
	m := &sparseModel{}
	m.emb = m.RegisterModule("emb", nn.NewEmbeddingBag(g, 50, 8, nn.EmbeddingBagOptions{Mode: "sum", Sparse: true})).(*nn.EmbeddingBag)
	m.out = m.RegisterModule("out", nn.NewLinear(g, 8, 1, nn.LinearOptions{})).(*nn.Linear)
	return m
}

func (m *sparseModel) forward(idx []int64) *autograd.Tensor {
	bags := len(idx) / 2
	return m.out.Forward(m.emb.Forward(autograd.FromInt64(idx, bags, 2), nil, nil))
}

// Sparse embedding gradients are gathered from every rank: 2 ranks train
// the table as one process does on the whole batch.
func TestDataParallelSparse(t *testing.T) {
	const steps, bags = 30, 8
	data := autograd.NewGenerator(11)
	idx := make([][]int64, steps)
	ys := make([]*autograd.Tensor, steps)
	for k := range idx {
		for range 2 * bags {
			idx[k] = append(idx[k], int64(data.IntN(50)))
		}
		ys[k] = autograd.Randn(data, bags, 1)
	}
	sgd := optim.SGDOptions{LR: 0.1}
	ref := newSparseModel(1)
	opt, err := optim.NewSGD(nn.Parameters(ref), sgd)
	if err != nil {
		t.Fatal(err)
	}
	for k := range steps {
		opt.ZeroGrad()
		autograd.MSELoss(ref.forward(idx[k]), ys[k], autograd.ReductionMean).Backward()
		opt.Step()
	}
	want := flat(ref)
	rec := newRecorder(2)
	world(t, 2, func(c Communicator) {
		m := newSparseModel(uint64(1 + c.Rank()))
		dp, err := NewDataParallel(c, m, Options{})
		if err != nil {
			t.Error(err)
			return
		}
		opt, _ := optim.NewSGD(nn.Parameters(m), sgd)
		lo, hi := c.Rank()*bags/2, (c.Rank()+1)*bags/2
		for k := range steps {
			opt.ZeroGrad()
			autograd.MSELoss(m.forward(idx[k][2*lo:2*hi]), rows(ys[k], lo, hi), autograd.ReductionMean).Backward()
			if err := dp.Sync(); err != nil {
				t.Error(err)
				return
			}
			if m.emb.Weight().SparseGrad() == nil {
				t.Error("the table's gradient is not sparse after Sync")
			}
			opt.Step()
			rec.add(c.Rank(), flat(m))
		}
	})
	rec.checkInStep(t)
	if d := relDiff(rec.steps[0][steps-1], want); d > 1e-5 {
		t.Errorf("after %d steps the parameters differ from one process's by %.3g relative", steps, d)
	}
}

// A split BF16 model: rank 0's bottom halves reach every rank, the
// bfloat16 gradients are reduced in float32, and the FP32 masters stay
// bitwise equal across ranks.
func TestDataParallelSplit(t *testing.T) {
	const steps = 10
	x := autograd.Randn(autograd.NewGenerator(4), 8, 6)
	rec := newRecorder(2)
	world(t, 2, func(c Communicator) {
		m := mlp(uint64(1 + c.Rank()))
		sm, err := amp.SplitModule(m)
		if err != nil {
			t.Error(err)
			return
		}
		dp, err := NewDataParallel(c, m, Options{Split: sm, BucketBytes: 4 * 500})
		if err != nil {
			t.Error(err)
			return
		}
		opt, err := optim.NewSGDSplit(sm, optim.SGDOptions{LR: 0.01, Momentum: 0.9})
		if err != nil {
			t.Error(err)
			return
		}
		lo := 4 * c.Rank()
		for range steps {
			opt.ZeroGrad()
			autograd.Sum(autograd.Cast(m.Forward(autograd.Cast(rows(x, lo, lo+4), autograd.BFloat16)), autograd.Float32), nil, false).Backward()
			if err := dp.Sync(); err != nil {
				t.Error(err)
				return
			}
			opt.Step()
			var master []float32
			for _, s := range sm.Params() {
				master = append(master, s.Param.Join().Float32s()...)
			}
			rec.add(c.Rank(), master)
		}
	})
	rec.checkInStep(t)
}

// Sync leaves every rank with rank 0's buffers (batch-norm running
// statistics, the step counter), unless KeepBuffers.
func TestDataParallelBuffers(t *testing.T) {
	for _, keep := range []bool{false, true} {
		bufs := make([][]float32, 2)
		counts := make([][]int64, 2)
		world(t, 2, func(c Communicator) {
			g := autograd.NewGenerator(1)
			m := nn.NewSequential(nn.NewConv2d(g, 3, 4, 3, nn.ConvOptions{}), nn.NewBatchNorm2d(4, nn.BatchNormOptions{}))
			dp, err := NewDataParallel(c, m, Options{KeepBuffers: keep})
			if err != nil {
				t.Error(err)
				return
			}
			x := autograd.Randn(autograd.NewGenerator(uint64(10+c.Rank())), 2, 3, 8, 8)
			autograd.Sum(m.Forward(x), nil, false).Backward()
			if err := dp.Sync(); err != nil {
				t.Error(err)
			}
			for _, b := range nn.NamedBuffers(m) {
				switch v := b.Tensor.Data().(type) {
				case []float32:
					bufs[c.Rank()] = append(bufs[c.Rank()], v...)
				case []int64:
					counts[c.Rank()] = append(counts[c.Rank()], v...)
				}
			}
		})
		same := bitwiseEqual(bufs[0], bufs[1]) && slices.Equal(counts[0], counts[1]) && len(counts[0]) > 0
		if same == keep {
			t.Errorf("KeepBuffers %v: ranks' buffers equal: %v", keep, same)
		}
	}
}

// twoHeads uses head b only on rank 1: rank 0's b gets no gradient, its
// bucket is completed in Sync, and both ranks end with the mean (half of
// rank 1's gradient).
type twoHeads struct {
	nn.Base
	a, b *nn.Linear
}

func TestDataParallelUnusedParameter(t *testing.T) {
	grads := make([][]float32, 2)
	world(t, 2, func(c Communicator) {
		g := autograd.NewGenerator(1)
		m := &twoHeads{}
		m.a = m.RegisterModule("a", nn.NewLinear(g, 3, 2, nn.LinearOptions{})).(*nn.Linear)
		m.b = m.RegisterModule("b", nn.NewLinear(g, 3, 2, nn.LinearOptions{})).(*nn.Linear)
		dp, err := NewDataParallel(c, m, Options{BucketBytes: 16})
		if err != nil {
			t.Error(err)
			return
		}
		x := autograd.Ones(1, 3)
		out := m.a.Forward(x)
		if c.Rank() == 1 {
			out = autograd.Add(out, m.b.Forward(x))
		}
		autograd.Sum(out, nil, false).Backward()
		if err := dp.Sync(); err != nil {
			t.Error(err)
			return
		}
		grads[c.Rank()] = m.b.Weight().Grad().Float32s()
	})
	for r, g := range grads {
		for _, v := range g {
			if v != 0.5 {
				t.Fatalf("rank %d: b's weight gradient %v, want 0.5 everywhere (rank 1's 1, averaged with rank 0's none)", r, g)
			}
		}
	}
}

// Every optimizer steps on the averaged gradients: 20 steps on 2 ranks
// equal one process, the ranks bitwise equal after each.
func TestDataParallelOptimizers(t *testing.T) {
	betas := [2]float64{0.9, 0.999}
	opts := map[string]func([]*autograd.Tensor) (optim.Optimizer, error){
		"Adam": func(p []*autograd.Tensor) (optim.Optimizer, error) {
			return optim.NewAdam(p, optim.AdamOptions{LR: 1e-2, Betas: betas, Eps: 1e-8})
		},
		"AdamW": func(p []*autograd.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamW(p, optim.AdamOptions{LR: 1e-2, Betas: betas, Eps: 1e-8, WeightDecay: 0.01})
		},
		"Adagrad": func(p []*autograd.Tensor) (optim.Optimizer, error) {
			return optim.NewAdagrad(p, optim.AdagradOptions{LR: 0.05, Eps: 1e-10})
		},
		"Lamb": func(p []*autograd.Tensor) (optim.Optimizer, error) {
			return optim.NewLamb(p, optim.LambOptions{LR: 1e-2, Betas: betas, Eps: 1e-6, WeightDecay: 0.01})
		},
	}
	for name, newOpt := range opts {
		t.Run(name, func(t *testing.T) {
			run := newMLPRunOf(20, newOpt)
			want := run.reference(t)
			rec := newRecorder(2)
			world(t, 2, func(c Communicator) {
				run.rank(t, c, 2000, func(p []float32) { rec.add(c.Rank(), p) })
			})
			rec.checkInStep(t)
			if d := relDiff(rec.steps[0][run.steps-1], want); d > 1e-5 {
				t.Errorf("after %d steps the parameters differ from one process's by %.3g relative", run.steps, d)
			}
		})
	}
}
