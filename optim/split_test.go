package optim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// splitNet holds parameters of odd sizes, to exercise vector bodies and
// scalar tails.
type splitNet struct{ nn.Base }

var splitNetSizes = []int{1, 7, 4095, 4097, 12305}

func newSplitNet(seed uint64) *splitNet {
	m := &splitNet{}
	rng := rand.New(rand.NewPCG(seed, 1))
	for i, n := range splitNetSizes {
		v := make([]float32, n)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		p := autograd.FromFloat32(v)
		p.SetRequiresGrad(true)
		m.RegisterParameter(fmt.Sprintf("p%d", i), p)
	}
	return m
}

// splitPair is an FP32 model and an identical split one, with optimizers
// made by mk and mkSplit.
type splitPair struct {
	fp32      []*autograd.Tensor
	sm        *amp.SplitModel
	opt, sopt optim.Optimizer
	rng       *rand.Rand
}

func newSplitPair(t *testing.T, mk func([]*autograd.Tensor) (optim.Optimizer, error), mkSplit func(*amp.SplitModel) (optim.Optimizer, error)) *splitPair {
	t.Helper()
	a := newSplitNet(1)
	sm, err := amp.SplitModule(newSplitNet(1))
	if err != nil {
		t.Fatal(err)
	}
	sp := &splitPair{fp32: nn.Parameters(a), sm: sm, rng: rand.New(rand.NewPCG(9, 9))}
	if sp.opt, err = mk(sp.fp32); err != nil {
		t.Fatal(err)
	}
	if sp.sopt, err = mkSplit(sm); err != nil {
		t.Fatal(err)
	}
	return sp
}

// step gives both models the same bfloat16 gradients (the FP32 model gets
// them widened) and steps both optimizers.
func (sp *splitPair) step() {
	for i, ns := range sp.sm.Params() {
		n := ns.Param.Top.Numel()
		g16 := make([]uint16, n)
		g32 := make([]float32, n)
		for j := range g16 {
			g16[j] = kernels.BF16FromF32(float32(sp.rng.NormFloat64() * 0.1))
			g32[j] = kernels.F32FromBF16(g16[j])
		}
		ns.Param.Top.SetGrad(autograd.FromBFloat16(g16, ns.Param.Top.Shape()...))
		sp.fp32[i].SetGrad(autograd.FromFloat32(g32, sp.fp32[i].Shape()...))
	}
	sp.opt.Step()
	sp.sopt.Step()
}

// check requires the split masters and the optimizer state to be bit for
// bit the FP32 ones.
func (sp *splitPair) check(t *testing.T, what string) {
	t.Helper()
	for i, ns := range sp.sm.Params() {
		got, want := ns.Param.Join().Float32s(), sp.fp32[i].Float32s()
		if err := sameBits(got, want); err != "" {
			t.Fatalf("%s: %s (%d elements): master %s", what, ns.Name, len(want), err)
		}
	}
	sd, ssd := sp.opt.StateDict(), sp.sopt.StateDict()
	if len(sd.State) != len(ssd.State) {
		t.Fatalf("%s: %d state entries, FP32 %d", what, len(ssd.State), len(sd.State))
	}
	for id, st := range sd.State {
		for name, ten := range st {
			s := ssd.State[id][name]
			if s == nil || s.DType() != autograd.Float32 {
				t.Fatalf("%s: state.%d.%s missing or not float32 in the split optimizer", what, id, name)
			}
			if err := sameBits(s.Float32s(), ten.Float32s()); err != "" {
				t.Fatalf("%s: state.%d.%s: %s", what, id, name, err)
			}
		}
	}
}

func sameBits(got, want []float32) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d elements, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Sprintf("element %d is %v (%#08x), want %v (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	return ""
}

// TestSplitGroupsMixFP32AndTops: FP32 parameters and Tops may share an
// optimizer and a group.
func TestSplitGroupsMixFP32AndTops(t *testing.T) {
	sm, err := amp.SplitModule(newSplitNet(1))
	if err != nil {
		t.Fatal(err)
	}
	top, fp, opts := sm.Params()[0].Param.Top, leaf(1, 2), optim.SGDOptions{LR: 0.1}
	mixed, err := optim.NewSGDSplitGroups(sm,
		optim.SGDGroup{Params: []*autograd.Tensor{fp, top}, SGDOptions: opts},
		optim.SGDGroup{Params: []*autograd.Tensor{sm.Params()[1].Param.Top}, SGDOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	setGrad(fp, 1, 1)
	top.SetGrad(autograd.FromBFloat16([]uint16{0x3f80})) // 1
	before := sm.Params()[0].Param.Join().Float32s()[0]
	mixed.Step()
	if got := fp.Float32s(); got[0] != float32(1-0.1) || got[1] != float32(2-0.1) {
		t.Errorf("FP32 parameter after a mixed step: %v", got)
	}
	if got, want := sm.Params()[0].Param.Join().Float32s()[0], float32(float64(before)-0.1); got != want {
		t.Errorf("split parameter after a mixed step: %v, want %v", got, want)
	}
}

// splitCase is an optimizer made over FP32 parameters by mk and over a
// split model by mkSplit.
type splitCase struct {
	name    string
	mk      func([]*autograd.Tensor) (optim.Optimizer, error)
	mkSplit func(*amp.SplitModel) (optim.Optimizer, error)
}
