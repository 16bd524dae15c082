package amp_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
)

// convNet is a conv + BN + linear model with channels-last conv weights, the
// shape of what AutocastParams is for.
func convNet(seed uint64) *nn.Sequential {
	g := autograd.NewGenerator(seed)
	return nn.To(nn.NewSequential(
		nn.NewConv2d(g, 2, 4, 3, nn.ConvOptions{Padding: 1}),
		nn.NewBatchNorm2d(4, nn.BatchNormOptions{}),
		nn.NewReLU(),
		nn.NewFlatten(1, -1),
		nn.NewLinear(g, 4*3*3, 5, nn.LinearOptions{}),
	), autograd.ChannelsLast)
}

// dtypes returns each parameter's dtype by name.
func dtypes(m nn.Module) map[string]autograd.DType {
	out := map[string]autograd.DType{}
	for _, p := range nn.NamedParameters(m) {
		out[p.Name] = p.Tensor.DType()
	}
	return out
}

var wantAutocastDTypes = map[string]autograd.DType{
	"0.weight": autograd.BFloat16, "0.bias": autograd.BFloat16,
	"1.weight": autograd.Float32, "1.bias": autograd.Float32,
	"4.weight": autograd.BFloat16, "4.bias": autograd.BFloat16,
}

func checkDTypes(t *testing.T, m nn.Module) {
	t.Helper()
	for name, got := range dtypes(m) {
		if want := wantAutocastDTypes[name]; got != want {
			t.Errorf("%s is %v, want %v", name, got, want)
		}
	}
}

// SplitModuleFunc splits only the selected parameters, keeping memory
// formats, and leaves the rest float32 for a mixed split optimizer.
func TestSplitModuleFunc(t *testing.T) {
	ref := convNet(1)
	m := convNet(1)
	sm, err := amp.SplitModuleFunc(m, amp.AutocastParams)
	if err != nil {
		t.Fatal(err)
	}
	checkDTypes(t, m)
	var names []string
	for _, ns := range sm.Params() {
		names = append(names, ns.Name)
	}
	if got := strings.Join(names, " "); got != "0.weight 0.bias 4.weight 4.bias" {
		t.Errorf("split parameters: %s", got)
	}
	if w := sm.Param("0.weight").Top; w.Format() != autograd.ChannelsLast || !w.RequiresGrad() {
		t.Errorf("conv weight Top: format %v, requires grad %v", w.Format(), w.RequiresGrad())
	}
	if sm.Param("1.weight") != nil {
		t.Error("the BatchNorm weight was split")
	}
	// The state dict is the FP32 model's, bit for bit.
	want := fp32State(t, nn.StateDict(ref))
	got := fp32State(t, sm.StateDict())
	for name, bits := range want {
		if g, ok := got[name]; !ok || !slices.Equal(g, bits) {
			t.Errorf("state dict %s differs from the unsplit model's", name)
		}
	}
	if _, err := amp.SplitModuleFunc(convNet(1), nil); err == nil || !strings.Contains(err.Error(), "filter is nil") {
		t.Errorf("nil filter: %v", err)
	}
}

// CastModule rounds the selected parameters to nearest even and keeps
// their format and requires-grad flag; the model then runs under Autocast
// close to the FP32 one.
func TestCastModule(t *testing.T) {
	ref := nn.Eval(convNet(2))
	m := nn.Eval(convNet(2))
	n, err := amp.CastModule(m, amp.AutocastParams)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("cast %d tensors, want 4", n)
	}
	checkDTypes(t, m)
	refParams := nn.NamedParameters(ref)
	for i, p := range nn.NamedParameters(m) {
		r := refParams[i].Tensor
		if p.Tensor.Format() != r.Format() || p.Tensor.RequiresGrad() != r.RequiresGrad() {
			t.Errorf("%s: format %v requires grad %v, was %v %v", p.Name, p.Tensor.Format(), p.Tensor.RequiresGrad(), r.Format(), r.RequiresGrad())
		}
		if p.Tensor.DType() != autograd.BFloat16 {
			continue
		}
		for j, v := range r.Float32s() {
			if got, want := p.Tensor.BFloat16s()[j], kernels.BF16FromF32(v); got != want {
				t.Fatalf("%s[%d] = %#04x, want %v rounded to nearest even %#04x", p.Name, j, got, v, want)
			}
		}
	}
	x := autograd.Randn(autograd.NewGenerator(3), 2, 2, 3, 3)
	var want, got *autograd.Tensor
	x = autograd.NoGrad(x)
	want = ref.Forward(x)
	got = autograd.Cast(m.Forward(amp.Autocast(x)), autograd.Float32)
	w, g := want.ContiguousFloat32s(), got.ContiguousFloat32s()
	for i := range w {
		if d := float64(g[i] - w[i]); d > 0.05 || d < -0.05 {
			t.Fatalf("output %d: BF16 %v, FP32 %v", i, g[i], w[i])
		}
	}
}

// MasterCopyModule keeps the FP32 tensors as masters (the very tensors an
// optimizer made before holds) and registers rounded copies in their place.
func TestMasterCopyModule(t *testing.T) {
	m := convNet(4)
	before := nn.NamedParameters(m)
	mcs, err := amp.MasterCopyModule(m, amp.AutocastParams)
	if err != nil {
		t.Fatal(err)
	}
	checkDTypes(t, m)
	if len(mcs) != 4 {
		t.Fatalf("%d master copies, want 4", len(mcs))
	}
	after := nn.NamedParameters(m)
	byName := map[string]*autograd.Tensor{}
	for _, p := range before {
		byName[p.Name] = p.Tensor
	}
	for i, mc := range mcs {
		if mc.Param.Master != byName[mc.Name] {
			t.Errorf("%s: the master is not the original FP32 parameter", mc.Name)
		}
		found := false
		for _, p := range after {
			found = found || (p.Name == mc.Name && p.Tensor == mc.Param.Copy)
		}
		if !found {
			t.Errorf("copy %d (%s) is not registered under its name", i, mc.Name)
		}
	}
}

// A tied tensor selected under one name and not another is an error for
// every conversion, and nothing changes.
func TestModuleConversionErrors(t *testing.T) {
	onlyFC := func(owner nn.NamedModule, param string) bool { return owner.Name == "fc" }
	convs := map[string]func(nn.Module, amp.ParamFilter) error{
		"SplitModuleFunc":  func(m nn.Module, f amp.ParamFilter) error { _, err := amp.SplitModuleFunc(m, f); return err },
		"CastModule":       func(m nn.Module, f amp.ParamFilter) error { _, err := amp.CastModule(m, f); return err },
		"MasterCopyModule": func(m nn.Module, f amp.ParamFilter) error { _, err := amp.MasterCopyModule(m, f); return err },
	}
	for name, conv := range convs {
		m := newNet(1)
		err := conv(m, onlyFC)
		want := `amp: ` + name + `: parameters "fc.weight" and "tied" are one tied tensor, but only "fc.weight" is selected`
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
		if m.fc.Weight().DType() != autograd.Float32 || m.fc.Bias().DType() != autograd.Float32 {
			t.Errorf("%s: a failed conversion changed the module", name)
		}
		m = newNet(1)
		m.fc.SetParameter("bias", autograd.FromInt32([]int32{1, 2}))
		if err := conv(m, onlyFC); err == nil || !strings.Contains(err.Error(), `parameter "fc.bias" is int32`) {
			t.Errorf("%s of an int32 parameter: %v", name, err)
		}
		if err := conv(nil, onlyFC); err == nil || !strings.Contains(err.Error(), "module is nil") {
			t.Errorf("%s(nil): %v", name, err)
		}
	}
}

// AutocastParams selects embedding tables too: split, they are bfloat16
// tops the lookups gather from, each row its FP32 master's high half.
func TestAutocastParamsSelectsTables(t *testing.T) {
	g := autograd.NewGenerator(3)
	emb := nn.NewEmbedding(g, 6, 5, nn.EmbeddingOptions{Sparse: true})
	bag := nn.NewEmbeddingBag(g, 6, 5, nn.EmbeddingBagOptions{Mode: "sum"})
	m := nn.NewModuleList(emb, bag, nn.NewLinear(g, 5, 2, nn.LinearOptions{}))
	masters := map[string][]float32{}
	for _, p := range nn.NamedParameters(m) {
		masters[p.Name] = slices.Clone(p.Tensor.Float32s())
	}
	sm, err := amp.SplitModuleFunc(m, amp.AutocastParams)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ns := range sm.Params() {
		names = append(names, ns.Name)
	}
	if got := strings.Join(names, " "); got != "0.weight 1.weight 2.weight 2.bias" {
		t.Fatalf("split parameters: %s", got)
	}
	idx := autograd.FromInt64([]int64{5, 0, 5}, 3)
	rows := emb.Forward(idx)
	sums := bag.Forward(idx, autograd.FromInt64([]int64{0}, 1), nil)
	if rows.DType() != autograd.BFloat16 || sums.DType() != autograd.BFloat16 {
		t.Fatalf("lookups of split tables give %v and %v, want bfloat16", rows.DType(), sums.DType())
	}
	top := func(v float32) uint16 { return uint16(math.Float32bits(v) >> 16) }
	w0 := masters["0.weight"]
	for i, r := range []int{5, 0, 5} {
		for j := range 5 {
			if got, want := rows.BFloat16s()[i*5+j], top(w0[r*5+j]); got != want {
				t.Fatalf("row %d element %d = %#04x, want the master's top half %#04x", i, j, got, want)
			}
		}
	}
	w1 := masters["1.weight"]
	for j := range 5 {
		sum := float64(kernels.F32FromBF16(top(w1[5*5+j])))*2 + float64(kernels.F32FromBF16(top(w1[j])))
		if got, want := sums.BFloat16s()[j], kernels.BF16FromF32(float32(sum)); got != want {
			t.Fatalf("bag sum element %d = %#04x, want %#04x", j, got, want)
		}
	}
	n, err := amp.CastModule(nn.NewModuleList(nn.NewEmbedding(g, 3, 2, nn.EmbeddingOptions{}), nn.NewEmbeddingBag(g, 3, 2, nn.EmbeddingBagOptions{})), amp.AutocastParams)
	if err != nil || n != 2 {
		t.Fatalf("CastModule cast %d tables (%v), want 2", n, err)
	}
}

// MasterCopyModule leaves sparse tables FP32: their row-sparse gradients
// have no dense form to move onto a master. Dense tables get copies.
func TestMasterCopyModuleKeepsSparseTablesFP32(t *testing.T) {
	g := autograd.NewGenerator(4)
	sparse := nn.NewEmbedding(g, 6, 3, nn.EmbeddingOptions{Sparse: true})
	sparseBag := nn.NewEmbeddingBag(g, 6, 3, nn.EmbeddingBagOptions{Sparse: true})
	for _, keep := range []amp.ParamFilter{amp.AutocastParams, nil} {
		m := nn.NewModuleList(sparse, sparseBag, nn.NewEmbeddingBag(g, 6, 3, nn.EmbeddingBagOptions{}))
		w, wb := sparse.Weight(), sparseBag.Weight()
		mcs, err := amp.MasterCopyModule(m, keep)
		if err != nil {
			t.Fatal(err)
		}
		if len(mcs) != 1 || mcs[0].Name != "2.weight" {
			t.Fatalf("master copies %v, want only 2.weight", mcs)
		}
		if sparse.Weight() != w || sparseBag.Weight() != wb || w.DType() != autograd.Float32 {
			t.Fatal("a sparse table was replaced")
		}
		autograd.EmbeddingSparse(autograd.FromInt64([]int64{1}, 1), w).Backward(autograd.Ones(1, 3))
		if w.SparseGrad() == nil {
			t.Fatal("the FP32 sparse table lost its sparse gradient")
		}
		w.ZeroGrad()
	}
}
