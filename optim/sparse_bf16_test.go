package optim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// tablesNet is a sparse embedding and a sparse mean bag, the tables of a
// DLRM-like model.
type tablesNet struct {
	emb *nn.Embedding
	bag *nn.EmbeddingBag
	nn.Module
}

func newTablesNet(seed uint64) tablesNet {
	g := autograd.NewGenerator(seed)
	emb := nn.NewEmbedding(g, 13, 7, nn.EmbeddingOptions{Sparse: true})
	bag := nn.NewEmbeddingBag(g, 13, 7, nn.EmbeddingBagOptions{Mode: "mean", Sparse: true})
	return tablesNet{emb, bag, nn.NewModuleList(emb, bag)}
}

// tablesBatch is one step's lookups and loss constants.
type tablesBatch struct {
	idx, flat, offsets *autograd.Tensor
	target, coef       *autograd.Tensor
}

func newTablesBatch(r *rand.Rand) tablesBatch {
	ints := func(n int) []int64 {
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(r.IntN(13)) // repeats are likely: rows summed in the gradient
		}
		return v
	}
	floats := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	return tablesBatch{
		idx:     autograd.FromInt64(ints(10), 2, 5),
		flat:    autograd.FromInt64(ints(9), 9),
		offsets: autograd.FromInt64([]int64{0, 4, 4}, 3),
		target:  autograd.FromFloat32(floats(2*5*7), 2, 5, 7),
		coef:    autograd.FromFloat32(floats(3*7), 3, 7),
	}
}

// loss is the mean squared error of the rows against the target plus a
// linear function of the bags: the rows' values reach the gradient, the
// bags' do not (the split model's bags reduce the masters' top halves,
// the FP32 model's the masters).
func (b tablesBatch) loss(rows, bags *autograd.Tensor) *autograd.Tensor {
	d := autograd.Sub(rows, b.target)
	return autograd.Add(autograd.Mean(autograd.Mul(d, d), nil, false), autograd.Sum(autograd.Mul(bags, b.coef), nil, false))
}

// truncated returns x with its values cut to their bfloat16 top halves, as
// a split table's rows are, and its gradient passed through unchanged.
// x−top(x) is exact in float32 (both share x's binade), so x plus it is
// top(x) exactly.
func truncated(x *autograd.Tensor) *autograd.Tensor {
	v := x.Detach().ContiguousFloat32s()
	delta := make([]float32, len(v))
	for i, f := range v {
		delta[i] = math.Float32frombits(math.Float32bits(f)&0xffff0000) - f
	}
	return autograd.Add(x, autograd.FromFloat32(delta, x.Shape()...))
}

// viaBF16 rounds x to bfloat16 and widens it back, differentiably: the
// gradient is rounded to bfloat16 on its way, as it is behind a bfloat16
// lookup's output.
func viaBF16(x *autograd.Tensor) *autograd.Tensor {
	return autograd.Cast(autograd.Cast(x, autograd.BFloat16), autograd.Float32)
}

// TestSplitSparseTablesTrackFP32 trains sparse tables split by
// AutocastParams (bfloat16 lookups of the tops, row-sparse float32
// gradients) and the same tables in FP32, whose lookups' outputs are cut
// to bfloat16 the way the tops are and whose gradients pass through
// bfloat16 the way the split model's do. Every step both optimizers see
// the same sparse gradients, bit for bit, and the split updates are the
// FP32 updates of the joined masters, so the masters stay equal bit for
// bit: the bfloat16 lookups lose nothing a split table did not already.
func TestSplitSparseTablesTrackFP32(t *testing.T) {
	type optPair struct {
		name  string
		fp32  func([]*autograd.Tensor) (optim.Optimizer, error)
		split func(*amp.SplitModel) (optim.Optimizer, error)
	}
	sgd := func(o optim.SGDOptions) optPair {
		return optPair{
			fmt.Sprintf("SGD momentum %v", o.Momentum),
			func(ps []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewSGD(ps, o) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewSGDSplit(sm, o) },
		}
	}
	adagrad := optim.AdagradOptions{LR: 0.3, LRDecay: 0.01, InitialAccumulatorValue: 0.1, Eps: 1e-10}
	pairs := []optPair{
		sgd(optim.SGDOptions{LR: 0.5}),
		// With momentum the step is the dense one on the densified
		// gradient, split or not.
		sgd(optim.SGDOptions{LR: 0.5, Momentum: 0.9}),
		{
			"Adagrad",
			func(ps []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewAdagrad(ps, adagrad) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewAdagradSplit(sm, adagrad) },
		},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			ref, m := newTablesNet(5), newTablesNet(5)
			sm, err := amp.SplitModuleFunc(m, amp.AutocastParams)
			if err != nil {
				t.Fatal(err)
			}
			if len(sm.Params()) != 2 {
				t.Fatalf("AutocastParams split %d tables, want 2", len(sm.Params()))
			}
			refOpt, err := p.fp32(nn.Parameters(ref))
			if err != nil {
				t.Fatal(err)
			}
			opt, err := p.split(sm)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(17, 18))
			for step := range 5 {
				b := newTablesBatch(r)
				refOpt.ZeroGrad()
				opt.ZeroGrad()

				rows, bags := m.emb.Forward(b.idx), m.bag.Forward(b.flat, b.offsets, nil)
				if rows.DType() != autograd.BFloat16 || bags.DType() != autograd.BFloat16 {
					t.Fatalf("split lookups give %v and %v, want bfloat16", rows.DType(), bags.DType())
				}
				rows32 := autograd.Cast(rows, autograd.Float32)
				refRows := viaBF16(truncated(ref.emb.Forward(b.idx)))
				if msg := sameBits(rows32.Float32s(), refRows.Float32s()); msg != "" {
					t.Fatalf("step %d: split rows differ from the cut FP32 rows: %s", step, msg)
				}
				b.loss(rows32, autograd.Cast(bags, autograd.Float32)).Backward()
				b.loss(refRows, viaBF16(ref.bag.Forward(b.flat, b.offsets, nil))).Backward()

				for _, tab := range []struct {
					name      string
					top, fp32 *autograd.Tensor
				}{{"0.weight", m.emb.Weight(), ref.emb.Weight()}, {"1.weight", m.bag.Weight(), ref.bag.Weight()}} {
					got, want := tab.top.SparseGrad(), tab.fp32.SparseGrad()
					if got == nil || want == nil || tab.top.Grad() != nil {
						t.Fatalf("step %d %s: sparse gradients %v and %v, dense %v; want sparse ones", step, tab.name, got, want, tab.top.Grad())
					}
					if fmt.Sprint(got.Indices) != fmt.Sprint(want.Indices) {
						t.Fatalf("step %d %s: gradient rows %v, want %v", step, tab.name, got.Indices, want.Indices)
					}
					if msg := sameBits(got.Values.Float32s(), want.Values.Float32s()); msg != "" {
						t.Fatalf("step %d %s: gradient values: %s", step, tab.name, msg)
					}
				}
				refOpt.Step()
				opt.Step()
				for _, tab := range []struct {
					name string
					fp32 *autograd.Tensor
				}{{"0.weight", ref.emb.Weight()}, {"1.weight", ref.bag.Weight()}} {
					if msg := sameBits(sm.Param(tab.name).Join().Float32s(), tab.fp32.Float32s()); msg != "" {
						t.Fatalf("step %d %s: split master differs from FP32: %s", step, tab.name, msg)
					}
				}
			}
		})
	}
}

// TestSplitMergedTablesTrackFP32 is the table half of DLRM's split-BF16
// training (issue 19): the tables of an nn.MergedEmbeddingBag (dlrm's
// emb_l), split by AutocastParams like those kiln.Optimize splits, and the
// same tables in FP32, looked up by one merged op each and trained with
// the optimizers dlrm offers. The loss is linear in the bags, so both
// lookups send back the same row-sparse float32 gradients, bit for bit,
// whatever the tables hold; the split steps then keep each joined master
// equal to its FP32 twin bit for bit.
func TestSplitMergedTablesTrackFP32(t *testing.T) {
	rows := []int{7, 13, 2}
	const dim, B = 5, 4
	adagrad := optim.AdagradOptions{LR: 0.3, LRDecay: 0.01, InitialAccumulatorValue: 0.1, Eps: 1e-10}
	rw := optim.RowWiseAdagradOptions{LR: 0.3, LRDecay: 0.01, InitialAccumulatorValue: 0.1, Eps: 1e-10}
	for _, c := range []struct {
		name  string
		fp32  func([]*autograd.Tensor) (optim.Optimizer, error)
		split func(*amp.SplitModel) (optim.Optimizer, error)
	}{
		{"SGD",
			func(ps []*autograd.Tensor) (optim.Optimizer, error) {
				return optim.NewSGD(ps, optim.SGDOptions{LR: 0.5})
			},
			func(sm *amp.SplitModel) (optim.Optimizer, error) {
				return optim.NewSGDSplit(sm, optim.SGDOptions{LR: 0.5})
			}},
		{"Adagrad",
			func(ps []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewAdagrad(ps, adagrad) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewAdagradSplit(sm, adagrad) }},
		{"RowWiseAdagrad",
			func(ps []*autograd.Tensor) (optim.Optimizer, error) { return optim.NewRowWiseAdagrad(ps, rw) },
			func(sm *amp.SplitModel) (optim.Optimizer, error) { return optim.NewRowWiseAdagradSplit(sm, rw) }},
	} {
		for _, mode := range []string{"sum", "mean"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				opts := nn.MergedEmbeddingBagOptions{Mode: mode, Sparse: true}
				ref := nn.NewMergedEmbeddingBag(autograd.NewGenerator(9), rows, dim, opts)
				m := nn.NewMergedEmbeddingBag(autograd.NewGenerator(9), rows, dim, opts)
				sm, err := amp.SplitModuleFunc(m, amp.AutocastParams)
				if err != nil {
					t.Fatal(err)
				}
				if len(sm.Params()) != len(rows) {
					t.Fatalf("AutocastParams split %d of the %d tables", len(sm.Params()), len(rows))
				}
				refOpt, err := c.fp32(nn.Parameters(ref))
				if err != nil {
					t.Fatal(err)
				}
				opt, err := c.split(sm)
				if err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(21, 22))
				for step := range 5 {
					var idx, offs []*autograd.Tensor
					var coef []*autograd.Tensor
					for _, n := range rows {
						var ix, of []int64
						for range B {
							of = append(of, int64(len(ix)))
							for range r.IntN(4) { // empty bags and repeated rows too
								ix = append(ix, int64(r.IntN(n)))
							}
						}
						idx = append(idx, autograd.FromInt64(ix, len(ix)))
						offs = append(offs, autograd.FromInt64(of, B))
						cv := make([]float32, B*dim)
						for i := range cv {
							cv[i] = float32(r.NormFloat64())
						}
						coef = append(coef, autograd.FromFloat32(cv, B, dim))
					}
					loss := func(bags []*autograd.Tensor) *autograd.Tensor {
						var l *autograd.Tensor
						for k, b := range bags {
							term := autograd.Sum(autograd.Mul(b, coef[k]), nil, false)
							if l == nil {
								l = term
							} else {
								l = autograd.Add(l, term)
							}
						}
						return l
					}
					refOpt.ZeroGrad()
					opt.ZeroGrad()
					loss(m.Forward(idx, offs)).Backward()
					loss(ref.Forward(idx, offs)).Backward()
					for k := range rows {
						top, fp32 := m.Tables[k].Weight(), ref.Tables[k].Weight()
						if top.DType() != autograd.BFloat16 {
							t.Fatalf("table %d is %v after the split, want its bfloat16 top", k, top.DType())
						}
						got, want := top.SparseGrad(), fp32.SparseGrad()
						if (got == nil) != (want == nil) || top.Grad() != nil {
							t.Fatalf("step %d table %d: sparse gradients %v and %v, dense %v", step, k, got, want, top.Grad())
						}
						if got == nil {
							continue
						}
						if fmt.Sprint(got.Indices) != fmt.Sprint(want.Indices) {
							t.Fatalf("step %d table %d: gradient rows %v, want %v", step, k, got.Indices, want.Indices)
						}
						if msg := sameBits(got.Values.Float32s(), want.Values.Float32s()); msg != "" {
							t.Fatalf("step %d table %d: gradient values: %s", step, k, msg)
						}
					}
					refOpt.Step()
					opt.Step()
					for k := range rows {
						name := fmt.Sprintf("%d.weight", k)
						if msg := sameBits(sm.Param(name).Join().Float32s(), ref.Tables[k].Weight().Float32s()); msg != "" {
							t.Fatalf("step %d table %d: split master differs from FP32: %s", step, k, msg)
						}
					}
				}
			})
		}
	}
}
