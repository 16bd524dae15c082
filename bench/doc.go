// Package bench measures Kiln and PyTorch on the same workloads: GEMM,
// the convolutions of ResNet-50, activations, softmax, normalisation
// layers, an optimizer step, and whole-model ResNet-50 inference, training
// step and training peak memory, in float32 and, for the GEMM and the
// whole-model rows, in BF16 (each BF16 row names its float32 counterpart,
// Workload.FP32Row, and the report sets Kiln's two speeds side by side;
// its % peak is of the BF16 peak, kernels.MeasurePeakBF16, where the CPU
// has AVX512_BF16, and the BF16 GEMM's of the AMX peak,
// kernels.MeasurePeakAMX, where it has AMX) and INT8 (the GEMM and the frozen ResNet-50 graph
// against PyTorch's quantized linear and FX-quantized model, in GOP/s of
// the INT8 peak, kernels.MeasurePeakInt8; their FP32Row gives Kiln INT8
// ÷ Kiln FP32 likewise), and DLRM (dlrm's DLRM_Net on 26 tables of
// 100 000 rows: a training step with sparse table gradients, in float32
// and in split BF16 against PyTorch's autocast, eager and
// frozen-graph inference, in samples/s; the split-BF16 training's peak
// memory against issue 19's bound, MemBound; and its kernels, the
// merged lookup forward, its backward with the fused SGD step and the
// dot interaction, in float32 and BF16, in GB/s of the copy bandwidth;
// Kiln's DLRM rows run with the garbage collector's headroom that
// examples/dlrm sets, internal/gcheadroom).
// A row whose calls each need an untimed part first (a backward's
// forward) times only the rest (MeasureSetup). It defines the workloads once;
// the Kiln side runs them in-process (Prepare), the PyTorch side runs them in
// torch_bench.py (embedded here as TorchScript), which reads the same
// workload list as JSON. Peak-memory (Footprint) rows run in fresh
// processes on both sides (RunFresh, ServeFresh). The driver
// bench/cmd/kilnbench runs both at each thread count and prints one table;
// `make bench` is the way to call it.
package bench
