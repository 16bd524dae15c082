package nn_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// TestConvPrepack: a prepacked convolution gives the plain one's output
// bit for bit, and its packed copy follows every change of the weights
// made through nn (loading a state dict, a recorded forward before a step,
// a new weight tensor, a change of memory format).
func TestConvPrepack(t *testing.T) {
	g := autograd.NewGenerator(9)
	mk := func() *nn.Conv2d {
		c := nn.NewConv2d(autograd.NewGenerator(3), 8, 16, 3, nn.ConvOptions{Padding: 1})
		return nn.To(c, autograd.ChannelsLast)
	}
	x := autograd.Randn(g, 2, 8, 7, 9).To(autograd.ChannelsLast)
	ref, c := nn.Eval(mk()), nn.Eval(mk())
	c.Prepack()
	same := func(what string) {
		t.Helper()
		var got, want *autograd.Tensor
		got, want = c.Forward(autograd.NoGrad(x)), ref.Forward(autograd.NoGrad(x))
		if fmt.Sprint(got.Values()) != fmt.Sprint(want.Values()) {
			t.Fatalf("%s: the prepacked convolution's output differs from the plain one's", what)
		}
	}
	same("first forward")
	same("second forward")

	// Loading a state dict writes into the weight in place.
	other := mk()
	for _, p := range nn.Parameters(other) {
		p.CopyFrom(autograd.Randn(g, p.Shape()...))
	}
	path := filepath.Join(t.TempDir(), "w.safetensors")
	if err := nn.SaveStateDict(other, path); err != nil {
		t.Fatal(err)
	}
	for _, m := range []nn.Module{c, ref} {
		if err := nn.LoadStateDict(m, path); err != nil {
			t.Fatal(err)
		}
	}
	same("after LoadStateDict")

	// A forward recording gradients drops the packed copy, so a step
	// between two inference calls is seen.
	y := c.Forward(x)
	autograd.Sum(y, nil, false).Backward()
	for _, m := range []*nn.Conv2d{c, ref} {
		w := m.Weight()
		w.CopyFrom(autograd.AddScalar(autograd.NoGrad(w), 0.25))
	}
	same("after a recorded forward and a weight change")

	// A new weight tensor is packed anew.
	for _, m := range []*nn.Conv2d{c, ref} {
		m.SetParameter("weight", autograd.Randn(autograd.NewGenerator(4), 16, 8, 3, 3).To(autograd.ChannelsLast))
	}
	same("after SetParameter")
	for _, m := range []*nn.Conv2d{c, ref} {
		nn.To(m, autograd.Contiguous)
	}
	same("after nn.To(Contiguous)")
	for _, m := range []*nn.Conv2d{c, ref} {
		nn.To(m, autograd.ChannelsLast)
	}
	same("after nn.To(ChannelsLast)")
	if !c.Prepacked() || ref.Prepacked() {
		t.Error("Prepacked reports the wrong state")
	}
}

// TestConvPrepackConcurrent runs inference forwards of one prepacked
// convolution from several goroutines (run it with -race): each gets the
// plain convolution's output.
func TestConvPrepackConcurrent(t *testing.T) {
	c := nn.Eval(nn.To(nn.NewConv2d(autograd.NewGenerator(3), 8, 16, 3, nn.ConvOptions{Padding: 1}), autograd.ChannelsLast))
	x := autograd.Randn(autograd.NewGenerator(5), 2, 8, 6, 6).To(autograd.ChannelsLast)
	var want *autograd.Tensor
	want = c.Forward(autograd.NoGrad(x))
	c.Prepack()
	errs := make(chan string, 4)
	for range 4 {
		go func() {
			var msg string
			for range 3 {
				if got := c.Forward(autograd.NoGrad(x)); fmt.Sprint(got.Values()) != fmt.Sprint(want.Values()) {
					msg = "a concurrent prepacked forward differs from the plain one"
				}
			}
			errs <- msg
		}()
	}
	for range 4 {
		if msg := <-errs; msg != "" {
			t.Error(msg)
		}
	}
}
