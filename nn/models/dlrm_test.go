package models

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// dlrmGoldenConfig is the model of testdata/golden/gen_dlrm.py.
func dlrmGoldenConfig(op string, itself bool) DLRMConfig {
	return DLRMConfig{
		SparseFeatureSize: 8,
		EmbeddingSizes:    []int{7, 50, 300, 1000},
		BottomMLP:         []int{13, 16, 8},
		TopMLP:            []int{16, 1},
		InteractionOp:     op,
		InteractionItself: itself,
		SparseTables:      true,
	}
}

// dlrmBatch returns gen_dlrm.py's batch s: dense, indices, offsets, target.
func dlrmBatch(t *testing.T, set golden.Set, s, tables int) (dense *autograd.Tensor, idx, offs []*autograd.Tensor, target *autograd.Tensor) {
	t.Helper()
	for k := range tables {
		idx = append(idx, set.Get(t, fmt.Sprintf("batch.%d.idx.%d", s, k)))
		offs = append(offs, set.Get(t, fmt.Sprintf("batch.%d.offsets.%d", s, k)))
	}
	return set.Get(t, fmt.Sprintf("batch.%d.dense", s)), idx, offs, set.Get(t, fmt.Sprintf("batch.%d.target", s))
}

// loadPrefixed loads the set's entries named prefix+name into m strictly.
func loadPrefixed(t *testing.T, m nn.Module, set golden.Set, prefix string) {
	t.Helper()
	var sd []nn.NamedTensor
	for name, v := range set {
		if s, ok := strings.CutPrefix(name, prefix); ok {
			sd = append(sd, nn.NamedTensor{Name: s, Tensor: v.Clone()})
		}
	}
	if err := nn.LoadTensors(m, sd); err != nil {
		t.Fatal(err)
	}
}

// TestDLRMMatchesPyTorch is acceptance 1 of issue 19: DLRM_Net's weights
// load strictly; the probabilities on a batch agree with PyTorch's to 1e-5;
// three SGD steps with sparse table gradients give PyTorch's losses (1e-5
// relative), MLP weights (1e-4 of their largest magnitude), touched table
// rows (1e-5) and untouched rows bit for bit.
func TestDLRMMatchesPyTorch(t *testing.T) {
	set := golden.Load(t, "dlrm.safetensors")
	cases := []struct {
		name, op string
		itself   bool
		topIn    int
	}{{"dot", "dot", false, 18}, {"self", "dot", true, 23}, {"cat", "cat", false, 40}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := dlrmGoldenConfig(c.op, c.itself)
			if got := cfg.TopInput(); got != c.topIn {
				t.Fatalf("TopInput() = %d, want %d", got, c.topIn)
			}
			m, err := NewDLRM(autograd.NewGenerator(5), cfg)
			if err != nil {
				t.Fatal(err)
			}
			loadPrefixed(t, m, set, c.name+".init.")
			T := len(cfg.EmbeddingSizes)

			dense, idx, offs, _ := dlrmBatch(t, set, 0, T)
			p := m.Forward(autograd.NoGrad(dense), idx, offs)
			golden.AssertWithin(t, "probabilities", p, set.Get(t, c.name+".prob"), 1e-5)

			opt, err := optim.NewSGD(nn.Parameters(m), optim.SGDOptions{LR: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			touched := make([]map[int64]bool, T)
			for k := range touched {
				touched[k] = map[int64]bool{}
			}
			wantLoss := set.Get(t, c.name+".loss").Values()
			for s := range wantLoss {
				dense, idx, offs, target := dlrmBatch(t, set, s, T)
				for k, ix := range idx {
					for _, r := range ix.Int64s() {
						touched[k][r] = true
					}
				}
				opt.ZeroGrad()
				loss := autograd.BCELoss(m.Forward(dense, idx, offs), target, autograd.ReductionMean)
				loss.Backward()
				if s == 0 {
					for k, w := range m.Emb.Weights() {
						if w.SparseGrad() == nil {
							t.Fatalf("table %d has no sparse gradient", k)
						}
					}
				}
				opt.Step()
				if got, want := loss.Item(), wantLoss[s]; math.Abs(got-want) > 1e-5*math.Abs(want) {
					t.Errorf("step %d: loss %.8g, PyTorch %.8g (relative %.2g, want <= 1e-5)", s, got, want, math.Abs(got-want)/math.Abs(want))
				}
			}

			worstMLP, worstRow := 0.0, 0.0
			for _, nt := range nn.StateDict(m) {
				want := set.Get(t, c.name+".final."+nt.Name)
				if fmt.Sprint(nt.Tensor.Shape()) != fmt.Sprint(want.Shape()) {
					t.Fatalf("%s: shape %v, PyTorch %v", nt.Name, nt.Tensor.Shape(), want.Shape())
				}
				if !strings.HasPrefix(nt.Name, "emb_l.") {
					r := maxRelative(nt.Tensor.Values(), want.Values())
					worstMLP = math.Max(worstMLP, r)
					if r > 1e-4 {
						t.Errorf("%s after 3 steps differs from PyTorch's by %.3g relative to its largest value, want <= 1e-4", nt.Name, r)
					}
					continue
				}
				var k int
				fmt.Sscanf(nt.Name, "emb_l.%d.weight", &k)
				got, w, init := nt.Tensor.Float32s(), want.Float32s(), set.Get(t, c.name+".init."+nt.Name).Float32s()
				d := nt.Tensor.Shape()[1]
				moved := 0
				for r := range nt.Tensor.Shape()[0] {
					for j := range d {
						i := r*d + j
						if !touched[k][int64(r)] {
							if math.Float32bits(got[i]) != math.Float32bits(init[i]) || math.Float32bits(w[i]) != math.Float32bits(init[i]) {
								t.Errorf("%s row %d (never looked up) changed: %v, PyTorch %v, initially %v", nt.Name, r, got[i], w[i], init[i])
							}
							continue
						}
						if got[i] != init[i] {
							moved++
						}
						e := math.Abs(float64(got[i]) - float64(w[i]))
						worstRow = math.Max(worstRow, e)
						if e > 1e-5 {
							t.Errorf("%s[%d, %d] after 3 steps: %v, PyTorch %v (|diff| %.2g, want <= 1e-5)", nt.Name, r, j, got[i], w[i], e)
						}
					}
				}
				if moved == 0 {
					t.Errorf("%s: no touched row moved", nt.Name)
				}
				if len(touched[k]) == nt.Tensor.Shape()[0] && nt.Tensor.Shape()[0] > 7 {
					t.Errorf("%s: every row was touched; the untouched-rows check is empty", nt.Name)
				}
			}
			t.Logf("after 3 steps: MLP max-relative %.2g, touched table rows max |diff| %.2g", worstMLP, worstRow)
		})
	}
}

func TestDLRMStateDictNames(t *testing.T) {
	m, err := NewDLRM(autograd.NewGenerator(1), dlrmGoldenConfig("dot", false))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nt := range nn.StateDict(m) {
		names = append(names, fmt.Sprintf("%s%v", nt.Name, nt.Tensor.Shape()))
	}
	want := []string{
		"emb_l.0.weight[7 8]", "emb_l.1.weight[50 8]", "emb_l.2.weight[300 8]", "emb_l.3.weight[1000 8]",
		"bot_l.0.weight[16 13]", "bot_l.0.bias[16]", "bot_l.2.weight[8 16]", "bot_l.2.bias[8]",
		"top_l.0.weight[16 18]", "top_l.0.bias[16]", "top_l.2.weight[1 16]", "top_l.2.bias[1]",
	}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("state dict\n got %v\nwant %v", names, want)
	}
	if _, ok := m.Bottom.At(3).(*nn.ReLU); !ok {
		t.Errorf("bot_l.3 is %T, want ReLU after the last bottom layer too", m.Bottom.At(3))
	}
	if _, ok := m.Top.At(3).(*nn.Sigmoid); !ok {
		t.Errorf("top_l.3 is %T, want Sigmoid", m.Top.At(3))
	}
}

// TestDLRMInit checks dlrm's initialisation: tables within ±√(1/n), MLP
// weights and biases with standard deviations near √(2/(m+n)) and √(1/m).
func TestDLRMInit(t *testing.T) {
	cfg := DLRMConfig{SparseFeatureSize: 64, EmbeddingSizes: []int{4, 10000}, BottomMLP: []int{13, 512, 64}, TopMLP: []int{256, 1}}
	m, err := NewDLRM(autograd.NewGenerator(2), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range cfg.EmbeddingSizes {
		b := math.Sqrt(1 / float64(n))
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range m.Emb.Tables[k].Weight().Values() {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		if lo < -b || hi > b || hi-lo < b {
			t.Errorf("table %d: values in [%.4g, %.4g], want spread over ±%.4g", k, lo, hi, b)
		}
	}
	std := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x * x
		}
		return math.Sqrt(s / float64(len(v)))
	}
	l := m.Bottom.At(0).(*nn.Linear)
	if got, want := std(l.Weight().Values()), math.Sqrt(2.0/(512+13)); math.Abs(got/want-1) > 0.05 {
		t.Errorf("bot_l.0.weight std %.4g, want about %.4g", got, want)
	}
	if got, want := std(l.Bias().Values()), math.Sqrt(1.0/512); math.Abs(got/want-1) > 0.15 {
		t.Errorf("bot_l.0.bias std %.4g, want about %.4g", got, want)
	}
}

func TestDLRMConfigErrors(t *testing.T) {
	good := dlrmGoldenConfig("dot", false)
	for _, c := range []struct {
		name string
		edit func(*DLRMConfig)
		want string
	}{
		{"bottom output is not d", func(c *DLRMConfig) { c.BottomMLP = []int{13, 16, 4} }, "bottom MLP output 4 must equal the sparse feature size 8"},
		{"no tables", func(c *DLRMConfig) { c.EmbeddingSizes = nil }, "no embedding tables"},
		{"empty table", func(c *DLRMConfig) { c.EmbeddingSizes = []int{7, 0, 3} }, "table 1 (emb_l.1)"},
		{"negative rows", func(c *DLRMConfig) { c.EmbeddingSizes = []int{-7} }, "table 0 (emb_l.0)"},
		{"zero d", func(c *DLRMConfig) { c.SparseFeatureSize = 0; c.BottomMLP = []int{13, 0} }, "sparse feature size must be positive"},
		{"bottom too short", func(c *DLRMConfig) { c.BottomMLP = []int{8} }, "bottom MLP needs an input"},
		{"bottom zero width", func(c *DLRMConfig) { c.BottomMLP = []int{13, 0, 8} }, "bottom MLP width 1 must be positive"},
		{"no top", func(c *DLRMConfig) { c.TopMLP = nil }, "top MLP needs at least one layer"},
		{"top zero width", func(c *DLRMConfig) { c.TopMLP = []int{16, 0} }, "top MLP width 1 must be positive"},
		{"interaction op", func(c *DLRMConfig) { c.InteractionOp = "mul" }, "interaction op must be"},
		{"embedding mode", func(c *DLRMConfig) { c.EmbeddingMode = "max" }, "embedding mode must be"},
		{"loss threshold", func(c *DLRMConfig) { c.LossThreshold = 0.5 }, "loss threshold must be in [0, 0.5)"},
		{"NaN loss threshold", func(c *DLRMConfig) { c.LossThreshold = math.NaN() }, "loss threshold"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			cfg.EmbeddingSizes = append([]int(nil), good.EmbeddingSizes...)
			c.edit(&cfg)
			m, err := NewDLRM(autograd.NewGenerator(1), cfg)
			if err == nil || m != nil {
				t.Fatalf("NewDLRM = %v, %v; want an error", m, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
	if _, err := NewDLRM(nil, good); err == nil {
		t.Error("NewDLRM(nil generator) gave no error")
	}
}

func TestDLRMForwardShapesAndThreshold(t *testing.T) {
	cfg := dlrmGoldenConfig("dot", false)
	cfg.LossThreshold = 0.45
	m, err := NewDLRM(autograd.NewGenerator(3), cfg)
	if err != nil {
		t.Fatal(err)
	}
	const B, L = 5, 2
	g := autograd.NewGenerator(4)
	dense := autograd.Zeros(B, 13)
	nn.Normal(g, dense, 0, 3)
	fixed := make([]int64, 0, B*4*L)
	for range B {
		for _, rows := range cfg.EmbeddingSizes {
			for range L {
				fixed = append(fixed, int64(g.IntN(rows)))
			}
		}
	}
	p := m.ForwardFixed(dense, autograd.FromInt64(fixed, B, 4, L))
	if fmt.Sprint(p.Shape()) != "[5 1]" {
		t.Fatalf("probabilities shape %v, want [5 1]", p.Shape())
	}
	for _, v := range p.Values() {
		if v < 0.45-1e-7 || v > 0.55+1e-7 {
			t.Errorf("probability %v outside the loss threshold's [0.45, 0.55]", v)
		}
	}
	err = autograd.Try(func() { m.Forward(autograd.Zeros(B, 12), nil, nil) })
	if err == nil || !errors.Is(err, autograd.ErrShape) || !strings.Contains(err.Error(), "[batch, 13]") {
		t.Errorf("dense width 12: error %v, want a shape error naming [batch, 13]", err)
	}
}

// TestDLRMThresholdGradientAtBound checks that the loss threshold's clamp
// passes the gradient at exactly its bound, as torch.clamp's does
// (HardTanh's would be 0 there): with the last top layer's weights zero,
// every probability is sigmoid(bias), and the threshold is set to exactly
// that value.
func TestDLRMThresholdGradientAtBound(t *testing.T) {
	m, err := NewDLRM(autograd.NewGenerator(3), dlrmGoldenConfig("dot", false))
	if err != nil {
		t.Fatal(err)
	}
	var bias *autograd.Tensor
	for _, nt := range nn.NamedParameters(m) {
		switch nt.Name {
		case "top_l.2.weight":
			clear(nt.Tensor.Float32s())
		case "top_l.2.bias":
			bias = nt.Tensor
			bias.Float32s()[0] = -1
		}
	}
	if bias == nil {
		t.Fatal("no top_l.2.bias")
	}
	const B = 3
	dense := autograd.Zeros(B, 13)
	fixed := autograd.FromInt64(make([]int64, B*4), B, 4, 1)
	v := m.ForwardFixed(dense, fixed).Values()[0] // no Backward: records only
	m.Config.LossThreshold = v                    // exactly the probability: float32(t) == p
	p := m.ForwardFixed(dense, fixed)
	for _, got := range p.Values() {
		if got != v {
			t.Fatalf("probability %v, want the bound %v itself", got, v)
		}
	}
	p.Backward(autograd.Ones(B, 1))
	want := B * v * (1 - v) // the sigmoid's derivative, dy = 1 passed by the clamp
	if g := bias.Grad(); g == nil || math.Abs(g.Values()[0]-want) > 1e-6 {
		t.Errorf("top_l.2.bias gradient %v, want %v passed through the clamp at its bound", g, want)
	}
}

// TestDLRMSplitBF16 runs DLRM as split-BF16 training does (issue 19):
// every Linear and every table split by amp.SplitModuleFunc, the dense
// input under amp.Autocast. The probabilities are bfloat16 and close to
// the FP32 model's on the same weights, and each table still gets a
// row-sparse float32 gradient, on the FP32 model's rows and close to its
// values, for the split optimizers to apply to the FP32 masters.
func TestDLRMSplitBF16(t *testing.T) {
	for _, c := range []struct {
		op     string
		itself bool
	}{{"dot", false}, {"dot", true}, {"cat", false}} {
		t.Run(fmt.Sprintf("%s_itself%v", c.op, c.itself), func(t *testing.T) {
			cfg := dlrmGoldenConfig(c.op, c.itself)
			m32, err := NewDLRM(autograd.NewGenerator(5), cfg)
			if err != nil {
				t.Fatal(err)
			}
			m16, err := NewDLRM(autograd.NewGenerator(5), cfg)
			if err != nil {
				t.Fatal(err)
			}
			sm, err := amp.SplitModuleFunc(m16, amp.AutocastParams)
			if err != nil {
				t.Fatal(err)
			}
			// 4 tables, and a weight and a bias for each of 2 bottom and 2
			// top Linear layers.
			if n := len(sm.Params()); n != 12 {
				t.Fatalf("%d parameters split, want 12 (4 tables, 4 Linear layers' weights and biases)", n)
			}
			// The FP32 model computes with the tops' values, so that only
			// the arithmetic differs.
			sd := sm.StateDict()
			for i, nt := range sd {
				if sp := sm.Param(nt.Name); sp != nil {
					sd[i].Tensor = autograd.Cast(sp.Top.Detach(), autograd.Float32)
				}
			}
			if err := nn.LoadTensors(m32, sd); err != nil {
				t.Fatal(err)
			}

			const B = 6
			g := autograd.NewGenerator(6)
			dense := autograd.Zeros(B, 13)
			nn.Normal(g, dense, 0, 1)
			var idx, offs []*autograd.Tensor
			for _, rows := range cfg.EmbeddingSizes {
				var ix, of []int64
				for b := range B {
					of = append(of, int64(len(ix)))
					for range b % 3 { // bags of 0, 1 and 2 rows
						ix = append(ix, int64(g.IntN(rows)))
					}
				}
				idx = append(idx, autograd.FromInt64(ix, len(ix)))
				offs = append(offs, autograd.FromInt64(of, B))
			}
			target := autograd.FromFloat32([]float32{0, 1, 1, 0, 1, 0}, B, 1)

			p32 := m32.Forward(dense, idx, offs)
			p16 := m16.Forward(amp.Autocast(dense), idx, offs)
			if p16.DType() != autograd.BFloat16 {
				t.Fatalf("probabilities are %v under autocast, want bfloat16", p16.DType())
			}
			want, got := p32.Values(), p16.Values()
			for i := range want {
				if math.Abs(got[i]-want[i]) > 0.02 {
					t.Errorf("sample %d: BF16 probability %v, FP32 %v", i, got[i], want[i])
				}
			}
			l16 := autograd.BCELoss(p16, target, autograd.ReductionMean)
			if l16.DType() != autograd.Float32 {
				t.Errorf("loss is %v under autocast, want float32", l16.DType())
			}
			l16.Backward()
			autograd.BCELoss(p32, target, autograd.ReductionMean).Backward()
			for k, e := range m16.Emb.Tables {
				g16, g32 := e.Weight().SparseGrad(), m32.Emb.Tables[k].Weight().SparseGrad()
				if g16 == nil || g32 == nil {
					t.Fatalf("table %d: sparse gradients %v (BF16) and %v (FP32), want both", k, g16, g32)
				}
				if fmt.Sprint(g16.Indices) != fmt.Sprint(g32.Indices) || g16.Values.DType() != autograd.Float32 {
					t.Fatalf("table %d: BF16 gradient rows %v (%v), FP32 rows %v", k, g16.Indices, g16.Values.DType(), g32.Indices)
				}
				w, v := g32.Values.Values(), g16.Values.Values()
				scale := 0.0
				for _, x := range w {
					scale = max(scale, math.Abs(x))
				}
				for i := range w {
					if math.Abs(v[i]-w[i]) > 0.05*scale {
						t.Errorf("table %d gradient element %d: BF16 %v, FP32 %v (largest %v)", k, i, v[i], w[i], scale)
					}
				}
			}
		})
	}
}

// TestDLRMArenaBitwise: a forward and backward whose dense features are
// in an arena (so the lookups join it, and under autocast give bfloat16
// bags) gives the probabilities and every gradient of one without, bit
// for bit, in float32 and in split BF16 under autocast, over two steps
// with the arena reset between them.
func TestDLRMArenaBitwise(t *testing.T) {
	for _, autocast := range []bool{false, true} {
		cfg := dlrmGoldenConfig("dot", false)
		var models [2]*DLRM
		for k := range models {
			m, err := NewDLRM(autograd.NewGenerator(9), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if autocast {
				if _, err := amp.SplitModuleFunc(m, amp.AutocastParams); err != nil {
					t.Fatal(err)
				}
			}
			models[k] = m
		}
		arena := autograd.NewArena(0)
		g := autograd.NewGenerator(10)
		for step := range 2 {
			const B = 7
			dense := autograd.Zeros(B, 13)
			nn.Normal(g, dense, 0, 1)
			var idx, offs []*autograd.Tensor
			for _, rows := range cfg.EmbeddingSizes {
				var ix, of []int64
				for b := range B {
					of = append(of, int64(len(ix)))
					for range b % 3 {
						ix = append(ix, int64(g.IntN(rows)))
					}
				}
				idx, offs = append(idx, autograd.FromInt64(ix, len(ix))), append(offs, autograd.FromInt64(of, B))
			}
			target := autograd.FromFloat32([]float32{0, 1, 1, 0, 1, 0, 1}, B, 1)
			var probs [2][]float64
			for k, m := range models {
				nn.ZeroGrad(m)
				in := dense
				if autocast {
					in = amp.Autocast(in)
				}
				if k == 1 {
					in = arena.In(in)
				}
				p := m.Forward(in, idx, offs)
				probs[k] = p.Values()
				autograd.BCELoss(p, target, autograd.ReductionMean).Backward()
			}
			what := fmt.Sprintf("autocast %v step %d", autocast, step)
			if fmt.Sprint(probs[0]) != fmt.Sprint(probs[1]) {
				t.Fatalf("%s: probabilities %v in an arena, %v without", what, probs[1], probs[0])
			}
			ps := [2][]*autograd.Tensor{nn.Parameters(models[0]), nn.Parameters(models[1])}
			for i, p := range ps[0] {
				q := ps[1][i]
				a, b := gradValues(p), gradValues(q)
				if a == nil || fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("%s: parameter %d's gradient differs in an arena (%d and %d values)", what, i, len(b), len(a))
				}
			}
			arena.Reset()
		}
	}
}

// gradValues returns p's gradient, dense or the values of a sparse one.
func gradValues(p *autograd.Tensor) []float64 {
	if s := p.SparseGrad(); s != nil {
		return append(s.Values.Values(), float64(len(s.Indices)))
	}
	if g := p.Grad(); g != nil {
		return g.Values()
	}
	return nil
}
