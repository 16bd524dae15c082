package main

import (
	"encoding/json"
	"io"
	"path/filepath"
	"runtime"
	"time"
)

// mlperfLog writes --mlperf-logging's lines, in the format of MLCommons'
// mlperf_logging.mllog that dlrm_s_pytorch.py uses: one JSON object a
// line after ":::MLLOG ", holding namespace (empty), time_ms (wall clock,
// milliseconds since the Unix epoch), event_type (POINT_IN_TIME,
// INTERVAL_START or INTERVAL_END), key, value and metadata (the calling
// file and line, as mllog records them, and the event's own fields such as
// epoch_num). Its methods log the events dlrm logs, named after them; on a
// nil *mlperfLog (no --mlperf-logging) they do nothing.
type mlperfLog struct {
	w io.Writer
}

// newMLPerfLog returns the log written to w under --mlperf-logging, or nil.
func newMLPerfLog(o *options, w io.Writer) *mlperfLog {
	if !o.MLPerfLogging {
		return nil
	}
	return &mlperfLog{w: w}
}

// mllogLine is one line's object, its fields in mllog's order.
type mllogLine struct {
	Namespace string         `json:"namespace"`
	TimeMS    int64          `json:"time_ms"`
	EventType string         `json:"event_type"`
	Key       string         `json:"key"`
	Value     any            `json:"value"`
	Metadata  map[string]any `json:"metadata"`
}

// mllog's event types.
const (
	pointInTime   = "POINT_IN_TIME"
	intervalStart = "INTERVAL_START"
	intervalEnd   = "INTERVAL_END"
)

// log writes one line. meta holds the event's metadata as name, value
// pairs. It is called only by mlperfLog's methods, which train.go calls,
// so that the line recorded is the one in train.go.
func (l *mlperfLog) log(eventType, key string, value any, meta ...any) {
	md := map[string]any{}
	if _, file, line, ok := runtime.Caller(2); ok {
		md["file"], md["lineno"] = filepath.Base(file), line
	}
	for i := 0; i+1 < len(meta); i += 2 {
		md[meta[i].(string)] = meta[i+1]
	}
	b, err := json.Marshal(mllogLine{TimeMS: time.Now().UnixMilli(), EventType: eventType, Key: key, Value: value, Metadata: md})
	if err != nil {
		panic(err) // the values are numbers, strings and booleans
	}
	l.w.Write(append(append([]byte(":::MLLOG "), b...), '\n'))
}

// runStart logs cache_clear, init_start, init_stop and run_start, as
// dlrm does before it reads the data: Kiln has nothing to set up before.
func (l *mlperfLog) runStart() {
	if l == nil {
		return
	}
	l.log(pointInTime, "cache_clear", true)
	l.log(intervalStart, "init_start", nil)
	l.log(intervalEnd, "init_stop", nil)
	l.log(intervalStart, "run_start", nil)
}

// samples logs the sizes of src's training and held-out sets, as dlrm's
// data loader does.
func (l *mlperfLog) samples(src source) {
	if l == nil {
		return
	}
	train, test := src.samples()
	l.log(pointInTime, "train_samples", train)
	l.log(pointInTime, "eval_samples", test)
}

// config logs the submission's description, the seed, the batch size
// and the learning rate and its schedule (under mllog's keys and those of
// MLPerf's DLRM table), as dlrm does before training. The benchmark,
// division and status are dlrm's; Kiln names itself where dlrm says
// "reference_implementation".
func (l *mlperfLog) config(o *options) {
	if l == nil {
		return
	}
	for _, kv := range [][2]string{{"submission_benchmark", "dlrm"}, {"submission_org", "kiln"},
		{"submission_division", "closed"}, {"submission_status", "onprem"}, {"submission_platform", "kiln"},
		{"submission_entry", "kiln"}, {"submission_poc_name", "kiln"}, {"submission_poc_email", "kiln"}} {
		l.log(pointInTime, kv[0], kv[1])
	}
	l.log(pointInTime, "seed", o.Seed)
	l.log(pointInTime, "global_batch_size", o.MiniBatchSize)
	l.log(pointInTime, "opt_base_learning_rate", o.LearningRate)
	l.log(pointInTime, "opt_learning_rate_warmup_steps", o.LRNumWarmupSteps)
	l.log(pointInTime, "sgd_opt_base_learning_rate", o.LearningRate)
	l.log(pointInTime, "lr_decay_start_steps", o.LRDecayStartStep)
	l.log(pointInTime, "sgd_opt_learning_rate_decay_steps", o.LRNumDecaySteps)
	l.log(pointInTime, "sgd_opt_learning_rate_decay_poly_power", 2)
}

// epochStart opens a block of one epoch and the epoch (0-based epoch,
// logged 1-based as dlrm does).
func (l *mlperfLog) epochStart(epoch int) {
	if l == nil {
		return
	}
	l.log(intervalStart, "block_start", nil, "first_epoch_num", epoch+1, "epoch_count", 1)
	l.log(intervalStart, "epoch_start", nil, "epoch_num", epoch+1)
}

// epochStop closes what epochStart opened.
func (l *mlperfLog) epochStop(epoch int) {
	if l == nil {
		return
	}
	l.log(intervalEnd, "epoch_stop", nil, "epoch_num", epoch+1)
	l.log(intervalEnd, "block_stop", nil, "first_epoch_num", epoch+1)
}

// evalEpoch is the epoch_num dlrm gives a test after it of perEpoch
// iterations of the 0-based epoch: it/perEpoch + epoch + 1.
func evalEpoch(epoch, it, perEpoch int) float64 {
	return float64(it)/float64(perEpoch) + float64(epoch) + 1
}

// evalStart opens a test at epochNum (evalEpoch's).
func (l *mlperfLog) evalStart(epochNum float64) {
	if l == nil {
		return
	}
	l.log(intervalStart, "eval_start", nil, "epoch_num", epochNum)
}

// evalStop logs the test's AUC as eval_accuracy and closes it.
func (l *mlperfLog) evalStop(epochNum, auc float64) {
	if l == nil {
		return
	}
	l.log(pointInTime, "eval_accuracy", auc, "epoch_num", epochNum)
	l.log(intervalEnd, "eval_stop", nil, "epoch_num", epochNum)
}

// runStop ends the run: status success when it stopped at
// --mlperf-auc-threshold, aborted otherwise.
func (l *mlperfLog) runStop(success bool) {
	if l == nil {
		return
	}
	status := "aborted"
	if success {
		status = "success"
	}
	l.log(intervalEnd, "run_stop", nil, "status", status)
}
