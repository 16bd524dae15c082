// Command kiln inspects, runs, benchmarks, quantizes and serves graphs
// saved by graph.Save.
//
// Usage:
//
//	kiln inspect FILE
//	kiln run FILE -i IN.npy [-i IN2.npy ...] [-o OUT.npy ...]
//	kiln bench FILE [--batch N] [--bag-size L] [--threads T] [--iters K] [--warmup W] [--profile]
//	kiln serve FILE [--addr HOST:PORT] [--instances N] [--max-batch B] [--max-wait D] [--max-body BYTES] [--timeout D]
//	kiln cpu [--levels]
//
// inspect prints the graph, one op per line, and its parameter count. run
// reads one .npy file per graph input, in the order of the graph's inputs
// (float32 for a bfloat16 input, int32 or int64 for an int64 one, such
// as a DLRM's indices and offsets), and writes one .npy file per output
// (out.npy when the graph has one output and no -o is given). bench runs the graph on random inputs of
// its input shapes with the first dimension set to the batch size (the
// indices of embedding-bag lookups uniform over each table's rows, L to a
// bag where the graph takes offsets) and prints latency percentiles and
// throughput; with --profile it then
// times every node and prints where the time goes, by node and by op.
// serve answers HTTP requests with the graph (POST /predict with a JSON or
// .npy body, GET /healthz, GET /metrics) until SIGTERM or SIGINT, after
// which it answers the requests in flight and exits (see package serve).
// cpu prints the CPU, the kernel variants in use and the instruction-set
// levels KILN_ISA can select on it.
//
// Flags may come before or after FILE. The exit status is 0 on success, 1
// when the command fails and 2 when it is used wrongly.
package main

import (
	"os"

	"github.com/kilnml/kiln/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
