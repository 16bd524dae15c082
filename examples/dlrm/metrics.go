package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/kilnml/kiln/metrics"
)

// metricsLog is the metrics log train appends to: --metrics (by default
// the one beside --save-model) and --tensorboard's event file. Its
// methods do nothing on a nil *metricsLog (no log, or not rank 0).
type metricsLog struct {
	w      *metrics.Writer
	stderr io.Writer
	// bce: the training loss is binary cross-entropy, which a test's log
	// loss is too, so held-out records carry it as their loss as well.
	bce bool
}

// openMetrics opens the metrics log the flags ask for, or returns nil.
func openMetrics(o *options, stderr io.Writer) (*metricsLog, error) {
	path := o.Metrics
	if !o.metricsSet && o.SaveModel != "" {
		path = strings.TrimSuffix(o.SaveModel, filepath.Ext(o.SaveModel)) + ".metrics.jsonl"
	}
	opts := metrics.Options{Run: o.Run, TensorBoardDir: o.TensorBoard}
	var w *metrics.Writer
	var err error
	switch {
	case path != "":
		w, err = metrics.Create(path, opts)
	case opts.TensorBoardDir != "":
		w, err = metrics.NewWriter(io.Discard, opts)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &metricsLog{w: w, stderr: stderr, bce: o.LossFunction == "bce"}, nil
}

// train logs a progress line's numbers: after the global iteration step
// of the 0-based epoch, the mean loss and accuracy of the iterations since
// the last line (this rank's share of their batches), the learning rate of
// the last and the samples per second of all ranks.
func (l *metricsLog) train(step, epoch int, loss, accuracy, lr, samplesPerS float64) {
	l.log(metrics.Record{Split: metrics.Train, Step: int64(step), Epoch: epoch, Values: map[string]float64{
		"loss": loss, "accuracy": accuracy, "lr": lr, "samples_per_s": samplesPerS}})
}

// eval logs a held-out test after the global iteration step: with the
// bce loss its log loss is also its "loss", on one curve with training's
// (kiln plot); under mse or wbce the two measure different things.
func (l *metricsLog) eval(step, epoch int, s scores) {
	if l == nil {
		return
	}
	v := map[string]float64{"accuracy": s.accuracy, "auc": s.auc, "log_loss": s.logLoss}
	if l.bce {
		v["loss"] = s.logLoss
	}
	l.log(metrics.Record{Split: metrics.Eval, Step: int64(step), Epoch: epoch, Values: v})
}

// log writes r. A log that fails (a full disk) does not stop training:
// it is reported once and closed.
func (l *metricsLog) log(r metrics.Record) {
	if l == nil || l.w == nil {
		return
	}
	if err := l.w.Log(r); err != nil {
		fmt.Fprintf(l.stderr, "%v; training goes on without the metrics log\n", err)
		l.close()
	}
}

func (l *metricsLog) close() {
	if l != nil && l.w != nil {
		l.w.Close() // every record is written already
		l.w = nil
	}
}
