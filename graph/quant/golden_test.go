package quant_test

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph/quant"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/nn"
)

// TestCalibrationGolden calibrates a one-convolution model and compares
// its conf entry with IPEX 1.10's ChooseQuantizationParams and per-channel
// weight scales, computed independently in plain Python by
// testdata/golden/gen_qlayers.py. The weights, bias and batches are
// multiples of powers of two small enough that the convolution is exact in
// float32 whatever order it sums in, so the observed ranges are PyTorch's
// to the bit and every scale must be equal as a float64.
func TestCalibrationGolden(t *testing.T) {
	set := golden.Load(t, "qlayers.safetensors")
	want := goldenFloat64s(t, "qlayers.safetensors")
	conv := nn.NewConv2d(autograd.NewGenerator(1), 3, 4, 3, nn.ConvOptions{Padding: 1})
	conv.Weight().CopyFrom(set.Get(t, "calib.weight"))
	conv.Bias().CopyFrom(set.Get(t, "calib.bias"))
	nn.Eval(conv)
	batches := []*autograd.Tensor{set.Get(t, "calib.batch0"), set.Get(t, "calib.batch1")}
	conf := quant.NewConf(quant.PerTensorAffine)
	traceCalibrate(t, conv, conf, batches)
	if len(conf.Ops) != 1 || conf.Ops[0].Name != "conv2d" {
		t.Fatalf("conf has %d ops (first %+v), want the one conv2d", len(conf.Ops), conf.Ops)
	}
	op := conf.Ops[0]
	zero := func(name string) []int32 {
		var out []int32
		for _, v := range set.Get(t, name).Int64s() {
			out = append(out, int32(v))
		}
		return out
	}
	for _, c := range []struct {
		what      string
		got, want any
		equal     bool
	}{
		{"input scales", op.InputScales, want["calib.in_scale"], slices.Equal(op.InputScales, want["calib.in_scale"])},
		{"input zero points", op.InputZeroPoints, zero("calib.in_zero"), slices.Equal(op.InputZeroPoints, zero("calib.in_zero"))},
		{"output scales", op.OutputScales, want["calib.out_scale"], slices.Equal(op.OutputScales, want["calib.out_scale"])},
		{"output zero points", op.OutputZeroPoints, zero("calib.out_zero"), slices.Equal(op.OutputZeroPoints, zero("calib.out_zero"))},
		{"weight scales", op.WeightScales, want["calib.w_scales"], len(op.WeightScales) == 1 && slices.Equal(op.WeightScales[0], want["calib.w_scales"])},
	} {
		if !c.equal {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

// goldenFloat64s returns a golden file's F64 tensors at full precision:
// golden.Load narrows them to float32, which would hide the last bits of a
// scale.
func goldenFloat64s(t *testing.T, name string) map[string][]float64 {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join(golden.Dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for _, e := range f.Tensors {
		if e.DType != "F64" {
			continue
		}
		v := make([]float64, len(e.Data)/8)
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(e.Data[8*i:]))
		}
		out[e.Name] = v
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no F64 tensors", name)
	}
	return out
}
