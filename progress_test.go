package kiln

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProgressDrawing(t *testing.T) {
	tests := []struct {
		name    string
		opt     ProgressOptions
		useFile bool // write to a regular file instead of a buffer
		total   int  // samples announced; 10 batches of 10 are seen
		draw    bool
	}{
		{"buffer", ProgressOptions{}, false, 100, false},
		{"file", ProgressOptions{}, true, 100, false},
		{"forced", ProgressOptions{Force: true}, false, 100, true},
		{"forced file", ProgressOptions{Force: true}, true, 100, true},
		{"forced short", ProgressOptions{Force: true}, false, 120, true},
		{"quiet", ProgressOptions{Quiet: true}, false, 100, false},
		{"quiet beats force", ProgressOptions{Quiet: true, Force: true}, false, 100, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			path := filepath.Join(t.TempDir(), "log")
			file, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			tc.opt.Writer = &buf
			if tc.useFile {
				tc.opt.Writer = file
			}
			tc.opt.Description = "epoch 1"
			p := NewProgress(tc.total, tc.opt)
			for range 10 {
				p.Update(10, 0.5, 7)
			}
			p.Finish()
			out := buf.String()
			if tc.useFile {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				out = string(b)
			}
			if !tc.draw {
				if out != "" {
					t.Fatalf("drew %q", out)
				}
				return
			}
			for _, want := range []string{"epoch 1 loss 0.5000 acc 70.00%", "samples/s", "100%"} {
				if !strings.Contains(out, want) {
					t.Errorf("output %q lacks %q", out, want)
				}
			}
			if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
				t.Errorf("output %q does not end in its only newline", out)
			}
		})
	}
}

func TestProgressStatistics(t *testing.T) {
	p := NewProgress(-1, ProgressOptions{Quiet: true})
	if p.Loss() != 0 || p.Accuracy() != 0 || p.Samples() != 0 {
		t.Fatalf("fresh progress: loss %v acc %v samples %d", p.Loss(), p.Accuracy(), p.Samples())
	}
	// Batch mean losses weigh by batch size: (4·1 + 1·6)/5 = 2.
	p.Update(4, 1, 4)
	p.Update(1, 6, 0)
	p.Finish()
	if p.Loss() != 2 || p.Accuracy() != 0.8 || p.Samples() != 5 {
		t.Errorf("loss %v acc %v samples %d, want 2, 0.8, 5", p.Loss(), p.Accuracy(), p.Samples())
	}
	if tp := p.Throughput(); !(tp > 0) || math.IsInf(tp, 0) {
		t.Errorf("throughput %v", tp)
	}
	if s := p.String(); !strings.HasPrefix(s, "loss 2.0000 acc 80.00% ") {
		t.Errorf("String() = %q", s)
	}
}

func TestProgressUpdateMisuse(t *testing.T) {
	for _, tc := range []struct{ batch, correct int }{{-1, 0}, {4, 5}, {4, -1}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Progress.Update") {
					t.Errorf("Update(%d, _, %d): recovered %v", tc.batch, tc.correct, r)
				}
			}()
			NewProgress(10, ProgressOptions{Quiet: true}).Update(tc.batch, 0, tc.correct)
		}()
	}
}

// A training loop updates the progress after each batch; the bar appears
// only on a terminal, and the running figures are there either way.
func ExampleProgress() {
	p := NewProgress(1000, ProgressOptions{Description: "epoch 1"})
	for range 10 {
		// loss, correct := trainStep(batch)
		p.Update(100, 0.25, 90)
	}
	p.Finish()
	fmt.Printf("loss %.2f accuracy %.2f\n", p.Loss(), p.Accuracy())
	// Output: loss 0.25 accuracy 0.90
}
