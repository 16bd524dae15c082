package models

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// parityFile is a file written by testdata/parity/gen_resnet.py, relative
// to testdata/golden (the directory golden.Load reads).
func parityFile(arch string) string {
	return filepath.Join("..", "parity", arch+".safetensors")
}

// loadTorchvision loads the "model." entries of a parity file into m
// strictly, as a torchvision state dict.
func loadTorchvision(t *testing.T, m nn.Module, set golden.Set) {
	t.Helper()
	var sd []nn.NamedTensor
	for name, v := range set {
		if s, ok := strings.CutPrefix(name, "model."); ok {
			sd = append(sd, nn.NamedTensor{Name: s, Tensor: v})
		}
	}
	if err := nn.LoadTensors(m, sd); err != nil {
		t.Fatal(err)
	}
}

// maxRelative is max|got-want| / max|want|: the issue's "relative, max
// over the batch" measure, which does not blow up on logits near zero.
func maxRelative(got, want []float64) float64 {
	diff, scale := 0.0, 0.0
	for i := range want {
		diff = math.Max(diff, math.Abs(got[i]-want[i]))
		scale = math.Max(scale, math.Abs(want[i]))
	}
	return diff / scale
}

func checkEvalLogits(t *testing.T, m *ResNet, set golden.Set, format autograd.MemoryFormat) {
	t.Helper()
	x, want := set.Get(t, "eval.x"), set.Get(t, "eval.logits")
	if format != autograd.Contiguous {
		nn.To(m, format)
		x = x.To(format)
	}
	var got *autograd.Tensor
	got = nn.Eval(m).Forward(autograd.NoGrad(x))
	if fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
		t.Fatalf("logits shape %v, PyTorch %v", got.Shape(), want.Shape())
	}
	r := maxRelative(got.Values(), want.Values())
	t.Logf("eval logits: max |Kiln − PyTorch| / max |PyTorch| = %.2g", r)
	if r > 1e-4 {
		t.Errorf("eval logits differ from PyTorch's by %.3g relative (max over the batch), want <= 1e-4", r)
	}
}

func TestResNet18EvalMatchesPyTorch(t *testing.T) {
	set := golden.Load(t, parityFile("resnet18"))
	for _, format := range []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast} {
		t.Run(format.String(), func(t *testing.T) {
			m := ResNet18(autograd.NewGenerator(1), ResNetOptions{NumClasses: 10})
			loadTorchvision(t, m, set)
			checkEvalLogits(t, m, set, format)
		})
	}
}

// TestResNet50EvalMatchesPyTorch needs the ~100 MB file that `make parity`
// writes; it is not committed.
func TestResNet50EvalMatchesPyTorch(t *testing.T) {
	if _, err := os.Stat(filepath.Join(golden.Dir(), parityFile("resnet50"))); err != nil {
		t.Skip("testdata/parity/resnet50.safetensors is absent; `make parity` writes it")
	}
	set := golden.Load(t, parityFile("resnet50"))
	m := ResNet50(autograd.NewGenerator(1), ResNetOptions{})
	loadTorchvision(t, m, set)
	checkEvalLogits(t, m, set, autograd.ChannelsLast)
}

// TestResNet18TrainingMatchesPyTorch runs three train-mode SGD steps from
// the same weights and batches as PyTorch and compares the losses, the BN
// running statistics and the updated weights.
//
// Forward values agree with PyTorch's to float32 rounding, but gradients do
// not everywhere: where a ReLU input or a max-pool pair sits within rounding
// of a tie, two summation orders may route one element's gradient
// differently, which moves a weight gradient by a few percent in single
// elements, and later steps inherit that. PyTorch against itself shows the
// same: the same three steps in channels-last instead of contiguous format
// change its losses by up to 2.4e-5, the BN statistics by up to 1.9e-4
// and a weight update by up to 4% (‖Δ‖ relative to the update's size). So
// the losses are held to the 1e-4 and the statistics of the first
// step, which depend on the forward pass alone, to its 1e-5; after three
// steps, statistics and weights are held to 20% of their change (flips
// have moved this run's contiguous layout by up to 6.5%, its channels-last
// layout by 1%), which catches a systematic error in a gradient or in the
// step while leaving room for them on other machines.
func TestResNet18TrainingMatchesPyTorch(t *testing.T) {
	set := golden.Load(t, parityFile("resnet18"))
	formats := []autograd.MemoryFormat{autograd.Contiguous, autograd.ChannelsLast}
	if testing.Short() {
		formats = formats[1:] // the layout the fast kernels serve
	}
	for _, format := range formats {
		t.Run(format.String(), func(t *testing.T) {
			m := ResNet18(autograd.NewGenerator(1), ResNetOptions{NumClasses: 10})
			loadTorchvision(t, m, set)
			nn.To(m, format)
			opt, err := optim.NewSGD(nn.Parameters(m), optim.SGDOptions{LR: 0.001, Momentum: 0.9, WeightDecay: 1e-4})
			if err != nil {
				t.Fatal(err)
			}
			xs, ys := set.Get(t, "train.x"), set.Get(t, "train.y")
			wantLoss := set.Get(t, "train.loss").Values()
			for step := range wantLoss {
				x := batch(xs, step).To(format)
				n := ys.Shape()[1]
				y := autograd.FromInt64(ys.Int64s()[step*n:(step+1)*n], n)
				opt.ZeroGrad()
				loss := autograd.CrossEntropy(m.Forward(x), y, autograd.CrossEntropyOptions{})
				loss.Backward()
				opt.Step()
				if got, want := loss.Item(), wantLoss[step]; math.Abs(got-want) > 1e-4*math.Abs(want) {
					t.Errorf("step %d: loss %.8g, PyTorch %.8g (relative error %.2g, want <= 1e-4)", step, got, want, math.Abs(got-want)/math.Abs(want))
				}
				if step == 0 {
					checkTrained(t, m, set, "stats0.", "after the first step", false, 1e-5, 40)
				}
			}
			checkTrained(t, m, set, "final.", "after 3 steps", true, 0.2, 80)
			checkTrained(t, m, set, "sample.", "after 3 steps (every 101st element)", true, 0.2, 10)
		})
	}
}

// checkTrained compares m's state-dict entries with the set's tensors named
// prefix+name, at least least of them. With update set, the measure is
// ‖got−want‖₂ / ‖want−initial‖₂: the error relative to the change that the
// steps made, not to the weights, which hardly move at this learning rate.
// Otherwise it is the largest element difference relative to max|want|.
func checkTrained(t *testing.T, m *ResNet, set golden.Set, prefix, when string, update bool, tol float64, least int) {
	t.Helper()
	checked, worst, worstName, stats := 0, 0.0, "", 0.0
	for _, nt := range nn.StateDict(m) {
		want, ok := set[prefix+nt.Name]
		if !ok {
			continue
		}
		checked++
		if strings.Contains(nt.Name, "running_") {
			stats = math.Max(stats, maxRelative(nt.Tensor.Values(), want.Values()))
		}
		got := nt.Tensor.Values()
		r := maxRelative(got, want.Values())
		if update {
			initial := set.Get(t, "model."+nt.Name).Values()
			if prefix == "sample." {
				got, initial = sample(got, 101), sample(initial, 101)
			}
			r = updateRelative(got, want.Values(), initial)
		}
		if r > tol {
			t.Errorf("%s %s differs from PyTorch's by %.3g relative, want <= %g", nt.Name, when, r, tol)
		}
		if r > worst {
			worst, worstName = r, nt.Name
		}
	}
	t.Logf("%s: worst %s %.2g; BN running statistics at most %.2g (max-relative)", when, worstName, worst, stats)
	if checked < least {
		t.Errorf("compared only %d tensors %s with PyTorch's, want at least %d", checked, when, least)
	}
}

// updateRelative is ‖got−want‖₂ / ‖want−initial‖₂.
func updateRelative(got, want, initial []float64) float64 {
	var d, n float64
	for i := range want {
		d += (got[i] - want[i]) * (got[i] - want[i])
		n += (want[i] - initial[i]) * (want[i] - initial[i])
	}
	return math.Sqrt(d / n)
}

// batch returns xs[i] of a stack of batches [steps, N, C, H, W].
func batch(xs *autograd.Tensor, i int) *autograd.Tensor {
	s := xs.Shape()
	n := xs.Numel() / s[0]
	return autograd.FromFloat32(xs.Float32s()[i*n:(i+1)*n], s[1:]...)
}

func sample(v []float64, step int) []float64 {
	var out []float64
	for i := 0; i < len(v); i += step {
		out = append(out, v[i])
	}
	return out
}
