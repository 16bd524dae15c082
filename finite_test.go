package kiln_test

import (
	"errors"
	"math"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

func TestCheckFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		name  string
		spoil func(t *testing.T, m *nn.Sequential) // makes m non-finite, or not
		want  *kiln.NonFiniteError                 // nil: m stays finite
	}{
		{"finite", func(*testing.T, *nn.Sequential) {}, nil},
		{"finite gradients", func(_ *testing.T, m *nn.Sequential) {
			for _, p := range nn.Parameters(m) {
				p.SetGrad(autograd.ZerosLike(p))
			}
		}, nil},
		{"NaN weight", func(_ *testing.T, m *nn.Sequential) { param(m, "2.weight").Float32s()[7] = nan },
			&kiln.NonFiniteError{Name: "2.weight", Kind: "parameter", Index: 7}},
		{"-Inf bias", func(_ *testing.T, m *nn.Sequential) { param(m, "2.bias").Float32s()[1] = -inf },
			&kiln.NonFiniteError{Name: "2.bias", Kind: "parameter", Index: 1, Value: -inf}},
		{"Inf gradient", func(_ *testing.T, m *nn.Sequential) {
			p := param(m, "0.weight")
			g := autograd.ZerosLike(p)
			g.Float32s()[3] = inf
			p.SetGrad(g)
		}, &kiln.NonFiniteError{Name: "0.weight", Kind: "gradient", Index: 3, Value: inf}},
		{"first layer first", func(_ *testing.T, m *nn.Sequential) {
			param(m, "2.weight").Float32s()[0] = nan
			param(m, "0.bias").Float32s()[3] = inf
		}, &kiln.NonFiniteError{Name: "0.bias", Kind: "parameter", Index: 3, Value: inf}},
		// Element 1 of a channels-last [4 3 2 2] weight's storage is
		// channel 1 of position (0, 0, 0): logical index 4.
		{"channels-last", func(t *testing.T, m *nn.Sequential) {
			if _, err := kiln.Optimize(m, kiln.Level(kiln.O0), kiln.ChannelsLast(true)); err != nil {
				t.Fatal(err)
			}
			param(m, "0.weight").Float32s()[1] = nan
		}, &kiln.NonFiniteError{Name: "0.weight", Kind: "parameter", Index: 4}},
		{"bfloat16 split weight", func(t *testing.T, m *nn.Sequential) {
			if _, err := amp.SplitModule(m); err != nil {
				t.Fatal(err)
			}
			param(m, "2.weight").BFloat16s()[9] = 0xff80 // -Inf
		}, &kiln.NonFiniteError{Name: "2.weight", Kind: "parameter", Index: 9, Value: -inf}},
		{"bfloat16 NaN gradient", func(t *testing.T, m *nn.Sequential) {
			if _, err := amp.SplitModule(m); err != nil {
				t.Fatal(err)
			}
			p := param(m, "2.bias")
			g := autograd.Cast(autograd.ZerosLike(p), autograd.BFloat16)
			g.BFloat16s()[0] = 0x7fc1
			p.SetGrad(g)
		}, &kiln.NonFiniteError{Name: "2.bias", Kind: "gradient", Index: 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := finiteNet()
			c.spoil(t, m)
			err := kiln.CheckFinite(m)
			if c.want == nil {
				if err != nil {
					t.Fatalf("CheckFinite = %v, want nil", err)
				}
				return
			}
			var e *kiln.NonFiniteError
			if !errors.As(err, &e) {
				t.Fatalf("CheckFinite = %v, want a *NonFiniteError", err)
			}
			if e.Name != c.want.Name || e.Kind != c.want.Kind || e.Index != c.want.Index ||
				!(e.Value == c.want.Value || math.IsNaN(float64(e.Value)) && c.want.Value == 0) {
				t.Errorf("CheckFinite = %+v, want %+v (Value 0 standing for NaN)", *e, *c.want)
			}
		})
	}
}

func TestCheckFiniteTensors(t *testing.T) {
	ts := []nn.NamedTensor{
		{Name: "steps", Tensor: autograd.FromInt64([]int64{math.MaxInt64}, 1)},
		{Name: "momentum", Tensor: autograd.FromFloat32([]float32{1, 2, float32(math.Inf(-1))}, 3)},
	}
	err := kiln.CheckFiniteTensors("optimizer state", ts)
	want := "optimizer state momentum holds -Inf at index 2"
	if err == nil || err.Error() != want {
		t.Errorf("CheckFiniteTensors = %v, want %q", err, want)
	}
	if err := kiln.CheckFiniteTensors("state", ts[:1]); err != nil {
		t.Errorf("CheckFiniteTensors of an int64 tensor = %v", err)
	}
}

// TestCheckFiniteAllocs checks CheckFinite's cost does not grow with the
// size of the tensors it reads: it allocates the parameter list, nothing
// per element.
func TestCheckFiniteAllocs(t *testing.T) {
	small, big := finiteNet(), finiteNet()
	if _, err := amp.SplitModule(big); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*nn.Sequential{small, big} {
		if n := testing.AllocsPerRun(10, func() { kiln.CheckFinite(m) }); n > 8 {
			t.Errorf("CheckFinite allocates %v times a call, want at most 8", n)
		}
	}
}

func BenchmarkCheckFinite(b *testing.B) {
	for _, dtype := range []autograd.DType{autograd.Float32, autograd.BFloat16} {
		b.Run(dtype.String(), func(b *testing.B) {
			m := nn.NewLinear(autograd.NewGenerator(1), 1024, 1024, nn.LinearOptions{})
			if dtype == autograd.BFloat16 {
				if _, err := amp.SplitModule(m); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(1024 * 1025 * dtype.Size()))
			for b.Loop() {
				if err := kiln.CheckFinite(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// finiteNet is a convolution and a linear layer with distinct parameter
// names.
func finiteNet() *nn.Sequential {
	g := autograd.NewGenerator(1)
	return nn.NewSequential(
		nn.NewConv2d(g, 3, 4, 2, nn.ConvOptions{}),
		nn.NewFlatten(1, -1),
		nn.NewLinear(g, 4, 5, nn.LinearOptions{}),
	)
}

// param returns m's parameter called name.
func param(m nn.Module, name string) *autograd.Tensor {
	for _, p := range nn.NamedParameters(m) {
		if p.Name == name {
			return p.Tensor
		}
	}
	panic("no parameter " + name)
}
