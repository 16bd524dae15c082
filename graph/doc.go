// Package graph turns a model into a frozen inference graph: Trace records
// the autograd ops a module's forward runs into a small typed IR, Freeze
// makes the parameters constants and folds what eval mode makes constant
// (batch norm into convolutions, dropout, identities), fusion passes merge
// common patterns into single ops, and a compiled plan runs the result with
// buffers assigned once. Graphs save to and load from one safetensors file,
// so a deployment needs no model code.
//
// The IR is deliberately plain: a Graph is a list of Values (shape, dtype,
// memory format) and a list of Nodes in execution order, each naming an op,
// its input and output values and typed attributes. Constants are values
// with data attached. g.String() prints it, fused ops under their fused
// names, as PyTorch's graph_for does.
//
// A model traced under autocast gives a BF16 graph: the convolutions and
// linear layers hold bfloat16 weights and values, and the fusions are the
// same, the float32 casts autocast and type promotion put before a norm,
// a softmax or a sum with a float32 tensor taken into the fused op.
// Program.Profile times every node of a compiled graph.
//
// A saved graph is untrusted input: Decode and Compile check every node
// against its op's definition (operand and result counts, attribute kinds
// and ranges, the shapes its operands give) and bound the memory a plan
// needs by a budget before they allocate anything the graph sizes, so a
// corrupt or hostile file fails with an error (a *NodeError naming the
// node, its scope and the field) rather than crashing the process.
//
// Every op runs on the same kernels as eager mode: the graph never grows a
// second implementation of an op.
package graph
