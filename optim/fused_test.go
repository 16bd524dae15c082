package optim_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// fusedBatch is one step's lookups into tables of rows (bags of 0 to 3
// rows, repeats included) and the coefficients of a linear loss on the
// bags.
type fusedBatch struct {
	idx, offs, coef []*autograd.Tensor
}

func newFusedBatch(r *rand.Rand, rows []int, batch, dim int) fusedBatch {
	var b fusedBatch
	for _, n := range rows {
		var ix, of []int64
		for range batch {
			of = append(of, int64(len(ix)))
			for range r.IntN(4) {
				ix = append(ix, int64(r.IntN(n)))
			}
		}
		b.idx = append(b.idx, autograd.FromInt64(ix, len(ix)))
		b.offs = append(b.offs, autograd.FromInt64(of, batch))
		cv := make([]float32, batch*dim)
		for i := range cv {
			cv[i] = float32(r.NormFloat64())
		}
		b.coef = append(b.coef, autograd.FromFloat32(cv, batch, dim))
	}
	return b
}

// loss is Σ_t Σ bags_t ⊙ coef_t, in float32.
func (b fusedBatch) loss(bags []*autograd.Tensor) *autograd.Tensor {
	var l *autograd.Tensor
	for k, bag := range bags {
		if bag.DType() != autograd.Float32 {
			bag = autograd.Cast(bag, autograd.Float32)
		}
		term := autograd.Sum(autograd.Mul(bag, b.coef[k]), nil, false)
		if l == nil {
			l = term
		} else {
			l = autograd.Add(l, term)
		}
	}
	return l
}

// TestFuseSparseMatchesStep trains the same tables fused and unfused, in
// float32 and split BF16, with a learning rate that changes every step,
// and checks that they stay the same bits: the fused update is the
// unfused sparse gradient and Step, applied inside Backward. The large
// case splits its tables across the workers.
func TestFuseSparseMatchesStep(t *testing.T) {
	for _, size := range []struct {
		name       string
		rows       []int
		dim, batch int
	}{{"small", []int{7, 13, 2, 40}, 5, 6}, {"large", []int{700, 1300, 200, 4000}, 40, 300}} {
		t.Run(size.name, func(t *testing.T) { fuseSparseMatchesStep(t, size.rows, size.dim, size.batch) })
	}
}

func fuseSparseMatchesStep(t *testing.T, rows []int, dim, batch int) {
	sgd := optim.SGDOptions{LR: 0.5}
	adagrad := optim.AdagradOptions{LR: 0.3, LRDecay: 0.01, InitialAccumulatorValue: 0.1, Eps: 1e-10}
	rw := optim.RowWiseAdagradOptions{LR: 0.3, LRDecay: 0.01, InitialAccumulatorValue: 0.1, Eps: 1e-10}
	kinds := []struct {
		name  string
		fp32  func([]*autograd.Tensor) (optim.Optimizer, error)
		split func(*amp.SplitModel) (optim.Optimizer, error)
	}{
		{"SGD", func(ps []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewSGD(ps, sgd) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewSGDSplit(sm, sgd) }},
		{"Adagrad", func(ps []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewAdagrad(ps, adagrad) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewAdagradSplit(sm, adagrad) }},
		{"RowWiseAdagrad", func(ps []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewRowWiseAdagrad(ps, rw) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewRowWiseAdagradSplit(sm, rw) }},
	}
	for _, k := range kinds {
		for _, split := range []bool{false, true} {
			for _, mode := range []string{"sum", "mean"} {
				name := k.name + "/" + mode
				if split {
					name += "/split"
				}
				t.Run(name, func(t *testing.T) {
					opts := nn.MergedEmbeddingBagOptions{Mode: mode, Sparse: true}
					build := func() (*nn.MergedEmbeddingBag, optim.Optimizer, []*autograd.Tensor) {
						m := nn.NewMergedEmbeddingBag(autograd.NewGenerator(9), rows, dim, opts)
						if !split {
							o, err := k.fp32(nn.Parameters(m))
							if err != nil {
								t.Fatal(err)
							}
							return m, o, nn.Parameters(m)
						}
						sm, err := amp.SplitModuleFunc(m, amp.AutocastParams)
						if err != nil {
							t.Fatal(err)
						}
						o, err := k.split(sm)
						if err != nil {
							t.Fatal(err)
						}
						return m, o, nn.Parameters(m)
					}
					ref, refOpt, _ := build()
					m, opt, tables := build()
					if err := optim.FuseSparse(opt, tables...); err != nil {
						t.Fatal(err)
					}
					r := rand.New(rand.NewPCG(31, 32))
					for step := range 6 {
						lr := 0.4 / float64(step+1)
						refOpt.SetLR(0, lr)
						opt.SetLR(0, lr)
						b := newFusedBatch(r, rows, batch, dim)
						refOpt.ZeroGrad()
						opt.ZeroGrad()
						b.loss(ref.Forward(b.idx, b.offs)).Backward()
						b.loss(m.Forward(b.idx, b.offs)).Backward()
						for i, p := range tables {
							if p.SparseGrad() != nil || p.Grad() != nil {
								t.Fatalf("step %d: fused table %d kept a gradient", step, i)
							}
						}
						refOpt.Step()
						opt.Step()
						for i, p := range nn.Parameters(ref) {
							a, f := stateBits(p), stateBits(tables[i])
							for j := range a {
								if a[j] != f[j] {
									t.Fatalf("step %d table %d element %d: fused %08x, unfused %08x", step, i, j, f[j], a[j])
								}
							}
						}
					}
					// The state dicts agree too.
					if a, b := refOpt.StateDict(), opt.StateDict(); len(a.State) != len(b.State) {
						t.Errorf("state dicts hold %d and %d parameters", len(a.State), len(b.State))
					}
				})
			}
		}
	}
}

// stateBits returns p's elements as bits (bfloat16 widened).
func stateBits(p *autograd.Tensor) []uint32 {
	v := autograd.Cast(p.Detach(), autograd.Float32).Float32s()
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestFuseSparseErrors checks what FuseSparse refuses, and that a second
// gradient before Step fails the backward pass naming the table.
func TestFuseSparseErrors(t *testing.T) {
	m := nn.NewMergedEmbeddingBag(autograd.NewGenerator(1), []int{5, 6}, 3, nn.MergedEmbeddingBagOptions{Sparse: true})
	tables := nn.Parameters(m)
	sgd, _ := optim.NewSGD(tables, optim.SGDOptions{LR: 0.1})
	adam, _ := optim.NewAdam(tables, optim.DefaultAdamOptions())
	vec := autograd.Zeros(4).SetRequiresGrad(true)
	withVec, _ := optim.NewSGD(append([]*autograd.Tensor{vec}, tables...), optim.SGDOptions{LR: 0.1})
	for _, c := range []struct {
		name   string
		opt    optim.Optimizer
		params []*autograd.Tensor
		want   string
	}{
		{"Adam", adam, tables, "no sparse step to fuse"},
		{"nil optimizer", nil, tables, "no sparse step"},
		{"a stranger", sgd, []*autograd.Tensor{autograd.Zeros(5, 3)}, "is not one of the optimizer's"},
		{"a vector", withVec, []*autograd.Tensor{vec}, "2-D tables"},
		{"nil", sgd, []*autograd.Tensor{nil}, "parameter 0 is nil"},
	} {
		err := optim.FuseSparse(c.opt, c.params...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}

	if err := optim.FuseSparse(sgd, tables...); err != nil {
		t.Fatal(err)
	}
	idx := []*autograd.Tensor{autograd.FromInt64([]int64{1, 2}, 2), autograd.FromInt64([]int64{3}, 1)}
	offs := []*autograd.Tensor{autograd.FromInt64([]int64{0, 1}, 2), autograd.FromInt64([]int64{0, 1}, 2)}
	pass := func() error {
		return autograd.Try(func() { autograd.Sum(m.Forward(idx, offs)[0], nil, false).Backward() })
	}
	if err := pass(); err != nil {
		t.Fatal(err)
	}
	err := pass() // accumulating: no Step or ZeroGrad between
	var oe *optim.Error
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "second sparse gradient before Step") {
		t.Fatalf("a second backward pass: %v, want an *optim.Error about accumulation", err)
	}
	sgd.Step()
	if err := pass(); err != nil {
		t.Errorf("after Step: %v", err)
	}
	sgd.ZeroGrad()
	if err := pass(); err != nil {
		t.Errorf("after ZeroGrad: %v", err)
	}
}

// TestFuseSparseSharedTableInParallel checks that a table a merged lookup
// reads twice fails the backward pass with the optimizer's error while
// the other tables update on the workers, not a crash in a worker.
func TestFuseSparseSharedTableInParallel(t *testing.T) {
	g := autograd.NewGenerator(5)
	a := autograd.Randn(g, 3000, 32).SetRequiresGrad(true)
	b := autograd.Randn(g, 2000, 32).SetRequiresGrad(true)
	sgd, err := optim.NewSGD([]*autograd.Tensor{a, b}, optim.SGDOptions{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if err := optim.FuseSparse(sgd, a, b); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	batch := newFusedBatch(r, []int{2000, 2000, 2000}, 1000, 32)
	err = autograd.Try(func() {
		outs := autograd.MergedEmbeddingBag([]*autograd.Tensor{b, a, a}, batch.idx, batch.offs, autograd.BagSum, false, true)
		batch.loss(outs).Backward()
	})
	var oe *optim.Error
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "second sparse gradient before Step") {
		t.Fatalf("a table looked up twice: %v, want an *optim.Error about accumulation", err)
	}
}
