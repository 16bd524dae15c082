// Package serve answers HTTP requests with a frozen graph (graph.Save):
// the handler behind `kiln serve`, for Go programs that want the same
// server inside their own.
//
// POST /predict takes the graph's inputs and answers with its outputs,
// either as JSON,
//
//	{"inputs": [{"shape": [1, 4], "data": [0.5, 1, -2, 3]}]}
//	→ {"outputs": [{"name": "%7", "dtype": "float32", "shape": [1, 2], "data": [0.25, -1]}]}
//
// one object per graph input in order (float32 numbers feed float32 and
// bfloat16 inputs, integers int64 ones; "dtype" may be given and must fit),
// or, for a graph with one input, as a .npy body (Content-Type
// application/x-npy), answered as .npy when the request accepts
// application/x-npy and the graph has one output. NaN and infinities,
// which JSON lacks, travel as the strings "NaN", "Infinity" and
// "-Infinity".
//
// GET /healthz answers 200 "ok" while the server takes requests (503 once
// it is closing); GET /metrics gives request, error, batch-size and
// latency counts in Prometheus' text format.
//
// A request that cannot be read (malformed JSON or .npy, a body over the
// limit, wrong number of inputs, a dtype or rank that does not fit, a
// shape the graph cannot take) gets a 4xx status and a message naming the
// problem, and touches no other request. Requests wait at most
// Options.Timeout for their turn.
//
// With Options.MaxBatch above 1, requests that arrive together with the
// same shapes but for the first dimension are run as one batch, joined
// along the first dimension and split again, which amortises the graph's
// per-call costs at small batches; it is for graphs whose first dimension
// is the batch in every input and output (float inputs only, since index
// inputs such as an embedding bag's offsets cannot simply be joined), and
// a graph whose outputs turn out not to be is run one request at a time.
// A probe at New runs two random rows together and apart, and leaves
// batching off for a graph that mixes rows (a batch statistic, a product
// of the batch with itself), which would hand one request's numbers to
// another. Joined batches are padded with zero rows to a power of two.
//
// A compiled graph keeps a plan, with its memory, for every input shape it
// meets, and clients choose their batch sizes; an instance that has met
// 16 compiles the graph afresh, so no sequence of requests makes the
// server's memory grow without bound.
package serve
