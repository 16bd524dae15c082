package models

import (
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// The parameter and state-dict counts are torchvision's (sum of numel over
// model.parameters(), len(model.state_dict())).
func TestResNetSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every ResNet to count parameters, which no kernel level changes; skipped with -short")
	}
	for _, tc := range []struct {
		arch          string
		params, state int
	}{
		{"resnet18", 11689512, 122},
		{"resnet34", 21797672, 218},
		{"resnet50", 25557032, 320},
		{"resnet101", 44549160, 626},
		{"resnet152", 60192808, 932},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			m, err := ResNetByName(autograd.NewGenerator(1), tc.arch, ResNetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, p := range nn.Parameters(m) {
				n += p.Numel()
			}
			if n != tc.params {
				t.Errorf("%d parameters, want %d", n, tc.params)
			}
			if got := len(nn.StateDict(m)); got != tc.state {
				t.Errorf("%d state-dict entries, want %d", got, tc.state)
			}
		})
	}
}

func TestResNetNames(t *testing.T) {
	m := ResNet50(autograd.NewGenerator(1), ResNetOptions{NumClasses: 10})
	sd := nn.StateDict(m)
	names := make([]string, len(sd))
	for i, nt := range sd {
		names[i] = nt.Name
	}
	joined := strings.Join(names, " ")
	for _, want := range []string{
		"conv1.weight bn1.weight bn1.bias bn1.running_mean bn1.running_var bn1.num_batches_tracked layer1.0.conv1.weight",
		"layer1.0.downsample.0.weight layer1.0.downsample.1.weight",
		"layer4.2.bn3.num_batches_tracked fc.weight fc.bias",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("state dict lacks the run %q", want)
		}
	}
	if s := m.FC.Weight().Shape(); s[0] != 10 || s[1] != 2048 {
		t.Errorf("fc.weight shape %v, want [10 2048]", s)
	}
}

func TestResNetForward(t *testing.T) {
	for _, cl := range []bool{false, true} {
		g := autograd.NewGenerator(2)
		m := nn.Eval(ResNet18(g, ResNetOptions{NumClasses: 7, ChannelsLast: cl}))
		x := autograd.Randn(g, 2, 3, 40, 48)
		if cl {
			x = x.To(autograd.ChannelsLast)
		}
		var y *autograd.Tensor
		y = m.Forward(autograd.NoGrad(x))
		if s := y.Shape(); len(s) != 2 || s[0] != 2 || s[1] != 7 {
			t.Fatalf("channels-last %v: output shape %v, want [2 7]", cl, s)
		}
	}
}

func TestResNetZeroInitResidual(t *testing.T) {
	m := ResNet18(autograd.NewGenerator(1), ResNetOptions{ZeroInitResidual: true})
	for _, nt := range nn.NamedParameters(m) {
		zero := strings.HasSuffix(nt.Name, "bn2.weight")
		for _, v := range nt.Tensor.Float32s() {
			if (v == 0) != zero && strings.Contains(nt.Name, "bn") && strings.HasSuffix(nt.Name, "weight") {
				t.Fatalf("%s holds %v; zero_init_residual zeroes exactly the bn2 weights", nt.Name, v)
			}
		}
	}
}

func TestResNetErrors(t *testing.T) {
	g := autograd.NewGenerator(1)
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"block", func() { NewResNet(g, "dense", [4]int{1, 1, 1, 1}, ResNetOptions{}) }, `unknown block kind "dense"`},
		{"stage", func() { NewResNet(g, "basic", [4]int{1, 0, 1, 1}, ResNetOptions{}) }, "stage 2"},
		{"groups", func() { NewResNet(g, "basic", [4]int{1, 1, 1, 1}, ResNetOptions{Groups: 2}) }, "basic blocks"},
		{"input", func() { ResNet18(g, ResNetOptions{NumClasses: 2}).Forward(autograd.Zeros(1, 1, 32, 32)) }, "[1 1 32 32]"},
	} {
		err := autograd.Try(tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := ResNetByName(g, "resnet19", ResNetOptions{}); err == nil || !strings.Contains(err.Error(), "resnet19") {
		t.Errorf("ResNetByName(resnet19): %v", err)
	}
}

// TestResNetAutocast runs a ResNet-18 training step under BF16 autocast:
// convolutions and the classifier in BF16, batch norms and the loss in
// float32, float32 gradients for every parameter, and a loss close to the
// float32 one.
func TestResNetAutocast(t *testing.T) {
	g := autograd.NewGenerator(4)
	m := ResNet18(g, ResNetOptions{NumClasses: 5, ChannelsLast: true})
	x := autograd.Randn(g, 4, 3, 32, 32).To(autograd.ChannelsLast)
	y := autograd.FromInt64([]int64{0, 1, 2, 3}, 4)
	want := autograd.CrossEntropy(m.Forward(x), y, autograd.CrossEntropyOptions{}).Item()
	nn.ZeroGrad(m)
	var loss *autograd.Tensor
	var logits *autograd.Tensor
	logits = m.Forward(amp.Autocast(x))
	loss = autograd.CrossEntropy(logits, y, autograd.CrossEntropyOptions{})
	loss.Backward()
	if logits.DType() != autograd.BFloat16 {
		t.Errorf("logits under autocast are %v", logits.DType())
	}
	if got := loss.Item(); math.Abs(got-want) > 0.05*math.Abs(want) {
		t.Errorf("autocast loss %v, float32 loss %v", got, want)
	}
	for _, p := range nn.NamedParameters(m) {
		if gr := p.Tensor.Grad(); gr == nil || gr.DType() != autograd.Float32 {
			t.Fatalf("%s: gradient %v", p.Name, gr)
		}
	}
	var inf *autograd.Tensor
	inf = nn.Eval(m).Forward(amp.Autocast(autograd.NoGrad(x)))
	if inf.DType() != autograd.BFloat16 {
		t.Errorf("inference logits under autocast are %v", inf.DType())
	}
}
