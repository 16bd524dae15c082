package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/kilnml/kiln/metrics"
)

// defaultMetrics is the metrics log beside checkpoint: its name without
// the extension, then .metrics.jsonl.
func defaultMetrics(checkpoint string) string {
	return strings.TrimSuffix(checkpoint, filepath.Ext(checkpoint)) + ".metrics.jsonl"
}

// openMetrics opens the metrics log train appends to: --metrics, by
// default the one beside --checkpoint, and --tensorboard's event file.
// It returns nil when there is neither.
func openMetrics(o *options) (*metrics.Writer, error) {
	path := o.Metrics
	if !o.set["metrics"] && o.Checkpoint != "" {
		path = defaultMetrics(o.Checkpoint)
	}
	opts := metrics.Options{Run: o.Run, TensorBoardDir: o.TensorBoard}
	if opts.Run == "" {
		opts.Run = o.Arch
	}
	switch {
	case path != "":
		return metrics.Create(path, opts)
	case opts.TensorBoardDir != "":
		return metrics.NewWriter(io.Discard, opts)
	}
	return nil, nil
}

// window gathers the training batches since the last train record.
type window struct {
	start   time.Time
	samples int // this rank's
	lossSum float64
	correct int
}

func (w *window) add(samples int, loss float64, correct int) {
	w.samples += samples
	w.lossSum += loss * float64(samples)
	w.correct += correct
}

// logTrain logs the batches since the last train record, if any: their
// mean loss and top-1 accuracy (this rank's share of the batches), the
// learning rate and the images per second of all ranks together.
func (t *trainer) logTrain() {
	w := &t.win
	if t.metrics != nil && w.samples > 0 {
		t.record(metrics.Record{Split: metrics.Train, Step: int64(t.p.Step), Epoch: t.p.Epoch, Values: map[string]float64{
			"loss":          w.lossSum / float64(w.samples),
			"accuracy":      float64(w.correct) / float64(w.samples),
			"lr":            t.opt.LR(0),
			"samples_per_s": float64(w.samples*t.comm.Size()) / time.Since(w.start).Seconds(),
		}})
	}
	*w = window{start: time.Now()}
}

// logEval logs the held-out results after epoch (0-based).
func (t *trainer) logEval(epoch int, a accuracies) {
	if t.metrics == nil || a.n == 0 {
		return
	}
	t.record(metrics.Record{Split: metrics.Eval, Step: int64(t.p.Step), Epoch: epoch, Values: map[string]float64{
		"loss":          a.loss / float64(a.n),
		"accuracy":      a.rate(a.top1),
		"top5_accuracy": a.rate(a.top5),
	}})
}

// record logs r. A log that fails (a full disk) does not stop training:
// it is reported once and closed.
func (t *trainer) record(r metrics.Record) {
	if err := t.metrics.Log(r); err != nil {
		fmt.Fprintf(t.stderr, "%v; training goes on without the metrics log\n", err)
		t.closeMetrics()
	}
}

func (t *trainer) closeMetrics() {
	if t.metrics != nil {
		t.metrics.Close() // every record is written already
		t.metrics = nil
	}
}
