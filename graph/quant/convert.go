package quant

import (
	"errors"
	"fmt"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
)

// Convert returns the int8 graph of g, a float32 graph (traced, frozen or
// loaded), quantized as conf says: g is prepared as Prepare does, conf is
// checked against the ops it records, and then
//
//   - each input the conf quantizes reads through a Quantize→Dequantize
//     pair with the input's scale and zero point, made for its reader;
//   - each output it quantizes is written through such a pair, which
//     every reader then reads;
//   - the weight of a convolution or linear layer whose input is
//     quantized goes through QuantizePerChannel→DequantizePerChannel with
//     the conf's weight scales (zero point 0, int8): quant.FakeQuant of
//     the weight;
//
// and the result is frozen: the weights' quantization folds into int8
// constants, their dequantization stays, and equal Quantize nodes merge.
// Freeze's int8 passes then run pools and Flatten on 8-bit values and
// make each Dequantize → layer → [Add] → [activation] → [Quantize] chain
// one int8 layer node ("Dequantize+Conv2d+Add+ReLU+Quantize") on the int8
// kernels. opts go to that Freeze: with graph.WithFusion(false) the
// result is the FakeQuant decomposition, the same model computed in
// float32 on dequantized values. g is not changed.
func Convert(g *graph.Graph, conf *Conf, opts ...graph.FreezeOption) (*graph.Graph, error) {
	if conf == nil {
		return nil, errors.New("quant.Convert: nil conf")
	}
	if len(conf.Ops) == 0 {
		return nil, errors.New("quant.Convert: the conf has no entries (calibrate with Prepare, Observe and Finish, or LoadConf)")
	}
	p, err := prepareGraph(g)
	if err != nil {
		return nil, fmt.Errorf("quant.Convert: %w", err)
	}
	ss := sites(p)
	if err := conf.match(p, ss); err != nil {
		return nil, fmt.Errorf("quant.Convert: %w", err)
	}
	var entries []*OpConf
	for i := range conf.Ops {
		if conf.Ops[i].Name != "dropout" {
			entries = append(entries, &conf.Ops[i])
		}
	}
	q := &inserter{g: p}
	nodes := p.Nodes
	p.Nodes = nil
	k := 0
	for i, n := range nodes {
		if k < len(ss) && ss[k].node == i {
			if err := q.quantizeSite(&n, ss[k], entries[k]); err != nil {
				return nil, fmt.Errorf("quant.Convert: entry %d (%s): %w", entries[k].ID, entries[k].Name, err)
			}
			k++
			continue
		}
		p.Nodes = append(p.Nodes, n)
	}
	out, err := graph.Freeze(p, opts...)
	if err != nil {
		return nil, fmt.Errorf("quant.Convert: %w", err)
	}
	return out, nil
}

// inserter adds quantization nodes to a graph whose node list it is
// rebuilding.
type inserter struct{ g *graph.Graph }

// quantizeSite appends node n, recorded as s with conf entry e, to the
// graph with the pairs e asks for around it.
func (q *inserter) quantizeSite(n *graph.Node, s site, e *OpConf) error {
	for j, v := range s.ins {
		if !e.InputsQuantized[j] {
			continue
		}
		dq, err := q.pair(v, e.InputScales[j], e.InputZeroPoints[j], e.InputQuantizedDtypes[j], n.Scope)
		if err != nil {
			return fmt.Errorf("input %d: %w", j, err)
		}
		// A layer's activation is its first operand; the other ops'
		// recorded inputs are all their operands, in order.
		n.Inputs[j] = dq
	}
	if s.weight != graph.None && e.InputsQuantized[0] {
		w, err := q.fakeQuantWeight(s.weight, e.WeightScales[0], n.Scope)
		if err != nil {
			return fmt.Errorf("weight: %w", err)
		}
		n.Inputs[1] = w
	}
	outs := make([]int, len(n.Outputs))
	copy(outs, n.Outputs)
	var after []func() error
	for j, v := range s.outs {
		if !e.OutputsQuantized[j] {
			continue
		}
		// The node writes a new value, and the pair writes the old one,
		// which the readers already read.
		raw := q.g.AddValue(graph.Value{Name: fmt.Sprintf("%%raw%d", len(q.g.Values)), Shape: q.g.Values[v].Shape,
			DType: q.g.Values[v].DType, Format: q.g.Values[v].Format})
		n.Outputs[j] = raw
		after = append(after, func() error {
			return q.pairInto(raw, v, e.OutputScales[j], e.OutputZeroPoints[j], e.OutputQuantizedDtypes[j], n.Scope)
		})
	}
	q.g.Nodes = append(q.g.Nodes, *n)
	for j, f := range after {
		if err := f(); err != nil {
			return fmt.Errorf("output %d: %w", j, err)
		}
	}
	return nil
}

// pair appends Quantize→Dequantize of value v and returns the
// dequantized value.
func (q *inserter) pair(v int, scale float64, zero int32, dtype, scope string) (int, error) {
	dq := q.g.AddValue(graph.Value{Name: fmt.Sprintf("%%dq%d", len(q.g.Values)), Shape: q.g.Values[v].Shape,
		DType: autograd.Float32, Format: q.g.Values[v].Format})
	return dq, q.pairInto(v, dq, scale, zero, dtype, scope)
}

// pairInto appends Quantize of value v and its Dequantize into value dq.
func (q *inserter) pairInto(v, dq int, scale float64, zero int32, dtype, scope string) error {
	dt, err := quantDType(dtype)
	if err != nil {
		return err
	}
	qa, err := graph.AttrsOf(autograd.QuantizeAttrs{Scale: scale, ZeroPoint: int(zero), DType: dtype})
	if err != nil {
		return err
	}
	da, err := graph.AttrsOf(autograd.DequantizeAttrs{Scale: scale, ZeroPoint: int(zero)})
	if err != nil {
		return err
	}
	val := q.g.Values[v]
	qv := q.g.AddValue(graph.Value{Name: fmt.Sprintf("%%q%d", len(q.g.Values)), Shape: val.Shape, DType: dt, Format: val.Format})
	q.g.Nodes = append(q.g.Nodes,
		graph.Node{Op: "Quantize", Inputs: []int{v}, Outputs: []int{qv}, Attrs: qa, Scope: scope},
		graph.Node{Op: "Dequantize", Inputs: []int{qv}, Outputs: []int{dq}, Attrs: da, Scope: scope})
	return nil
}

// fakeQuantWeight appends the per-channel int8 quantization of constant
// weight w with scales (one per output channel, or one for all) and its
// dequantization, and returns the dequantized value.
func (q *inserter) fakeQuantWeight(w int, scales []float64, scope string) (int, error) {
	val := q.g.Values[w]
	s := make([]float32, val.Shape[0])
	for c := range s {
		s[c] = float32(scales[min(c, len(scales)-1)])
	}
	sv := q.g.AddConst(fmt.Sprintf("%s.scales", val.Name), autograd.FromFloat32(s, len(s)))
	qa, err := graph.AttrsOf(autograd.QuantizePerChannelAttrs{Axis: 0, DType: "int8"})
	if err != nil {
		return 0, err
	}
	da, err := graph.AttrsOf(autograd.DequantizePerChannelAttrs{Axis: 0})
	if err != nil {
		return 0, err
	}
	qv := q.g.AddValue(graph.Value{Name: fmt.Sprintf("%%wq%d", len(q.g.Values)), Shape: val.Shape, DType: autograd.Int8, Format: val.Format})
	dq := q.g.AddValue(graph.Value{Name: fmt.Sprintf("%%wdq%d", len(q.g.Values)), Shape: val.Shape, DType: autograd.Float32, Format: val.Format})
	q.g.Nodes = append(q.g.Nodes,
		graph.Node{Op: "QuantizePerChannel", Inputs: []int{w, sv}, Outputs: []int{qv}, Attrs: qa, Scope: scope},
		graph.Node{Op: "DequantizePerChannel", Inputs: []int{qv, sv}, Outputs: []int{dq}, Attrs: da, Scope: scope})
	return dq, nil
}

// quantDType is the dtype a conf names.
func quantDType(s string) (autograd.DType, error) {
	switch s {
	case "uint8":
		return autograd.Uint8, nil
	case "int8":
		return autograd.Int8, nil
	}
	return 0, fmt.Errorf("%w: unknown quantized dtype %q", ErrConf, s)
}
