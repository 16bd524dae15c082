package autograd_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

func lossIgnore(v int64) *int64 { return &v }

// lossTargets returns Int64 class indices in [0, c) of the given shape,
// with every fifth one (when ignore is not nil) set to *ignore.
func lossTargets(g *autograd.Generator, c int, ignore *int64, shape ...int) *autograd.Tensor {
	t := autograd.Empty(autograd.Int64, shape...)
	for i, v := range t.Int64s() {
		v = int64(g.IntN(c))
		if ignore != nil && i%5 == 2 {
			v = *ignore
		}
		t.Int64s()[i] = v
	}
	return t
}

func TestCrossEntropyGradCheck(t *testing.T) {
	g := autograd.NewGenerator(21)
	ign := lossIgnore(-100)
	unbatchedTarget := autograd.Empty(autograd.Int64)
	unbatchedTarget.Int64s()[0] = 4
	cases := []struct {
		name   string
		x      *autograd.Tensor
		target *autograd.Tensor
		opt    autograd.CrossEntropyOptions
	}{
		{"mean", autograd.Randn(g, 4, 5), lossTargets(g, 5, nil, 4), autograd.CrossEntropyOptions{}},
		{"sum-smooth", autograd.Randn(g, 4, 5), lossTargets(g, 5, nil, 4),
			autograd.CrossEntropyOptions{Reduction: autograd.ReductionSum, LabelSmoothing: 0.2}},
		{"none-ignore", autograd.Randn(g, 6, 3), lossTargets(g, 3, ign, 6),
			autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone, IgnoreIndex: ign}},
		{"ignore-a-class", autograd.Randn(g, 6, 3), lossTargets(g, 3, nil, 6),
			autograd.CrossEntropyOptions{IgnoreIndex: lossIgnore(1), LabelSmoothing: 0.1}},
		{"3d-smooth-ignore", autograd.Randn(g, 2, 3, 4), lossTargets(g, 3, ign, 2, 4),
			autograd.CrossEntropyOptions{IgnoreIndex: ign, LabelSmoothing: 0.3}},
		{"full-smoothing", autograd.Randn(g, 3, 4), lossTargets(g, 4, nil, 3), autograd.CrossEntropyOptions{LabelSmoothing: 1}},
		{"cl", autograd.Randn(g, 2, 4, 3, 3).To(autograd.ChannelsLast), lossTargets(g, 4, ign, 2, 3, 3),
			autograd.CrossEntropyOptions{IgnoreIndex: ign, LabelSmoothing: 0.1}},
		{"cl-none", autograd.Randn(g, 2, 3, 2, 3).To(autograd.ChannelsLast), lossTargets(g, 3, nil, 2, 2, 3),
			autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone}},
		{"cl3d", autograd.Randn(g, 1, 3, 2, 2, 2).To(autograd.ChannelsLast3d), lossTargets(g, 3, nil, 1, 2, 2, 2),
			autograd.CrossEntropyOptions{}},
		// An inner size above the kernel's tile width.
		{"wide-inner", autograd.Randn(g, 2, 3, 300), lossTargets(g, 3, nil, 2, 300), autograd.CrossEntropyOptions{}},
		{"unbatched", autograd.Randn(g, 6), unbatchedTarget, autograd.CrossEntropyOptions{LabelSmoothing: 0.1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := c.x.Detach().SetRequiresGrad(true)
			f := func(xs ...*autograd.Tensor) *autograd.Tensor { return autograd.CrossEntropy(xs[0], c.target, c.opt) }
			y := f(x)
			if y.GradFn() != "CrossEntropyBackward" {
				t.Errorf("grad_fn %q, want one fused CrossEntropyBackward", y.GradFn())
			}
			want := "[]"
			if c.opt.Reduction == autograd.ReductionNone {
				want = fmt.Sprint(c.target.Shape())
			}
			if got := fmt.Sprint(y.Shape()); got != want {
				t.Errorf("output shape %s, want %s", got, want)
			}
			if err := autograd.GradCheck(f, []*autograd.Tensor{x}, autograd.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
			if x.Grad().Format() != x.Format() {
				t.Errorf("gradient format %v, want %v", x.Grad().Format(), x.Format())
			}
		})
	}
}

// TestCrossEntropyMatchesLogSoftmax checks the fused loss against its
// definition through LogSoftmax, with smoothing and an ignored target.
func TestCrossEntropyMatchesLogSoftmax(t *testing.T) {
	g := autograd.NewGenerator(4)
	x := autograd.Randn(g, 7, 6)
	target := autograd.FromInt64([]int64{0, 5, 9, 2, 2, 9, 1}, 7)
	const eps = 0.15
	lp := autograd.LogSoftmax(x, 1).Values()
	sum, n := 0.0, 0
	want := make([]float64, 7)
	for i, c := range target.Int64s() {
		if c == 9 {
			continue
		}
		mean := 0.0
		for j := range 6 {
			mean -= lp[i*6+j] / 6
		}
		want[i] = (1-eps)*-lp[i*6+int(c)] + eps*mean
		sum += want[i]
		n++
	}
	for _, r := range []autograd.Reduction{autograd.ReductionNone, autograd.ReductionSum, autograd.ReductionMean} {
		got := autograd.CrossEntropy(x, target, autograd.CrossEntropyOptions{Reduction: r, LabelSmoothing: eps, IgnoreIndex: lossIgnore(9)}).Values()
		w := want
		switch r {
		case autograd.ReductionSum:
			w = []float64{sum}
		case autograd.ReductionMean:
			w = []float64{sum / float64(n)}
		}
		for i := range w {
			if math.Abs(got[i]-w[i]) > 1e-6*(1+math.Abs(w[i])) {
				t.Errorf("%v: element %d: %v, want %v", r, i, got[i], w[i])
			}
		}
	}
}

func TestCrossEntropyNothingCounted(t *testing.T) {
	ign := lossIgnore(-1)
	x := autograd.Randn(autograd.NewGenerator(1), 3, 4).SetRequiresGrad(true)
	y := autograd.CrossEntropy(x, autograd.FromInt64([]int64{-1, -1, -1}, 3), autograd.CrossEntropyOptions{IgnoreIndex: ign, LabelSmoothing: 0.1})
	if !math.IsNaN(y.Item()) {
		t.Errorf("mean over all-ignored targets = %v, want NaN", y.Item())
	}
	y.Backward()
	for _, v := range x.Grad().Values() {
		if v != 0 {
			t.Fatalf("gradient %v, want zeros", x.Grad().Values())
		}
	}
	// An empty batch: NaN mean, zero sum, empty unreduced loss.
	e := autograd.Zeros(0, 4)
	et := autograd.Empty(autograd.Int64, 0)
	if v := autograd.CrossEntropy(e, et, autograd.CrossEntropyOptions{}).Item(); !math.IsNaN(v) {
		t.Errorf("mean over an empty batch = %v, want NaN", v)
	}
	if v := autograd.CrossEntropy(e, et, autograd.CrossEntropyOptions{Reduction: autograd.ReductionSum}).Item(); v != 0 {
		t.Errorf("sum over an empty batch = %v, want 0", v)
	}
	if s := autograd.CrossEntropy(e, et, autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone}).Shape(); fmt.Sprint(s) != "[0]" {
		t.Errorf("unreduced loss of an empty batch has shape %v, want [0]", s)
	}
}

// The target of 5-D logits is 4-D and may be channels-last; its classes
// must be read in logical order, whatever the logits' layout.
func TestCrossEntropyChannelsLastTarget(t *testing.T) {
	g := autograd.NewGenerator(6)
	x0 := autograd.Randn(g, 2, 3, 2, 3, 2)
	target := autograd.RandInt(g, 0, 3, 2, 2, 3, 2)
	opt := autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone, LabelSmoothing: 0.1}
	gout := autograd.Rand(g, 2, 2, 3, 2)
	var ref []float64
	for _, xf := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast3d} {
		for _, tf := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
			x := x0.To(xf).Detach().SetRequiresGrad(true)
			y := autograd.CrossEntropy(x, target.To(tf), opt)
			y.Backward(gout)
			got := append(y.Values(), x.Grad().Values()...)
			if ref == nil {
				ref = got
				continue
			}
			for i := range ref {
				if math.Abs(got[i]-ref[i]) > 1e-6*(1+math.Abs(ref[i])) {
					t.Fatalf("logits %v, target %v: element %d = %v, contiguous gives %v", xf, tf, i, got[i], ref[i])
				}
			}
		}
	}
}

func TestCrossEntropyLargeLogits(t *testing.T) {
	x := autograd.FromFloat32([]float32{1e4, 0, -1e4, 500, 500, 500}, 2, 3).SetRequiresGrad(true)
	y := autograd.CrossEntropy(x, autograd.FromInt64([]int64{1, 2}, 2), autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone})
	want := []float64{1e4, math.Log(3)}
	for i, v := range y.Values() {
		if math.Abs(v-want[i]) > 1e-5*want[i] {
			t.Errorf("loss %d = %v, want %v", i, v, want[i])
		}
	}
	y.Backward(autograd.Ones(2))
	for i, v := range x.Grad().Values() {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("gradient element %d is %v", i, v)
		}
	}
}

func TestPointwiseLossGradCheck(t *testing.T) {
	g := autograd.NewGenerator(8)
	cl := autograd.ChannelsLast
	cases := []struct {
		name string
		x, t *autograd.Tensor
		r    autograd.Reduction
	}{
		{"mean", autograd.Randn(g, 3, 4), autograd.Rand(g, 3, 4), autograd.ReductionMean},
		{"sum", autograd.Randn(g, 2, 3, 2), autograd.Rand(g, 2, 3, 2), autograd.ReductionSum},
		{"none", autograd.Randn(g, 5), autograd.Rand(g, 5), autograd.ReductionNone},
		{"0d", autograd.Scalar(0.3), autograd.Scalar(0.8), autograd.ReductionMean},
		{"cl-x-none", autograd.Randn(g, 2, 3, 2, 2).To(cl), autograd.Rand(g, 2, 3, 2, 2), autograd.ReductionNone},
		{"cl-t-none", autograd.Randn(g, 2, 3, 2, 2), autograd.Rand(g, 2, 3, 2, 2).To(cl), autograd.ReductionNone},
		{"cl-both-mean", autograd.Randn(g, 2, 3, 2, 2).To(cl), autograd.Rand(g, 2, 3, 2, 2).To(cl), autograd.ReductionMean},
		// Large logits: the stable BCE form must neither overflow nor lose the gradient.
		{"large", autograd.FromFloat32([]float32{-40, -15, 15, 40}, 4), autograd.Rand(g, 4), autograd.ReductionSum},
	}
	ops := map[string]func(x, t *autograd.Tensor, r autograd.Reduction) *autograd.Tensor{
		"BCEWithLogits": autograd.BCEWithLogits, "MSELoss": autograd.MSELoss,
	}
	for _, c := range cases {
		for name, op := range ops {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				x, tg := c.x.Detach().SetRequiresGrad(true), c.t.Detach().SetRequiresGrad(true)
				f := func(xs ...*autograd.Tensor) *autograd.Tensor { return op(xs[0], xs[1], c.r) }
				if err := autograd.GradCheck(f, []*autograd.Tensor{x, tg}, autograd.GradCheckOptions{}); err != nil {
					t.Fatal(err)
				}
				if x.Grad().Format() != x.Format() || tg.Grad().Format() != tg.Format() {
					t.Errorf("gradient formats %v, %v, want %v, %v", x.Grad().Format(), tg.Grad().Format(), x.Format(), tg.Format())
				}
				// Only the input needs a gradient: the target gets none.
				x2 := c.x.Detach().SetRequiresGrad(true)
				tg2 := c.t.Detach()
				out := op(x2, tg2, c.r)
				out.Backward(autograd.OnesLike(out))
				if x2.Grad() == nil || tg2.Grad() != nil {
					t.Errorf("input grad %v, target grad %v", x2.Grad(), tg2.Grad())
				}
			})
		}
	}
}

func TestPointwiseLossValues(t *testing.T) {
	x := autograd.FromFloat32([]float32{-100, -1, 0, 2, 100}, 5)
	tg := autograd.FromFloat32([]float32{0, 0.5, 1, 0.25, 1}, 5)
	bce := autograd.BCEWithLogits(x, tg, autograd.ReductionNone).Values()
	mse := autograd.MSELoss(x, tg, autograd.ReductionNone).Values()
	for i, xv := range x.Values() {
		tv := tg.Values()[i]
		// log(1+exp(x)) − x·t, written to stay finite for |x| = 100.
		want := math.Max(xv, 0) + math.Log1p(math.Exp(-math.Abs(xv))) - xv*tv
		if math.Abs(bce[i]-want) > 1e-6*(1+want) {
			t.Errorf("BCE element %d = %v, want %v", i, bce[i], want)
		}
		if w := (xv - tv) * (xv - tv); math.Abs(mse[i]-w) > 1e-6*(1+w) {
			t.Errorf("MSE element %d = %v, want %v", i, mse[i], w)
		}
	}
	sum := autograd.MSELoss(x, tg, autograd.ReductionSum).Item()
	mean := autograd.MSELoss(x, tg, autograd.ReductionMean).Item()
	if math.Abs(sum/5-mean) > 1e-6*mean {
		t.Errorf("MSE sum %v and mean %v disagree", sum, mean)
	}
}

func TestReductionString(t *testing.T) {
	got := fmt.Sprint(autograd.ReductionMean, autograd.ReductionSum, autograd.ReductionNone, autograd.Reduction(7))
	if want := "mean sum none Reduction(7)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	var zero autograd.CrossEntropyOptions
	if zero.Reduction != autograd.ReductionMean {
		t.Errorf("zero options reduce by %v, want mean", zero.Reduction)
	}
}

func TestLossBadInputs(t *testing.T) {
	x := autograd.Zeros(4, 5)
	tg := autograd.FromInt64([]int64{0, 1, 2, 3}, 4)
	ce := func(x, t *autograd.Tensor, o autograd.CrossEntropyOptions) func() {
		return func() { autograd.CrossEntropy(x, t, o) }
	}
	none := autograd.CrossEntropyOptions{}
	ign := lossIgnore(-100)
	scalarTarget := autograd.Empty(autograd.Int64)
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"ce nil logits", ce(nil, tg, none), "CrossEntropy: logits are nil"},
		{"ce nil target", ce(x, nil, none), "CrossEntropy: target is nil"},
		{"ce logits dtype", ce(autograd.Empty(autograd.Int64, 4, 5), tg, none), "CrossEntropy: logits have dtype int64"},
		{"ce float target", ce(x, autograd.Zeros(4, 5), none), "target has dtype float32; CrossEntropy takes int64 class indices (probability targets"},
		{"ce int32 target", ce(x, autograd.FromInt32([]int32{0, 1, 2, 3}, 4), none), "CrossEntropy: target has dtype int32; CrossEntropy takes int64"},
		{"ce 0-d logits", ce(autograd.Scalar(1), scalarTarget, none), "CrossEntropy: logits must be [C], [N, C] or [N, C, d1, ...], got a 0-d tensor"},
		{"ce target shape", ce(x, autograd.FromInt64([]int64{0, 1, 2}, 3), none), "CrossEntropy: target shape [3] does not fit logits [4 5]: want [4]"},
		{"ce spatial target", ce(autograd.Zeros(2, 3, 4), autograd.Empty(autograd.Int64, 2, 3), none), "target shape [2 3] does not fit logits [2 3 4]: want [2 4]"},
		{"ce unbatched target", ce(autograd.Zeros(5), autograd.FromInt64([]int64{1}, 1), none), "target shape [1] does not fit logits [5]: want []"},
		{"ce target too big", ce(x, autograd.FromInt64([]int64{0, 5, 2, 3}, 4), none), "CrossEntropy: target 5 is out of range for 5 classes (want 0 to 4)"},
		{"ce negative target", ce(x, autograd.FromInt64([]int64{0, 1, -1, 3}, 4), autograd.CrossEntropyOptions{IgnoreIndex: ign}),
			"target -1 is out of range for 5 classes (want 0 to 4, or the ignore index -100)"},
		{"ce -100 without ignore", ce(x, autograd.FromInt64([]int64{0, 1, -100, 3}, 4), none), "target -100 is out of range for 5 classes"},
		{"ce no classes", ce(autograd.Zeros(4, 0), tg, none), "CrossEntropy: logits [4 0] have no classes"},
		{"ce negative smoothing", ce(x, tg, autograd.CrossEntropyOptions{LabelSmoothing: -0.1}), "label smoothing must be in [0, 1], got -0.1"},
		{"ce big smoothing", ce(x, tg, autograd.CrossEntropyOptions{LabelSmoothing: 1.5}), "label smoothing must be in [0, 1], got 1.5"},
		{"ce NaN smoothing", ce(x, tg, autograd.CrossEntropyOptions{LabelSmoothing: math.NaN()}), "label smoothing must be in [0, 1], got NaN"},
		{"ce reduction", ce(x, tg, autograd.CrossEntropyOptions{Reduction: 3}), "CrossEntropy: invalid reduction Reduction(3)"},
	}
	pointwise := map[string]func(x, t *autograd.Tensor, r autograd.Reduction) *autograd.Tensor{
		"BCEWithLogits": autograd.BCEWithLogits, "MSELoss": autograd.MSELoss,
	}
	for name, op := range pointwise {
		cases = append(cases, []struct {
			name string
			f    func()
			want string
		}{
			{name + " nil input", func() { op(nil, x, 0) }, name + ": input is nil"},
			{name + " nil target", func() { op(x, nil, 0) }, name + ": target is nil"},
			{name + " input dtype", func() { op(autograd.Empty(autograd.Int32, 4, 5), x, 0) }, name + ": input has dtype int32"},
			{name + " target dtype", func() { op(x, autograd.Empty(autograd.Int64, 4, 5), 0) }, name + ": target has dtype int64"},
			{name + " shape", func() { op(x, autograd.Zeros(5), 0) }, name + ": input shape [4 5] and target shape [5] differ (" + name + " does not broadcast)"},
			{name + " reduction", func() { op(x, x, -1) }, name + ": invalid reduction Reduction(-1)"},
		}...)
	}
	for _, c := range cases {
		err := autograd.Try(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

// CrossEntropy takes raw scores and class indices, like
// torch.nn.functional.cross_entropy.
func ExampleCrossEntropy() {
	logits := autograd.FromFloat32([]float32{2, 1, 0.1, 0.5, 2.5, 0.3}, 2, 3).SetRequiresGrad(true)
	target := autograd.FromInt64([]int64{0, 1}, 2)
	loss := autograd.CrossEntropy(logits, target, autograd.CrossEntropyOptions{})
	loss.Backward()
	fmt.Printf("loss %.4f\ngrad %.4f\n", loss.Item(), logits.Grad().Values())
	perRow := autograd.CrossEntropy(logits, target, autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone})
	fmt.Printf("per row %.4f\n", perRow.Values())
	// Output:
	// loss 0.3185
	// grad [-0.1705 0.1212 0.0493 0.0543 -0.0988 0.0445]
	// per row [0.4170 0.2200]
}

// BCEWithLogits scores logits against probabilities without computing
// the sigmoid, so large logits stay finite.
func ExampleBCEWithLogits() {
	x := autograd.FromFloat32([]float32{-200, 0, 3})
	t := autograd.FromFloat32([]float32{1, 0.5, 1})
	fmt.Printf("%.4f\n", autograd.BCEWithLogits(x, t, autograd.ReductionNone).Values())
	// Output: [200.0000 0.6931 0.0486]
}

// MSELoss averages the squared error by default.
func ExampleMSELoss() {
	x := autograd.FromFloat32([]float32{1, 2, 3}).SetRequiresGrad(true)
	t := autograd.FromFloat32([]float32{1, 0, 0})
	loss := autograd.MSELoss(x, t, autograd.ReductionMean)
	loss.Backward()
	fmt.Printf("%.4f %.4f\n", loss.Item(), x.Grad().Values())
	// Output: 4.3333 [0.0000 1.3333 2.0000]
}
