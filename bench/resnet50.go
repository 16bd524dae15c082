package bench

import (
	"fmt"
	"runtime"
	"slices"

	"github.com/kilnml/kiln/kernels"
)

// ResNet50Conv is one distinct convolution of torchvision's resnet50
// (ResNet v1.5: the stride sits on the 3×3 convolution) for a 224×224
// input, with the name of its first occurrence and how often the network
// uses it.
//
// This table stands in for kernels.ResNet50ConvShapes until that exists;
// switch to it then. TestResNet50ConvsMatchTorchvision checks the table
// against torchvision when it is installed.
type ResNet50Conv struct {
	Name                       string
	C, O, K, Stride, Pad, H, W int
	Uses                       int
	// Quick marks the representative shapes of a -quick run: the 7×7
	// stem, a 3×3 and a 1×1.
	Quick bool
}

// Dims returns the convolution at batch n.
func (c ResNet50Conv) Dims(n int) ConvDims {
	return ConvDims{N: n, C: c.C, H: c.H, W: c.W, O: c.O, K: c.K, Stride: c.Stride, Pad: c.Pad}
}

// Shape is a short description: "256→64 1×1 56²" (with "/2" when strided).
func (c ResNet50Conv) Shape() string {
	s := fmt.Sprintf("%d→%d %d×%d %d²", c.C, c.O, c.K, c.K, c.H)
	if c.Stride != 1 {
		s += fmt.Sprintf(" /%d", c.Stride)
	}
	return s
}

// ResNet50Convs returns the 23 distinct convolution shapes of ResNet-50 in
// network order.
func ResNet50Convs() []ResNet50Conv {
	return []ResNet50Conv{
		{Name: "conv1", C: 3, O: 64, K: 7, Stride: 2, Pad: 3, H: 224, W: 224, Uses: 1, Quick: true},
		{Name: "layer1.0.conv1", C: 64, O: 64, K: 1, Stride: 1, H: 56, W: 56, Uses: 1},
		{Name: "layer1.0.conv2", C: 64, O: 64, K: 3, Stride: 1, Pad: 1, H: 56, W: 56, Uses: 3, Quick: true},
		{Name: "layer1.0.conv3", C: 64, O: 256, K: 1, Stride: 1, H: 56, W: 56, Uses: 4}, // with layer1.0.downsample.0
		{Name: "layer1.1.conv1", C: 256, O: 64, K: 1, Stride: 1, H: 56, W: 56, Uses: 2},
		{Name: "layer2.0.conv1", C: 256, O: 128, K: 1, Stride: 1, H: 56, W: 56, Uses: 1},
		{Name: "layer2.0.conv2", C: 128, O: 128, K: 3, Stride: 2, Pad: 1, H: 56, W: 56, Uses: 1},
		{Name: "layer2.0.conv3", C: 128, O: 512, K: 1, Stride: 1, H: 28, W: 28, Uses: 4},
		{Name: "layer2.0.downsample.0", C: 256, O: 512, K: 1, Stride: 2, H: 56, W: 56, Uses: 1},
		{Name: "layer2.1.conv1", C: 512, O: 128, K: 1, Stride: 1, H: 28, W: 28, Uses: 3},
		{Name: "layer2.1.conv2", C: 128, O: 128, K: 3, Stride: 1, Pad: 1, H: 28, W: 28, Uses: 3},
		{Name: "layer3.0.conv1", C: 512, O: 256, K: 1, Stride: 1, H: 28, W: 28, Uses: 1},
		{Name: "layer3.0.conv2", C: 256, O: 256, K: 3, Stride: 2, Pad: 1, H: 28, W: 28, Uses: 1},
		{Name: "layer3.0.conv3", C: 256, O: 1024, K: 1, Stride: 1, H: 14, W: 14, Uses: 6},
		{Name: "layer3.0.downsample.0", C: 512, O: 1024, K: 1, Stride: 2, H: 28, W: 28, Uses: 1},
		{Name: "layer3.1.conv1", C: 1024, O: 256, K: 1, Stride: 1, H: 14, W: 14, Uses: 5, Quick: true},
		{Name: "layer3.1.conv2", C: 256, O: 256, K: 3, Stride: 1, Pad: 1, H: 14, W: 14, Uses: 5},
		{Name: "layer4.0.conv1", C: 1024, O: 512, K: 1, Stride: 1, H: 14, W: 14, Uses: 1},
		{Name: "layer4.0.conv2", C: 512, O: 512, K: 3, Stride: 2, Pad: 1, H: 14, W: 14, Uses: 1},
		{Name: "layer4.0.conv3", C: 512, O: 2048, K: 1, Stride: 1, H: 7, W: 7, Uses: 3},
		{Name: "layer4.0.downsample.0", C: 1024, O: 2048, K: 1, Stride: 2, H: 14, W: 14, Uses: 1},
		{Name: "layer4.1.conv1", C: 2048, O: 512, K: 1, Stride: 1, H: 7, W: 7, Uses: 2},
		{Name: "layer4.1.conv2", C: 512, O: 512, K: 3, Stride: 1, Pad: 1, H: 7, W: 7, Uses: 2},
	}
}

// The whole-model ResNet-50 rows: inference at two batch sizes, a training
// step, and the peak memory of training.
const (
	ResNet50Image      = 224 // image side of the table's rows
	ResNet50TrainBatch = 8
	// ResNet50MemSteps is how many training steps the peak-memory row
	// runs in each fresh process: the first allocates the momentum
	// buffers, the later ones show the steady state.
	ResNet50MemSteps = 3
	// ModelWarmUpCalls is the least number of untimed calls of a
	// whole-model row: one call already outlasts WarmUp, and the first
	// calls fill pools and caches (and profile a TorchScript graph).
	ModelWarmUpCalls = 2
)

// ResNet50InferBatches are the batch sizes of the inference rows.
var ResNet50InferBatches = []int{1, 16}

// ResNet50Workloads returns the whole-model rows for image×image inputs,
// in table order, all in group "ResNet-50". Every inference batch has two
// rows with the same Kiln side (eager, nn.Eval on an autograd.NoGrad input):
// "vs torch eager" compares it with model.eval() under torch.no_grad(),
// "vs torch jit.freeze" with torch.jit.freeze(torch.jit.trace(model, x));
// Kiln is timed again for the second row so that both sides of each row
// run under the same machine load. Batch 1 float32 inference is in the
// -quick subset; the training and BF16 rows are not (tens of seconds per
// thread count). Each BF16 row names its float32 counterpart in FP32Row.
func ResNet50Workloads(image int) []Workload {
	fwd, train := ResNet50Flops(image)
	var ws []Workload
	for _, n := range ResNet50InferBatches {
		for _, ref := range []struct{ kind, name string }{
			{KindResNet50Infer, "torch eager"},
			{KindResNet50InferFrozen, "torch jit.freeze"},
		} {
			ws = append(ws, Workload{Name: resNet50InferName(n, image, ref.name), Group: "ResNet-50",
				Kind: ref.kind, Dims: []int{n, image}, Flops: float64(n) * fwd, Bound: Compute, Images: n,
				WarmUpCalls: ModelWarmUpCalls, Quick: n == 1})
		}
	}
	// The frozen-graph rows share the jit.freeze reference, so beside the
	// eager row of the same batch they also give frozen ÷ eager and fusion
	// on ÷ off for Kiln.
	for _, n := range ResNet50InferBatches {
		for _, k := range []struct{ kind, name string }{
			{KindResNet50Graph, "frozen graph"},
			{KindResNet50GraphNoFuse, "frozen graph, fusion off,"},
		} {
			ws = append(ws, Workload{Name: resNet50GraphName(k.name, n, image, "torch jit.freeze"), Group: "ResNet-50",
				Kind: k.kind, Dims: []int{n, image}, Flops: float64(n) * fwd, Bound: Compute, Images: n,
				WarmUpCalls: ModelWarmUpCalls, Quick: n == 1})
		}
	}
	n := ResNet50TrainBatch
	// The runtime rows (issue 21): the batch-1 frozen graph as several
	// instances of pinned cores each against one instance of all of them,
	// IPEX launcher's throughput mode against its latency mode; Kiln only.
	// On 2 cores, instances of one core; from 8, of four (the 16-core
	// comparison issue 21 asks for: 4 × 4 against 1 × 16).
	cores := max(2, runtime.NumCPU())
	per := 1
	if cores >= 8 {
		per = 4
	}
	one := fmt.Sprintf("instances: ResNet-50 frozen graph bs1 %d², 1 instance × %d cores", image, cores)
	for _, in := range []struct{ instances, cores int }{{1, cores}, {cores / per, per}} {
		w := Workload{Name: one, Group: "Runtime (Kiln only)", Kind: KindResNet50Instances,
			Dims: []int{1, image, in.instances, in.cores}, Flops: float64(in.instances) * fwd, Bound: Compute,
			Images: in.instances, WarmUpCalls: ModelWarmUpCalls, KilnOnly: true, Threads: in.instances * in.cores}
		if in.instances > 1 {
			w.Name = fmt.Sprintf("instances: ResNet-50 frozen graph bs1 %d², %d instances × %d cores", image, in.instances, in.cores)
			w.Baseline = one
		}
		ws = append(ws, w)
	}
	// kiln serve against the same graph in process (the frozen-graph rows
	// above): one request at batch 1 and at batch 16 (the serving
	// overhead), and eight clients of batch 1 with dynamic batching.
	for _, sv := range []struct{ batch, clients, maxBatch int }{{1, 1, 1}, {16, 1, 1}, {1, 8, 8}} {
		name := fmt.Sprintf("serve: ResNet-50 frozen graph bs%d %d² over HTTP", sv.batch, image)
		if sv.clients > 1 {
			name += fmt.Sprintf(", %d clients, batching up to %d", sv.clients, sv.maxBatch)
		}
		ws = append(ws, Workload{Name: name, Group: "Runtime (Kiln only)", Kind: KindResNet50Serve,
			Dims: []int{sv.batch, image, sv.clients, sv.maxBatch}, Flops: float64(sv.batch*sv.clients) * fwd, Bound: Compute,
			Images: sv.batch * sv.clients, WarmUpCalls: ModelWarmUpCalls, KilnOnly: true,
			Baseline: resNet50GraphName("frozen graph", sv.batch, image, "torch jit.freeze")})
	}
	trainName := fmt.Sprintf("resnet50 train step bs%d %d² (SGD momentum)", n, image)
	ws = append(ws,
		Workload{Name: trainName, Group: "ResNet-50",
			Kind: KindResNet50Train, Dims: []int{n, image}, Flops: float64(n) * train, Bound: Compute, Images: n,
			WarmUpCalls: ModelWarmUpCalls},
		Workload{Name: fmt.Sprintf("resnet50 train peak RSS bs%d %d² (%d steps, fresh process)", n, image, ResNet50MemSteps),
			Group: "ResNet-50", Kind: KindResNet50TrainMem, Dims: []int{n, image, ResNet50MemSteps}, Bound: Footprint},
		Workload{Name: fmt.Sprintf("resnet50 bf16 infer bs%d %d² vs torch bf16", ResNet50BF16InferBatch, image), Group: "ResNet-50",
			Kind: KindResNet50InferBF16, Dims: []int{ResNet50BF16InferBatch, image}, Flops: float64(ResNet50BF16InferBatch) * fwd,
			Bound: Compute, Images: ResNet50BF16InferBatch, WarmUpCalls: 1, Runs: bf16Runs(ResNet50BF16Runs),
			FP32Row: resNet50InferName(ResNet50BF16InferBatch, image, "torch eager")})
	// The BF16 frozen graphs: Kiln's BF16 graph beside PyTorch's frozen
	// TorchScript under autocast, at every inference batch. Batch 1 is
	// short enough for a few samples.
	for _, b := range ResNet50InferBatches {
		runs := bf16Runs(ResNet50BF16Runs)
		if b == 1 {
			runs = bf16Runs(ResNet50BF16GraphBS1Runs)
		}
		ws = append(ws, Workload{Name: resNet50GraphName("bf16 frozen graph", b, image, "torch bf16 jit.freeze"), Group: "ResNet-50",
			Kind: KindResNet50GraphBF16, Dims: []int{b, image}, Flops: float64(b) * fwd, Bound: Compute, Images: b,
			WarmUpCalls: ModelWarmUpCalls, Runs: runs, FP32Row: resNet50GraphName("frozen graph", b, image, "torch jit.freeze")})
	}
	// The INT8 frozen graphs, calibrated alike on both sides, beside
	// Kiln's float32 frozen graph of the same batch.
	for _, b := range ResNet50InferBatches {
		ws = append(ws, Workload{Name: resNet50GraphName("int8 frozen graph", b, image, "torch FX int8 jit.freeze"), Group: "ResNet-50",
			Kind: KindResNet50GraphInt8, Dims: []int{b, image, ResNet50Int8CalibBatches, ResNet50Int8CalibBatch},
			Flops: float64(b) * fwd, Bound: Compute, Images: b, WarmUpCalls: ModelWarmUpCalls, Quick: b == 1,
			FP32Row: resNet50GraphName("frozen graph", b, image, "torch jit.freeze")})
	}
	ws = append(ws,
		Workload{Name: fmt.Sprintf("resnet50 bf16 train step bs%d %d² vs torch autocast", n, image), Group: "ResNet-50",
			Kind: KindResNet50TrainBF16, Dims: []int{n, image}, Flops: float64(n) * train, Bound: Compute, Images: n,
			WarmUpCalls: 1, Runs: bf16Runs(ResNet50BF16Runs), FP32Row: trainName})
	return ws
}

func resNet50InferName(n, image int, ref string) string {
	return fmt.Sprintf("resnet50 infer bs%d %d² vs %s", n, image, ref)
}

func resNet50GraphName(what string, n, image int, ref string) string {
	return fmt.Sprintf("resnet50 %s infer bs%d %d² vs %s", what, n, image, ref)
}

// The BF16 rows: inference at batch 16, frozen graphs at batches 1 and
// 16, a training step at the FP32 row's batch. PyTorch 1.13 without IPEX
// runs BF16 on a reference path on CPUs without AVX512_BF16 (minutes a
// call at these sizes on AVX2-only CPUs; on AVX-512 ones without
// AVX512_BF16 oneDNN emulates it, a few seconds a call at batch 16), so
// there these rows take one or two warm-up calls and one timed call on
// both sides, except the batch-1 frozen graph, which takes a few.
// Where the CPU has AVX512_BF16 (or AMX), PyTorch's BF16 calls are as
// quick as the FP32 ones (a second at most here) and the rows take
// ResNet50BF16NativeRuns timed calls: one call's time moved by 10–20 % on
// a shared 2-vCPU host, and a training step's first calls still settle
// Go's heap.
const (
	ResNet50BF16InferBatch   = 16
	ResNet50BF16Runs         = 1
	ResNet50BF16GraphBS1Runs = 3
	ResNet50BF16NativeRuns   = 5
)

// bf16Runs is a BF16 row's timed calls: runs, or ResNet50BF16NativeRuns
// where the CPU computes in BF16 natively.
func bf16Runs(runs int) int {
	if slices.Contains(kernels.Levels(), kernels.AVX512BF16) {
		return max(runs, ResNet50BF16NativeRuns)
	}
	return runs
}

// The INT8 rows' calibration: both sides observe this many batches of
// this many random images before converting. The batches are small
// because Kiln's calibration runs the unfused float32 graph with every
// observed value as an output and scans each one: on a 2-vCPU Cascade
// Lake one Observe took about 2 s at batch 2 and 13 to 21 s at batch 16,
// so batches of 16 would spend a minute per row and thread count before
// anything is timed, where these take about 7 s in all.
const (
	ResNet50Int8CalibBatches = 4
	ResNet50Int8CalibBatch   = 2
)

// ResNet50Flops returns the floating-point work per image of torchvision's
// resnet50 at image×image: forward, and a training step (forward plus
// backward). Only the multiply-adds of the 53 convolutions and the final
// linear layer count (two flops each), as in the usual figure of about
// 4.1 G multiply-adds at 224²; batch norm, ReLU, pooling and the residual
// sums are left out. Backward computes the data and weight gradients of
// every layer, twice the forward work, except the data gradient of conv1,
// whose input (the images) needs none.
func ResNet50Flops(image int) (forward, train float64) {
	out := func(h, k, stride, pad int) int { return (h+2*pad-k)/stride + 1 }
	conv := func(c, o, k, stride, pad, h int) int {
		oh := out(h, k, stride, pad)
		forward += 2 * float64(c*o*k*k) * float64(oh*oh)
		return oh
	}
	h := conv(3, 64, 7, 2, 3, image)
	stem := forward
	h = out(h, 3, 2, 1) // max pool
	in := 64
	for i, blocks := range [4]int{3, 4, 6, 3} {
		width := 64 << i
		for b := range blocks {
			stride := 1
			if b == 0 && i > 0 {
				stride = 2
			}
			conv(in, width, 1, 1, 0, h)
			h2 := conv(width, width, 3, stride, 1, h)
			conv(width, 4*width, 1, 1, 0, h2)
			if b == 0 {
				conv(in, 4*width, 1, stride, 0, h) // downsample
			}
			in, h = 4*width, h2
		}
	}
	forward += 2 * 2048 * 1000 // fc
	return forward, 3*forward - stem
}
