package kiln

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// ProgressOptions configures a Progress.
type ProgressOptions struct {
	// Description starts the line, e.g. "epoch 3".
	Description string
	// Writer receives the bar; nil means os.Stderr.
	Writer io.Writer
	// Quiet draws nothing; the statistics are still kept.
	Quiet bool
	// Force draws the bar even when Writer is not a terminal, as logs
	// and tests may want. Quiet overrides it.
	Force bool
}

// Progress follows a training or evaluation pass: it keeps the running
// mean loss, the running accuracy and the throughput, and draws them on a
// progress bar. The bar is drawn only on a terminal (unless forced), so
// output redirected to a file or a pipe stays clean.
//
// A Progress is not safe for concurrent use.
type Progress struct {
	bar     *progressbar.ProgressBar // nil when nothing is drawn
	desc    string
	start   time.Time
	samples int
	lossSum float64 // Σ batch mean loss × batch size
	correct int
}

// NewProgress starts following a pass over total samples; a total of -1
// means unknown and draws a spinner instead of a bar. Any other negative
// total is a programming error and panics, as misuse of Update does.
func NewProgress(total int, opt ProgressOptions) *Progress {
	if total < -1 {
		panic(fmt.Sprintf("kiln: NewProgress: total %d must be -1 (unknown) or at least 0", total))
	}
	p := &Progress{desc: opt.Description, start: time.Now()}
	w := opt.Writer
	if w == nil {
		w = os.Stderr
	}
	if opt.Quiet || !(opt.Force || isTerminal(w)) {
		return p
	}
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(opt.Description),
		progressbar.OptionSetWidth(20),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		// Redrawing on every batch costs more than small batches do.
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Update records a finished batch of batchSize samples whose mean loss was
// loss and of which correct were classified correctly, and advances the
// bar. Pass correct = 0 when accuracy means nothing for the task.
func (p *Progress) Update(batchSize int, loss float64, correct int) {
	if batchSize < 0 || correct < 0 || correct > batchSize {
		panic(fmt.Sprintf("kiln: Progress.Update: %d correct of a batch of %d", correct, batchSize))
	}
	p.samples += batchSize
	p.lossSum += loss * float64(batchSize)
	p.correct += correct
	if p.bar != nil {
		p.bar.Describe(p.String())
		p.bar.Add(batchSize)
	}
}

// Loss returns the mean loss per sample so far, weighting each batch's
// mean loss by its size; 0 before the first batch.
func (p *Progress) Loss() float64 {
	if p.samples == 0 {
		return 0
	}
	return p.lossSum / float64(p.samples)
}

// Accuracy returns the fraction of samples so far classified correctly.
func (p *Progress) Accuracy() float64 {
	if p.samples == 0 {
		return 0
	}
	return float64(p.correct) / float64(p.samples)
}

// Samples returns the number of samples seen so far.
func (p *Progress) Samples() int { return p.samples }

// Throughput returns the samples per second since NewProgress.
func (p *Progress) Throughput() float64 {
	s := time.Since(p.start).Seconds()
	if s <= 0 {
		return 0
	}
	return float64(p.samples) / s
}

// String summarises the pass so far, as the bar shows it:
// "epoch 3 loss 0.2345 acc 93.10% 5120 samples/s".
func (p *Progress) String() string {
	s := fmt.Sprintf("loss %.4f acc %.2f%% %.0f samples/s", p.Loss(), 100*p.Accuracy(), p.Throughput())
	if p.desc != "" {
		s = p.desc + " " + s
	}
	return s
}

// Finish completes the bar and ends its line. The statistics stay
// readable afterwards.
func (p *Progress) Finish() {
	// The bar finishes by itself when the samples reach the total.
	if p.bar != nil && !p.bar.IsFinished() {
		p.bar.Describe(p.String())
		p.bar.Finish()
	}
}
