package bench

import _ "embed"

// TorchScript is torch_bench.py, the PyTorch side of the benchmark,
// embedded so a built driver always runs the script of its own version.
//
//go:embed torch_bench.py
var TorchScript []byte
