package autograd

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestBroadcastAddMulGrad(t *testing.T) {
	g := NewGenerator(1)
	cases := []struct {
		name string
		a, b *Tensor
	}{
		{"same", Randn(g, 2, 3), Randn(g, 2, 3)},
		{"row", Randn(g, 2, 3), Randn(g, 3)},
		{"col", Randn(g, 4, 1), Randn(g, 1, 5)},
		{"cl-bias", Randn(g, 2, 3, 4, 5).To(ChannelsLast), Randn(g, 1, 3, 1, 1)},
		{"cl-cl", Randn(g, 2, 3, 2, 2).To(ChannelsLast), Randn(g, 2, 3, 2, 2).To(ChannelsLast)},
		{"cl-contig", Randn(g, 2, 3, 2, 2).To(ChannelsLast), Randn(g, 2, 3, 2, 2)},
	}
	ops := map[string]func(a, b *Tensor) *Tensor{"Add": Add, "Sub": Sub, "Mul": Mul, "Div": Div}
	for _, c := range cases {
		for name, op := range ops {
			a := c.a.Detach().SetRequiresGrad(true)
			b := c.b.Detach()
			if name == "Div" {
				b = Add(Mul(b, b), Full(1, 1)).Detach() // keep away from 0
			}
			b.SetRequiresGrad(true)
			err := GradCheck(func(xs ...*Tensor) *Tensor { return op(xs[0], xs[1]) }, []*Tensor{a, b}, GradCheckOptions{})
			if err != nil {
				t.Errorf("%s %s: %v", c.name, name, err)
			}
		}
	}
}

func TestBroadcastValues(t *testing.T) {
	a := FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := FromFloat32([]float32{10, 20, 30}, 3)
	got := Add(a, b).Values()
	want := []float64{11, 22, 33, 14, 25, 36}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Add = %v, want %v", got, want)
		}
	}
	if err := Try(func() { Add(a, Zeros(2)) }); err == nil || !strings.Contains(err.Error(), "[2 3] and [2]") {
		t.Fatalf("bad broadcast error = %v", err)
	}
}

func TestChannelsLastRoundTrip(t *testing.T) {
	x := Arange(0, 2*3*4*5, 1, Float32).Detach()
	x = reshapeData(x, 2, 3, 4, 5)
	cl := x.To(ChannelsLast)
	if cl.Format() != ChannelsLast || !sameShape(cl.Shape(), []int{2, 3, 4, 5}) {
		t.Fatalf("To(ChannelsLast) = %v %v", cl.Format(), cl.Shape())
	}
	// Element (n=0,c=1,h=0,w=0) is 20 logically and sits at physical index 1.
	if got := cl.Float32s()[1]; got != 20 {
		t.Fatalf("physical[1] = %v, want 20", got)
	}
	if !sameShape(cl.Strides(), []int{60, 1, 15, 3}) {
		t.Fatalf("strides = %v", cl.Strides())
	}
	back := cl.Contiguous().Values()
	for i, v := range x.Values() {
		if back[i] != v {
			t.Fatalf("round trip differs at %d", i)
		}
	}
	if err := Try(func() { Zeros(2, 3).To(ChannelsLast) }); err == nil {
		t.Fatal("ChannelsLast on 2-D tensor did not fail")
	}
}

func TestDenseZeroCopy(t *testing.T) {
	x := Randn(NewGenerator(2), 2, 3, 2, 2).To(ChannelsLast)
	d := x.Dense()
	if !sameShape([]int(d.Shape()), []int{2, 3, 2, 2}) {
		t.Fatalf("Dense shape %v", d.Shape())
	}
	v, err := d.At(1, 2, 1, 0)
	if err != nil || v.(float32) != float32(x.Contiguous().Values()[1*12+2*4+1*2+0]) {
		t.Fatalf("Dense.At = %v %v", v, err)
	}
	y, err := FromDense(d)
	if err != nil || y.Format() != ChannelsLast || &y.Float32s()[0] != &x.Float32s()[0] {
		t.Fatalf("FromDense = %v, %v", y, err)
	}
	c := Zeros(3, 4)
	yc, err := FromDense(c.Dense())
	if err != nil || &yc.Float32s()[0] != &c.Float32s()[0] || yc.Format() != Contiguous {
		t.Fatalf("FromDense contiguous = %v, %v", yc, err)
	}
}

func TestBF16Rounding(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie to even (down)
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie to even (up)
		{math.Float32frombits(0x3f808001), 0x3f81},
		{float32(math.Inf(1)), 0x7f80},
	}
	for _, c := range cases {
		got := Cast(FromFloat32([]float32{c.in}), BFloat16).BFloat16s()[0]
		if got != c.want {
			t.Errorf("bf16(%v) = %#x, want %#x", c.in, got, c.want)
		}
	}
	nan := Cast(FromFloat32([]float32{float32(math.NaN())}), BFloat16)
	if !math.IsNaN(nan.Item()) {
		t.Errorf("NaN did not survive bf16 conversion")
	}
}

func TestBackwardAccumulatesAndNoGrad(t *testing.T) {
	x := FromFloat32([]float32{1, 2, 3}).SetRequiresGrad(true)
	y := Mul(x, x) // dy/dx = 2x, used twice below
	Add(y, y).BackwardRetainGraph(Ones(3))
	Add(y, y).Backward(Ones(3))
	for i, v := range x.Grad().Values() {
		if want := 8 * float64(i+1); v != want {
			t.Fatalf("grad[%d] = %v, want %v", i, v, want)
		}
	}
	// The second Backward freed y's graph, as PyTorch's does.
	if err := Try(func() { Add(y, y).Backward(Ones(3)) }); err == nil || !strings.Contains(err.Error(), "freed by an earlier Backward") {
		t.Errorf("a third Backward through a freed graph: %v", err)
	}
	z := Mul(NoGrad(x), x)
	if z.RequiresGrad() || !z.Mode().NoGrad() {
		t.Fatal("NoGrad result requires grad")
	}
	if Detach := x.Detach(); Detach.RequiresGrad() || &Detach.Float32s()[0] != &x.Float32s()[0] {
		t.Fatal("Detach should share data and drop grad")
	}
	if err := Try(func() { Mul(x, x).Backward() }); err == nil || !strings.Contains(err.Error(), "one-element") {
		t.Fatalf("non-scalar Backward error = %v", err)
	}
}

func TestStringShowsMetadata(t *testing.T) {
	s := Zeros(2, 3, 1, 1).To(ChannelsLast).String()
	for _, want := range []string{"shape=[2 3 1 1]", "float32", "channels_last"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q lacks %q", s, want)
		}
	}
	if s := Arange(0, 10, 1, Int64).String(); !strings.Contains(s, "[0, 1, 2, ..., 7, 8, 9]") {
		t.Errorf("long print = %q", s)
	}
}

// reshapeData views t's contiguous data with a new shape (test helper until
// Reshape exists in this package's tests).
func reshapeData(t *Tensor, shape ...int) *Tensor {
	return FromFloat32(t.Float32s(), shape...)
}

func TestSetFormatInPlace(t *testing.T) {
	w := Randn(NewGenerator(3), 4, 3, 2, 2).SetRequiresGrad(true)
	want := w.Values()
	w.SetFormat(ChannelsLast)
	if w.Format() != ChannelsLast || !w.RequiresGrad() {
		t.Fatalf("SetFormat: format %v requiresGrad %v", w.Format(), w.RequiresGrad())
	}
	for i, v := range w.Values() {
		if v != want[i] {
			t.Fatalf("values changed at %d", i)
		}
	}
	if err := Try(func() { Add(w, w).SetFormat(Contiguous) }); err == nil {
		t.Fatal("SetFormat on non-leaf did not fail")
	}
}

// TestLeafGradientsOwnTheirMemory checks that a leaf's gradient never
// shares memory with the caller's output gradient or with another leaf's,
// where the tape hands one tensor on unchanged (a reshape) or to two inputs
// (a sum), while fresh gradients are adopted without a copy.
func TestLeafGradientsOwnTheirMemory(t *testing.T) {
	x := FromFloat32([]float32{1, 2, 3, 4}, 2, 2).SetRequiresGrad(true)
	dy := FromFloat32([]float32{1, 1, 1, 1}, 4)
	Reshape(x, 4).Backward(dy)
	if overlaps(x.Grad(), dy) {
		t.Error("the gradient of a reshaped leaf is the caller's output gradient")
	}

	a := FromFloat32([]float32{1, -2}, 2).SetRequiresGrad(true)
	b := FromFloat32([]float32{3, 1}, 2).SetRequiresGrad(true)
	AddReLU(a, b).Backward(FromFloat32([]float32{5, 7}, 2))
	if overlaps(a.Grad(), b.Grad()) {
		t.Error("two leaves of one sum share a gradient tensor")
	}
	if fmt.Sprint(a.Grad().Values(), b.Grad().Values()) != "[5 0] [5 0]" {
		t.Errorf("gradients %v %v, want [5 0] [5 0]", a.Grad().Values(), b.Grad().Values())
	}

	w := FromFloat32([]float32{2, 3}, 2).SetRequiresGrad(true)
	y := Mul(w, FromFloat32([]float32{4, 5}, 2))
	var fresh *Tensor
	node := y.node
	back := node.backward
	node.backward = func(g *Tensor) []*Tensor { r := back(g); fresh = r[0]; return r }
	y.Backward(Ones(2))
	if w.Grad() != fresh {
		t.Error("a fresh gradient was copied instead of adopted")
	}
}

// TestGradientSumsDoNotClobber sums gradients of a tensor read by several
// ops, some of them handing one gradient tensor to two inputs, and checks
// the results against values worked out by hand.
func TestGradientSumsDoNotClobber(t *testing.T) {
	x := FromFloat32([]float32{1, -2, 3}, 3).SetRequiresGrad(true)
	h := Mul(x, FromFloat32([]float32{1, 1, 1}, 3)) // a non-leaf read three times below
	y := Add(AddReLU(h, h), Mul(h, h))              // d/dh: 2·[2h>0] + 2h
	y.Backward(Ones(3))
	want := []float64{2 + 2, 0 - 4, 2 + 6}
	for i, v := range x.Grad().Values() {
		if v != want[i] {
			t.Fatalf("grad %v, want %v", x.Grad().Values(), want)
		}
	}
}
