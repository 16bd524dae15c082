package quant

import "slices"

// The op kinds the default recipe treats alike, by IPEX name.
var (
	eltwiseOps = []string{"relu", "sigmoid", "gelu"}
	inplaceOps = []string{"relu_", "add_"}
	layerOps   = []string{"conv2d", "conv3d", "linear"}
	poolOps    = []string{"max_pool2d", "adaptive_avg_pool2d"}
)

// defaultRecipe decides, as IPEX 1.10's default recipe does rule for rule,
// where a calibrated graph quantizes: every op starts with all its inputs
// and outputs quantized (a Quantize→Dequantize pair on each), and then
//
//   - a value read by a recorded op is quantized once, at the reader: the
//     producer's output pair goes (unless the producer is an in-place op
//     or the reader is one and the producer no layer);
//   - a relu, sigmoid or gelu after a convolution, linear layer or add
//     reads it unquantized, so the pair fuses into the layer's epilogue;
//   - an add quantizes neither input unless a layer made one, and then
//     the first input a layer made stays float32 (conv+sum);
//   - a flatten after a pool takes the pool's parameters, and an op after
//     a flatten the flatten's;
//   - add, linear, conv2d and matmul results are never quantized, and a
//     flatten whose input and output are both quantized quantizes
//     neither.
//
// Entries are matched by flow names, so a loaded conf with IPEX's dropout
// entries is treated as IPEX treats it.
func defaultRecipe(ops []OpConf) {
	for cur := range ops {
		op := &ops[cur]
		if op.Name == "dropout" {
			continue
		}
		// addInputs[i] is the op that made input i of an add, in input
		// order.
		var addInputs []string
		var addMade []int
		for i, in := range op.InputsFlow {
			for pre := range ops[:cur] {
				p := &ops[pre]
				for o, out := range p.OutputsFlow {
					if out != in {
						continue
					}
					if !slices.Contains(inplaceOps, op.Name) || slices.Contains(layerOps, p.Name) {
						if !slices.Contains(inplaceOps, p.Name) && p.Name != "dropout" {
							p.OutputsQuantized[o] = false
						}
					}
					if slices.Contains(eltwiseOps, op.Name) && (slices.Contains(layerOps, p.Name) || p.Name == "add") {
						op.InputsQuantized[i] = false
					}
					if op.Name == "add" {
						addInputs = append(addInputs, p.Name)
						addMade = append(addMade, i)
					}
					if op.Name == "flatten" && slices.Contains(poolOps, p.Name) {
						op.InputScales[i], op.InputZeroPoints[i] = p.OutputScales[o], p.OutputZeroPoints[o]
						op.OutputScales[i], op.OutputZeroPoints[i] = p.OutputScales[o], p.OutputZeroPoints[o]
					}
					if p.Name == "flatten" {
						op.InputScales[i], op.InputZeroPoints[i] = p.OutputScales[o], p.OutputZeroPoints[o]
					}
				}
			}
		}
		for k, name := range addInputs {
			if slices.Contains(layerOps, name) {
				op.InputsQuantized[addMade[k]] = false
				break
			}
		}
		if op.Name == "add" && !slices.ContainsFunc(addInputs, func(n string) bool { return slices.Contains(layerOps, n) }) {
			op.InputsQuantized[0], op.InputsQuantized[1] = false, false
		}
	}
	for i := range ops {
		op := &ops[i]
		switch op.Name {
		case "add", "linear", "conv2d", "matmul":
			op.OutputsQuantized[0] = false
		case "flatten":
			if op.InputsQuantized[0] && op.OutputsQuantized[0] {
				op.InputsQuantized[0], op.OutputsQuantized[0] = false, false
			}
		}
	}
}
