package models

import (
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
)

// TestResNetFoldBatchNorm folds every BatchNorm of eval ResNets with
// randomised statistics: the stem, each block's declared pairs and the
// downsample Sequentials, and the logits do not move.
func TestResNetFoldBatchNorm(t *testing.T) {
	for _, tc := range []struct {
		arch         string
		channelsLast bool
		// folded: stem + blocks·convs per block + downsamples; state:
		// torchvision's entries less five per BatchNorm plus one bias per
		// folded convolution.
		folded, state int
	}{
		{"resnet18", false, 1 + 8*2 + 3, 122 - 20*5 + 20},
		{"resnet18", true, 20, 42},
		{"resnet50", true, 1 + 16*3 + 4, 320 - 53*5 + 53},
	} {
		if testing.Short() && tc.arch != "resnet18" {
			continue // the same folds, larger; -short keeps the ResNet-18 cases
		}
		name := tc.arch
		if tc.channelsLast {
			name += "/channels-last"
		}
		t.Run(name, func(t *testing.T) {
			g := autograd.NewGenerator(5)
			m, err := ResNetByName(g, tc.arch, ResNetOptions{NumClasses: 10, ChannelsLast: tc.channelsLast})
			if err != nil {
				t.Fatal(err)
			}
			for _, nm := range nn.NamedModules(m) {
				if bn, ok := nm.Module.(*nn.BatchNorm); ok {
					nn.Uniform(g, bn.Weight(), 0.5, 1.5)
					nn.Uniform(g, bn.Bias(), -0.2, 0.2)
					nn.Uniform(g, bn.RunningMean(), -0.2, 0.2)
					nn.Uniform(g, bn.RunningVar(), 0.5, 2)
				}
			}
			nn.Eval(m)
			x := autograd.Randn(g, 2, 3, 32, 32)
			if tc.channelsLast {
				x = x.To(autograd.ChannelsLast)
			}
			var want *autograd.Tensor
			want = m.Forward(autograd.NoGrad(x))

			n, err := nn.FoldBatchNorm(m)
			if err != nil || n != tc.folded {
				t.Fatalf("FoldBatchNorm = %d, %v; want %d, nil", n, err, tc.folded)
			}
			if got := len(nn.StateDict(m)); got != tc.state {
				t.Errorf("%d state-dict entries after folding, want %d", got, tc.state)
			}
			for _, nm := range nn.NamedModules(m) {
				if bn, ok := nm.Module.(*nn.BatchNorm); ok && !bn.Folded() {
					t.Errorf("%s was not folded", nm.Name)
				}
			}
			var got *autograd.Tensor
			got = m.Forward(autograd.NoGrad(x))
			golden.AssertClose(t, "folded logits (in place)", got, want, 1e-4)
			golden.AssertClose(t, "folded logits (recording)", m.Forward(x), want, 1e-4)
		})
	}
}
