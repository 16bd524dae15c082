// Package bench measures Kiln and PyTorch on the same workloads: GEMM,
// the convolutions of ResNet-50, activations, softmax, normalisation
// layers and an optimizer step. It defines the workloads once; the Kiln
// side runs them in-process (Prepare), the PyTorch side runs them in
// torch_bench.py (embedded here as TorchScript), which reads the same
// workload list as JSON. The driver bench/cmd/kilnbench runs both at each
// thread count and prints one table; `make bench` is the way to call it.
package bench
