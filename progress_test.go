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

func TestProgressMisuse(t *testing.T) {
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"negative batch", func() { NewProgress(10, ProgressOptions{Quiet: true}).Update(-1, 0, 0) }, "Progress.Update: 0 correct of a batch of -1"},
		{"more correct than the batch", func() { NewProgress(10, ProgressOptions{Quiet: true}).Update(4, 0, 5) }, "Progress.Update: 5 correct of a batch of 4"},
		{"negative correct", func() { NewProgress(10, ProgressOptions{Quiet: true}).Update(4, 0, -1) }, "Progress.Update: -1 correct"},
		// -1 means unknown; below it the bar drew "(0/-5)" and never ended
		// its line.
		{"total below -1", func() { NewProgress(-5, ProgressOptions{Force: true, Writer: &bytes.Buffer{}}) }, "NewProgress: total -5 must be -1 (unknown) or at least 0"},
		{"total below -1 when quiet", func() { NewProgress(-2, ProgressOptions{Quiet: true}) }, "total -2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Errorf("recovered %v, want a panic mentioning %q", r, tc.want)
				}
			}()
			tc.f()
		})
	}
}

// A diverging loss shows as NaN or infinity, never as a number that looks
// fine, and an empty batch changes nothing.
func TestProgressNonFiniteLoss(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(10, ProgressOptions{Force: true, Writer: &buf})
	p.Update(0, 123, 0)
	if p.Loss() != 0 || p.Samples() != 0 {
		t.Errorf("an empty batch changed the loss to %v and samples to %d", p.Loss(), p.Samples())
	}
	p.Update(4, 0.5, 2)
	p.Update(4, math.Inf(1), 2)
	if !math.IsInf(p.Loss(), 1) {
		t.Errorf("loss after an infinite batch = %v, want +Inf", p.Loss())
	}
	p.Update(2, math.NaN(), 1)
	p.Finish()
	if !math.IsNaN(p.Loss()) || p.Accuracy() != 0.5 {
		t.Errorf("loss %v accuracy %v, want NaN and 0.5", p.Loss(), p.Accuracy())
	}
	if !strings.Contains(p.String(), "loss NaN acc 50.00%") || !strings.Contains(buf.String(), "loss NaN") {
		t.Errorf("String %q, bar %q: the NaN loss is not shown", p.String(), buf.String())
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
