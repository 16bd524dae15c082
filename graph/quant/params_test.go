package quant

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/kilnml/kiln/internal/safetensors"
)

// goldenSet is testdata/golden/quant.safetensors (gen_quant.py), decoded to
// float64 without loss: the scales are float64 there and must compare
// bit for bit, which the float32 golden.Load would not allow.
type goldenSet struct{ f *safetensors.File }

func loadGolden(t *testing.T) goldenSet {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join("..", "..", "testdata", "golden", "quant.safetensors"))
	if err != nil {
		t.Fatalf("golden: %v (regenerate with `make golden`)", err)
	}
	return goldenSet{f}
}

func (g goldenSet) values(t *testing.T, name string) []float64 {
	t.Helper()
	e, ok := g.f.Get(name)
	if !ok {
		t.Fatalf("golden: no tensor %q", name)
	}
	var out []float64
	switch e.DType {
	case "F32":
		for i := 0; i < len(e.Data); i += 4 {
			out = append(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(e.Data[i:]))))
		}
	case "F64":
		for i := 0; i < len(e.Data); i += 8 {
			out = append(out, math.Float64frombits(binary.LittleEndian.Uint64(e.Data[i:])))
		}
	case "I64":
		for i := 0; i < len(e.Data); i += 8 {
			out = append(out, float64(int64(binary.LittleEndian.Uint64(e.Data[i:]))))
		}
	default:
		t.Fatalf("golden: %q has dtype %s", name, e.DType)
	}
	return out
}

func (g goldenSet) float32s(t *testing.T, name string) []float32 {
	t.Helper()
	v := g.values(t, name)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// smallScaleCut is the floor PyTorch 1.13 puts under affine scales and IPEX
// 1.10 does not.
const smallScaleCut = float32(6.1e-5)

// TestChooseParamsAffineGolden compares the affine rule with PyTorch 1.13's
// torch._choose_qparams_per_tensor (ATen's ChooseQuantizationParams, qmin 0,
// qmax 255), which must agree to the bit wherever 1.13's small-scale cut
// does not apply; where it does, Kiln keeps IPEX 1.10's scale.
func TestChooseParamsAffineGolden(t *testing.T) {
	g := loadGolden(t)
	mm := g.float32s(t, "qp.minmax")
	scales, zps := g.values(t, "qp.affine_scale"), g.values(t, "qp.affine_zp")
	cut := 0
	for i := range scales {
		lo, hi := mm[2*i], mm[2*i+1]
		p := ChooseParams(lo, hi, PerTensorAffine)
		if p.DType != "uint8" {
			t.Errorf("[%g, %g]: dtype %q, want uint8", lo, hi, p.DType)
		}
		if float32(scales[i]) == smallScaleCut && float32(p.Scale) != smallScaleCut {
			// IPEX 1.10's scale is the range over 255, below the cut.
			cut++
			want := (float64(max(hi, 0)) - float64(min(lo, 0))) / 255
			if p.Scale != want || !(p.Scale < float64(smallScaleCut)) {
				t.Errorf("[%g, %g]: scale %v, want IPEX's uncut %v", lo, hi, p.Scale, want)
			}
			continue
		}
		if p.Scale != scales[i] || float64(p.ZeroPoint) != zps[i] {
			t.Errorf("[%g, %g]: got scale %v zero point %d, PyTorch %v %v", lo, hi, p.Scale, p.ZeroPoint, scales[i], zps[i])
		}
	}
	if cut == 0 || cut == len(scales) {
		t.Errorf("%d of %d cases under PyTorch's small-scale cut; the table should have both kinds", cut, len(scales))
	}
}

// TestChooseParamsSymmetricGolden compares the symmetric rule with
// MinMaxObserver(qint8, per_tensor_symmetric, quant_min -127, quant_max 127),
// whose scale is max(|min|, max)/127 in float32: Kiln's float64 scale rounds
// to the same float32. Ranges so small that the observer clamps to float32
// epsilon instead get fbgemm's 0.1 or their own tiny scale here.
func TestChooseParamsSymmetricGolden(t *testing.T) {
	g := loadGolden(t)
	mm := g.float32s(t, "qp.minmax")
	want := g.float32s(t, "qp.sym_scale")
	eps := float32(math.Nextafter32(1, 2) - 1)
	compared := 0
	for i, w := range want {
		lo, hi := mm[2*i], mm[2*i+1]
		p := ChooseParams(lo, hi, PerTensorSymmetric)
		if p.ZeroPoint != 0 || p.DType != "int8" {
			t.Errorf("[%g, %g]: zero point %d dtype %q, want 0 int8", lo, hi, p.ZeroPoint, p.DType)
		}
		if w == eps {
			if m := max(-lo, hi); m == 0 && p.Scale != 0.1 {
				t.Errorf("[%g, %g]: scale %v, want fbgemm's fallback 0.1", lo, hi, p.Scale)
			}
			continue
		}
		compared++
		if float32(p.Scale) != w {
			t.Errorf("[%g, %g]: scale %v, PyTorch %v", lo, hi, p.Scale, w)
		}
	}
	if compared < len(want)/2 {
		t.Errorf("only %d of %d cases compared", compared, len(want))
	}
}

func TestSymmetricUint8(t *testing.T) {
	p := symmetricParams(-2, 1, "uint8")
	if p.ZeroPoint != 128 || p.Scale != 2.0/127 || p.DType != "uint8" {
		t.Errorf("got %+v, want scale 2/127, zero point 128, uint8", p)
	}
}

func TestChooseParamsFallback(t *testing.T) {
	for _, c := range []struct{ lo, hi float32 }{{0, 0}, {5, 5}, {-1e-44, 1e-44}, {0, 1e-40}} {
		for _, s := range []Scheme{PerTensorAffine, PerTensorSymmetric} {
			// A positive point range still widens to contain 0, so only the
			// all-zero and subnormal ones take the fallback.
			p := ChooseParams(c.lo, c.hi, s)
			if c.hi <= 1e-38 && p.Scale != 0.1 {
				t.Errorf("%v [%g, %g]: scale %v, want 0.1", s, c.lo, c.hi, p.Scale)
			}
			if math.IsInf(float64(1/float32(p.Scale)), 0) {
				t.Errorf("%v [%g, %g]: scale %v has no finite float32 reciprocal", s, c.lo, c.hi, p.Scale)
			}
		}
	}
}

func TestWeightScales(t *testing.T) {
	w := []float32{
		1, -2, 0.5, // channel 0: max |w| 2
		0, 0, 0, // channel 1: all zero
		-127, 3, 4, // channel 2
	}
	got := WeightScales(w, 3, true)
	want := []float64{2.0 / 127, 0.1, 1}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("per channel %d: %v, want %v", i, got[i], want[i])
		}
	}
	if got := WeightScales(w, 3, false); len(got) != 1 || got[0] != 1 {
		t.Errorf("per tensor: %v, want [1]", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("WeightScales with 4 channels of a 9-value weight did not panic")
		}
	}()
	WeightScales(w, 4, true)
}
