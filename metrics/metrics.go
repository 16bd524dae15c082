// Package metrics is the log a training loop appends its numbers to: one
// record per report of the training loss, learning rate and throughput,
// one per evaluation, written as JSON Lines that scripts (and kiln plot)
// read and, optionally, as TensorBoard scalar event files.
//
// A Writer writes each record as one JSON object on one line, its keys in
// a fixed order:
//
//	{"run":"r18","split":"train","step":120,"epoch":1,"wall_time":1795851234.125,"loss":2.3125,"lr":0.1,"samples_per_s":312.4}
//
// run is Options.Run (left out when empty); split is "train" or "eval";
// step is the global optimizer step the record belongs to; epoch is the
// epoch that step belongs to (Kiln's trainers count from 0); wall_time is
// the record's time in Unix seconds, to the millisecond. The values
// follow: first the standard names, in this order, when present — loss,
// accuracy (a fraction, not a percentage), auc, lr, samples_per_s — then
// any others sorted by name. Numbers are written as encoding/json writes a
// float64 (the shortest text that reads back to the same value); NaN and
// the infinities, which JSON cannot hold, as the strings "NaN", "+Inf" and
// "-Inf".
//
// Create opens the file for appending, so a resumed run adds to the log of
// the run it continues. Each line goes to the file in one write as soon as
// it is logged, with no buffer holding lines back: a crash loses at most
// the line being written, and never leaves half a line with more records
// after it (Create ends a cut-off last line before it appends). A reader
// should skip a line that does not parse.
//
// With Options.TensorBoardDir the Writer also writes a TensorBoard event
// file in that directory (events.out.tfevents.SECONDS.HOST.PID, a new one
// per Writer, as TensorFlow's writers do), each record an event at its step
// holding one scalar per value, tagged split/name (train/loss,
// eval/accuracy). TensorBoard reads every event file in a directory, so
// the files of a resumed run show as one.
package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The splits a Record can belong to.
const (
	Train = "train" // a report of training progress
	Eval  = "eval"  // the result of an evaluation on held-out data
)

// standard are the value names written first, in this order.
var standard = []string{"loss", "accuracy", "auc", "lr", "samples_per_s"}

// reserved are the keys every line has before its values.
var reserved = []string{"run", "split", "step", "epoch", "wall_time"}

// Options configures a Writer.
type Options struct {
	// Run names the run on every line ("run"); empty leaves the key out.
	Run string
	// TensorBoardDir, when not empty, is a directory (created if need be)
	// in which the Writer also writes a TensorBoard event file.
	TensorBoardDir string
}

// Record is one line of the log.
type Record struct {
	Split string // Train or Eval
	Step  int64  // the global optimizer step, at least 0
	Epoch int    // the epoch the step belongs to, at least 0
	// Time is when the record was taken; the zero Time means now.
	Time time.Time
	// Values are the metrics by name: the standard names loss, accuracy,
	// auc, lr and samples_per_s, or others made of ASCII letters, digits
	// and _ . - / (not starting or ending with /), and none of the line's
	// own keys (run, split, step, epoch, wall_time).
	Values map[string]float64
}

// A Writer appends records to a JSON Lines log and, optionally, to a
// TensorBoard event file. It is safe for use by several goroutines.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	file   *os.File // w when the Writer opened it, closed by Close
	name   string   // the log's name in errors
	run    []byte   // `"run":"…",` or nothing
	tb     *eventFile
	now    func() time.Time
	buf    []byte
	names  []string
	closed bool
}

// Create opens the log at path for appending, creating it if need be, and
// with opts.TensorBoardDir an event file in that directory.
func Create(path string, opts Options) (*Writer, error) {
	return create(path, opts, time.Now)
}

// create is Create with a clock.
func create(path string, opts Options, now func() time.Time) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := endLastLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("metrics: %s: %w", path, err)
	}
	w, err := newWriter(f, path, opts, now)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.file = f
	return w, nil
}

// endLastLine writes a newline to f, opened for appending, when its last
// byte is not one: a line cut off by a crash is then a line of its own,
// which readers skip, rather than the start of the next record's.
func endLastLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 || !st.Mode().IsRegular() {
		return err
	}
	r, err := os.Open(f.Name())
	if err != nil {
		return err
	}
	defer r.Close()
	last := make([]byte, 1)
	if _, err := r.ReadAt(last, st.Size()-1); err != nil {
		return err
	}
	if last[0] != '\n' {
		_, err = f.Write([]byte{'\n'})
	}
	return err
}

// NewWriter returns a Writer that writes the log's lines to w, each in one
// call of w.Write, and with opts.TensorBoardDir an event file in that
// directory. Close closes the event file, not w.
func NewWriter(w io.Writer, opts Options) (*Writer, error) {
	return newWriter(w, "", opts, time.Now)
}

func newWriter(w io.Writer, name string, opts Options, now func() time.Time) (*Writer, error) {
	mw := &Writer{w: w, name: name, now: now}
	if opts.Run != "" {
		run, _ := json.Marshal(opts.Run) // a string always marshals
		mw.run = append(append([]byte(`"run":`), run...), ',')
	}
	if opts.TensorBoardDir != "" {
		var err error
		if mw.tb, err = createEventFile(opts.TensorBoardDir, now()); err != nil {
			return nil, fmt.Errorf("metrics: TensorBoard: %w", err)
		}
	}
	return mw, nil
}

// Log appends r to the log, and to the event file if there is one. A
// record that is not valid (see Record) is an error, and nothing is
// written.
func (w *Writer) Log(r Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.errorf("log after Close")
	}
	if err := w.check(&r); err != nil {
		return err
	}
	if r.Time.IsZero() {
		r.Time = w.now()
	}
	wall := float64(r.Time.UnixMilli()) / 1e3
	w.buf = w.appendLine(w.buf[:0], &r, wall)
	var errs []error
	if _, err := w.w.Write(w.buf); err != nil {
		errs = append(errs, fmt.Errorf("metrics: %w", err)) // a file's error names it
	}
	if w.tb != nil {
		w.buf = appendScalars(w.buf[:0], wall, r.Step, r.Split, w.names, r.Values)
		if err := w.tb.write(w.buf); err != nil {
			errs = append(errs, fmt.Errorf("metrics: TensorBoard: %w", err))
		}
	}
	return errors.Join(errs...)
}

// check validates r and leaves its value names, in the order they are
// written, in w.names.
func (w *Writer) check(r *Record) error {
	switch {
	case r.Split != Train && r.Split != Eval:
		return w.errorf("split %q: want %q or %q", r.Split, Train, Eval)
	case r.Step < 0:
		return w.errorf("%s record: step %d: must be at least 0", r.Split, r.Step)
	case r.Epoch < 0:
		return w.errorf("%s record at step %d: epoch %d: must be at least 0", r.Split, r.Step, r.Epoch)
	}
	w.names = w.names[:0]
	for _, name := range standard {
		if _, ok := r.Values[name]; ok {
			w.names = append(w.names, name)
		}
	}
	std := len(w.names)
	for name := range r.Values {
		if slices.Contains(standard, name) {
			continue
		}
		if err := checkName(name); err != nil {
			return w.errorf("%s record at step %d: value name %q: %v", r.Split, r.Step, name, err)
		}
		w.names = append(w.names, name)
	}
	slices.Sort(w.names[std:])
	return nil
}

// checkName says why name cannot name a value, or returns nil.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty")
	}
	if slices.Contains(reserved, name) {
		return errors.New("is one of the line's own keys")
	}
	if name[0] == '/' || name[len(name)-1] == '/' {
		return errors.New("starts or ends with /")
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-' || c == '/') {
			return fmt.Errorf("character %q: TensorBoard tags hold only letters, digits and _ . - /", c)
		}
	}
	return nil
}

// appendLine appends r's JSON line, its values in w.names's order.
func (w *Writer) appendLine(b []byte, r *Record, wall float64) []byte {
	b = append(b, '{')
	b = append(b, w.run...)
	b = append(b, `"split":"`...)
	b = append(b, r.Split...)
	b = append(b, `","step":`...)
	b = strconv.AppendInt(b, r.Step, 10)
	b = append(b, `,"epoch":`...)
	b = strconv.AppendInt(b, int64(r.Epoch), 10)
	b = append(b, `,"wall_time":`...)
	b = appendNumber(b, wall)
	for _, name := range w.names {
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = appendNumber(b, r.Values[name])
	}
	return append(b, '}', '\n')
}

// appendNumber appends v as encoding/json writes a float64, or NaN and
// the infinities as the strings "NaN", "+Inf" and "-Inf".
func appendNumber(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(v, -1):
		return append(b, `"-Inf"`...)
	}
	// encoding/json's float64 format: 'f' unless the exponent is very
	// small or large, and then 'e' with at least two exponent digits cut
	// to one ("1e-07" → "1e-7").
	format := byte('f')
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, v, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}

// errorf returns an error prefixed with "metrics: " and the log's name.
func (w *Writer) errorf(format string, args ...any) error {
	prefix := "metrics: "
	if w.name != "" {
		prefix += w.name + ": "
	}
	return fmt.Errorf(prefix+format, args...)
}

// Close closes the log file (when Create opened it) and the event file.
// Logging after Close is an error; closing again does nothing.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	if w.file != nil {
		if err := w.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("metrics: %w", err))
		}
	}
	if w.tb != nil {
		if err := w.tb.close(); err != nil {
			errs = append(errs, fmt.Errorf("metrics: TensorBoard: %w", err))
		}
	}
	return errors.Join(errs...)
}
