package amp_test

import (
	"errors"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
)

func bitsOf(xs []float32) []uint32 {
	b := make([]uint32, len(xs))
	for i, x := range xs {
		b[i] = math.Float32bits(x)
	}
	return b
}

func fromBits(bs ...uint32) []float32 {
	xs := make([]float32, len(bs))
	for i, b := range bs {
		xs[i] = math.Float32frombits(b)
	}
	return xs
}

// specials are float32 patterns of every class, at the edges of each.
var specials = []uint32{
	0x00000000, 0x80000000, // ±0
	0x00000001, 0x80000001, 0x0000ffff, 0x00010000, 0x0040ffff, 0x007fffff, 0x807fffff, // subnormals
	0x00800000, 0x80800000, 0x3f800000, 0x3f80ffff, 0x3f808000, 0xbf80ffff, 0x7f7fffff, 0xff7fffff, // normals
	0x7f800000, 0xff800000, // ±Inf
	0x7f800001, 0xff80ffff, 0x7f810000, 0x7fc00000, 0xffc00001, 0x7fffffff, 0xffffffff, // NaNs
}

// Join(Split(x)) is x bit for bit, and the halves are x's high and low 16
// bits, for a stride through the whole float32 space and the specials.
func TestSplitJoinEveryClass(t *testing.T) {
	pats := append([]uint32(nil), specials...)
	for b := uint64(0); b < 1<<32; b += 65521 {
		pats = append(pats, uint32(b))
	}
	pats = append(pats, 0xffffffff-65521)
	sp := amp.Split(autograd.FromFloat32(fromBits(pats...)))
	top, bottom := sp.Top.BFloat16s(), sp.Bottom
	joined := bitsOf(sp.Join().Float32s())
	into := make([]float32, len(pats))
	sp.JoinInto(into)
	for i, b := range pats {
		if top[i] != uint16(b>>16) || bottom[i] != uint16(b) {
			t.Fatalf("%#08x: halves %#04x %#04x, want %#04x %#04x", b, top[i], bottom[i], b>>16, b&0xffff)
		}
		if joined[i] != b || math.Float32bits(into[i]) != b {
			t.Fatalf("%#08x: Join gives %#08x, JoinInto %#08x", b, joined[i], math.Float32bits(into[i]))
		}
	}
	if len(pats) < 65536 {
		t.Fatalf("only %d patterns tried", len(pats))
	}
}

// What the truncated Top means for each class of float32.
func TestSplitTopByClass(t *testing.T) {
	tests := []struct {
		name string
		bits uint32
		top  uint16
		want string // what Top reads as
	}{
		{"positive zero", 0x00000000, 0x0000, "+0"},
		{"negative zero", 0x80000000, 0x8000, "-0"},
		{"smallest subnormal becomes +0", 0x00000001, 0x0000, "+0"},
		{"negative subnormal keeps its sign", 0x80000001, 0x8000, "-0"},
		{"subnormal with high bits stays subnormal", 0x0040ffff, 0x0040, "subnormal"},
		{"largest subnormal", 0x007fffff, 0x007f, "subnormal"},
		{"smallest normal", 0x00800000, 0x0080, "normal"},
		{"truncated, not rounded up", 0x3f80ffff, 0x3f80, "normal"},
		{"negative truncates toward zero", 0xbf80ffff, 0xbf80, "normal"},
		{"largest finite stays finite", 0x7f7fffff, 0x7f7f, "normal"},
		{"+Inf", 0x7f800000, 0x7f80, "+Inf"},
		{"-Inf", 0xff800000, 0xff80, "-Inf"},
		{"NaN with payload in the high half", 0x7fc00001, 0x7fc0, "NaN"},
		{"NaN with payload only in the low half reads as Inf", 0x7f800001, 0x7f80, "+Inf"},
		{"negative NaN with low payload reads as -Inf", 0xff80ffff, 0xff80, "-Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := amp.Split(autograd.FromFloat32(fromBits(tt.bits)))
			top := sp.Top.BFloat16s()[0]
			if top != tt.top {
				t.Fatalf("Top %#04x, want %#04x", top, tt.top)
			}
			if got := class(kernels.F32FromBF16(top)); got != tt.want {
				t.Errorf("Top reads as %s, want %s", got, tt.want)
			}
			if got := math.Float32bits(sp.Join().Float32s()[0]); got != tt.bits {
				t.Errorf("Join %#08x, want %#08x", got, tt.bits)
			}
		})
	}
}

func class(f float32) string {
	b := math.Float32bits(f)
	switch {
	case f != f:
		return "NaN"
	case math.IsInf(float64(f), 1):
		return "+Inf"
	case math.IsInf(float64(f), -1):
		return "-Inf"
	case b == 0:
		return "+0"
	case b == 0x80000000:
		return "-0"
	case b&0x7f800000 == 0:
		return "subnormal"
	}
	return "normal"
}

// The split keeps the parameter's memory format; Bottom follows Top's
// physical order.
func TestSplitKeepsFormat(t *testing.T) {
	g := autograd.NewGenerator(1)
	p := autograd.Randn(g, 2, 3, 4, 5).To(autograd.ChannelsLast).Detach().SetRequiresGrad(true)
	sp := amp.Split(p)
	if sp.Top.Format() != autograd.ChannelsLast || !sp.Top.RequiresGrad() || !sp.Top.IsLeaf() {
		t.Fatalf("Top is %v, requires grad %v, leaf %v", sp.Top.Format(), sp.Top.RequiresGrad(), sp.Top.IsLeaf())
	}
	j := sp.Join()
	if j.Format() != autograd.ChannelsLast || !sameBits(j.Float32s(), p.Float32s()) {
		t.Fatalf("Join is %v or differs", j.Format())
	}
	for i, x := range p.Float32s() {
		if sp.Top.BFloat16s()[i] != uint16(math.Float32bits(x)>>16) {
			t.Fatalf("Top element %d is not in physical order", i)
		}
	}
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// updates make fresh optimizer-like step functions, each with its own
// state, indexed from off as Step asks.
var updates = []struct {
	name string
	make func(n int) func(off int, p, g []float32)
}{
	{"sgd", func(int) func(int, []float32, []float32) {
		return func(_ int, p, g []float32) {
			for i := range p {
				p[i] -= 0.01 * g[i]
			}
		}
	}},
	{"sgd momentum weight decay", func(n int) func(int, []float32, []float32) {
		buf := make([]float32, n)
		return func(off int, p, g []float32) {
			b := buf[off : off+len(p)]
			for i := range p {
				d := g[i] + 1e-4*p[i]
				b[i] = 0.9*b[i] + d
				p[i] -= 0.1 * b[i]
			}
		}
	}},
	{"adam-like", func(n int) func(int, []float32, []float32) {
		m, v := make([]float32, n), make([]float32, n)
		return func(off int, p, g []float32) {
			m, v := m[off:off+len(p)], v[off:off+len(p)]
			for i := range p {
				m[i] = 0.9*m[i] + 0.1*g[i]
				v[i] = 0.999*v[i] + 0.001*g[i]*g[i]
				p[i] -= 1e-3 * m[i] / (float32(math.Sqrt(float64(v[i]))) + 1e-8)
			}
		}
	}},
}

// An update through split form equals the same update on plain FP32
// values bit for bit, for float32 and bfloat16 gradients and sizes around
// the span length.
func TestStepMatchesFP32(t *testing.T) {
	g := autograd.NewGenerator(7)
	for _, u := range updates {
		for _, n := range []int{1, 7, amp.StepSpan - 1, amp.StepSpan, amp.StepSpan + 3, 3*amp.StepSpan + 17} {
			for _, gdt := range []autograd.DType{autograd.Float32, autograd.BFloat16} {
				init := autograd.Randn(g, n).Float32s()
				plain := append([]float32(nil), init...)
				sp := amp.Split(autograd.FromFloat32(append([]float32(nil), init...)))
				mc := amp.NewMasterCopy(autograd.FromFloat32(append([]float32(nil), init...)))
				stepPlain, stepSplit, stepMaster := u.make(n), u.make(n), u.make(n)
				for k := 0; k < 5; k++ {
					grad := autograd.Cast(autograd.Randn(g, n), gdt)
					stepPlain(0, plain, autograd.Cast(grad, autograd.Float32).Float32s())
					sp.Step(grad, stepSplit)
					mc.Step(grad, stepMaster)
				}
				if !sameBits(sp.Join().Float32s(), plain) {
					t.Errorf("%s n=%d %v grad: split step differs from FP32", u.name, n, gdt)
				}
				if !sameBits(mc.Master.Float32s(), plain) {
					t.Errorf("%s n=%d %v grad: master-copy step differs from FP32", u.name, n, gdt)
				}
				for i, x := range plain {
					if mc.Copy.BFloat16s()[i] != kernels.BF16FromF32(x) {
						t.Fatalf("%s n=%d: Copy element %d not the rounded master", u.name, n, i)
					}
				}
			}
		}
	}
}

// Step hands out consecutive spans covering every element once.
func TestStepSpans(t *testing.T) {
	n := 2*amp.StepSpan + 5
	sp := amp.Split(autograd.Zeros(n))
	next := 0
	sp.Step(autograd.Zeros(n), func(off int, p, g []float32) {
		if off != next || len(p) != len(g) || len(p) == 0 || len(p) > amp.StepSpan {
			t.Fatalf("span at %d of %d (param) %d (grad), want offset %d", off, len(p), len(g), next)
		}
		next += len(p)
	})
	if next != n {
		t.Fatalf("spans covered %d of %d elements", next, n)
	}
	called := false
	sp.Step(nil, func(int, []float32, []float32) { called = true })
	if called {
		t.Error("Step with a nil gradient called the step function")
	}
}

// A pass that only reads the joined values leaves the halves as they were.
func TestReadingStepChangesNothing(t *testing.T) {
	init := fromBits(specials...)
	sp := amp.Split(autograd.FromFloat32(init))
	var sum float64
	sp.Step(autograd.Zeros(len(init)), func(_ int, p, _ []float32) {
		for _, x := range p {
			sum += float64(x)
		}
	})
	if !sameBits(sp.Join().Float32s(), init) {
		t.Fatal("a reading pass changed the parameter")
	}
}

// The gradient a split parameter receives from the tape is bfloat16, and
// stepping with it equals stepping the FP32 values with it widened.
func TestGradientFlow(t *testing.T) {
	g := autograd.NewGenerator(3)
	w := autograd.Randn(g, 4, 3).SetRequiresGrad(true)
	x := autograd.Randn(g, 4, 3)
	sp := amp.Split(w)
	loss := autograd.Sum(autograd.Mul(autograd.Cast(sp.Top, autograd.Float32), x), nil, false)
	loss.Backward()
	grad := sp.Top.Grad()
	if grad == nil || grad.DType() != autograd.BFloat16 {
		t.Fatalf("Top's gradient is %v, want bfloat16", grad)
	}
	for i, v := range x.Float32s() {
		if grad.BFloat16s()[i] != kernels.BF16FromF32(v) {
			t.Fatalf("gradient element %d is not x rounded to bfloat16", i)
		}
	}
	plain := append([]float32(nil), w.Float32s()...)
	step := updates[0].make(12)
	step(0, plain, autograd.Cast(grad, autograd.Float32).Float32s())
	sp.Step(grad, updates[0].make(12))
	if !sameBits(sp.Join().Float32s(), plain) {
		t.Fatal("step with the tape's gradient differs from FP32")
	}
	if sp.Top.Grad() != grad {
		t.Fatal("Step replaced Top's gradient")
	}
}

// A gradient in another memory format is reordered to the parameter's.
func TestStepGradientFormat(t *testing.T) {
	g := autograd.NewGenerator(5)
	p := autograd.Randn(g, 2, 3, 2, 2).To(autograd.ChannelsLast)
	grad := autograd.Randn(g, 2, 3, 2, 2) // contiguous
	plain := append([]float32(nil), p.Float32s()...)
	updates[0].make(0)(0, plain, grad.To(autograd.ChannelsLast).Float32s())
	sp := amp.Split(p)
	sp.Step(grad, updates[0].make(0))
	if !sameBits(sp.Join().Float32s(), plain) {
		t.Fatal("contiguous gradient for a channels-last parameter applied out of order")
	}
}

func TestMisuse(t *testing.T) {
	sp := amp.Split(autograd.Zeros(2, 3))
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"split int tensor", func() { amp.Split(autograd.FromInt32([]int32{1})) }, "int32"},
		{"split bfloat16 tensor", func() { amp.Split(autograd.Empty(autograd.BFloat16, 2)) }, "bfloat16"},
		{"split nil", func() { amp.Split(nil) }, "nil"},
		{"master copy of bfloat16", func() { amp.NewMasterCopy(autograd.Empty(autograd.BFloat16, 2)) }, "bfloat16"},
		{"JoinInto short slice", func() { sp.JoinInto(make([]float32, 5)) }, "5 elements for a parameter of 6"},
		{"SplitFrom long slice", func() { sp.SplitFrom(make([]float32, 7)) }, "7 elements for a parameter of 6"},
		{"Step gradient shape", func() { sp.Step(autograd.Zeros(3, 2), updates[0].make(6)) }, "[3 2] does not match parameter shape [2 3]"},
		{"Step int gradient", func() { sp.Step(autograd.Empty(autograd.Int64, 2, 3), updates[0].make(6)) }, "int64"},
		{"Step nil function", func() { sp.Step(autograd.Zeros(2, 3), nil) }, "nil"},
		{"Bottom out of step", func() {
			bad := &amp.SplitParam{Top: sp.Top, Bottom: make([]uint16, 2)}
			bad.Join()
		}, "Bottom has 2 elements, Top 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := autograd.Try(tt.f)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// net has its own parameters, a child layer, a weight tied to the child's,
// and an integer buffer.
type net struct {
	nn.Base
	fc *nn.Linear
}

func newNet(seed uint64) *net {
	g := autograd.NewGenerator(seed)
	n := &net{fc: nn.NewLinear(g, 3, 2, nn.LinearOptions{})}
	n.RegisterParameter("scale", autograd.Randn(g, 2))
	n.RegisterModule("fc", n.fc)
	n.RegisterParameter("tied", n.fc.Weight())
	n.RegisterBuffer("steps", autograd.FromInt64([]int64{42}))
	return n
}

func fp32State(t *testing.T, sd []nn.NamedTensor) map[string][]uint32 {
	t.Helper()
	out := map[string][]uint32{}
	for _, nt := range sd {
		if nt.Tensor.DType() == autograd.Float32 {
			out[nt.Name] = bitsOf(nt.Tensor.Float32s())
		}
	}
	return out
}

func TestSplitModule(t *testing.T) {
	m := newNet(1)
	before := fp32State(t, nn.StateDict(m))
	sm, err := amp.SplitModule(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range nn.NamedParameters(m) {
		if p.Tensor.DType() != autograd.BFloat16 || !p.Tensor.RequiresGrad() {
			t.Errorf("%s is %v (requires grad %v) after splitting", p.Name, p.Tensor.DType(), p.Tensor.RequiresGrad())
		}
		if sm.Param(p.Name) == nil || sm.Param(p.Name).Top != p.Tensor {
			t.Errorf("%s is not its split's Top", p.Name)
		}
	}
	if m.fc.Weight() != sm.Param("fc.weight").Top || sm.Param("tied") != sm.Param("fc.weight") {
		t.Error("the tied weight was split twice")
	}
	var names []string
	for _, p := range sm.Params() {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, " "); got != "scale tied fc.bias" {
		t.Errorf("Params: %s", got)
	}
	sd := sm.StateDict()
	var keys []string
	for _, nt := range sd {
		keys = append(keys, nt.Name)
	}
	if got := strings.Join(keys, " "); got != "scale tied steps fc.weight fc.bias" {
		t.Errorf("StateDict keys: %s", got)
	}
	after := fp32State(t, sd)
	for name, b := range before {
		if a, ok := after[name]; !ok || !slices.Equal(a, b) {
			t.Errorf("state dict %s is not the FP32 value before splitting", name)
		}
	}
	if sd[2].Tensor.Int64s()[0] != 42 {
		t.Error("buffer lost")
	}
}

// A saved split model is the file the FP32 model saves, and loads back into
// split form exactly, in place.
func TestSplitStateDictRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ref := newNet(1)
	refPath := filepath.Join(dir, "fp32.safetensors")
	if err := nn.SaveStateDict(ref, refPath); err != nil {
		t.Fatal(err)
	}
	want := fp32State(t, nn.StateDict(ref))

	m := newNet(2) // different weights
	sm, err := amp.SplitModule(m)
	if err != nil {
		t.Fatal(err)
	}
	top := sm.Param("fc.weight").Top
	if err := sm.LoadStateDict(refPath); err != nil {
		t.Fatal(err)
	}
	if sm.Param("fc.weight").Top != top || m.fc.Weight() != top {
		t.Fatal("loading replaced the Top tensor")
	}
	if got := fp32State(t, sm.StateDict()); !maps.EqualFunc(got, want, slices.Equal[[]uint32]) {
		t.Fatal("loaded split state differs from the FP32 file")
	}

	// Save from split form, load into a plain FP32 model: same bits.
	path := filepath.Join(dir, "split.safetensors")
	if err := sm.SaveStateDict(path); err != nil {
		t.Fatal(err)
	}
	plain := newNet(3)
	if err := nn.LoadStateDict(plain, path); err != nil {
		t.Fatal(err)
	}
	if got := fp32State(t, nn.StateDict(plain)); !maps.EqualFunc(got, want, slices.Equal[[]uint32]) {
		t.Fatal("FP32 model loaded from a split model's file differs")
	}
}

func TestSplitLoadTensors(t *testing.T) {
	m := newNet(1)
	sm, err := amp.SplitModule(m)
	if err != nil {
		t.Fatal(err)
	}
	orig := fp32State(t, sm.StateDict())
	w := fromBits(0x3f80ffff, 0x80000001, 0x7f800001, 0x00000000, 0xbf80ffff, 0x007fffff)

	// Non-strict: only fc.weight changes, the rest keep their exact bits.
	err = sm.LoadTensors([]nn.NamedTensor{{Name: "fc.weight", Tensor: autograd.FromFloat32(w, 2, 3)}}, nn.LoadOptions{NonStrict: true})
	if err != nil {
		t.Fatal(err)
	}
	got := fp32State(t, sm.StateDict())
	if !slices.Equal(got["fc.weight"], bitsOf(w)) || !slices.Equal(got["tied"], bitsOf(w)) {
		t.Errorf("fc.weight loaded as %x", got["fc.weight"])
	}
	for _, k := range []string{"scale", "fc.bias"} {
		if !slices.Equal(got[k], orig[k]) {
			t.Errorf("%s changed by a non-strict load that did not name it", k)
		}
	}

	// Errors name the parameter; nothing is loaded.
	tests := []struct {
		name string
		ts   []nn.NamedTensor
		want []string
	}{
		{"shape mismatch", []nn.NamedTensor{{Name: "fc.weight", Tensor: autograd.Zeros(3, 2)}}, []string{"size mismatch for fc.weight", "[3 2]", "[2 3]"}},
		{"integer values", []nn.NamedTensor{{Name: "scale", Tensor: autograd.FromInt32([]int32{1, 2})}}, []string{"dtype mismatch for scale", "int32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fp32State(t, sm.StateDict())
			err := sm.LoadTensors(tt.ts, nn.LoadOptions{NonStrict: true})
			var sde *nn.StateDictError
			if !errors.As(err, &sde) {
				t.Fatalf("error %v, want a *nn.StateDictError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !maps.EqualFunc(fp32State(t, sm.StateDict()), before, slices.Equal[[]uint32]) {
				t.Error("a failed load changed the model")
			}
		})
	}

	// Strict loading reports missing keys by name.
	err = sm.LoadTensors(nil)
	if err == nil || !strings.Contains(err.Error(), `"fc.weight"`) {
		t.Errorf("strict load of nothing: %v", err)
	}
}

// bf16Param holds a parameter SplitModule cannot split.
type bf16Param struct{ nn.Base }

func TestSplitModuleErrors(t *testing.T) {
	tests := []struct {
		name string
		make func() *net
		want string
	}{
		{"bfloat16 parameter", func() *net {
			m := newNet(1)
			b := &bf16Param{}
			b.RegisterParameter("w", autograd.Empty(autograd.BFloat16, 2))
			m.RegisterModule("half", b)
			return m
		}, `parameter "half.w" is bfloat16; only float32 parameters can be split`},
		{"integer parameter", func() *net {
			m := newNet(1)
			m.SetParameter("scale", autograd.FromInt32([]int32{1, 2}))
			return m
		}, `parameter "scale" is int32`},
		{"non-leaf parameter", func() *net {
			m := newNet(1)
			m.fc.SetParameter("bias", autograd.Add(m.fc.Bias(), m.fc.Bias()))
			return m
		}, `parameter "fc.bias" is the result of AddBackward, not a leaf`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.make()
			_, err := amp.SplitModule(m)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if m.fc.Weight().DType() != autograd.Float32 {
				t.Error("a failed SplitModule changed the module")
			}
		})
	}
	if _, err := amp.SplitModule(nil); err == nil || !strings.Contains(err.Error(), "module is nil") {
		t.Errorf("SplitModule(nil): %v", err)
	}
}
