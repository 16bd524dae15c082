package autograd

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestBatchNormGradCheck(t *testing.T) {
	g := NewGenerator(3)
	cases := []struct {
		name     string
		shape    []int
		format   MemoryFormat
		training bool
		affine   bool
	}{
		{"2d", []int{6, 3}, Contiguous, true, true},
		{"3d", []int{3, 2, 4}, Contiguous, true, true},
		{"4d", []int{2, 3, 3, 4}, Contiguous, true, true},
		{"4d-cl", []int{2, 3, 3, 4}, ChannelsLast, true, true},
		{"5d", []int{2, 2, 2, 3, 2}, Contiguous, true, true},
		{"5d-cl", []int{2, 3, 2, 2, 3}, ChannelsLast3d, true, true},
		{"4d-noaffine", []int{3, 2, 2, 3}, Contiguous, true, false},
		{"cl-noaffine", []int{3, 2, 2, 3}, ChannelsLast, true, false},
		{"eval-2d", []int{4, 3}, Contiguous, false, true},
		{"eval-4d", []int{2, 3, 3, 2}, Contiguous, false, true},
		{"eval-cl", []int{2, 3, 3, 2}, ChannelsLast, false, true},
		{"eval-5d-cl", []int{2, 2, 2, 2, 3}, ChannelsLast3d, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			C := c.shape[1]
			x := Randn(g, c.shape...)
			if c.format != Contiguous {
				x = x.To(c.format)
			}
			ins := []*Tensor{convLeaf(x)}
			if c.affine {
				ins = append(ins, convLeaf(Randn(g, C)), convLeaf(Randn(g, C)))
			}
			rm := Randn(g, C)
			rv := normAddScalar(Rand(g, C), 0.5)
			f := func(xs ...*Tensor) *Tensor {
				var w, b *Tensor
				if len(xs) == 3 {
					w, b = xs[1], xs[2]
				}
				return BatchNorm(xs[0], rm, rv, w, b, c.training, 0.1, 1e-5)
			}
			if out := f(ins...); out.Format() != c.format {
				t.Errorf("output format %v, want %v", out.Format(), c.format)
			}
			if err := GradCheck(f, ins, GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
			if gf := ins[0].Grad().Format(); gf != c.format {
				t.Errorf("input gradient format %v, want %v", gf, c.format)
			}
		})
	}
}

// normAddScalar returns x+v elementwise, so these tests do not depend on
// the elementwise ops other files add.
func normAddScalar(x *Tensor, v float32) *Tensor {
	return unaryF32("add", x, func(a float32) float32 { return a + v })
}

// normRef computes batch-norm statistics of a contiguous [N, C, S] array in
// the simplest way, for comparison.
func normRef(x []float64, n, c, s int) (mean, biased []float64) {
	mean, biased = make([]float64, c), make([]float64, c)
	for ch := 0; ch < c; ch++ {
		var vals []float64
		for i := 0; i < n; i++ {
			vals = append(vals, x[(i*c+ch)*s:(i*c+ch+1)*s]...)
		}
		for _, v := range vals {
			mean[ch] += v
		}
		mean[ch] /= float64(len(vals))
		for _, v := range vals {
			biased[ch] += (v - mean[ch]) * (v - mean[ch])
		}
		biased[ch] /= float64(len(vals))
	}
	return mean, biased
}

func TestBatchNormRunningStatsAndLayouts(t *testing.T) {
	g := NewGenerator(9)
	const N, C, H, W = 3, 4, 5, 6
	x := Randn(g, N, C, H, W)
	mean, biased := normRef(x.Values(), N, C, H*W)
	cnt := float64(N * H * W)
	var ref []float64
	for _, f := range []MemoryFormat{Contiguous, ChannelsLast} {
		rm, rv := Full(0.5, C), Full(2, C)
		y := BatchNorm(x.reformat(f), rm, rv, nil, nil, true, 0.25, 1e-5)
		for c := 0; c < C; c++ {
			wantM := 0.75*0.5 + 0.25*mean[c]
			wantV := 0.75*2 + 0.25*biased[c]*cnt/(cnt-1)
			if math.Abs(rm.Values()[c]-wantM) > 1e-6 || math.Abs(rv.Values()[c]-wantV) > 1e-6 {
				t.Errorf("%v: channel %d running stats %v, %v; want %v, %v", f, c, rm.Values()[c], rv.Values()[c], wantM, wantV)
			}
		}
		// Normalised output: zero mean and unit biased variance per channel.
		m, v := normRef(y.Values(), N, C, H*W)
		for c := 0; c < C; c++ {
			if math.Abs(m[c]) > 1e-5 || math.Abs(v[c]-biased[c]/(biased[c]+1e-5)) > 1e-5 {
				t.Errorf("%v: channel %d output mean %v variance %v", f, c, m[c], v[c])
			}
		}
		if ref == nil {
			ref = y.Values()
		} else if err := convClose(y.Values(), ref, 1e-6); err != nil {
			t.Errorf("channels-last output differs from contiguous: %v", err)
		}
	}
	// Evaluation leaves the running statistics alone and uses them.
	rm, rv := FromFloat32([]float32{1, 2, 3, 4}), FromFloat32([]float32{4, 4, 1, 0.25})
	y := BatchNorm(x, rm, rv, FromFloat32([]float32{2, 2, 2, 2}), FromFloat32([]float32{1, 0, 0, 0}), false, 0.1, 0)
	if fmt.Sprint(rm.Values(), rv.Values()) != "[1 2 3 4] [4 4 1 0.25]" {
		t.Errorf("evaluation changed the running statistics to %v, %v", rm.Values(), rv.Values())
	}
	xv, yv := x.Values(), y.Values()
	for i := 0; i < H*W; i++ {
		// Channel 1 of item 0: (x - 2)/2·2 + 0.
		if want := xv[H*W+i] - 2; math.Abs(yv[H*W+i]-want) > 1e-5 {
			t.Fatalf("eval output %v, want %v", yv[H*W+i], want)
		}
	}
}

// A large mean with a small spread must not lose the variance.
func TestBatchNormLargeMean(t *testing.T) {
	g := NewGenerator(4)
	x := normAddScalar(Randn(g, 64, 2), 1000)
	y := BatchNorm(x, nil, nil, nil, nil, true, 0.1, 0)
	_, v := normRef(y.Values(), 64, 2, 1)
	for c, vc := range v {
		if math.Abs(vc-1) > 1e-4 {
			t.Errorf("channel %d: output variance %v, want 1", c, vc)
		}
	}
}

func TestBatchNormBigParallel(t *testing.T) {
	// Large enough that the kernels split the work, in both layouts and on
	// the row-blocked reduction path; results must agree with each other.
	g := NewGenerator(12)
	x0 := Randn(g, 8, 16, 24, 24)
	gout := Randn(g, 8, 16, 24, 24)
	var ref []*Tensor
	for _, f := range []MemoryFormat{Contiguous, ChannelsLast} {
		x, w, b := convLeaf(x0.reformat(f)), convLeaf(Randn(NewGenerator(1), 16)), convLeaf(Randn(NewGenerator(2), 16))
		y := BatchNorm(x, nil, nil, w, b, true, 0.1, 1e-5)
		y.Backward(gout)
		got := []*Tensor{y, x.Grad(), w.Grad(), b.Grad()}
		if ref == nil {
			ref = got
			continue
		}
		for i := range got {
			if err := convClose(got[i].Values(), ref[i].Values(), 1e-5); err != nil {
				t.Errorf("%v: result %d: %v", f, i, err)
			}
		}
	}
}

func TestBatchNormBadInputs(t *testing.T) {
	x := Zeros(2, 3, 4, 4)
	c3 := Zeros(3)
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"nil", func() { BatchNorm(nil, nil, nil, nil, nil, true, 0.1, 1e-5) }, "BatchNorm: input is nil"},
		{"dtype", func() { BatchNorm(Empty(Int64, 2, 3), nil, nil, nil, nil, true, 0.1, 1e-5) }, "input has dtype int64; BatchNorm supports float32"},
		{"rank", func() { BatchNorm(Zeros(5), nil, nil, nil, nil, true, 0.1, 1e-5) }, "at least 2 dimensions [N, C, ...], got shape [5]"},
		{"one value", func() { BatchNorm(Zeros(1, 3), nil, nil, nil, nil, true, 0.1, 1e-5) }, "Expected more than 1 value per channel when training, got input of shape [1 3]"},
		{"one value 4d", func() { BatchNorm(Zeros(1, 3, 1, 1), c3, Ones(3), nil, nil, true, 0.1, 1e-5) }, "Expected more than 1 value per channel when training, got input of shape [1 3 1 1]"},
		{"empty batch training", func() { BatchNorm(Zeros(0, 3, 2, 2), nil, nil, nil, nil, true, 0.1, 1e-5) }, "got input of shape [0 3 2 2]"},
		{"eval no stats", func() { BatchNorm(x, nil, nil, nil, nil, false, 0.1, 1e-5) }, "running mean and variance are required when not training (input [2 3 4 4])"},
		{"eval one stat", func() { BatchNorm(x, c3, nil, nil, nil, false, 0.1, 1e-5) }, "running mean and variance are required"},
		{"weight shape", func() { BatchNorm(x, nil, nil, Zeros(4), nil, true, 0.1, 1e-5) }, "weight has shape [4], want [3] for input [2 3 4 4]"},
		{"bias rank", func() { BatchNorm(x, nil, nil, nil, Zeros(3, 1), true, 0.1, 1e-5) }, "bias has shape [3 1], want [3]"},
		{"running mean shape", func() { BatchNorm(x, Zeros(2), Ones(3), nil, nil, true, 0.1, 1e-5) }, "running mean has shape [2], want [3]"},
		{"running var dtype", func() { BatchNorm(x, c3, Empty(BFloat16, 3), nil, nil, true, 0.1, 1e-5) }, "running variance has dtype bfloat16"},
		{"weight dtype", func() { BatchNorm(x, nil, nil, Empty(Int32, 3), nil, true, 0.1, 1e-5) }, "weight has dtype int32"},
		{"stats require grad", func() { BatchNorm(x, Zeros(3).SetRequiresGrad(true), Ones(3), nil, nil, true, 0.1, 1e-5) }, "running statistics are updated in place and cannot require gradients"},
		{"negative eps", func() { BatchNorm(x, nil, nil, nil, nil, true, 0.1, -1) }, "eps must be finite and non-negative, got -1"},
		{"nan eps", func() { BatchNorm(x, nil, nil, nil, nil, true, 0.1, math.NaN()) }, "eps must be finite and non-negative, got NaN"},
		{"nan momentum", func() { BatchNorm(x, c3, Ones(3), nil, nil, true, math.NaN(), 1e-5) }, "momentum must be a finite number, got NaN"},
		{"infinite momentum", func() { BatchNorm(x, nil, Ones(3), nil, nil, true, math.Inf(1), 1e-5) }, "momentum must be a finite number, got +Inf"},
	}
	for _, c := range cases {
		err := Try(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// A rejected call leaves the running statistics untouched.
	rm := Full(7, 3)
	if Try(func() { BatchNorm(Zeros(1, 3), rm, Ones(3), nil, nil, true, 0.1, 1e-5) }) == nil || rm.Values()[0] != 7 {
		t.Errorf("running mean %v after a rejected call", rm.Values())
	}
	// Momentum only matters where running statistics are updated.
	if err := Try(func() { BatchNorm(Randn(NewGenerator(1), 2, 3), nil, nil, nil, nil, true, math.NaN(), 1e-5) }); err != nil {
		t.Errorf("NaN momentum without running statistics: %v", err)
	}
	// Evaluation works on an empty batch.
	if y := BatchNorm(Zeros(0, 3, 2, 2), c3, Ones(3), nil, nil, false, 0.1, 1e-5); y.Numel() != 0 {
		t.Errorf("empty batch gave %v", y.Shape())
	}
}

func TestLayerNormGradCheck(t *testing.T) {
	g := NewGenerator(5)
	cases := []struct {
		name       string
		shape, ns  []int
		w, b       bool
		format     MemoryFormat
		wantFormat MemoryFormat
	}{
		{"last1", []int{3, 5}, []int{5}, true, true, Contiguous, Contiguous},
		{"last2", []int{2, 3, 4}, []int{3, 4}, true, true, Contiguous, Contiguous},
		{"all", []int{3, 4}, []int{3, 4}, true, true, Contiguous, Contiguous},
		{"noaffine", []int{4, 6}, []int{6}, false, false, Contiguous, Contiguous},
		{"weight-only", []int{2, 2, 5}, []int{5}, true, false, Contiguous, Contiguous},
		{"bias-only", []int{3, 4}, []int{4}, false, true, Contiguous, Contiguous},
		{"cl", []int{2, 3, 2, 4}, []int{2, 4}, true, true, ChannelsLast, Contiguous},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := Randn(g, c.shape...)
			if c.format != Contiguous {
				x = x.To(c.format)
			}
			ins := []*Tensor{convLeaf(x)}
			wi, bi := -1, -1
			if c.w {
				wi = len(ins)
				ins = append(ins, convLeaf(Randn(g, c.ns...)))
			}
			if c.b {
				bi = len(ins)
				ins = append(ins, convLeaf(Randn(g, c.ns...)))
			}
			f := func(xs ...*Tensor) *Tensor {
				var w, b *Tensor
				if wi > 0 {
					w = xs[wi]
				}
				if bi > 0 {
					b = xs[bi]
				}
				return LayerNorm(xs[0], c.ns, w, b, 1e-5)
			}
			if out := f(ins...); out.Format() != c.wantFormat {
				t.Errorf("output format %v, want %v", out.Format(), c.wantFormat)
			}
			if err := GradCheck(f, ins, GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
			if gf := ins[0].Grad().Format(); gf != c.format {
				t.Errorf("input gradient format %v, want %v", gf, c.format)
			}
		})
	}
}

func TestLayerNormValues(t *testing.T) {
	x := FromFloat32([]float32{1, 2, 3, 4, 10, 10, 10, 10}, 2, 4)
	y := LayerNorm(x, []int{4}, nil, FromFloat32([]float32{0, 0, 0, 1}), 1e-5)
	s := math.Sqrt(1.25 + 1e-5)
	want := []float64{-1.5 / s, -0.5 / s, 0.5 / s, 1.5/s + 1, 0, 0, 0, 1}
	if err := convClose(y.Values(), want, 1e-6); err != nil {
		t.Error(err)
	}
	// Large leading size: split across workers, rows independent.
	g := NewGenerator(2)
	big := Randn(g, 512, 96)
	w := convLeaf(Randn(g, 96))
	out := LayerNorm(convLeaf(big), []int{96}, w, nil, 1e-5)
	out.Backward(OnesLike(out))
	// With a ones output gradient, dL/dw_j = Σ_rows xhat_j.
	xh := LayerNorm(big, []int{96}, nil, nil, 1e-5).Values()
	for j := 0; j < 96; j++ {
		s := 0.0
		for r := 0; r < 512; r++ {
			s += xh[r*96+j]
		}
		if d := math.Abs(w.Grad().Values()[j] - s); d > 1e-4*(1+math.Abs(s)) {
			t.Fatalf("weight gradient %d: %v, want %v", j, w.Grad().Values()[j], s)
		}
	}
}

func TestLayerNormBadInputs(t *testing.T) {
	x := Zeros(2, 3, 4)
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"nil", func() { LayerNorm(nil, []int{4}, nil, nil, 1e-5) }, "LayerNorm: input is nil"},
		{"dtype", func() { LayerNorm(Empty(BFloat16, 2, 4), []int{4}, nil, nil, 1e-5) }, "input has dtype bfloat16; LayerNorm supports float32"},
		{"empty shape", func() { LayerNorm(x, nil, nil, nil, 1e-5) }, "normalized shape must have at least one dimension (input [2 3 4])"},
		{"mismatch", func() { LayerNorm(x, []int{3, 5}, nil, nil, 1e-5) }, "normalized shape [3 5] does not match the trailing dimensions of input [2 3 4]"},
		{"too long", func() { LayerNorm(x, []int{1, 2, 3, 4}, nil, nil, 1e-5) }, "normalized shape [1 2 3 4] does not match the trailing dimensions of input [2 3 4]"},
		{"weight shape", func() { LayerNorm(x, []int{3, 4}, Zeros(12), nil, 1e-5) }, "weight has shape [12], want the normalized shape [3 4]"},
		{"bias shape", func() { LayerNorm(x, []int{4}, nil, Zeros(3), 1e-5) }, "bias has shape [3], want the normalized shape [4]"},
		{"weight dtype", func() { LayerNorm(x, []int{4}, Empty(Int64, 4), nil, 1e-5) }, "weight has dtype int64"},
		{"eps", func() { LayerNorm(x, []int{4}, nil, nil, math.Inf(1)) }, "eps must be finite"},
	}
	for _, c := range cases {
		err := Try(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// Empty leading dimensions give an empty result, not a panic.
	if y := LayerNorm(Zeros(0, 4), []int{4}, Ones(4), nil, 1e-5); !sameShape(y.Shape(), []int{0, 4}) {
		t.Errorf("empty input gave shape %v", y.Shape())
	}
}

// TestBatchNormReLU checks the fused op against the two ops it replaces:
// the same output and gradients bit for bit, in training and evaluation,
// in both layouts, and a finite-difference check of its own.
func TestBatchNormReLU(t *testing.T) {
	g := NewGenerator(7)
	for _, c := range []struct {
		name     string
		format   MemoryFormat
		training bool
	}{{"train", Contiguous, true}, {"train-cl", ChannelsLast, true}, {"eval", Contiguous, false}, {"eval-cl", ChannelsLast, false}} {
		t.Run(c.name, func(t *testing.T) {
			x := Randn(g, 3, 4, 5, 6).To(c.format)
			w, b := Randn(g, 4), Randn(g, 4)
			dy := Randn(g, 3, 4, 5, 6).To(c.format)
			run := func(fused bool) []*Tensor {
				xl, wl, bl := convLeaf(x), convLeaf(w), convLeaf(b)
				rm, rv := Zeros(4), Ones(4)
				var y *Tensor
				if fused {
					y = BatchNormReLU(xl, rm, rv, wl, bl, c.training, 0.1, 1e-5)
				} else {
					y = ReLU(BatchNorm(xl, rm, rv, wl, bl, c.training, 0.1, 1e-5))
				}
				y.Backward(dy)
				return []*Tensor{y, xl.Grad(), wl.Grad(), bl.Grad(), rm, rv}
			}
			want, got := run(false), run(true)
			for i, name := range []string{"output", "x grad", "weight grad", "bias grad", "running mean", "running var"} {
				if got[i].Format() != want[i].Format() || fmt.Sprint(got[i].Float32s()) != fmt.Sprint(want[i].Float32s()) {
					t.Errorf("%s differs from ReLU(BatchNorm(...))", name)
				}
			}
			// Finite differences across ReLU's kink mean nothing, so the
			// check's inputs keep every normalised value at least ~0.5
			// from it: x of magnitude 1 to 1.5, a positive scale, no shift.
			xv := Randn(g, 3, 4, 5, 6).Float32s()
			for i, v := range xv {
				xv[i] = float32(math.Copysign(1+0.1*math.Min(math.Abs(float64(v)), 5), float64(v)))
			}
			xk := FromFloat32(xv, 3, 4, 5, 6).To(c.format)
			wk := normAddScalar(Rand(g, 4), 0.5)
			rm, rv := Zeros(4), Ones(4)
			f := func(xs ...*Tensor) *Tensor { return BatchNormReLU(xs[0], rm, rv, xs[1], xs[2], c.training, 0.1, 1e-5) }
			if err := GradCheck(f, []*Tensor{convLeaf(xk), convLeaf(wk), convLeaf(Zeros(4))}, GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestInPlaceInference checks that the in-place ops give the out-of-place
// results in the input's own memory, and refuse a tensor autograd needs.
func TestInPlaceInference(t *testing.T) {
	g := NewGenerator(9)
	for _, relu := range []bool{false, true} {
		x := Randn(g, 2, 3, 4, 5).To(ChannelsLast)
		w, b, rm, rv := Randn(g, 3), Randn(g, 3), Randn(g, 3), normAddScalar(Rand(g, 3), 0.5)
		want := BatchNorm(x, rm, rv, w, b, false, 0.1, 1e-5)
		if relu {
			want = ReLU(want)
		}
		got := BatchNormInPlace(x, rm, rv, w, b, false, 0.1, 1e-5, relu)
		if got != x || fmt.Sprint(got.Float32s()) != fmt.Sprint(want.Float32s()) {
			t.Errorf("relu=%v: BatchNormInPlace differs from the out-of-place op or did not write x", relu)
		}
	}
	a, b := Randn(g, 2, 3, 4, 5), Randn(g, 2, 3, 4, 5)
	want := AddReLU(a, b)
	if got := AddReLUInPlace(a, b); got != a || fmt.Sprint(got.Float32s()) != fmt.Sprint(want.Float32s()) {
		t.Error("AddReLUInPlace differs from AddReLU or did not write a")
	}
	leaf := Randn(g, 2, 3).SetRequiresGrad(true)
	for name, f := range map[string]func(){
		"bn":  func() { BatchNormInPlace(leaf, nil, nil, nil, nil, true, 0.1, 1e-5, false) },
		"add": func() { AddReLUInPlace(leaf, Zeros(2, 3)) },
	} {
		if err := Try(f); err == nil || !strings.Contains(err.Error(), "requires grad") {
			t.Errorf("%s on a leaf that requires grad: %v", name, err)
		}
	}
	if err := Try(func() { AddReLUInPlace(Zeros(2, 3), Zeros(3)) }); err == nil || !strings.Contains(err.Error(), "[2 3]") {
		t.Errorf("AddReLUInPlace with broadcasting: %v", err)
	}
	BatchNormInPlace(NoGrad(leaf), nil, nil, nil, nil, true, 0.1, 1e-5, false) // allowed: nothing is recorded
}
