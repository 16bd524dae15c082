package bench

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Kinds of workload. The names are shared with torch_bench.py.
const (
	KindGemm          = "gemm"            // Dims m, n, k: C = A·B, row-major, C overwritten
	KindGemmBF16      = "gemm_bf16"       // Dims m, n, k: C = A·B with bfloat16 A and B, C float32 (PyTorch: bf16 C)
	KindGemmInt8      = "gemm_int8"       // Dims m, n, k: C = A·Wᵀ, uint8 A (scale 2/255, zero point 128), int8 per-channel W packed once, C uint8 with scale 0.1 and zero point 128 (PyTorch: quantized linear, the same quint8 C)
	KindConvFwd       = "conv_fwd"        // Dims of a ConvDims: y = conv(x, w), no bias
	KindConvBwdData   = "conv_bwd_data"   // dx from dy and w
	KindConvBwdWeight = "conv_bwd_weight" // dw from x and dy
	KindReLU          = "relu"            // Dims n: y = relu(x), new output
	KindGELU          = "gelu"            // Dims n: exact (erf) GELU, new output
	KindAdd           = "add"             // Dims n: z = x + y, new output
	KindReLUInto      = "relu_into"       // Dims n: relu(x) into a given y: the kernel without allocation
	KindGELUInto      = "gelu_into"       // Dims n: exact GELU into a given y
	KindAddInto       = "add_into"        // Dims n: x + y into a given z
	KindSoftmax       = "softmax"         // Dims rows, cols: softmax along each row
	KindBatchNorm     = "batchnorm"       // Dims N, C, H, W: training BatchNorm2d forward+backward, channels-last
	KindLayerNorm     = "layernorm"       // Dims rows, cols: LayerNorm over cols, forward+backward
	KindSGD           = "sgd"             // Dims n: one SGD step with momentum 0.9 on n parameters

	// Whole ResNet-50 (torchvision's resnet50 on the PyTorch side,
	// models.ResNet50 on Kiln's), seeded random weights, channels-last
	// weights and images. Kiln always runs eager.
	KindResNet50Infer       = "resnet50_infer"        // Dims batch, image: eval forward under no-grad; PyTorch eager
	KindResNet50InferFrozen = "resnet50_infer_frozen" // the same Kiln run; PyTorch torch.jit.freeze(torch.jit.trace(model, x))
	KindResNet50Train       = "resnet50_train"        // Dims batch, image: zero grad, train-mode forward, cross-entropy, backward, SGD step
	KindResNet50TrainMem    = "resnet50_train_mem"    // Dims batch, image, steps: peak RSS of that many training steps in a fresh process
	KindResNet50Graph       = "resnet50_graph"        // Dims batch, image: Kiln's frozen fused graph (Trace, Freeze, Compile); PyTorch as resnet50_infer_frozen
	KindResNet50GraphNoFuse = "resnet50_graph_nofuse" // the same with graph.WithFusion(false); PyTorch as resnet50_infer_frozen
	KindResNet50InferBF16   = "resnet50_infer_bf16"   // Dims batch, image: BF16 inference (Kiln: kiln.Optimize with BF16 weights, under amp.Autocast; PyTorch: model.bfloat16())
	KindResNet50GraphBF16   = "resnet50_graph_bf16"   // Dims batch, image: BF16 frozen graph (Kiln: kiln.Optimize with BF16 weights, Trace under amp.Autocast, Freeze, Compile, run on float32 images; PyTorch: torch.jit.freeze(torch.jit.trace(model, x)) traced and run under torch.cpu.amp.autocast)
	KindResNet50TrainBF16   = "resnet50_train_bf16"   // Dims batch, image: the train step in BF16 (Kiln: split master weights from kiln.Optimize, under amp.Autocast; PyTorch: torch.cpu.amp.autocast)
	KindResNet50Instances   = "resnet50_instances"    // Dims batch, image, instances, cores per instance: Kiln only: the frozen FP32 graph compiled once per instance on a kernels.Pool of its own cores; a call runs every instance on one batch at once
	KindResNet50Serve       = "resnet50_serve"        // Dims batch, image, clients, max batch: Kiln only: the frozen FP32 graph behind serve.New on loopback HTTP, .npy bodies; a call is clients concurrent requests of batch images each
	KindResNet50GraphInt8   = "resnet50_graph_int8"   // Dims batch, image, calibration batches, calibration batch size: INT8 frozen graph (Kiln: Trace, quant.Prepare, Observe, Finish, Convert, Compile; PyTorch: FX prepare_fx, calibration, convert_fx, then torch.jit.freeze(torch.jit.trace(model, x)))

	// DLRM (dlrm's DLRM_Net: models.NewDLRM on Kiln's side, a
	// transcription in torch_bench.py on PyTorch's), seeded random
	// weights, one fixed random batch; see DLRMWorkloads for the model.
	KindDLRMTrain       = "dlrm_train"        // Dims batch, tables, rows, d: zero grad, train-mode forward, mean BCE loss, backward, SGD with sparse table gradients
	KindDLRMTrainFused  = "dlrm_train_fused"  // Dims as dlrm_train; Kiln applies the tables' SGD inside their sparse backward (optim.FuseSparse, examples/dlrm --fused-emb, IPEX's MergedEmbeddingBagWithSGD); PyTorch, which has no such op, runs dlrm_train's step
	KindDLRMTrainBF16   = "dlrm_train_bf16"   // Dims as dlrm_train; Kiln trains as examples/dlrm --dtype bf16 --fused-emb (split BF16 weights and tables from kiln.Optimize, the dense features under autocast, SGD fused into the tables' backward); PyTorch runs dlrm_train's step under torch.cpu.amp.autocast (its CPU EmbeddingBag has no bfloat16, so its tables stay float32)
	KindDLRMInfer       = "dlrm_infer"        // Dims batch, tables, rows, d: eval forward under no-grad (Kiln: NoGrad); PyTorch eager
	KindDLRMInferFrozen = "dlrm_infer_frozen" // Dims batch, tables, rows, d: Kiln's frozen compiled graph (TraceFunc, Freeze, Compile); PyTorch torch.jit.freeze(torch.jit.trace(model, inputs))
	KindDLRMTrainMem    = "dlrm_train_mem"    // Dims batch, tables, rows, d, steps: peak RSS of that many training steps in a fresh process (Kiln: split BF16 from kiln.Optimize, SGD fused into the sparse backward; PyTorch: FP32, sparse tables, SGD)

	// DLRM's kernels at the model's sizes (see DLRMKernelWorkloads),
	// memory-bound. The bag kinds' Dims are batch, tables, rows, d; the
	// interaction's batch, tables, d (tables + 1 features).
	KindDLRMBagFwd          = "dlrm_bag_fwd"          // Kiln: one MergedEmbeddingBag lookup of every table under no-grad; PyTorch: dlrm's loop of nn.EmbeddingBag calls under no_grad
	KindDLRMBagFwdBF16      = "dlrm_bag_fwd_bf16"     // the same with bfloat16 tables (Kiln's bags float32)
	KindDLRMBagBwd          = "dlrm_bag_bwd_sgd"      // timed: backward of the lookups from one gradient each (autograd.Backward, torch.autograd.backward) and the SGD step (Kiln: fused into the backward, optim.FuseSparse); untimed before each call: zero grad, forward
	KindDLRMBagBwdBF16      = "dlrm_bag_bwd_sgd_bf16" // the same with split BF16 tables (kiln.Optimize); PyTorch: bfloat16 tables
	KindDLRMInteraction     = "dlrm_interaction"      // forward and backward of the dot interaction (Kiln: autograd.Interaction; PyTorch: dlrm's cat, bmm, tril index, cat)
	KindDLRMInteractionBF16 = "dlrm_interaction_bf16" // the same on bfloat16 features
)

// Bound says which ceiling a workload is compared with.
type Bound string

const (
	// Compute-bound rows are compared with the FMA peak.
	Compute Bound = "compute"
	// Memory-bound rows are compared with the copy bandwidth.
	Memory Bound = "memory"
	// Footprint rows are not timed: each side runs the workload in a
	// fresh process and reports its peak resident memory (RunFresh).
	// Their ratio is Kiln/PyTorch memory, lower being better.
	Footprint Bound = "footprint"
)

// Workload is one benchmark row (at each thread count). It travels to
// torch_bench.py as JSON, so both sides run exactly the same shapes.
type Workload struct {
	Name  string `json:"name"`  // unique, shown in the table
	Group string `json:"group"` // table section
	Kind  string `json:"kind"`
	Dims  []int  `json:"dims"` // meaning depends on Kind (see the Kind constants)
	// Flops is the arithmetic work of one run (multiply-adds count two),
	// floating-point or, on INT8 rows, integer; set for compute-bound rows.
	Flops float64 `json:"flops,omitempty"`
	// Bytes is the compulsory memory traffic of one run: every operand
	// read once and every result written once. Set for memory-bound rows;
	// rows whose data fits in cache can exceed the DRAM copy bandwidth.
	Bytes float64 `json:"bytes,omitempty"`
	Bound Bound   `json:"bound"`
	// Images is the number of images one run processes, for rows that
	// also report images/s.
	Images int `json:"images,omitempty"`
	// Samples is the number of samples one run processes, for rows
	// (DLRM) that also report samples/s.
	Samples int `json:"samples,omitempty"`
	// WarmUpCalls is the least number of untimed calls before timing
	// (besides WarmUp); slow whole-model rows set it, where one call
	// already outlasts WarmUp.
	WarmUpCalls int `json:"warmup_calls,omitempty"`
	// Runs, when set, is the number of timed samples of this row's PyTorch
	// side in place of the run's own count: for rows whose PyTorch side
	// takes seconds to minutes a call on CPUs without native BF16. Kiln's
	// side, as fast as its float32 row, takes the run's count, so the two
	// speeds the BF16 ÷ FP32 section sets side by side are medians of as
	// many samples.
	Runs int `json:"runs,omitempty"`
	// FP32Row is set only on BF16 and INT8 rows (on every BF16 row, and on
	// the INT8 rows that have one): the name of the Kiln float32 row doing
	// the same work (the same GEMM or model at the same batch, in the same
	// mode), which the report sets beside it as Kiln BF16 (or INT8) speed ÷
	// Kiln FP32 speed. A BF16 row's % peak is of the BF16 peak where the
	// CPU has one, an INT8 row's of the INT8 peak.
	FP32Row string `json:"fp32_row,omitempty"`
	// MemBound, on a Footprint row, is a ceiling (in bytes) for its
	// peak resident memory less its resident memory at start; the table
	// sets each side's growth beside it.
	MemBound float64 `json:"mem_bound_bytes,omitempty"`
	// Quick marks the representative subset run by -quick.
	Quick bool `json:"quick,omitempty"`
	// KilnOnly rows have no PyTorch side: they compare Kiln with itself
	// (Baseline), as the runtime rows compare instance layouts.
	KilnOnly bool `json:"kiln_only,omitempty"`
	// Threads, when set, is the one thread count the row runs at (its
	// instances need that many cores); other thread counts skip it.
	Threads int `json:"threads,omitempty"`
	// Baseline names the Kiln row of the same run this row's Kiln speed
	// is set against (images a second ÷ images a second) in the report's
	// "Kiln ÷ Kiln" section.
	Baseline string `json:"baseline,omitempty"`
}

// RunsAt reports whether w runs at t threads.
func (w Workload) RunsAt(t int) bool { return w.Threads == 0 || w.Threads == t }

// Precision is the arithmetic of a row's Kiln side.
type Precision string

const (
	PrecisionFP32 Precision = "fp32"
	PrecisionBF16 Precision = "bf16"
	PrecisionInt8 Precision = "int8"
)

// Precision is w's arithmetic, read from its kind (the BF16 and INT8
// kinds end in _bf16 and _int8) so that the -json files of earlier runs,
// which carry no such field, read the same.
func (w Workload) Precision() Precision {
	switch {
	case strings.HasSuffix(w.Kind, "_bf16"):
		return PrecisionBF16
	case strings.HasSuffix(w.Kind, "_int8"):
		return PrecisionInt8
	}
	return PrecisionFP32
}

// IsBF16 reports whether w is a BF16 row.
func (w Workload) IsBF16() bool { return w.Precision() == PrecisionBF16 }

// ConvDims are the Dims of a convolution workload: a 2-D square-kernel
// convolution with one group, batch N, C input and O output channels,
// H×W input, K×K kernel, equal stride and padding in both directions, no
// dilation. Data are channels-last (NHWC input, OHWI weight).
type ConvDims struct {
	N, C, H, W, O, K, Stride, Pad int
}

func (c ConvDims) dims() []int { return []int{c.N, c.C, c.H, c.W, c.O, c.K, c.Stride, c.Pad} }

// OutHW returns the output height and width.
func (c ConvDims) OutHW() (int, int) {
	return (c.H+2*c.Pad-c.K)/c.Stride + 1, (c.W+2*c.Pad-c.K)/c.Stride + 1
}

// Flops is the work of one direction (forward, backward-data or
// backward-weight): the same multiply-adds in each.
func (c ConvDims) Flops() float64 {
	oh, ow := c.OutHW()
	return 2 * float64(c.N) * float64(c.O) * float64(oh*ow) * float64(c.C) * float64(c.K*c.K)
}

func convDimsOf(d []int) (ConvDims, error) {
	if len(d) != 8 {
		return ConvDims{}, fmt.Errorf("conv workload needs 8 dims, got %v", d)
	}
	return ConvDims{N: d[0], C: d[1], H: d[2], W: d[3], O: d[4], K: d[5], Stride: d[6], Pad: d[7]}, nil
}

// ConvBatch is the batch size of the ResNet-50 convolution rows.
const ConvBatch = 16

// Workloads returns every benchmark row, in table order; with quick only
// the representative subset.
func Workloads(quick bool) []Workload {
	var ws []Workload
	add := func(w Workload) {
		if !quick || w.Quick {
			ws = append(ws, w)
		}
	}
	gemm := func(group string, m, n, k int, q bool) {
		add(Workload{Name: gemmName(m, n, k), Group: group, Kind: KindGemm,
			Dims: []int{m, n, k}, Flops: 2 * float64(m) * float64(n) * float64(k), Bound: Compute, Quick: q})
	}
	squares := []int{256, 512, 1024, 2048}
	for _, s := range squares {
		gemm("GEMM square", s, s, s, s == 256 || s == 1024)
	}
	gemm("GEMM DL shapes (m×n×k)", 64, 1024, 1024, false)
	gemm("GEMM DL shapes (m×n×k)", 512, 4096, 512, true)
	gemm("GEMM DL shapes (m×n×k)", 2048, 512, 256, false)
	gemm("GEMM DL shapes (m×n×k)", 128, 13, 512, true)
	// The low-precision GEMMs count their multiply-adds as two operations
	// each, as the float32 rows count flops, and name the float32 row of
	// the same size where there is one (none at 4096).
	for _, lp := range []struct {
		kind, label, group string
		sizes              []int
	}{
		{KindGemmBF16, "bf16", "GEMM BF16", []int{1024, 2048}},
		{KindGemmInt8, "int8", "GEMM INT8", []int{1024, 2048, 4096}},
	} {
		for _, sz := range lp.sizes {
			fp32 := ""
			if slices.Contains(squares, sz) {
				fp32 = gemmName(sz, sz, sz)
			}
			add(Workload{Name: fmt.Sprintf("gemm %s %d×%d×%d", lp.label, sz, sz, sz), Group: lp.group, Kind: lp.kind,
				Dims: []int{sz, sz, sz}, Flops: 2 * float64(sz) * float64(sz) * float64(sz), Bound: Compute, Quick: sz == 1024,
				FP32Row: fp32})
		}
	}

	dirs := []struct{ kind, label, group string }{
		{KindConvFwd, "fwd", "ResNet-50 conv forward"},
		{KindConvBwdData, "bwd-data", "ResNet-50 conv backward-data"},
		{KindConvBwdWeight, "bwd-weight", "ResNet-50 conv backward-weight"},
	}
	for _, d := range dirs {
		for _, l := range ResNet50Convs() {
			cd := l.Dims(ConvBatch)
			add(Workload{Name: fmt.Sprintf("%s %s %s", d.label, l.Name, l.Shape()), Group: d.group, Kind: d.kind,
				Dims: cd.dims(), Flops: cd.Flops(), Bound: Compute, Quick: l.Quick})
		}
	}

	// Each elementwise kernel twice: as the autograd op, which allocates
	// its result, and writing into a preallocated output, which is what
	// the kernel itself costs (for 4 MiB and more Go zeroes and
	// page-faults a fresh block, where PyTorch's malloc reuses a freed one).
	const small, large = 1 << 20, 25_000_000
	elems := []struct {
		kind, into, label string
		bytesPerElem      float64
		quickN            int
	}{
		{KindReLU, KindReLUInto, "relu", 8, large},
		{KindGELU, KindGELUInto, "gelu", 8, small},
		{KindAdd, KindAddInto, "add", 12, large},
	}
	for _, out := range []struct {
		given         bool
		group, suffix string
	}{
		{false, "Elementwise (new output)", ""},
		{true, "Elementwise (given output)", " into y"},
	} {
		for _, n := range []int{small, large} {
			for _, e := range elems {
				kind := e.kind
				if out.given {
					kind = e.into
				}
				add(Workload{Name: fmt.Sprintf("%s %s%s", e.label, countName(n), out.suffix), Group: out.group, Kind: kind,
					Dims: []int{n}, Bytes: e.bytesPerElem * float64(n), Bound: Memory, Quick: n == e.quickN})
			}
		}
	}
	for _, s := range [][2]int{{4096, 1024}, {32768, 128}} {
		add(Workload{Name: fmt.Sprintf("softmax %d×%d (rows)", s[0], s[1]), Group: "Softmax", Kind: KindSoftmax,
			Dims: s[:], Bytes: 8 * float64(s[0]*s[1]), Bound: Memory, Quick: s[1] == 1024})
	}
	// Forward reads x and writes y; backward reads x and dy and writes dx.
	const normBytes = 20
	for _, s := range [][4]int{{16, 64, 56, 56}, {16, 256, 56, 56}} {
		n := s[0] * s[1] * s[2] * s[3]
		add(Workload{Name: fmt.Sprintf("batchnorm2d fwd+bwd %d×%d×%d×%d NHWC", s[0], s[1], s[2], s[3]), Group: "Normalisation",
			Kind: KindBatchNorm, Dims: s[:], Bytes: normBytes * float64(n), Bound: Memory, Quick: s[1] == 64})
	}
	for _, s := range [][2]int{{8192, 1024}} {
		add(Workload{Name: fmt.Sprintf("layernorm fwd+bwd %d×%d", s[0], s[1]), Group: "Normalisation",
			Kind: KindLayerNorm, Dims: s[:], Bytes: normBytes * float64(s[0]*s[1]), Bound: Memory, Quick: true})
	}
	// Reads parameter, gradient and momentum; writes parameter and momentum.
	add(Workload{Name: "sgd momentum step " + countName(large), Group: "Optimizer", Kind: KindSGD,
		Dims: []int{large}, Bytes: 20 * large, Bound: Memory, Quick: true})

	for _, w := range ResNet50Workloads(ResNet50Image) {
		add(w)
	}
	for _, w := range DLRMWorkloads() {
		add(w)
	}
	return ws
}

func gemmName(m, n, k int) string { return fmt.Sprintf("gemm %d×%d×%d", m, n, k) }

func countName(n int) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMi", n>>20)
	}
	return fmt.Sprint(n)
}

// Filter returns the workloads whose name matches re (all when re is
// empty).
func Filter(ws []Workload, re string) ([]Workload, error) {
	if re == "" {
		return ws, nil
	}
	r, err := regexp.Compile(re)
	if err != nil {
		return nil, err
	}
	var out []Workload
	for _, w := range ws {
		if r.MatchString(w.Name) {
			out = append(out, w)
		}
	}
	return out, nil
}
