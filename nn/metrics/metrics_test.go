package metrics_test

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/nn/metrics"
)

var nan = float32(math.NaN())

func TestAUC(t *testing.T) {
	tests := []struct {
		name   string
		scores []float32
		labels []float32
		want   float64
	}{
		{"perfect", []float32{0.1, 0.2, 0.8, 0.9}, []float32{0, 0, 1, 1}, 1},
		{"inverted", []float32{0.9, 0.8, 0.2, 0.1}, []float32{0, 0, 1, 1}, 0},
		{"all tied", []float32{0.5, 0.5, 0.5, 0.5, 0.5}, []float32{0, 1, 1, 0, 1}, 0.5},
		// Pairs (pos, neg): (0.8,0.4) win, (0.8,0.8) tie, (0.4,0.4) tie,
		// (0.4,0.8) loss: (1 + 0.5 + 0.5) / 4.
		{"ties across classes", []float32{0.8, 0.4, 0.4, 0.8}, []float32{1, 1, 0, 0}, 0.5},
		{"one tie", []float32{0.1, 0.5, 0.5, 0.9}, []float32{0, 0, 1, 1}, 0.875},
		// 2 positives, 3 negatives; positive 0.7 beats all 3, 0.3 beats 1: 4/6.
		{"fraction", []float32{0.3, 0.7, 0.2, 0.4, 0.5}, []float32{1, 1, 0, 0, 0}, 4.0 / 6},
		{"negative zero ties zero", []float32{float32(math.Copysign(0, -1)), 0}, []float32{1, 0}, 0.5},
		{"logits and infinities", []float32{float32(math.Inf(-1)), -3, 2, float32(math.Inf(1))}, []float32{0, 1, 0, 1}, 0.75},
		{"negative scores", []float32{-2, -1, -0.5, -3}, []float32{0, 1, 1, 0}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := metrics.AUC(tc.scores, tc.labels)
			if err != nil || got != tc.want {
				t.Errorf("AUC = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestLogLossAccuracy(t *testing.T) {
	ln := math.Log
	top := 1 - metrics.LogLossEps // a float64 variable: constant arithmetic would be exact
	tests := []struct {
		name          string
		probs, labels []float32
		loss, acc     float64
	}{
		{"confident right", []float32{1, 0}, []float32{1, 0}, -ln(top), 1},
		// 1 clips to the float64 nearest 1−1e-15, and 1 minus that is not 1e-15.
		{"confident wrong clips at eps", []float32{0, 1}, []float32{1, 0}, -(ln(1e-15) + ln(1-top)) / 2, 0},
		{"half", []float32{0.5, 0.5}, []float32{1, 0}, ln(2), 0.5}, // 0.5 rounds to 0
		{"mixed", []float32{0.25, 0.75, 0.5000001}, []float32{0, 0, 1},
			-(ln(0.75) + ln(0.25) + ln(float64(float32(0.5000001)))) / 3, 2.0 / 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loss, err := metrics.LogLoss(tc.probs, tc.labels)
			if err != nil || math.Abs(loss-tc.loss) > 1e-15*math.Abs(tc.loss) {
				t.Errorf("LogLoss = %v, %v; want %v", loss, err, tc.loss)
			}
			acc, err := metrics.Accuracy(tc.probs, tc.labels)
			if err != nil || acc != tc.acc {
				t.Errorf("Accuracy = %v, %v; want %v", acc, err, tc.acc)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	type fn func([]float32, []float32) (float64, error)
	all := map[string]fn{"AUC": metrics.AUC, "LogLoss": metrics.LogLoss, "Accuracy": metrics.Accuracy}
	tests := []struct {
		name   string
		only   string // one metric, or all
		scores []float32
		labels []float32
		msg    string // the error after "metrics: NAME: "
	}{
		{"lengths", "", []float32{0.1, 0.2}, []float32{1}, "2 %s values but 1 labels"},
		{"empty", "", nil, nil, "no samples"},
		{"label 2", "", []float32{0.1, 0.2}, []float32{0, 2}, "label 1 is 2, want 0 or 1"},
		{"label -1", "", []float32{0.1, 0.2}, []float32{-1, 1}, "label 0 is -1, want 0 or 1"},
		{"label NaN", "", []float32{0.1, 0.2}, []float32{1, nan}, "label 1 is NaN, want 0 or 1"},
		{"score NaN", "", []float32{0.1, nan, 0.3}, []float32{0, 1, 0}, "%s 1 is NaN"},
		{"one class", "AUC", []float32{0.1, 0.9}, []float32{1, 1}, "labels hold only one class (2 samples, all labelled 1)"},
		{"logit", "LogLoss", []float32{0.5, 1.5}, []float32{0, 1}, "probability 1 is 1.5, outside [0, 1]"},
	}
	for _, tc := range tests {
		for name, f := range all {
			if tc.only != "" && tc.only != name {
				continue
			}
			what := "probability"
			if name == "AUC" {
				what = "score"
			}
			want := "metrics: " + name + ": " + strings.ReplaceAll(tc.msg, "%s", what)
			_, err := f(tc.scores, tc.labels)
			if err == nil || err.Error() != want {
				t.Errorf("%s %s: error %v, want %q", name, tc.name, err, want)
			}
		}
	}
	if _, err := metrics.AUC([]float32{0.1}, []float32{0}); !errors.Is(err, metrics.ErrOneClass) {
		t.Errorf("one negative: %v, want ErrOneClass", err)
	}
	// One class is fine for the other two.
	if l, err := metrics.LogLoss([]float32{0.5}, []float32{1}); err != nil || l != math.Log(2) {
		t.Errorf("LogLoss of one positive: %v, %v", l, err)
	}
}

// goldenF reads every tensor of metrics.safetensors as float64 (F32
// widened), keeping the float64 references unrounded.
func goldenF(t *testing.T) map[string][]float64 {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join(golden.Dir(), "metrics.safetensors"))
	if err != nil {
		t.Fatalf("%v (regenerate with gen_metrics.py)", err)
	}
	out := map[string][]float64{}
	for _, e := range f.Tensors {
		le := binary.LittleEndian
		switch e.DType {
		case "F32":
			v := make([]float64, len(e.Data)/4)
			for i := range v {
				v[i] = float64(math.Float32frombits(le.Uint32(e.Data[4*i:])))
			}
			out[e.Name] = v
		case "F64":
			v := make([]float64, len(e.Data)/8)
			for i := range v {
				v[i] = math.Float64frombits(le.Uint64(e.Data[8*i:]))
			}
			out[e.Name] = v
		default:
			t.Fatalf("%s: dtype %s", e.Name, e.DType)
		}
	}
	return out
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func TestGolden(t *testing.T) {
	g := goldenF(t)
	n := 0
	for name := range g {
		c, ok := strings.CutSuffix(name, ".scores")
		if !ok {
			continue
		}
		n++
		scores, labels := f32(g[c+".scores"]), f32(g[c+".labels"])
		for metric, f := range map[string]func([]float32, []float32) (float64, error){
			"auc": metrics.AUC, "logloss": metrics.LogLoss, "accuracy": metrics.Accuracy,
		} {
			want := g[c+"."+metric]
			if len(want) != 1 {
				t.Fatalf("%s.%s: %d values", c, metric, len(want))
			}
			got, err := f(scores, labels)
			if err != nil {
				t.Errorf("%s: %s: %v", c, metric, err)
				continue
			}
			if math.Abs(got-want[0]) > 1e-12*math.Abs(want[0]) {
				t.Errorf("%s: %s = %.17g, want %.17g (rel %.2g)", c, metric, got, want[0], math.Abs(got-want[0])/want[0])
			}
		}
	}
	if n < 8 {
		t.Errorf("%d golden cases, want at least 8", n)
	}
}
