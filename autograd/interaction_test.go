package autograd_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
)

func TestInteractionGradCheck(t *testing.T) {
	g := autograd.NewGenerator(19)
	for _, c := range []struct{ b, d, tables int }{{1, 1, 1}, {3, 4, 1}, {2, 5, 3}, {4, 3, 6}} {
		for _, self := range []bool{false, true} {
			t.Run(fmt.Sprintf("B%d_d%d_T%d_self%v", c.b, c.d, c.tables, self), func(t *testing.T) {
				inputs := []*autograd.Tensor{autograd.Randn(g, c.b, c.d).SetRequiresGrad(true)}
				for range c.tables {
					inputs = append(inputs, autograd.Randn(g, c.b, c.d).SetRequiresGrad(true))
				}
				f := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.Interaction(xs[0], xs[1:], self) }
				if err := autograd.GradCheck(f, inputs, autograd.GradCheckOptions{}); err != nil {
					t.Fatal(err)
				}
				// Operands that need no gradient get none, and the others
				// still get theirs.
				inputs[1] = inputs[1].Detach()
				if err := autograd.GradCheck(f, inputs, autograd.GradCheckOptions{}); err != nil {
					t.Fatal(err)
				}
				if inputs[1].Grad() != nil {
					t.Errorf("ly[0] got a gradient it did not ask for")
				}
			})
		}
	}
}

// The cases of testdata/golden/gen_interaction.py's INTERACTION table.
var interactionGoldenCases = []struct {
	name string
	self bool
}{
	{name: "dot.b5_d8_t4"},
	{name: "dotself.b5_d8_t4", self: true},
	{name: "dot.b2_d3_t1"},
	{name: "dotself.b3_d5_t2", self: true},
	{name: "dot.b4_d16_t26"},
	{name: "dotself.b4_d16_t26", self: true},
}

// interactionGoldenRTol is the tolerance against PyTorch: bmm sums each
// dot in another order, and dlrm's gradients go through the whole Gram
// matrix, so float32 rounding differs by a few ulps of the terms' sum
// (golden.Close scales the tolerance by the largest magnitude for values
// that cancel to near zero).
const interactionGoldenRTol = 1e-5

// interactionSplit returns the rows [t, :, :] of a stacked [T, B, d]
// golden tensor as T tensors.
func interactionSplit(ly *autograd.Tensor) []*autograd.Tensor {
	s := ly.Shape()
	n := s[1] * s[2]
	out := make([]*autograd.Tensor, s[0])
	for k := range out {
		out[k] = autograd.FromFloat32(append([]float32(nil), ly.Float32s()[k*n:(k+1)*n]...), s[1], s[2])
	}
	return out
}

func TestInteractionGolden(t *testing.T) {
	set := golden.Load(t, "interaction.safetensors")
	for _, c := range interactionGoldenCases {
		t.Run(c.name, func(t *testing.T) {
			x := set.Get(t, c.name+".x").SetRequiresGrad(true)
			ly := interactionSplit(set.Get(t, c.name+".ly"))
			for _, e := range ly {
				e.SetRequiresGrad(true)
			}
			out := autograd.Interaction(x, ly, c.self)
			out.Backward(set.Get(t, c.name+".gout"))
			golden.AssertClose(t, "out", out, set.Get(t, c.name+".out"), interactionGoldenRTol)
			golden.AssertClose(t, "grad_x", x.Grad(), set.Get(t, c.name+".grad_x"), interactionGoldenRTol)
			for k, want := range interactionSplit(set.Get(t, c.name+".grad_ly")) {
				golden.AssertClose(t, fmt.Sprintf("grad_ly[%d]", k), ly[k].Grad(), want, interactionGoldenRTol)
			}
		})
	}
}

// TestInteractionBFloat16 checks that bfloat16 operands give the float32
// interaction of their values rounded once to bfloat16, and gradients
// rounded likewise, on rows with vector tails, DLRM's 27 features, and
// operands that want no gradient.
func TestInteractionBFloat16(t *testing.T) {
	g := autograd.NewGenerator(23)
	for _, c := range []struct{ b, d, feats, noGrad int }{{3, 5, 4, -1}, {37, 17, 6, 1}, {130, 64, 27, 0}, {2, 1, 2, 1}} {
		for _, self := range []bool{false, true} {
			name := fmt.Sprintf("B%d_d%d_F%d_self%v", c.b, c.d, c.feats, self)
			wide := []*autograd.Tensor{}
			narrow := []*autograd.Tensor{}
			for f := range c.feats {
				v := autograd.Cast(autograd.Randn(g, c.b, c.d), autograd.BFloat16)
				wide = append(wide, autograd.Cast(v, autograd.Float32).SetRequiresGrad(f != c.noGrad))
				narrow = append(narrow, v.SetRequiresGrad(f != c.noGrad))
			}
			got := autograd.Interaction(narrow[0], narrow[1:], self)
			want := autograd.Interaction(wide[0], wide[1:], self)
			if got.DType() != autograd.BFloat16 {
				t.Fatalf("%s: result is %v, want bfloat16", name, got.DType())
			}
			interactionSameBits(t, name+" out", got, autograd.Cast(want, autograd.Float32))
			gout := autograd.Randn(g, want.Shape()...)
			gb := autograd.Cast(gout, autograd.BFloat16)
			got.Backward(gb)
			want.Backward(autograd.Cast(gb, autograd.Float32))
			for k := range narrow {
				if k == c.noGrad {
					if narrow[k].Grad() != nil {
						t.Fatalf("%s: operand %d got a gradient it did not ask for", name, k)
					}
					continue
				}
				if narrow[k].Grad().DType() != autograd.BFloat16 {
					t.Fatalf("%s: gradient %d is %v, want bfloat16", name, k, narrow[k].Grad().DType())
				}
				interactionSameBits(t, fmt.Sprintf("%s gradient %d", name, k), narrow[k].Grad(), wide[k].Grad())
			}
		}
	}
}

// interactionSameBits fails unless got (bfloat16) equals want (float32)
// rounded to bfloat16.
func interactionSameBits(t *testing.T, what string, got, want *autograd.Tensor) {
	t.Helper()
	g, w := got.Values(), autograd.Cast(want, autograd.BFloat16).Values()
	for i := range w {
		if math.Float64bits(g[i]) != math.Float64bits(w[i]) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, g[i], w[i])
		}
	}
}

func TestInteractionShapes(t *testing.T) {
	for _, c := range []struct {
		b, d, tables int
		self         bool
		want         string
	}{
		{0, 4, 2, true, "[0 10]"},
		{2, 0, 3, false, "[2 6]"},
		{2, 16, 26, false, "[2 367]"}, // the DLRM baseline
		{2, 16, 26, true, "[2 394]"},
	} {
		ly := make([]*autograd.Tensor, c.tables)
		for k := range ly {
			ly[k] = autograd.Zeros(c.b, c.d)
		}
		out := autograd.Interaction(autograd.Zeros(c.b, c.d), ly, c.self)
		if got := fmt.Sprint(out.Shape()); got != c.want {
			t.Errorf("%+v: shape %s, want %s", c, got, c.want)
		}
	}
}

func TestInteractionBadInputs(t *testing.T) {
	x := autograd.Zeros(3, 4)
	e := autograd.Zeros(3, 4)
	cases := []struct {
		name string
		x    *autograd.Tensor
		ly   []*autograd.Tensor
		kind error
		want string
	}{
		{"no tables", x, nil, autograd.ErrArgument, "Interaction: ly is empty; the interaction needs at least one embedding output"},
		{"nil x", nil, []*autograd.Tensor{e}, autograd.ErrArgument, "Interaction: x is nil"},
		{"nil ly", x, []*autograd.Tensor{e, nil}, autograd.ErrArgument, "Interaction: ly[1] is nil"},
		{"x rank", autograd.Zeros(3, 4, 1), []*autograd.Tensor{e}, autograd.ErrShape, "Interaction: x must be 2-D [batch, dim], got shape [3 4 1]"},
		{"ly rank", x, []*autograd.Tensor{e, autograd.Zeros(12)}, autograd.ErrShape, "Interaction: ly[1] must be 2-D [batch, dim], got shape [12]"},
		{"batch", x, []*autograd.Tensor{e, e, autograd.Zeros(2, 4)}, autograd.ErrShape, "Interaction: ly[2] has batch size 2 (shape [2 4]) but x has 3 (shape [3 4])"},
		{"dim", x, []*autograd.Tensor{autograd.Zeros(3, 5)}, autograd.ErrShape, "Interaction: ly[0] has dimension 5 (shape [3 5]) but x has 4 (shape [3 4])"},
		{"x dtype", autograd.Empty(autograd.Int64, 3, 4), []*autograd.Tensor{e}, autograd.ErrDType, "Interaction: x has dtype int64; Interaction supports float32 and bfloat16"},
		{"mixed dtype", x, []*autograd.Tensor{e, autograd.Cast(e, autograd.BFloat16)}, autograd.ErrDType, "Interaction: ly[1] has dtype bfloat16 but x has float32"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := autograd.Try(func() { autograd.Interaction(c.x, c.ly, false) })
			if !errors.Is(err, c.kind) || !strings.Contains(fmt.Sprint(err), c.want) {
				t.Errorf("error %v, want %v containing %q", err, c.kind, c.want)
			}
		})
	}
}

func ExampleInteraction() {
	// Two samples: the bottom MLP's output x and one embedding per sample.
	x := autograd.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	emb := autograd.FromFloat32([]float32{1, 0, 0, 1}, 2, 2)
	ly := []*autograd.Tensor{emb}
	// Each row: x, then <emb, x>.
	fmt.Println(autograd.Interaction(x, ly, false).Float32s())
	// With self: x, then <x, x>, <emb, x>, <emb, emb>.
	fmt.Println(autograd.Interaction(x, ly, true).Float32s())
	// Output:
	// [1 2 1 3 4 4]
	// [1 2 5 1 1 3 4 25 4 1]
}

// BenchmarkInteractionDLRM times DLRM's interaction, forward and backward
// of 27 features of 64 at batch 2048, in each dtype, with what a call
// allocates (the package's tests poison uninitialised memory, which costs
// time: take timings from kilnbench's interaction rows).
func BenchmarkInteractionDLRM(b *testing.B) {
	for _, dt := range []autograd.DType{autograd.Float32, autograd.BFloat16} {
		b.Run(dt.String(), func(b *testing.B) {
			g := autograd.NewGenerator(3)
			feats := make([]*autograd.Tensor, 27)
			for f := range feats {
				feats[f] = autograd.Cast(autograd.Rand(g, 2048, 64), dt).SetRequiresGrad(true)
			}
			dy := autograd.Cast(autograd.Rand(g, 2048, 64+27*26/2), dt)
			b.ReportAllocs()
			for b.Loop() {
				autograd.Interaction(feats[0], feats[1:], false).Backward(dy)
				for _, f := range feats {
					f.ZeroGrad()
				}
			}
		})
	}
}
