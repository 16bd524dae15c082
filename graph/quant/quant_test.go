package quant_test

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/graph/quant"
	"github.com/kilnml/kiln/nn"
)

// resNet is a small residual CNN with every op calibration records: a
// stem convolution, ReLU and max pool, a block whose 3×3 branch is added
// to a stride-2 1×1 downsample, Add+ReLU, an adaptive average pool,
// flatten and a linear classifier.
type resNet struct {
	nn.Base
	stem, conv1, conv2, down *nn.Conv2d
	fc                       *nn.Linear
}

func newResNet(g *autograd.Generator) *resNet { return newResNetWidth(g, 8) }

// newResNetWidth is the network with c stem channels and 2c in the block.
func newResNetWidth(g *autograd.Generator, c int) *resNet {
	m := &resNet{
		stem:  nn.NewConv2d(g, 1, c, 3, nn.ConvOptions{Padding: 1}),
		conv1: nn.NewConv2d(g, c, 2*c, 3, nn.ConvOptions{Stride: 2, Padding: 1}),
		conv2: nn.NewConv2d(g, 2*c, 2*c, 3, nn.ConvOptions{Padding: 1}),
		down:  nn.NewConv2d(g, c, 2*c, 1, nn.ConvOptions{Stride: 2}),
		fc:    nn.NewLinear(g, 2*c, 10, nn.LinearOptions{}),
	}
	m.RegisterModule("stem", m.stem)
	m.RegisterModule("conv1", m.conv1)
	m.RegisterModule("conv2", m.conv2)
	m.RegisterModule("down", m.down)
	m.RegisterModule("fc", m.fc)
	nn.Eval(m)
	return m
}

func (m *resNet) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(m, x)()
	x = autograd.MaxPool2d(autograd.ReLU(m.stem.Forward(x)), autograd.PoolOptions{Kernel: []int{2, 2}, Stride: []int{2, 2}})
	y := m.conv2.Forward(autograd.ReLU(m.conv1.Forward(x)))
	x = autograd.ReLU(autograd.Add(y, m.down.Forward(x)))
	x = autograd.AdaptiveAvgPool2d(x, 1, 1)
	return m.fc.Forward(autograd.Flatten(x, 1, -1))
}

// calibrated traces the residual CNN and calibrates it on batches of
// random images.
func calibrated(t *testing.T, conf *quant.Conf) (*graph.Graph, *quant.Calibrator, []*autograd.Tensor) {
	t.Helper()
	gen := autograd.NewGenerator(3)
	m := newResNet(gen)
	var batches []*autograd.Tensor
	for range 4 {
		batches = append(batches, autograd.Rand(gen, 8, 1, 16, 16))
	}
	g, cal := traceCalibrate(t, m, conf, batches)
	return g, cal, batches
}

// traceCalibrate traces m on the first batch and calibrates it on all of
// them into conf.
func traceCalibrate(t *testing.T, m nn.Module, conf *quant.Conf, batches []*autograd.Tensor) (*graph.Graph, *quant.Calibrator) {
	t.Helper()
	g, err := graph.Trace(m, batches[0])
	if err != nil {
		t.Fatal(err)
	}
	cal, err := quant.Prepare(g, conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := cal.Observe(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := cal.Finish(); err != nil {
		t.Fatal(err)
	}
	return g, cal
}

func TestCalibrationRecordsIPEXOps(t *testing.T) {
	conf := quant.NewConf(quant.PerTensorAffine)
	calibrated(t, conf)
	var names, flows []string
	for _, op := range conf.Ops {
		names = append(names, op.Name)
		flows = append(flows, strings.Join(op.InputsFlow, ","))
	}
	want := []string{"conv2d", "relu", "max_pool2d", "conv2d", "relu", "conv2d", "conv2d", "add", "relu", "adaptive_avg_pool2d", "flatten", "linear"}
	if !slices.Equal(names, want) {
		t.Fatalf("recorded %v, want %v", names, want)
	}
	wantFlows := []string{"conv2d0.input0", "conv2d0.output0", "relu1.output0", "max_pool2d2.output0", "conv2d3.output0",
		"relu4.output0", "max_pool2d2.output0", "conv2d5.output0,conv2d6.output0", "add7.output0", "relu8.output0",
		"adaptive_avg_pool2d9.output0", "flatten10.output0"}
	if !slices.Equal(flows, wantFlows) {
		t.Errorf("inputs_flow %v\nwant %v", flows, wantFlows)
	}
	for _, op := range conf.Ops {
		for j, s := range slices.Concat(op.InputScales, op.OutputScales) {
			if !(s > 0) || math.IsInf(s, 0) {
				t.Errorf("entry %d (%s): scale %d is %v", op.ID, op.Name, j, s)
			}
		}
		if strings.HasPrefix(op.Name, "conv") || op.Name == "linear" {
			if len(op.WeightScales) != 1 {
				t.Errorf("entry %d (%s): %d weight scale lists", op.ID, op.Name, len(op.WeightScales))
			}
		}
	}
	// A pool keeps its input's parameters; the flatten after it too.
	pool, flat := conf.Ops[9], conf.Ops[10]
	if pool.OutputScales[0] != pool.InputScales[0] || flat.InputScales[0] != pool.OutputScales[0] || flat.OutputScales[0] != pool.OutputScales[0] {
		t.Errorf("pool %v→%v, flatten %v→%v: want one scale", pool.InputScales, pool.OutputScales, flat.InputScales, flat.OutputScales)
	}
}

func TestConvertRunsCloseToFloat32(t *testing.T) {
	for _, scheme := range []quant.Scheme{quant.PerTensorAffine, quant.PerTensorSymmetric} {
		conf := quant.NewConf(scheme)
		g, _, batches := calibrated(t, conf)
		// The conf goes through a file, as a deployment's would.
		path := filepath.Join(t.TempDir(), "int8_conf.json")
		if err := conf.Save(path); err != nil {
			t.Fatal(err)
		}
		loaded, err := quant.LoadConf(path)
		if err != nil {
			t.Fatal(err)
		}
		q, err := quant.Convert(g, loaded)
		if err != nil {
			t.Fatal(err)
		}
		s := q.String()
		for _, op := range []string{"Quantize", "Dequantize+Conv2d+ReLU+Quantize", "Dequantize+Conv2d+Quantize",
			"Dequantize+Conv2d+Add+ReLU+Quantize", "Dequantize+Linear"} {
			if !strings.Contains(s, " = "+op+"(") {
				t.Errorf("scheme %v: the int8 graph has no %s node:\n%s", scheme, op, s)
			}
		}
		if strings.Contains(s, "DequantizePerChannel") {
			t.Errorf("scheme %v: a weight is dequantized outside an int8 layer:\n%s", scheme, s)
		}
		// Without fusion, the same conf gives the FakeQuant decomposition,
		// which the int8 layers must compute up to a step here and there.
		fake, err := quant.Convert(g, loaded, graph.WithFusion(false))
		if err != nil {
			t.Fatal(err)
		}
		if fs := fake.String(); !strings.Contains(fs, "DequantizePerChannel(") || strings.Contains(fs, "Dequantize+") {
			t.Errorf("scheme %v: the conversion without fusion is not the decomposition:\n%s", scheme, fs)
		}
		// Pools and flatten run on the quantized values.
		for _, op := range []string{"MaxPool2d", "AdaptiveAvgPool2d", "Flatten"} {
			if !strings.Contains(s, "= "+op+"(") || strings.Contains(s, "f32[") && regexpFloatOp(s, op) {
				t.Errorf("scheme %v: %s does not run on 8-bit values:\n%s", scheme, op, s)
			}
		}
		if strings.Contains(s, "QuantizePerChannel(") {
			t.Errorf("scheme %v: the weights' quantization was not folded:\n%s", scheme, s)
		}
		int8Weights := 0
		for id, c := range q.Consts {
			if c.DType() == autograd.Int8 {
				int8Weights++
			}
			_ = id
		}
		if int8Weights != 5 {
			t.Errorf("scheme %v: %d int8 weight constants, want 5:\n%s", scheme, int8Weights, s)
		}
		// A saved and loaded int8 graph computes the same bits.
		qpath := filepath.Join(t.TempDir(), "int8.kiln")
		if err := graph.Save(qpath, q); err != nil {
			t.Fatal(err)
		}
		ql, err := graph.Load(qpath)
		if err != nil {
			t.Fatal(err)
		}
		fq, err := graph.Compile(fake)
		if err != nil {
			t.Fatal(err)
		}
		fp, err := graph.Compile(g)
		if err != nil {
			t.Fatal(err)
		}
		qp, err := graph.Compile(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			want, err := fp.Run(b)
			if err != nil {
				t.Fatal(err)
			}
			w := slices.Clone(want[0].ContiguousFloat32s())
			got, err := qp.Run(b)
			if err != nil {
				t.Fatal(err)
			}
			loaded, err := graph.Compile(ql)
			if err != nil {
				t.Fatal(err)
			}
			again, err := loaded.Run(b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(again[0].ContiguousFloat32s(), got[0].ContiguousFloat32s()) {
				t.Errorf("scheme %v: the loaded int8 graph computes other bits", scheme)
			}
			if rel := relRMS(got[0].ContiguousFloat32s(), w); rel > 0.05 {
				t.Errorf("scheme %v: int8 output differs from float32 by %.3g (relative RMS)", scheme, rel)
			}
			dec, err := fq.Run(b)
			if err != nil {
				t.Fatal(err)
			}
			if rel := relRMS(got[0].ContiguousFloat32s(), dec[0].ContiguousFloat32s()); rel > 0.005 {
				t.Errorf("scheme %v: int8 layers differ from their FakeQuant decomposition by %.3g (relative RMS)", scheme, rel)
			}
		}
	}
}

func TestPrepareRejects(t *testing.T) {
	gen := autograd.NewGenerator(1)
	m := newResNet(gen)
	x := autograd.Rand(gen, 1, 1, 8, 8)
	bf, err := graph.Trace(m, autograd.Autocast(x))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := quant.Prepare(bf, quant.NewConf(quant.PerTensorAffine)); err == nil || !strings.Contains(err.Error(), "bfloat16") {
		t.Errorf("Prepare of a BF16 graph: %v", err)
	}
	g, err := graph.Trace(m, x)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := quant.Prepare(g, quant.NewConf(quant.PerTensorAffine))
	if err != nil {
		t.Fatal(err)
	}
	if err := cal.Finish(); err == nil || !strings.Contains(err.Error(), "before any Observe") {
		t.Errorf("Finish before Observe: %v", err)
	}
	bad := autograd.FromFloat32(slices.Repeat([]float32{float32(math.NaN())}, 64), 1, 1, 8, 8)
	if err := cal.Observe(bad); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("Observe of NaN: %v", err)
	}
	conf := quant.NewConf(quant.PerTensorAffine)
	_, _, _ = calibrated(t, conf)
	q, err := quant.Convert(g, conf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := quant.Prepare(q, conf); err == nil || !strings.Contains(err.Error(), "already quantized") {
		t.Errorf("Prepare of an int8 graph: %v", err)
	}
	// A conf for another model fails, naming the entry.
	short := *conf
	short.Ops = short.Ops[:3]
	if _, err := quant.Convert(g, &short); err == nil || !strings.Contains(err.Error(), "entries") {
		t.Errorf("Convert with a conf of 3 entries: %v", err)
	}
	wrong := *conf
	wrong.Ops = slices.Clone(conf.Ops)
	wrong.Ops[1].Name = "sigmoid"
	if _, err := quant.Convert(g, &wrong); err == nil || !strings.Contains(err.Error(), "entry 1") {
		t.Errorf("Convert with a wrong name: %v", err)
	}
}

// regexpFloatOp reports whether the printed graph s has a float32 result
// of op.
func regexpFloatOp(s, op string) bool {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "= "+op+"(") && strings.Contains(line, ": f32[") {
			return true
		}
	}
	return false
}

// relRMS is the root mean square of got − want relative to want's.
func relRMS(got, want []float32) float64 {
	var num, den float64
	for i, v := range got {
		num += float64(v-want[i]) * float64(v-want[i])
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// attention is the score part of an attention head: two projections of
// the input and their scaled product, which calibration records as two
// linear layers and a bmm.
type attention struct {
	nn.Base
	q, k *nn.Linear
}

func (m *attention) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(m, x)()
	s := autograd.BMM(m.q.Forward(x), autograd.Transpose(m.k.Forward(x), 1, 2))
	return autograd.Div(s, autograd.Scalar(4))
}

// TestConvertProduct converts an attention head's scores: the product of
// two activations becomes an int8 product node, and the graph computes
// the float32 one's scores closely.
func TestConvertProduct(t *testing.T) {
	gen := autograd.NewGenerator(5)
	m := &attention{q: nn.NewLinear(gen, 16, 16, nn.LinearOptions{}), k: nn.NewLinear(gen, 16, 16, nn.LinearOptions{})}
	m.RegisterModule("q", m.q)
	m.RegisterModule("k", m.k)
	nn.Eval(m)
	x := autograd.Randn(gen, 2, 7, 16)
	g, err := graph.Trace(m, x)
	if err != nil {
		t.Fatal(err)
	}
	conf := quant.NewConf(quant.PerTensorAffine)
	cal, err := quant.Prepare(g, conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := cal.Observe(x); err != nil {
		t.Fatal(err)
	}
	if err := cal.Finish(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, op := range conf.Ops {
		names = append(names, op.Name)
	}
	if !slices.Equal(names, []string{"linear", "linear", "bmm"}) {
		t.Fatalf("recorded %v", names)
	}
	q, err := quant.Convert(g, conf)
	if err != nil {
		t.Fatal(err)
	}
	if s := q.String(); !strings.Contains(s, "= Dequantize+BMM") {
		t.Errorf("no int8 product node:\n%s", s)
	}
	fake, err := quant.Convert(g, conf, graph.WithFusion(false))
	if err != nil {
		t.Fatal(err)
	}
	got, want, dec := runOnce(t, q, x), runOnce(t, g, x), runOnce(t, fake, x)
	if rel := relRMS(got, want); rel > 0.05 {
		t.Errorf("int8 scores differ from float32 by %.3g (relative RMS)", rel)
	}
	if rel := relRMS(got, dec); rel > 0.005 {
		t.Errorf("int8 product differs from its FakeQuant decomposition by %.3g (relative RMS)", rel)
	}
}

// runOnce compiles g and returns its first output's values for x.
func runOnce(t *testing.T, g *graph.Graph, x *autograd.Tensor) []float32 {
	t.Helper()
	p, err := graph.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(out[0].ContiguousFloat32s())
}
