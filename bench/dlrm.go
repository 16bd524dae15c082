package bench

import (
	"fmt"
	"math/rand/v2"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
	"github.com/kilnml/kiln/optim"
)

// The DLRM rows (issue 19): facebookresearch/dlrm's DLRM_Net with
// dlrm's random-data benchmark configuration, models.NewDLRM on Kiln's
// side and a transcription of DLRM_Net in torch_bench.py on PyTorch's.
// A row's Dims are batch, tables, rows per table and the feature size d;
// the rest of the model is fixed on both sides (keep the two in step):
// DLRMDense dense features, the bottom MLP DLRMDense-512-256-d, the
// top MLP 512-256-1 ending in a sigmoid, dot interaction without the
// features' dots with themselves, sum-mode tables with sparse gradients.
// Each sample has one index per table (uniform in the table's rows),
// dense features uniform in [0, 1) and a label 0 or 1 (dlrm's random
// data); one batch is generated once and used by every call.
const (
	DLRMDense      = 13
	DLRMTables     = 26
	DLRMRows       = 100_000
	DLRMDim        = 64
	DLRMTrainBatch = 2048
	DLRMLR         = 0.1
)

// DLRMBottomHidden and DLRMTop are the MLP widths around d: the bottom
// MLP is DLRMDense, DLRMBottomHidden..., d; the top MLP takes the
// interaction's d + N(N−1)/2 features (N = tables + 1) to DLRMTop.
var (
	DLRMBottomHidden = []int{512, 256}
	DLRMTop          = []int{512, 256, 1}
)

// DLRMInferBatches are the batch sizes of the inference rows.
var DLRMInferBatches = []int{2048, 128}

// DLRMWorkloads returns the DLRM rows, in table order, all in group
// "DLRM": a training step (zero grad, forward, BCE loss, backward, SGD
// with lr DLRMLR and sparse table gradients) at DLRMTrainBatch, then at
// each inference batch Kiln's eager evaluation-mode forward under NoGrad
// against PyTorch's eager model under torch.no_grad(), and Kiln's frozen
// compiled graph against torch.jit.freeze(torch.jit.trace(model)). The
// smallest inference batch is in the -quick subset; the training step
// (a few hundred milliseconds a call, and seconds to build the 666 MB of
// tables on each side) is not.
func DLRMWorkloads() []Workload {
	dims := func(b int) []int { return []int{b, DLRMTables, DLRMRows, DLRMDim} }
	cfgName := fmt.Sprintf("%d×%s×%d", DLRMTables, countNameK(DLRMRows), DLRMDim)
	n := DLRMTrainBatch
	fwd, train := DLRMFlops(DLRMTables, DLRMDim)
	ws := []Workload{{Name: fmt.Sprintf("dlrm train step bs%d %s (SGD, sparse tables)", n, cfgName), Group: "DLRM",
		Kind: KindDLRMTrain, Dims: dims(n), Flops: float64(n) * train, Bound: Compute, Samples: n,
		WarmUpCalls: ModelWarmUpCalls}, {Name: fmt.Sprintf("dlrm train step bs%d %s (Kiln: SGD fused into the tables' backward; torch: sparse tables)", n, cfgName), Group: "DLRM",
		Kind: KindDLRMTrainFused, Dims: dims(n), Flops: float64(n) * train, Bound: Compute, Samples: n,
		WarmUpCalls: ModelWarmUpCalls}}
	ws = append(ws, Workload{Name: fmt.Sprintf("dlrm bf16 train step bs%d %s (Kiln: split BF16, SGD fused; torch: autocast, float32 sparse tables)", n, cfgName), Group: "DLRM",
		Kind: KindDLRMTrainBF16, Dims: dims(n), Flops: float64(n) * train, Bound: Compute, Samples: n,
		WarmUpCalls: ModelWarmUpCalls, FP32Row: ws[1].Name})
	small := DLRMInferBatches[len(DLRMInferBatches)-1]
	for _, k := range []struct{ kind, what, ref string }{
		{KindDLRMInfer, "infer", "torch eager"},
		{KindDLRMInferFrozen, "frozen graph infer", "torch jit.freeze"},
	} {
		for _, b := range DLRMInferBatches {
			ws = append(ws, Workload{Name: fmt.Sprintf("dlrm %s bs%d %s vs %s", k.what, b, cfgName, k.ref), Group: "DLRM",
				Kind: k.kind, Dims: dims(b), Flops: float64(b) * fwd, Bound: Compute, Samples: b,
				WarmUpCalls: ModelWarmUpCalls, Quick: b == small})
		}
	}
	ws = append(ws, Workload{Name: fmt.Sprintf("dlrm train peak RSS bs%d %s (%d steps, fresh process; Kiln split BF16 + fused SGD, torch FP32)", n, cfgName, DLRMMemSteps),
		Group: "DLRM", Kind: KindDLRMTrainMem, Dims: append(dims(n), DLRMMemSteps), Bound: Footprint,
		MemBound: DLRMMemBound * 4 * float64(DLRMTables*DLRMRows*DLRMDim)})
	return append(ws, DLRMKernelWorkloads()...)
}

// DLRMMemSteps is the number of training steps of the DLRM peak-memory
// row, and DLRMMemBound issue 19's ceiling on its growth (peak less start
// RSS) as a multiple of the tables' FP32 bytes.
const (
	DLRMMemSteps = 3
	DLRMMemBound = 1.1
)

// DLRMKernelWorkloads returns the rows of DLRM's kernels at the DLRM
// rows' sizes (DLRMTrainBatch samples, one index per table per sample),
// in group "DLRM kernels", memory-bound (see DLRMBagBytes and
// DLRMInteractionBytes), each in float32 and in BF16: the merged lookup's
// forward against dlrm's loop of nn.EmbeddingBag calls, its backward with
// the fused SGD step against PyTorch's sparse backward and SGD step, and
// the dot interaction's forward and backward against dlrm's bmm and
// index. The interaction rows are in -quick.
func DLRMKernelWorkloads() []Workload {
	n, t, d := DLRMTrainBatch, DLRMTables, DLRMDim
	cfg := fmt.Sprintf("bs%d %d×%s×%d", n, t, countNameK(DLRMRows), d)
	var ws []Workload
	for _, k := range []struct {
		kind, bf16, what, ref string
		dims                  []int
		bytes                 func(elem int) float64
	}{
		{KindDLRMBagFwd, KindDLRMBagFwdBF16, "merged-bag fwd " + cfg, "torch EmbeddingBag loop", []int{n, t, DLRMRows, d},
			func(e int) float64 { f, _ := DLRMBagBytes(n, t, d, e); return f }},
		{KindDLRMBagBwd, KindDLRMBagBwdBF16, "merged-bag bwd+fused SGD " + cfg, "torch sparse bwd+SGD", []int{n, t, DLRMRows, d},
			func(e int) float64 { _, b := DLRMBagBytes(n, t, d, e); return b }},
		{KindDLRMInteraction, KindDLRMInteractionBF16, fmt.Sprintf("interaction fwd+bwd bs%d %d×%d", n, t+1, d), "torch bmm+tril", []int{n, t, d},
			func(e int) float64 { return DLRMInteractionBytes(n, t, d, e) }},
	} {
		name := fmt.Sprintf("dlrm %s vs %s", k.what, k.ref)
		quick := k.kind == KindDLRMInteraction
		ws = append(ws,
			Workload{Name: name, Group: "DLRM kernels", Kind: k.kind, Dims: k.dims, Bytes: k.bytes(4), Bound: Memory, Quick: quick},
			Workload{Name: fmt.Sprintf("dlrm bf16 %s vs %s bf16", k.what, k.ref), Group: "DLRM kernels", Kind: k.bf16, Dims: k.dims,
				Bytes: k.bytes(2), Bound: Memory, Quick: quick, FP32Row: name})
	}
	return ws
}

// DLRMBagBytes returns the compulsory memory traffic of a merged lookup of
// tables tables of feature size d, one index per table for each of b
// samples, with table entries of elem bytes (4 float32, 2 bfloat16):
// forward, the rows gathered, the float32 bags written (Kiln's bags are
// float32 for bfloat16 tables too) and the int64 indices read (not the
// offsets); backward with the SGD step, the float32 gradient of the bags
// and the indices read and each looked-up row read and written. A split
// BF16 table's row is its bfloat16 top and its low 16 bits, so its update
// moves as many bytes as a float32 row's: backward counts 4 bytes an
// entry whatever elem is.
func DLRMBagBytes(b, tables, d, elem int) (forward, backward float64) {
	lookups := float64(b * tables)
	forward = lookups * float64(d*elem+d*4+8)
	backward = lookups * float64(d*4+2*d*4+8)
	return forward, backward
}

// DLRMInteractionBytes returns the compulsory memory traffic of the dot
// interaction's forward and backward on b samples of tables + 1 features
// of size d, elem bytes a value: forward reads the features and writes
// the [b, d + P] result (P the (tables+1)·tables/2 dots kept); backward
// reads its gradient and the features and writes the features' gradients.
func DLRMInteractionBytes(b, tables, d, elem int) float64 {
	f := tables + 1
	feats := float64(b * f * d * elem)
	out := float64(b * (d + f*(f-1)/2) * elem)
	return 3*feats + 2*out
}

// countNameK writes 100000 as "100k".
func countNameK(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// DLRMFlops returns the floating-point work per sample of the DLRM rows'
// model with tables tables of feature size d: forward, and a training
// step. Only the MLPs' multiply-adds and the interaction's dot products
// (the N(N−1)/2 pairs kept, N = tables + 1) count, two flops each; the
// table lookups, activations, sigmoid and loss are left out. Backward
// does twice the forward work (data and weight gradients of every
// Linear, both operands' gradients of every dot), except the data
// gradient of the first bottom Linear, whose input needs none.
func DLRMFlops(tables, d int) (forward, train float64) {
	linears := func(widths []int) float64 {
		var f float64
		for i := 0; i+1 < len(widths); i++ {
			f += 2 * float64(widths[i]*widths[i+1])
		}
		return f
	}
	bottom := append(append([]int{DLRMDense}, DLRMBottomHidden...), d)
	nf := tables + 1
	top := append([]int{d + nf*(nf-1)/2}, DLRMTop...)
	forward = linears(bottom) + linears(top) + 2*float64(nf*(nf-1)/2*d)
	return forward, 3*forward - 2*float64(DLRMDense*bottom[1])
}

// dlrmConfig is the model of a DLRM row with dims batch, tables, rows, d.
func dlrmConfig(tables, rows, d int) models.DLRMConfig {
	sizes := make([]int, tables)
	for t := range sizes {
		sizes[t] = rows
	}
	return models.DLRMConfig{
		SparseFeatureSize: d,
		EmbeddingSizes:    sizes,
		BottomMLP:         append(append([]int{DLRMDense}, DLRMBottomHidden...), d),
		TopMLP:            append([]int(nil), DLRMTop...),
		SparseTables:      true,
	}
}

// dlrmBatch is a DLRM row's model, seeded, and its one batch: dense
// features [b, DLRMDense] uniform in [0, 1), indices i64[b, tables] (one
// per table per sample, uniform in the table's rows), labels [b, 1] of 0
// and 1.
type dlrmBatch struct {
	m      *models.DLRM
	b      int
	dense  *autograd.Tensor
	idx    *autograd.Tensor // [b, tables]
	labels *autograd.Tensor
}

func newDLRMBatch(d []int) (*dlrmBatch, error) {
	b, tables, rows, dim := d[0], d[1], d[2], d[3]
	m, err := models.NewDLRM(autograd.NewGenerator(1), dlrmConfig(tables, rows, dim))
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(2, 19))
	x := make([]float32, b*DLRMDense)
	for i := range x {
		x[i] = r.Float32()
	}
	idx := make([]int64, b*tables)
	for i := range idx {
		idx[i] = r.Int64N(int64(rows))
	}
	y := make([]float32, b)
	for i := range y {
		y[i] = float32(r.IntN(2))
	}
	return &dlrmBatch{m: m, b: b, dense: autograd.FromFloat32(x, b, DLRMDense), idx: autograd.FromInt64(idx, b, tables),
		labels: autograd.FromFloat32(y, b, 1)}, nil
}

// bags returns the batch in DLRM_Net's form: per table, the 1-D indices
// (one a sample) and the bag starts 0, 1, …, b−1.
func (s *dlrmBatch) bags() (indices, offsets []*autograd.Tensor) {
	tables := s.idx.Shape()[1]
	all := s.idx.Int64s()
	off := make([]int64, s.b)
	for i := range off {
		off[i] = int64(i)
	}
	for t := range tables {
		col := make([]int64, s.b)
		for i := range col {
			col[i] = all[i*tables+t]
		}
		indices = append(indices, autograd.FromInt64(col, s.b))
		offsets = append(offsets, autograd.FromInt64(off, s.b))
	}
	return indices, offsets
}

// dlrmTrainStep returns one training step on the row's batch, as
// torch_bench.py's dlrm_train_step: drop the gradients, train-mode
// forward, mean BCE loss, backward, SGD (row-sparse table gradients).
// With fuse the tables' SGD step is applied inside their backward pass
// (examples/dlrm's --fused-emb). With splitBF16 the model trains as
// examples/dlrm's --dtype bf16 does: split BF16 weights and tables from
// kiln.Optimize, the dense features under amp.Autocast.
func dlrmTrainStep(d []int, splitBF16, fuse bool) (func(), error) {
	s, err := newDLRMBatch(d)
	if err != nil {
		return nil, err
	}
	nn.Train(s.m, true)
	opt, err := dlrmSGD(s.m, s.m.Emb, splitBF16, fuse)
	if err != nil {
		return nil, err
	}
	dense := s.dense
	if splitBF16 {
		dense = amp.Autocast(dense)
	}
	indices, offsets := s.bags()
	arena := autograd.NewArena(0) // each step's activations and gradients, as examples/dlrm
	return func() {
		opt.ZeroGrad()
		p := s.m.Forward(arena.In(dense), indices, offsets)
		autograd.BCELoss(p, s.labels, autograd.ReductionMean).Backward()
		opt.Step()
		arena.Reset()
	}, nil
}

// dlrmSGD returns SGD with lr DLRMLR over m's parameters. With
// splitBF16 m becomes a split BF16 model (kiln.Optimize, as
// examples/dlrm's splitBF16) and the optimizer its split form; with fuse
// the optimizer's step on emb's tables is fused into their sparse
// backward (optim.FuseSparse, examples/dlrm's --fused-emb).
func dlrmSGD(m nn.Module, emb *nn.MergedEmbeddingBag, splitBF16, fuse bool) (optim.Optimizer, error) {
	sgd, err := optim.NewSGD(nn.Parameters(m), optim.SGDOptions{LR: DLRMLR})
	if err != nil {
		return nil, err
	}
	var opt optim.Optimizer = sgd
	if splitBF16 {
		o, err := kiln.Optimize(m, kiln.DType(autograd.BFloat16), kiln.ChannelsLast(false), kiln.WithOptimizer(opt))
		if err != nil {
			return nil, err
		}
		opt = o.Optimizer
	}
	if fuse {
		return opt, optim.FuseSparse(opt, emb.Weights()...)
	}
	return opt, nil
}

// dlrmBagForward returns the lookup of every table of the row's model
// for its batch, in DLRM_Net's form, under NoGrad: one
// MergedEmbeddingBag op, its bags in an arena reset after each call (as
// in a DLRM step; PyTorch's caching allocator likewise hands each call
// the same memory). With bf16 the tables are cast to bfloat16 first.
func dlrmBagForward(d []int, bf16 bool) (func(), error) {
	s, err := newDLRMBatch(d)
	if err != nil {
		return nil, err
	}
	emb := s.m.Emb
	nn.Eval(emb)
	if bf16 {
		if _, err := amp.CastModule(emb, amp.AutocastParams); err != nil {
			return nil, err
		}
	}
	indices, offsets := s.bags()
	for t := range indices {
		indices[t], offsets[t] = autograd.NoGrad(indices[t]), autograd.NoGrad(offsets[t])
	}
	arena, in := autograd.NewArena(0), make([]*autograd.Tensor, len(indices))
	return func() {
		for t, idx := range indices {
			in[t] = arena.In(idx)
		}
		emb.Forward(in, offsets)
		arena.Reset()
	}, nil
}

// dlrmBagBackward returns the two parts of a call of the bag backward
// row: setup, untimed, drops the gradients and looks up every table of
// the row's model for its batch (sparse gradients); run, timed, runs the
// backward of the bags from fixed random gradients (autograd.Backward,
// as torch_bench.py calls torch.autograd.backward), which updates the
// tables (SGD fused into the backward), and the optimizer's Step, which
// has nothing left to do for them. With bf16 the tables are
// split BF16 (kiln.Optimize).
func dlrmBagBackward(d []int, bf16 bool) (setup, run func(), err error) {
	s, err := newDLRMBatch(d)
	if err != nil {
		return nil, nil, err
	}
	emb := s.m.Emb
	nn.Train(emb, true)
	opt, err := dlrmSGD(emb, emb, bf16, true)
	if err != nil {
		return nil, nil, err
	}
	indices, offsets := s.bags()
	all := autograd.Rand(autograd.NewGenerator(3), s.b, emb.Len()*emb.Dim)
	dys := autograd.Split(all, emb.Dim, 1) // the same gradients as torch_bench.py's
	for t := range dys {
		dys[t] = dys[t].Contiguous()
	}
	// The lookups run in an arena, reset before each, as the bag rows'.
	arena, in := autograd.NewArena(0), make([]*autograd.Tensor, len(indices))
	var bags []*autograd.Tensor
	setup = func() {
		arena.Reset()
		opt.ZeroGrad()
		for t, idx := range indices {
			in[t] = arena.In(idx)
		}
		bags = emb.Forward(in, offsets)
	}
	run = func() {
		autograd.Backward(bags, dys)
		opt.Step()
	}
	return setup, run, nil
}

// dlrmInteraction returns the forward and backward of the dot
// interaction (without self-interaction) of the row's b samples: x and
// tables embedding outputs of size d, uniform in [0, 1), bfloat16 with
// bf16, and a fixed random output gradient. Each call runs in an arena
// reset after it and takes the features' gradients with autograd.Grad,
// in the arena: PyTorch's backward, its features' grad None, likewise
// takes new gradients' memory from its caching allocator each call.
func dlrmInteraction(d []int, bf16 bool) (func(), error) {
	b, tables, dim := d[0], d[1], d[2]
	g := autograd.NewGenerator(3)
	feats := make([]*autograd.Tensor, tables+1)
	for f := range feats {
		feats[f] = autograd.Rand(g, b, dim)
	}
	nf := tables + 1
	dy := autograd.Rand(g, b, dim+nf*(nf-1)/2)
	if bf16 {
		for f := range feats {
			feats[f] = autograd.Cast(feats[f], autograd.BFloat16)
		}
		dy = autograd.Cast(dy, autograd.BFloat16)
	}
	for _, f := range feats {
		f.SetRequiresGrad(true)
	}
	arena, in, dys := autograd.NewArena(0), make([]*autograd.Tensor, len(feats)), []*autograd.Tensor{dy}
	return func() {
		for f, x := range feats {
			in[f] = arena.In(x)
		}
		autograd.Grad([]*autograd.Tensor{autograd.Interaction(in[0], in[1:], false)}, in, dys)
		arena.Reset()
	}, nil
}

// dlrmInfer returns the eager evaluation-mode forward on the row's batch
// under NoGrad, in DLRM_Net's form (per-table indices and offsets), each
// call in an arena as examples/dlrm infer runs its batches (and as the
// ResNet-50 eager rows run theirs): PyTorch's caching allocator hands its
// forward the same memory each call too.
func dlrmInfer(d []int) (func(), error) {
	s, err := newDLRMBatch(d)
	if err != nil {
		return nil, err
	}
	nn.Eval(s.m)
	indices, offsets := s.bags()
	for t := range indices {
		indices[t], offsets[t] = autograd.NoGrad(indices[t]), autograd.NoGrad(offsets[t])
	}
	dense, arena := autograd.NoGrad(s.dense), autograd.NewArena(0)
	return func() { s.m.Forward(arena.In(dense), indices, offsets); arena.Reset() }, nil
}

// dlrmGraph returns a run of the row's model as a frozen compiled graph,
// made as examples/dlrm's export makes it: the evaluation-mode model
// traced on inputs dense f32[b, DLRMDense] and indices i64[b, tables]
// (ForwardFixed with one index per bag), frozen (tables and weights
// become constants, Linear+ReLU and Linear+Sigmoid fuse) and compiled.
// The run holds the compiled plan and the inputs, not the model.
func dlrmGraph(d []int) (func(), error) {
	s, err := newDLRMBatch(d)
	if err != nil {
		return nil, err
	}
	nn.Eval(s.m)
	m := s.m
	traced, err := graph.TraceFunc(m, func(in []*autograd.Tensor) []*autograd.Tensor {
		t := in[1].Shape()[1]
		return []*autograd.Tensor{m.ForwardFixed(in[0], autograd.Reshape(in[1], -1, t, 1))}
	}, s.dense, s.idx)
	if err != nil {
		return nil, err
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		return nil, err
	}
	p, err := graph.Compile(frozen)
	if err != nil {
		return nil, err
	}
	dense, idx := s.dense, s.idx
	return func() {
		if _, err := p.Run(dense, idx); err != nil {
			panic(err)
		}
	}, nil
}
