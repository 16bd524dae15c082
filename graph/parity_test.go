package graph

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// The frozen, fused graph of a torchvision ResNet must give the logits of
// eager Kiln and of PyTorch (testdata/parity, written by gen_resnet.py)
// within 1e-4 relative, the bound.

func parityModel(t *testing.T, arch string) (*models.ResNet, golden.Set) {
	t.Helper()
	file := filepath.Join("..", "parity", arch+".safetensors")
	if _, err := os.Stat(filepath.Join(golden.Dir(), file)); err != nil {
		t.Skipf("testdata/parity/%s.safetensors is absent; `make parity` writes it", arch)
	}
	set := golden.Load(t, file)
	opt := models.ResNetOptions{}
	if arch == "resnet18" {
		opt.NumClasses = 10
	}
	m, err := models.ResNetByName(autograd.NewGenerator(1), arch, opt)
	if err != nil {
		t.Fatal(err)
	}
	var sd []nn.NamedTensor
	for name, v := range set {
		if s, ok := strings.CutPrefix(name, "model."); ok {
			sd = append(sd, nn.NamedTensor{Name: s, Tensor: v})
		}
	}
	if err := nn.LoadTensors(m, sd); err != nil {
		t.Fatal(err)
	}
	return nn.Eval(m), set
}

// maxRelative is max|got−want| / max|want| over the batch.
func maxRelative(got, want []float64) float64 {
	diff, scale := 0.0, 0.0
	for i := range want {
		diff = math.Max(diff, math.Abs(got[i]-want[i]))
		scale = math.Max(scale, math.Abs(want[i]))
	}
	return diff / scale
}

func checkFrozenResNet(t *testing.T, arch string) {
	m, set := parityModel(t, arch)
	x, want := set.Get(t, "eval.x"), set.Get(t, "eval.logits")
	for _, format := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
		t.Run(format.String(), func(t *testing.T) {
			nn.To(m, format)
			xf := x.To(format)
			var eager *autograd.Tensor
			eager = m.Forward(autograd.NoGrad(xf))
			p, _ := freezeAndCompile(t, m, xf)
			outs, err := p.Run(xf)
			if err != nil {
				t.Fatal(err)
			}
			got := outs[0].Values()
			if r := maxRelative(got, eager.Values()); r > 1e-4 {
				t.Errorf("frozen graph differs from eager Kiln by %.3g relative, want <= 1e-4", r)
			} else {
				t.Logf("frozen vs eager Kiln: %.2g", r)
			}
			if r := maxRelative(got, want.Values()); r > 1e-4 {
				t.Errorf("frozen graph differs from PyTorch by %.3g relative, want <= 1e-4", r)
			} else {
				t.Logf("frozen vs PyTorch: %.2g", r)
			}
		})
	}
}

func TestFrozenResNet18MatchesPyTorch(t *testing.T) { checkFrozenResNet(t, "resnet18") }

// TestFrozenResNet50MatchesPyTorch needs the file `make parity` writes.
func TestFrozenResNet50MatchesPyTorch(t *testing.T) { checkFrozenResNet(t, "resnet50") }
