package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// TestMain lets RunFresh re-execute the test binary as a fresh process.
func TestMain(m *testing.M) {
	ServeFresh()
	os.Exit(m.Run())
}

// notQuick are the kinds the -quick subset leaves out: whole-model
// training takes tens of seconds per thread count, and PyTorch's BF16
// ResNet-50 seconds to minutes a call on CPUs without AVX512_BF16.
var notQuick = map[string]bool{KindResNet50Train: true, KindResNet50TrainMem: true, KindResNet50InferBF16: true,
	KindResNet50GraphBF16: true, KindResNet50TrainBF16: true, KindDLRMTrain: true, KindDLRMTrainFused: true, KindDLRMTrainBF16: true, KindDLRMTrainMem: true,
	KindDLRMBagFwd: true, KindDLRMBagFwdBF16: true, KindDLRMBagBwd: true, KindDLRMBagBwdBF16: true,
	KindResNet50Instances: true, KindResNet50Serve: true}

// fp32Kind is the kind of each BF16 and INT8 kind's FP32Row.
var fp32Kind = map[string]string{
	KindGemmBF16:            KindGemm,
	KindResNet50InferBF16:   KindResNet50Infer,
	KindResNet50GraphBF16:   KindResNet50Graph,
	KindResNet50TrainBF16:   KindResNet50Train,
	KindGemmInt8:            KindGemm,
	KindResNet50GraphInt8:   KindResNet50Graph,
	KindDLRMTrainBF16:       KindDLRMTrainFused,
	KindDLRMBagFwdBF16:      KindDLRMBagFwd,
	KindDLRMBagBwdBF16:      KindDLRMBagBwd,
	KindDLRMInteractionBF16: KindDLRMInteraction,
}

func TestWorkloads(t *testing.T) {
	all, quick := Workloads(false), Workloads(true)
	names := map[string]bool{}
	kinds := map[string]int{}
	for _, w := range all {
		if names[w.Name] {
			t.Errorf("duplicate workload name %q", w.Name)
		}
		names[w.Name] = true
		kinds[w.Kind]++
		switch w.Bound {
		case Compute:
			if !(w.Flops > 0) {
				t.Errorf("%s: compute-bound with flops %v", w.Name, w.Flops)
			}
		case Memory:
			if !(w.Bytes > 0) {
				t.Errorf("%s: memory-bound with bytes %v", w.Name, w.Bytes)
			}
		case Footprint:
			if w.Flops != 0 || w.Bytes != 0 || w.Quick {
				t.Errorf("%s: footprint row with flops %v, bytes %v, quick %v", w.Name, w.Flops, w.Bytes, w.Quick)
			}
		default:
			t.Errorf("%s: bound %q", w.Name, w.Bound)
		}
	}
	for _, k := range []string{KindConvFwd, KindConvBwdData, KindConvBwdWeight} {
		if kinds[k] != len(ResNet50Convs()) {
			t.Errorf("%d %s rows, want one per ResNet-50 shape (%d)", kinds[k], k, len(ResNet50Convs()))
		}
	}
	if len(quick) == 0 || len(quick) >= len(all) {
		t.Fatalf("quick subset has %d of %d workloads", len(quick), len(all))
	}
	quickKinds := map[string]bool{}
	for _, w := range quick {
		if !names[w.Name] {
			t.Errorf("quick workload %q is not in the full list", w.Name)
		}
		quickKinds[w.Kind] = true
	}
	for k := range kinds {
		if !quickKinds[k] && !notQuick[k] {
			t.Errorf("quick subset has no %s workload", k)
		}
		if quickKinds[k] && notQuick[k] {
			t.Errorf("quick subset has a %s workload", k)
		}
	}
	if f, _ := Filter(all, "^gemm 1024×"); len(f) != 1 {
		t.Errorf("filter ^gemm 1024× matched %d workloads", len(f))
	}

	// -filter resnet50 picks exactly the whole-model rows (not the
	// convolution rows, whose names are the layers').
	model, _ := Filter(all, "resnet50")
	if want := 6*len(ResNet50InferBatches) + 4; len(model) != want {
		t.Errorf("filter resnet50 matched %d workloads, want %d", len(model), want)
	}
	for _, w := range model {
		if w.Group != "ResNet-50" || !strings.HasPrefix(w.Kind, "resnet50_") {
			t.Errorf("%s: group %q, kind %q", w.Name, w.Group, w.Kind)
		}
		bf16 := w.IsBF16()
		if w.Bound == Compute && (w.Images != w.Dims[0] || w.WarmUpCalls < 2 && !bf16 || bf16 && (w.WarmUpCalls < 1 || w.Runs < 1)) {
			t.Errorf("%s: %d images, %d warm-up calls, %d runs for dims %v", w.Name, w.Images, w.WarmUpCalls, w.Runs, w.Dims)
		}
		if w.Quick != (!notQuick[w.Kind] && w.Dims[0] == 1) {
			t.Errorf("%s: quick %v; want only the batch-1 float32 and INT8 inference rows", w.Name, w.Quick)
		}
	}
	// -filter dlrm picks exactly the DLRM rows of issue 19: training
	// steps at batch 2048 (float32, fused, split BF16), eager and
	// frozen-graph inference at 2048 and 128, all on 26 tables of 100 000
	// rows of 64, and the training's peak memory; the batch-128 inference
	// rows are in -quick. Then the kernel rows (TestDLRMKernelWorkloads).
	dlrm, _ := Filter(all, "dlrm")
	if want := 4 + 2*len(DLRMInferBatches) + 6; len(dlrm) != want {
		t.Errorf("filter dlrm matched %d workloads, want %d", len(dlrm), want)
	}
	dlrmKinds := map[string][]int{}
	for _, w := range dlrm {
		if w.Group == "DLRM kernels" {
			continue
		}
		if w.Bound == Footprint {
			if w.Kind != KindDLRMTrainMem || !reflect.DeepEqual(w.Dims, []int{2048, 26, 100_000, 64, DLRMMemSteps}) || w.MemBound != 1.1*4*26*100_000*64 {
				t.Errorf("%s: kind %s, dims %v, memory bound %v", w.Name, w.Kind, w.Dims, w.MemBound)
			}
			continue
		}
		if w.Group != "DLRM" || !strings.HasPrefix(w.Kind, "dlrm_") || w.Bound != Compute || !(w.Flops > 0) {
			t.Errorf("%s: group %q, kind %q, bound %s, flops %v", w.Name, w.Group, w.Kind, w.Bound, w.Flops)
		}
		if len(w.Dims) != 4 || w.Dims[1] != 26 || w.Dims[2] != 100_000 || w.Dims[3] != 64 {
			t.Errorf("%s: dims %v, want batch, 26 tables, 100000 rows, d 64", w.Name, w.Dims)
			continue
		}
		if w.Samples != w.Dims[0] || w.Images != 0 || w.WarmUpCalls < 2 {
			t.Errorf("%s: %d samples, %d images, %d warm-up calls for dims %v", w.Name, w.Samples, w.Images, w.WarmUpCalls, w.Dims)
		}
		if w.Quick != (!notQuick[w.Kind] && w.Dims[0] == 128) {
			t.Errorf("%s: quick %v; want only the batch-128 inference rows", w.Name, w.Quick)
		}
		dlrmKinds[w.Kind] = append(dlrmKinds[w.Kind], w.Dims[0])
	}
	if want := map[string][]int{KindDLRMTrain: {2048}, KindDLRMTrainFused: {2048}, KindDLRMTrainBF16: {2048}, KindDLRMInfer: {2048, 128}, KindDLRMInferFrozen: {2048, 128}}; !reflect.DeepEqual(dlrmKinds, want) {
		t.Errorf("DLRM batches by kind %v, want %v", dlrmKinds, want)
	}
	if fwd, train := DLRMFlops(26, 64); fwd != 2*(13*512+512*256+256*64+415*512+512*256+256*1+351*64) || train != 3*fwd-2*13*512 {
		t.Errorf("DLRM flops per sample %v forward, %v train", fwd, train)
	}

	// The INT8 rows of issue 18: three square GEMMs (1024 in -quick), an
	// INT8 frozen graph per inference batch, calibrated on the batches
	// the constants give.
	var gemm8, quick8 []string
	for _, w := range all {
		if w.Precision() != PrecisionInt8 {
			continue
		}
		switch w.Kind {
		case KindGemmInt8:
			gemm8 = append(gemm8, w.Name)
		case KindResNet50GraphInt8:
			if len(w.Dims) != 4 || w.Dims[2] != ResNet50Int8CalibBatches || w.Dims[3] != ResNet50Int8CalibBatch {
				t.Errorf("%s: dims %v, want batch, image, %d calibration batches of %d", w.Name, w.Dims,
					ResNet50Int8CalibBatches, ResNet50Int8CalibBatch)
			}
		default:
			t.Errorf("%s: kind %s ends in _int8 but is no INT8 kind", w.Name, w.Kind)
		}
		if w.Quick {
			quick8 = append(quick8, w.Name)
		}
	}
	if want := []string{"gemm int8 1024×1024×1024", "gemm int8 2048×2048×2048", "gemm int8 4096×4096×4096"}; !reflect.DeepEqual(gemm8, want) {
		t.Errorf("INT8 GEMM rows %q, want %q", gemm8, want)
	}
	if want := []string{"gemm int8 1024×1024×1024", "resnet50 int8 frozen graph infer bs1 224² vs torch FX int8 jit.freeze"}; !reflect.DeepEqual(quick8, want) {
		t.Errorf("quick INT8 rows %q, want %q", quick8, want)
	}
}

// TestDLRMKernelWorkloads: the kernel rows of issue 19 at its baseline
// (26 tables of 100 000 rows of 64, batch 2048), memory-bound, each in
// float32 and BF16 naming its float32 row; the interaction in -quick.
func TestDLRMKernelWorkloads(t *testing.T) {
	ws := DLRMKernelWorkloads()
	kinds := map[string]bool{}
	for _, w := range ws {
		kinds[w.Kind] = true
		if w.Group != "DLRM kernels" || w.Bound != Memory || !(w.Bytes > 0) || w.Flops != 0 {
			t.Errorf("%s: group %q, bound %s, bytes %v, flops %v", w.Name, w.Group, w.Bound, w.Bytes, w.Flops)
		}
		want := []int{2048, 26, 100_000, 64}
		if strings.Contains(w.Kind, "interaction") {
			want = []int{2048, 26, 64}
		}
		if !reflect.DeepEqual(w.Dims, want) {
			t.Errorf("%s: dims %v, want %v", w.Name, w.Dims, want)
		}
		if w.Quick != strings.Contains(w.Kind, "interaction") || w.IsBF16() != (w.FP32Row != "") {
			t.Errorf("%s: quick %v, FP32Row %q", w.Name, w.Quick, w.FP32Row)
		}
	}
	if len(ws) != 6 || len(kinds) != 6 {
		t.Errorf("%d rows of %d kinds, want 6 of 6", len(ws), len(kinds))
	}
	// 53 248 lookups of 64 values: forward reads the rows (4 or 2 bytes
	// a value) and the index, writes float32 bags; backward reads the
	// bags' gradient and the index and reads and writes each row.
	const lookups = 2048 * 26
	if f, b := DLRMBagBytes(2048, 26, 64, 4); f != lookups*(256+256+8) || b != lookups*(256+512+8) {
		t.Errorf("FP32 bag bytes %v forward, %v backward", f, b)
	}
	if f, b := DLRMBagBytes(2048, 26, 64, 2); f != lookups*(128+256+8) || b != lookups*(256+512+8) {
		t.Errorf("BF16 bag bytes %v forward, %v backward", f, b)
	}
	// 27 features and 415 outputs a sample.
	if got, want := DLRMInteractionBytes(2048, 26, 64, 4), 4*2048*(3*27*64+2*415.0); got != want {
		t.Errorf("interaction bytes %v, want %v", got, want)
	}
}

func TestPrecision(t *testing.T) {
	for kind, want := range map[string]Precision{
		KindGemm: PrecisionFP32, KindResNet50Graph: PrecisionFP32, KindGemmBF16: PrecisionBF16,
		KindResNet50TrainBF16: PrecisionBF16, KindGemmInt8: PrecisionInt8, KindResNet50GraphInt8: PrecisionInt8,
	} {
		if got := (Workload{Kind: kind}).Precision(); got != want {
			t.Errorf("%s: precision %s, want %s", kind, got, want)
		}
	}
}

// TestFP32Pairs: every BF16 row, and every INT8 row that has one, names
// as its FP32Row an existing float32 row of the matching kind doing the
// same work, and only BF16 and INT8 rows name one.
func TestFP32Pairs(t *testing.T) {
	all := Workloads(false)
	byName := map[string]Workload{}
	for _, w := range all {
		byName[w.Name] = w
	}
	pairs := map[string]int{}
	for _, w := range all {
		want, low := fp32Kind[w.Kind]
		if !low {
			if w.FP32Row != "" || w.Precision() != PrecisionFP32 {
				t.Errorf("%s (%s): FP32Row %q on a float32 row", w.Name, w.Kind, w.FP32Row)
			}
			continue
		}
		if w.FP32Row == "" && w.Precision() == PrecisionInt8 {
			continue
		}
		f, ok := byName[w.FP32Row]
		// An INT8 model row's dims go on with its calibration.
		switch {
		case !ok:
			t.Errorf("%s: FP32Row %q is not a workload", w.Name, w.FP32Row)
		case f.Kind != want || f.Precision() != PrecisionFP32:
			t.Errorf("%s: FP32Row %q has kind %s, want %s", w.Name, f.Name, f.Kind, want)
		case f.Flops != w.Flops || f.Images != w.Images || len(w.Dims) < len(f.Dims) || !reflect.DeepEqual(f.Dims, w.Dims[:len(f.Dims)]):
			t.Errorf("%s: FP32Row %q does other work: flops %v, images %d, dims %v; want %v, %d, %v",
				w.Name, f.Name, f.Flops, f.Images, f.Dims, w.Flops, w.Images, w.Dims)
		}
		pairs[w.Kind]++
	}
	// The pairs of issues 17 and 18's targets, by name.
	for low, fp32 := range map[string]string{
		"gemm bf16 1024×1024×1024":                                               "gemm 1024×1024×1024",
		"resnet50 bf16 infer bs16 224² vs torch bf16":                            "resnet50 infer bs16 224² vs torch eager",
		"resnet50 bf16 frozen graph infer bs1 224² vs torch bf16 jit.freeze":     "resnet50 frozen graph infer bs1 224² vs torch jit.freeze",
		"resnet50 bf16 frozen graph infer bs16 224² vs torch bf16 jit.freeze":    "resnet50 frozen graph infer bs16 224² vs torch jit.freeze",
		"resnet50 bf16 train step bs8 224² vs torch autocast":                    "resnet50 train step bs8 224² (SGD momentum)",
		"gemm int8 1024×1024×1024":                                               "gemm 1024×1024×1024",
		"gemm int8 2048×2048×2048":                                               "gemm 2048×2048×2048",
		"gemm int8 4096×4096×4096":                                               "",
		"resnet50 int8 frozen graph infer bs1 224² vs torch FX int8 jit.freeze":  "resnet50 frozen graph infer bs1 224² vs torch jit.freeze",
		"resnet50 int8 frozen graph infer bs16 224² vs torch FX int8 jit.freeze": "resnet50 frozen graph infer bs16 224² vs torch jit.freeze",
	} {
		if w, ok := byName[low]; !ok || w.FP32Row != fp32 {
			t.Errorf("%q (present %v): FP32Row %q, want %q", low, ok, w.FP32Row, fp32)
		}
	}
	for _, k := range []string{KindResNet50GraphBF16, KindResNet50GraphInt8} {
		if pairs[k] != len(ResNet50InferBatches) {
			t.Errorf("%d %s rows, want one per inference batch", pairs[k], k)
		}
	}
}

// TestPeaksJSON: reports written before the BF16 peak existed still
// read, and a Peaks without one writes no BF16 field.
func TestPeaksJSON(t *testing.T) {
	var p Peaks
	if err := json.Unmarshal([]byte(`{"FMA":{"1":100},"Copy":{"1":20},"Triad":{"1":25}}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.FMA[1] != 100 || p.BF16 != nil || p.BF16Measured([]int{1}) {
		t.Errorf("old peaks read as %+v", p)
	}
	b, _ := json.Marshal(p)
	if bytes.Contains(b, []byte("BF16")) {
		t.Errorf("peaks without BF16 write %s", b)
	}
	p.BF16 = map[int]float64{1: 400, 2: 0}
	b, _ = json.Marshal(p)
	var back Peaks
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, p) {
		t.Errorf("round trip of %s: %+v, %v", b, back, err)
	}
	if !back.BF16Measured([]int{1}) || back.BF16Measured([]int{1, 2}) || back.BF16Measured(nil) {
		t.Error("BF16Measured wrong")
	}
	if back.Int8 != nil || back.Int8Measured([]int{1}) || bytes.Contains(b, []byte("Int8")) {
		t.Errorf("peaks without INT8 read back as %+v from %s", back, b)
	}
	p.Int8, p.Int8Route = map[int]float64{1: 600, 2: 1200}, "VPDPBUSD"
	b, _ = json.Marshal(p)
	back = Peaks{}
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, p) || !back.Int8Measured([]int{1, 2}) {
		t.Errorf("round trip of %s: %+v, %v", b, back, err)
	}
}

// TestWorkloadJSON: workloads reach torch_bench.py and the fresh process
// as JSON, so every field must survive the round trip.
func TestWorkloadJSON(t *testing.T) {
	all := Workloads(false)
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	var back []Workload
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(all, back) {
		t.Error("workloads changed in a JSON round trip")
	}
	for _, field := range []string{`"mem_bound_bytes":732160000`, `"kind":"dlrm_bag_bwd_sgd_bf16"`, `"images":16`, `"samples":2048`, `"kind":"dlrm_infer_frozen"`, `"warmup_calls":2`, `"bound":"footprint"`, `"kind":"resnet50_infer_frozen"`,
		`"fp32_row":"resnet50 frozen graph infer bs1 224² vs torch jit.freeze"`} {
		if !bytes.Contains(b, []byte(field)) {
			t.Errorf("JSON lacks %s", field)
		}
	}
}

func TestResNet50Flops(t *testing.T) {
	fwd, train := ResNet50Flops(224)
	var want float64
	for _, c := range ResNet50Convs() {
		want += float64(c.Uses) * c.Dims(1).Flops()
	}
	want += 2 * 2048 * 1000
	if fwd != want {
		t.Errorf("forward %v flops, the convolution table and fc give %v", fwd, want)
	}
	// The usual figure: about 4.1 G multiply-adds.
	if fwd < 8.1e9 || fwd > 8.3e9 {
		t.Errorf("forward %.3g flops, want about 8.2e9", fwd)
	}
	if stem := ResNet50Convs()[0].Dims(1).Flops(); train != 3*fwd-stem {
		t.Errorf("train %v flops, want 3×forward − conv1 = %v", train, 3*fwd-stem)
	}
	if small, _ := ResNet50Flops(32); !(small > 0 && small < fwd/40) {
		t.Errorf("forward at 32² %v flops", small)
	}
}

func TestResNet50Convs(t *testing.T) {
	convs := ResNet50Convs()
	if len(convs) != 23 {
		t.Fatalf("%d distinct convolutions, want 23", len(convs))
	}
	uses := 0
	for _, c := range convs {
		uses += c.Uses
	}
	if uses != 53 { // resnet50 has 53 convolutions (49 in blocks, 4 downsamples)
		t.Errorf("%d uses in all, want 53", uses)
	}
	// The stem halves 224 to 112 (then the max-pool halves it to 56).
	if oh, _ := convs[0].Dims(1).OutHW(); oh != 112 {
		t.Errorf("conv1 output %d, want 112", oh)
	}
}

// tinyWorkloads returns one small workload of every kind, for tests that
// run them.
func tinyWorkloads() []Workload {
	conv := ConvDims{N: 2, C: 3, H: 9, W: 7, O: 5, K: 3, Stride: 2, Pad: 1}
	return []Workload{
		{Name: "gemm", Kind: KindGemm, Dims: []int{5, 7, 3}},
		{Name: "gemm bf16", Kind: KindGemmBF16, Dims: []int{5, 7, 3}},
		{Name: "conv fwd", Kind: KindConvFwd, Dims: conv.dims()},
		{Name: "conv bwd data", Kind: KindConvBwdData, Dims: conv.dims()},
		{Name: "conv bwd weight", Kind: KindConvBwdWeight, Dims: conv.dims()},
		{Name: "conv 1x1", Kind: KindConvFwd, Dims: ConvDims{N: 2, C: 4, H: 3, W: 3, O: 2, K: 1, Stride: 1}.dims()},
		{Name: "relu", Kind: KindReLU, Dims: []int{37}},
		{Name: "gelu", Kind: KindGELU, Dims: []int{37}},
		{Name: "add", Kind: KindAdd, Dims: []int{37}},
		{Name: "softmax", Kind: KindSoftmax, Dims: []int{3, 11}},
		{Name: "batchnorm", Kind: KindBatchNorm, Dims: []int{2, 3, 4, 5}},
		{Name: "layernorm", Kind: KindLayerNorm, Dims: []int{3, 8}},
		{Name: "sgd", Kind: KindSGD, Dims: []int{37}},
		{Name: "resnet50 infer", Kind: KindResNet50Infer, Dims: []int{2, tinyImage}, WarmUpCalls: 2},
		{Name: "resnet50 infer frozen", Kind: KindResNet50InferFrozen, Dims: []int{1, tinyImage}, WarmUpCalls: 2},
		{Name: "resnet50 train", Kind: KindResNet50Train, Dims: []int{2, tinyImage}, WarmUpCalls: 2},
		{Name: "resnet50 bf16 infer", Kind: KindResNet50InferBF16, Dims: []int{2, tinyImage}, WarmUpCalls: 1, Runs: 1},
		{Name: "resnet50 bf16 frozen graph", Kind: KindResNet50GraphBF16, Dims: []int{2, tinyImage}, WarmUpCalls: 2, Runs: 1},
		{Name: "resnet50 bf16 train", Kind: KindResNet50TrainBF16, Dims: []int{2, tinyImage}, WarmUpCalls: 1, Runs: 1},
		{Name: "gemm int8", Kind: KindGemmInt8, Dims: []int{5, 7, 3}},
		{Name: "gemm int8 tail", Kind: KindGemmInt8, Dims: []int{13, 33, 9}}, // past a 12-row strip, a 32-channel panel and two 4-depth groups
		{Name: "resnet50 int8 frozen graph", Kind: KindResNet50GraphInt8, Dims: []int{2, tinyImage, 2, 1}, WarmUpCalls: 2},
		{Name: "resnet50 instances", Kind: KindResNet50Instances, Dims: []int{1, tinyImage, 1, 1}, WarmUpCalls: 2, KilnOnly: true},
		{Name: "resnet50 serve", Kind: KindResNet50Serve, Dims: []int{1, tinyImage, 3, 2}, WarmUpCalls: 2, KilnOnly: true},
		{Name: "dlrm train", Kind: KindDLRMTrain, Dims: tinyDLRM, WarmUpCalls: 2},
		{Name: "dlrm train fused", Kind: KindDLRMTrainFused, Dims: tinyDLRM, WarmUpCalls: 2},
		{Name: "dlrm bf16 train", Kind: KindDLRMTrainBF16, Dims: tinyDLRM, WarmUpCalls: 2},
		{Name: "dlrm infer", Kind: KindDLRMInfer, Dims: tinyDLRM, WarmUpCalls: 2},
		{Name: "dlrm infer frozen", Kind: KindDLRMInferFrozen, Dims: tinyDLRM, WarmUpCalls: 2},
		{Name: "dlrm bag fwd", Kind: KindDLRMBagFwd, Dims: tinyDLRM},
		{Name: "dlrm bf16 bag fwd", Kind: KindDLRMBagFwdBF16, Dims: tinyDLRM},
		{Name: "dlrm bag bwd", Kind: KindDLRMBagBwd, Dims: tinyDLRM},
		{Name: "dlrm bf16 bag bwd", Kind: KindDLRMBagBwdBF16, Dims: tinyDLRM},
		{Name: "dlrm interaction", Kind: KindDLRMInteraction, Dims: []int{5, 3, 8}},
		{Name: "dlrm bf16 interaction", Kind: KindDLRMInteractionBF16, Dims: []int{5, 3, 8}},
	}
}

// torchLacks are the kinds whose PyTorch side may be n/a: 1.13 has no
// bfloat16 nn.EmbeddingBag on the CPU.
var torchLacks = map[string]bool{KindDLRMBagFwdBF16: true, KindDLRMBagBwdBF16: true}

// tinyDLRM are the dims of the tiny DLRM rows: batch 5, 3 tables of 50
// rows, d 8 (the MLPs keep their hidden widths).
var tinyDLRM = []int{5, 3, 50, 8}

// tinyImage is the smallest image ResNet-50's stem takes (32 → 1×1 after
// layer4), which keeps the whole-model workloads fast in tests.
const tinyImage = 32

// tinyFootprint is a tiny peak-memory row: one training step.
var tinyFootprint = Workload{Name: "resnet50 train peak RSS", Kind: KindResNet50TrainMem, Dims: []int{2, tinyImage, 1}, Bound: Footprint}

// tinyDLRMFootprint is a tiny DLRM peak-memory row: two training steps.
var tinyDLRMFootprint = Workload{Name: "dlrm train peak RSS", Kind: KindDLRMTrainMem, Dims: append(slices.Clone(tinyDLRM), 2), Bound: Footprint}

func TestPrepareRunsEveryKind(t *testing.T) {
	t.Parallel() // the ResNet-50 kinds take a few seconds
	for _, w := range tinyWorkloads() {
		run, err := Prepare(w)
		if err != nil {
			t.Errorf("%s: %v", w.Name, err)
			continue
		}
		run()
		run() // twice: steps after the first (SGD momentum, cleared grads) take other paths
	}
	for _, w := range []Workload{
		{Name: "bad kind", Kind: "nope", Dims: []int{1}},
		{Name: "bad dims", Kind: KindGemm, Dims: []int{1, 2}},
		{Name: "zero dim", Kind: KindReLU, Dims: []int{0}},
		{Name: "resnet50 dims", Kind: KindResNet50Infer, Dims: []int{1}},
		{Name: "resnet50 int8 without calibration", Kind: KindResNet50GraphInt8, Dims: []int{1, tinyImage}},
		{Name: "resnet50 instances, too many cores", Kind: KindResNet50Instances, Dims: []int{1, tinyImage, 1 << 20, 1}},
		{Name: "resnet50 serve without clients", Kind: KindResNet50Serve, Dims: []int{1, tinyImage, 0, 1}},
		{Name: "dlrm without d", Kind: KindDLRMTrain, Dims: []int{2, 3, 50}},
		{Name: "dlrm zero tables", Kind: KindDLRMInferFrozen, Dims: []int{2, 0, 50, 8}},
		{Name: "dlrm bag bwd without d", Kind: KindDLRMBagBwd, Dims: []int{2, 3, 50}},
		{Name: "dlrm interaction with rows", Kind: KindDLRMInteraction, Dims: tinyDLRM},
		tinyFootprint, tinyDLRMFootprint, // measured by RunFresh, not timed
	} {
		if _, err := Prepare(w); err == nil {
			t.Errorf("%s: Prepare succeeded", w.Name)
		}
	}
}

// TestRunFresh measures a tiny peak-memory row in a fresh process (this
// test binary re-executed, see TestMain).
func TestRunFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ResNet-50 in a fresh process; skipped with -short")
	}
	t.Parallel()
	r := RunKiln(tinyFootprint, 5)
	if runtime.GOOS != "linux" {
		if !r.NA() || r.OK() {
			t.Errorf("off Linux: %+v, want n/a", r)
		}
		return
	}
	// ResNet-50's parameters alone are 100 MB; gradients and momentum
	// double and triple that.
	if !r.OK() || r.Name != tinyFootprint.Name || r.StartRSS <= 0 || r.PeakRSS < r.StartRSS+200<<20 {
		t.Errorf("fresh process: %+v", r)
	}
	// The tiny DLRM's split BF16 training in a fresh process.
	if r := RunKiln(tinyDLRMFootprint, 5); !r.OK() || r.Name != tinyDLRMFootprint.Name || r.StartRSS <= 0 || r.PeakRSS < r.StartRSS {
		t.Errorf("DLRM fresh process: %+v", r)
	}
	if r := footprint(Workload{Name: "short", Kind: KindDLRMTrainMem, Dims: tinyDLRM}); r.OK() || !strings.Contains(r.Error, "needs 5 dims") {
		t.Errorf("DLRM footprint without steps: %+v", r)
	}
	if _, err := procStatus("VmNope"); err == nil {
		t.Error("procStatus found a field that does not exist")
	}
}

func TestMeasure(t *testing.T) {
	calls := 0
	med, samples, inner := Measure(func() { calls++ }, 5)
	if len(samples) != 5 || !(med >= 0) || inner < 2 {
		t.Fatalf("fast call: median %v, %d samples, inner %d", med, len(samples), inner)
	}
	// Warm-up calls for WarmUp, then five samples of inner calls.
	if warm := calls - 5*inner; warm < 1 {
		t.Errorf("%d calls for 5 samples of %d: no warm-up", calls, inner)
	}
	calls = 0
	_, samples, inner = Measure(func() { calls++; time.Sleep(3 * time.Millisecond) }, 5)
	// Each call sleeps at least 3 ms, so warming up for 50 ms takes at
	// most 17 calls.
	if warm := calls - 5; inner != 1 || len(samples) != 5 || warm < 1 || warm > 17 {
		t.Errorf("slow call: inner %d, %d calls, %d samples; want 1, 6 to 22, 5", inner, calls, len(samples))
	}
	calls = 0
	_, samples, _ = MeasureWarm(func() { calls++; time.Sleep(30 * time.Millisecond) }, 2, 3)
	if calls != 5 || len(samples) != 2 {
		t.Errorf("30 ms call with 3 warm-up calls: %d calls, %d samples; want 5, 2", calls, len(samples))
	}
	// With a setup, only run is timed, each call after a setup call.
	setups, calls := 0, 0
	med, samples, _ = MeasureSetup(func() { setups++; time.Sleep(3 * time.Millisecond) }, func() { calls++ }, 3, 2)
	if setups != calls || calls < 3+2 || len(samples) != 3 || !(med < time.Millisecond.Seconds()) {
		t.Errorf("setup 3 ms, run nothing: median %v, %d setups, %d calls", med, setups, calls)
	}
	if m := Median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("Median = %v, want 2.5", m)
	}
}

func TestTable(t *testing.T) {
	w := Workload{Name: "gemm 2×2×2", Group: "G", Kind: KindGemm, Flops: 2e9, Bound: Compute}
	m := Workload{Name: "relu 1M", Group: "E", Kind: KindReLU, Bytes: 1e9, Bound: Memory}
	peaks := Peaks{FMA: map[int]float64{1: 100}, Copy: map[int]float64{1: 20}}
	rows := []Row{
		{Workload: w, Threads: 1, Kiln: Result{Median: 0.1}, Torch: Result{Median: 0.05}, KilnOK: true, TorchOK: true},
		{Workload: m, Threads: 1, Kiln: Result{Median: 0.1}, Torch: Result{Median: 0.2}, KilnOK: true, TorchOK: true},
		{Workload: m, Threads: 2, Kiln: Result{Error: "boom"}, Torch: Result{Median: 0.2}, TorchOK: true},
	}
	model := Workload{Name: "resnet50 infer bs16", Group: "ResNet-50", Kind: KindResNet50Infer, Dims: []int{16, 224},
		Flops: 16e9, Bound: Compute, Images: 16}
	dlrm := Workload{Name: "dlrm infer bs128", Group: "DLRM", Kind: KindDLRMInfer, Dims: []int{128, 26, 100_000, 64},
		Flops: 1e9, Bound: Compute, Samples: 128}
	mem := Workload{Name: "resnet50 peak RSS", Group: "ResNet-50", Kind: KindResNet50TrainMem, Bound: Footprint}
	dlrmMem := Workload{Name: "dlrm peak RSS", Group: "DLRM", Kind: KindDLRMTrainMem, Bound: Footprint, MemBound: 700 << 20}
	rows = append(rows,
		Row{Workload: model, Threads: 1, Kiln: Result{Median: 0.5}, Torch: Result{Median: 0.4}, KilnOK: true, TorchOK: true},
		Row{Workload: mem, Threads: 1, Kiln: Result{PeakRSS: 3 << 30, StartRSS: 20 << 20}, Torch: Result{PeakRSS: 2 << 30, StartRSS: 300 << 20}, KilnOK: true, TorchOK: true},
		Row{Workload: mem, Threads: 2, Kiln: Result{Error: naPrefix + "not Linux"}, Torch: Result{PeakRSS: 2 << 30}, TorchOK: true},
		Row{Workload: dlrm, Threads: 1, Kiln: Result{Median: 0.01}, Torch: Result{Median: 0.02}, KilnOK: true, TorchOK: true},
		Row{Workload: dlrmMem, Threads: 1, Kiln: Result{PeakRSS: 1070 << 20, StartRSS: 20 << 20}, Torch: Result{PeakRSS: 1400 << 20, StartRSS: 300 << 20}, KilnOK: true, TorchOK: true},
	)
	if r := rows[4].MemoryRatio(); r != 1.5 || !math.IsNaN(rows[4].Ratio()) || !math.IsNaN(rows[3].MemoryRatio()) {
		t.Errorf("memory row: memory ratio %v, speed ratio %v; model row memory ratio %v", r, rows[4].Ratio(), rows[3].MemoryRatio())
	}
	if r := rows[0].Ratio(); r != 0.5 {
		t.Errorf("ratio %v, want 0.5 (Kiln twice as slow)", r)
	}
	if !math.IsNaN(rows[2].Ratio()) {
		t.Errorf("ratio with a failed side = %v, want NaN", rows[2].Ratio())
	}
	tab := Table(rows, peaks)
	for _, want := range []string{
		"| gemm 2×2×2 | 1 | 100 ms | 20 GFLOP/s | 50 ms | 40 GFLOP/s | 0.50× | 20.0% | 40.0% |",
		"| relu 1M | 1 | 100 ms | 10 GB/s | 200 ms | 5 GB/s | 2.00× | 50.0% | 25.0% |",
		"| relu 1M | 2 | error | — | 200 ms | 5 GB/s | — | — | — |",
		"| resnet50 infer bs16 | 1 | 500 ms | 32 img/s, 32 GFLOP/s | 400 ms | 40 img/s, 40 GFLOP/s | 0.80× | 32.0% | 40.0% |",
		"| resnet50 peak RSS | 1 | 3.00 GiB | 20 MiB at start | 2.00 GiB | 300 MiB at start | 1.50× memory (lower is better) | — | — |",
		"| resnet50 peak RSS | 2 | n/a | — | 2.00 GiB | 0 MiB at start | — | — | — |",
		"| **DLRM** |",
		"| dlrm peak RSS | 1 | 1.04 GiB | 20 MiB at start; +1.03 GiB, 1.50× the 700 MiB bound | 1.37 GiB | 300 MiB at start; +1.07 GiB, 1.57× the 700 MiB bound | 0.76× memory (lower is better) | — | — |",
		"| dlrm infer bs128 | 1 | 10 ms | 12800 samples/s, 100 GFLOP/s | 20 ms | 6400 samples/s, 50 GFLOP/s | 2.00× | 100.0% | 50.0% |",
		"| **G** |", "| **E** |",
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	// A BF16 row's % peak is of the BF16 peak where measured, else of
	// the FMA peak; BF16Speedups sets it beside its FP32 row.
	bw := Workload{Name: "gemm bf16 2×2×2", Group: "G", Kind: KindGemmBF16, Flops: 2e9, Bound: Compute, FP32Row: w.Name}
	bf := Row{Workload: bw, Threads: 1, Kiln: Result{Median: 0.04}, Torch: Result{Median: 0.2}, KilnOK: true, TorchOK: true}
	// The BF16 GEMM's is of the AMX peak where that was measured.
	for _, c := range []struct {
		bf16, amx map[int]float64
		want      string
	}{
		{nil, nil, "| gemm bf16 2×2×2 | 1 | 40 ms | 50 GFLOP/s | 200 ms | 10 GFLOP/s | 5.00× | 50.0% | 10.0% |"},
		{map[int]float64{1: 0}, map[int]float64{1: 0}, "| gemm bf16 2×2×2 | 1 | 40 ms | 50 GFLOP/s | 200 ms | 10 GFLOP/s | 5.00× | 50.0% | 10.0% |"},
		{map[int]float64{1: 400}, nil, "| gemm bf16 2×2×2 | 1 | 40 ms | 50 GFLOP/s | 200 ms | 10 GFLOP/s | 5.00× | 12.5% | 2.5% |"},
		{map[int]float64{1: 400}, map[int]float64{1: 1000}, "| gemm bf16 2×2×2 | 1 | 40 ms | 50 GFLOP/s | 200 ms | 10 GFLOP/s | 5.00× | 5.0% | 1.0% |"},
	} {
		p := peaks
		p.BF16, p.AMX = c.bf16, c.amx
		if tab := Table([]Row{rows[0], bf}, p); !strings.Contains(tab, c.want) || !strings.Contains(tab, "| gemm 2×2×2 | 1 | 100 ms | 20 GFLOP/s | 50 ms | 40 GFLOP/s | 0.50× | 20.0% | 40.0% |") {
			t.Errorf("BF16 peak %v: table lacks %q or the FP32 row's FMA percentages:\n%s", c.bf16, c.want, tab)
		}
	}
	if s := Speedups(rows, []int{1, 2}, PrecisionBF16); s != "" {
		t.Errorf("Speedups without BF16 rows = %q", s)
	}
	bf2 := bf
	bf2.Threads = 2 // no FP32 row at 2 threads
	sp := Speedups(append([]Row{bf, bf2}, rows...), []int{1, 2}, PrecisionBF16)
	if want := "| gemm bf16 2×2×2 | gemm 2×2×2 | 2.50× (FP32 100 ms, BF16 40 ms) | — |"; !strings.Contains(sp, want) {
		t.Errorf("Speedups lacks %q:\n%s", want, sp)
	}
	if q := Speedup(bf, rows[0]); q != 2.5 {
		t.Errorf("Speedup = %v, want 2.5", q)
	}
	if q := Speedup(bf, rows[2]); !math.IsNaN(q) {
		t.Errorf("Speedup with a failed FP32 row = %v, want NaN", q)
	}

	// An INT8 row reports GOP/s against the INT8 peak (none where it was
	// not measured: no float32 ceiling applies), and sets beside its FP32
	// row in its own section; one without an FP32 row is left out there.
	iw := Workload{Name: "gemm int8 2×2×2", Group: "G8", Kind: KindGemmInt8, Flops: 2e9, Bound: Compute, FP32Row: w.Name}
	i8 := Row{Workload: iw, Threads: 1, Kiln: Result{Median: 0.01}, Torch: Result{Median: 0.02}, KilnOK: true, TorchOK: true}
	lone := i8
	lone.Workload.Name, lone.Workload.FP32Row = "gemm int8 4×4×4", ""
	p := peaks
	p.Int8 = map[int]float64{1: 800}
	if tab, want := Table([]Row{i8}, p), "| gemm int8 2×2×2 | 1 | 10 ms | 200 GOP/s | 20 ms | 100 GOP/s | 2.00× | 25.0% | 12.5% |"; !strings.Contains(tab, want) {
		t.Errorf("table lacks %q:\n%s", want, tab)
	}
	if tab, want := Table([]Row{i8}, peaks), "| gemm int8 2×2×2 | 1 | 10 ms | 200 GOP/s | 20 ms | 100 GOP/s | 2.00× | — | — |"; !strings.Contains(tab, want) {
		t.Errorf("without an INT8 peak, table lacks %q:\n%s", want, tab)
	}
	sp = Speedups(append([]Row{i8, lone, bf}, rows...), []int{1}, PrecisionInt8)
	if want := "| INT8 row | Kiln FP32 row | 1 thread(s) |\n|---|---|--:|\n| gemm int8 2×2×2 | gemm 2×2×2 | 10× (FP32 100 ms, INT8 10 ms) |\n"; !strings.HasSuffix(sp, want) || strings.Contains(sp, "bf16") || strings.Contains(sp, lone.Workload.Name) {
		t.Errorf("INT8 speedups are not exactly %q:\n%s", want, sp)
	}

	sum := Summary(rows, []int{1, 2})
	for _, want := range []string{"| G | 0.50× (1 rows) | — |", "| E | 2.00× (1 rows) | — |", "| ResNet-50 | 0.80× (1 rows) | — |"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

const python = "/usr/bin/python3"

// runPython runs a Python command for a test that compares with PyTorch
// and returns its stdout. It skips the test when the reference is not
// installed (`make bench-deps`) or with -short: importing torch takes a
// few seconds, so these tests run in parallel.
func runPython(t *testing.T, stdin []byte, env []string, args ...string) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PyTorch; skipped with -short")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	t.Parallel()
	cmd := exec.Command(python, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if strings.Contains(stderr.String(), "ModuleNotFoundError") {
			t.Skipf("%s lacks a module (make bench-deps): %s", python, lastLine(stderr.String()))
		}
		t.Fatalf("%s: %v\n%s", python, err, stderr.String())
	}
	return out
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// TestTorchScriptRunsEveryKind serves the tiny workloads with the embedded
// torch_bench.py, so the two sides agree on every kind and on the protocol.
func TestTorchScriptRunsEveryKind(t *testing.T) {
	script := filepath.Join(t.TempDir(), "torch_bench.py")
	if err := os.WriteFile(script, TorchScript, 0o644); err != nil {
		t.Fatal(err)
	}
	ws := slices.DeleteFunc(append(tinyWorkloads(), tinyFootprint, tinyDLRMFootprint), func(w Workload) bool { return w.KilnOnly })
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, w := range ws {
		enc.Encode(w)
	}
	out := runPython(t, in.Bytes(), []string{"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1"}, script, "--threads", "1", "--runs", "1")
	dec := json.NewDecoder(bytes.NewReader(out))
	var rep Report
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("header: %v\n%s", err, out)
	}
	if rep.Side != "pytorch" || rep.Threads != 1 {
		t.Fatalf("header side %q threads %d, want pytorch, 1", rep.Side, rep.Threads)
	}
	for range ws {
		var r Result
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("result %d: %v\n%s", len(rep.Results), err, out)
		}
		rep.Results = append(rep.Results, r)
	}
	for i, r := range rep.Results {
		w := ws[i]
		switch {
		case strings.HasPrefix(w.Kind, "resnet50_") && rep.Info["torchvision"] == "":
			if !strings.Contains(r.Error, "torchvision") {
				t.Errorf("result %d without torchvision: %+v", i, r)
			}
		case torchLacks[w.Kind] && r.NA():
			if !strings.Contains(r.Error, "bfloat16") {
				t.Errorf("result %d: n/a without the reason: %+v", i, r)
			}
		case w.Bound == Footprint:
			// ResNet-50's training takes 200 MiB more than the start;
			// the tiny DLRM hardly any.
			least := int64(200 << 20)
			if w.Kind == KindDLRMTrainMem {
				least = 0
			}
			if r.Name != w.Name || r.Error != "" || r.StartRSS <= 0 || r.PeakRSS < r.StartRSS+least {
				t.Errorf("footprint result %d: %+v", i, r)
			}
		case r.Name != w.Name || r.Error != "" || !(r.Median > 0) || len(r.Samples) != 1:
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if rep.Info["torch"] == "" || rep.Info["blas"] == "" {
		t.Errorf("info lacks torch or blas: %v", rep.Info)
	}
}

// TestDLRMMatchesTorch checks torch_bench.py's DLRM_Net against Kiln's
// DLRM: Kiln's weights and batch (tiny dims) load into the transcription,
// which must give the same probabilities eager and frozen, the same
// losses over three training steps and the same probabilities after
// them.
func TestDLRMMatchesTorch(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "torch_bench.py"), TorchScript, 0o644); err != nil {
		t.Fatal(err)
	}
	d := []int{6, 3, 50, 8}
	s, err := newDLRMBatch(d)
	if err != nil {
		t.Fatal(err)
	}
	type param struct {
		Shape []int     `json:"shape"`
		Data  []float32 `json:"data"`
	}
	in := struct {
		Dims   []int            `json:"dims"`
		Params map[string]param `json:"params"`
		Dense  []float32        `json:"dense"`
		Idx    []int64          `json:"idx"`
		Labels []float32        `json:"labels"`
	}{Dims: d, Params: map[string]param{}, Dense: s.dense.Float32s(), Idx: s.idx.Int64s(), Labels: s.labels.Float32s()}
	for _, p := range nn.NamedParameters(s.m) {
		in.Params[p.Name] = param{p.Tensor.Shape(), slices.Clone(p.Tensor.Float32s())}
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const prog = `
import json, sys, warnings, torch
sys.path.insert(0, sys.argv[1])
import torch_bench as tb
d = json.load(sys.stdin)
B, T, R, D = d["dims"]
model, dense, lS_o, lS_i, labels = tb.dlrm_input(B, T, R, D)
model.load_state_dict({k: torch.tensor(v["data"], dtype=torch.float32).view(v["shape"]) for k, v in d["params"].items()})
dense = torch.tensor(d["dense"], dtype=torch.float32).view(B, -1)
lS_i = torch.tensor(d["idx"]).view(B, T).t().contiguous()
labels = torch.tensor(d["labels"], dtype=torch.float32).view(B, 1)
model.eval()
with torch.no_grad(), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    out = model(dense, lS_o, lS_i)
    frozen = torch.jit.freeze(torch.jit.trace(model, (dense, lS_o, lS_i)))(dense, lS_o, lS_i)
model.train()
opt = torch.optim.SGD(model.parameters(), lr=tb.DLRM_LR)
loss_fn = torch.nn.BCELoss()
losses = []
for _ in range(3):
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(dense, lS_o, lS_i), labels)
    loss.backward()
    opt.step()
    losses.append(loss.item())
model.eval()
with torch.no_grad():
    after = model(dense, lS_o, lS_i)
print(json.dumps({"out": out.flatten().tolist(), "frozen": frozen.flatten().tolist(), "losses": losses,
                  "after": after.flatten().tolist(), "sparse": model.emb_l[0].weight.grad.is_sparse}))
`
	out := runPython(t, stdin, []string{"OMP_NUM_THREADS=1"}, "-c", prog, dir)
	var got struct {
		Out, Frozen, Losses, After []float64
		Sparse                     bool
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !got.Sparse {
		t.Error("PyTorch's table gradients are not sparse")
	}
	near := func(what string, got []float64, want []float32) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d values from PyTorch, %d from Kiln", what, len(got), len(want))
		}
		for i := range got {
			if math.Abs(got[i]-float64(want[i])) > 1e-5 {
				t.Errorf("%s[%d]: PyTorch %v, Kiln %v", what, i, got[i], want[i])
			}
		}
	}
	indices, offsets := s.bags()
	nn.Eval(s.m)
	want := s.m.Forward(autograd.NoGrad(s.dense), indices, offsets).Float32s()
	near("eager", got.Out, want)
	near("frozen", got.Frozen, want)
	nn.Train(s.m, true)
	opt, err := optim.NewSGD(nn.Parameters(s.m), optim.SGDOptions{LR: DLRMLR})
	if err != nil {
		t.Fatal(err)
	}
	var losses []float32
	for range 3 {
		opt.ZeroGrad()
		l := autograd.BCELoss(s.m.Forward(s.dense, indices, offsets), s.labels, autograd.ReductionMean)
		l.Backward()
		opt.Step()
		losses = append(losses, l.Float32s()[0])
	}
	near("losses", got.Losses, losses)
	nn.Eval(s.m)
	near("after 3 steps", got.After, s.m.Forward(autograd.NoGrad(s.dense), indices, offsets).Float32s())
}

// TestResNet50ConvsMatchTorchvision collects the convolutions of
// torchvision's resnet50 with forward hooks and compares the distinct
// shapes and their use counts with ResNet50Convs.
func TestResNet50ConvsMatchTorchvision(t *testing.T) {
	const prog = `
import json, torch, torchvision
m = torchvision.models.resnet50().eval()
seen = []
def hook(mod, inp, out):
    seen.append([mod.in_channels, mod.out_channels, mod.kernel_size[0], mod.stride[0], mod.padding[0], inp[0].shape[2], inp[0].shape[3]])
for mod in m.modules():
    if isinstance(mod, torch.nn.Conv2d):
        assert mod.groups == 1 and mod.dilation == (1, 1) and mod.bias is None
        mod.register_forward_hook(hook)
with torch.no_grad():
    m(torch.zeros(1, 3, 224, 224))
print(json.dumps(seen))
`
	out := runPython(t, nil, nil, "-c", prog)
	var seen [][7]int
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatal(err)
	}
	got := map[[7]int]int{}
	for _, s := range seen {
		got[s]++
	}
	want := map[[7]int]int{}
	for _, c := range ResNet50Convs() {
		want[[7]int{c.C, c.O, c.K, c.Stride, c.Pad, c.H, c.W}] = c.Uses
	}
	if len(got) != len(want) {
		t.Errorf("torchvision has %d distinct shapes, the table %d", len(got), len(want))
	}
	for s, n := range want {
		if got[s] != n {
			t.Errorf("shape C,O,K,stride,pad,H,W = %v: torchvision uses it %d times, the table says %d", s, got[s], n)
		}
	}
}

// BenchmarkKiln runs the -quick workloads as Go benchmarks, reporting
// GFLOP/s or GB/s. `make bench` gives the full comparison with PyTorch.
func BenchmarkKiln(b *testing.B) {
	for _, w := range Workloads(true) {
		if w.Kind == KindResNet50InferFrozen {
			continue // the Kiln side of the resnet50_infer row again
		}
		b.Run(strings.ReplaceAll(w.Name, " ", "_"), func(b *testing.B) {
			run, err := Prepare(w)
			if err != nil {
				b.Fatal(err)
			}
			run()
			for b.Loop() {
				run()
			}
			per := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(Rate(w, per), rateUnit(w))
		})
	}
}

// TestRuntimeRows: the instance rows run at 2 threads only, Kiln only, the
// two-instance row against the one-instance row; and the Kiln ÷ Kiln
// table sets their image rates side by side.
func TestRuntimeRows(t *testing.T) {
	var rt []Workload
	for _, w := range Workloads(false) {
		if w.Kind == KindResNet50Instances {
			rt = append(rt, w)
		}
	}
	if len(rt) != 2 || rt[1].Baseline != rt[0].Name || rt[0].Baseline != "" {
		t.Fatalf("runtime rows %+v", rt)
	}
	for _, w := range rt {
		in, cores := w.Dims[2], w.Dims[3]
		if !w.KilnOnly || w.Threads != in*cores || w.Images != in || !w.RunsAt(2) || w.RunsAt(1) || w.Quick {
			t.Errorf("%s: %+v", w.Name, w)
		}
	}
	rows := []Row{
		{Workload: rt[0], Threads: 2, Kiln: Result{Median: 0.050}, KilnOK: true},
		{Workload: rt[1], Threads: 2, Kiln: Result{Median: 0.080}, KilnOK: true},
	}
	table := Against(rows, []int{1, 2})
	for _, want := range []string{rt[1].Name, "| — |", "1.25× (25 vs 20 img/s)"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if Against(rows[:1], []int{2}) != "" {
		t.Error("a table without rows naming a baseline")
	}
	// The serve rows name the in-process frozen-graph rows of their batch.
	names := map[string]Workload{}
	for _, w := range Workloads(false) {
		names[w.Name] = w
	}
	serves := 0
	for _, w := range Workloads(false) {
		if w.Kind != KindResNet50Serve {
			continue
		}
		serves++
		base, ok := names[w.Baseline]
		if !ok || base.Kind != KindResNet50Graph || base.Dims[0] != w.Dims[0] || !w.KilnOnly || w.Images != w.Dims[0]*w.Dims[2] {
			t.Errorf("%s: baseline %q (%+v)", w.Name, w.Baseline, base)
		}
	}
	if serves != 3 {
		t.Errorf("%d serve rows, want 3", serves)
	}
}

// A serving row reports its requests' latency percentiles: three clients'
// requests of every timed call.
func TestServeLatencies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a frozen ResNet-50; skipped with -short")
	}
	t.Parallel()
	w := Workload{Name: "resnet50 serve", Kind: KindResNet50Serve, Dims: []int{1, tinyImage, 3, 2}, WarmUpCalls: 1, KilnOnly: true}
	r := RunKiln(w, 3)
	if !r.OK() || !(r.P50 > 0) || r.P99 < r.P50 || r.P99 > 100*r.Median {
		t.Errorf("%+v: want request latencies 0 < p50 ≤ p99", r)
	}
	rows := []Row{{Workload: w, Threads: 2, Kiln: r, KilnOK: true}}
	base := Workload{Name: "base", Images: 1}
	rows[0].Workload.Baseline, rows[0].Workload.Images = "base", 3
	rows = append(rows, Row{Workload: base, Threads: 2, Kiln: Result{Median: r.Median}, KilnOK: true})
	if tab := Against(rows, []int{2}); !strings.Contains(tab, "request p50") || !strings.Contains(tab, "p99") {
		t.Errorf("the table shows no latencies:\n%s", tab)
	}
}

func TestScaling(t *testing.T) {
	train := Workload{Name: "resnet50 train", Kind: KindResNet50Train}
	graph := Workload{Name: "resnet50 frozen graph", Kind: KindResNet50Graph}
	gemm := Workload{Name: "gemm", Kind: KindGemm}
	row := func(w Workload, threads int, median float64) Row {
		return Row{Workload: w, Threads: threads, Kiln: Result{Median: median}, KilnOK: median > 0}
	}
	rows := []Row{row(train, 1, 4), row(train, 2, 2.5), row(train, 4, 1), row(graph, 1, 1), row(graph, 2, 0), row(gemm, 1, 1), row(gemm, 2, 1)}
	got := Scaling(rows, []int{1, 2, 4})
	for _, want := range []string{"| resnet50 train | 1.60× (80% of 2×) | 4.00× (100% of 4×) |", "| resnet50 frozen graph | — | — |"} {
		if !strings.Contains(got, want) {
			t.Errorf("Scaling table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "gemm") {
		t.Errorf("a GEMM row in the scaling table:\n%s", got)
	}
	if Scaling(rows, []int{2, 4}) != "" || Scaling(rows[5:], []int{1, 2}) != "" {
		t.Error("a scaling table without 1-thread ResNet-50 rows")
	}
}
