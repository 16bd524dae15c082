package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// clock is the fixed time the golden files are written at.
var clock = time.Date(2026, 11, 27, 9, 33, 54, 125_000_000, time.UTC)

func fixedClock() time.Time { return clock }

// goldenRecords are the records of the golden files: the standard names
// out of order, other names, a value of every kind, a zero Time (the
// clock's) and a time whose sub-millisecond part is dropped.
func goldenRecords() []Record {
	return []Record{
		{Split: Train, Step: 120, Epoch: 1, Time: clock, Values: map[string]float64{
			"samples_per_s": 312.4, "loss": 2.3125, "lr": 0.1}},
		{Split: Train, Step: 130, Epoch: 1, Values: map[string]float64{
			"loss": 1e-7, "accuracy": 0.25, "grad_norm": 1e21, "zz.top": -0.0, "a-b/c": 3, "lr": 1.5e-5}},
		{Split: Eval, Step: 130, Epoch: 1, Time: clock.Add(1500*time.Millisecond + 999*time.Microsecond), Values: map[string]float64{
			"auc": 0.80125, "accuracy": 0.9375, "loss": math.NaN(), "lr": math.Inf(1), "x": math.Inf(-1)}},
		{Split: Train, Step: 0, Epoch: 0, Time: clock.Add(-time.Hour)},
	}
}

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what was written:\ngot:\n%q\nwant:\n%q", path, got, want)
	}
}

// writeGolden logs goldenRecords with the fixed clock to a new log with
// an event file, and returns their paths.
func writeGolden(t *testing.T) (log, events string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "run.jsonl")
	w, err := create(log, Options{Run: "r18", TensorBoardDir: filepath.Join(dir, "tb")}, fixedClock)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range goldenRecords() {
		if err := w.Log(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return log, onlyEventFile(t, filepath.Join(dir, "tb"))
}

func TestGoldenJSONL(t *testing.T) {
	path, _ := writeGolden(t)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "golden.jsonl", got)
	// Every line is JSON, its keys in the schema's order.
	for i, line := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n") {
		if keys := jsonKeys(t, line); keys[0] != "run" || keys[1] != "split" || keys[4] != "wall_time" {
			t.Errorf("line %d: keys %v", i+1, keys)
		}
	}
}

// jsonKeys returns the keys of the JSON object line in order, failing the
// test unless it parses.
func jsonKeys(t *testing.T, line string) []string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(line))
	var keys []string
	tok, err := d.Token()
	for err == nil && d.More() {
		tok, err = d.Token()
		if err != nil {
			break
		}
		keys = append(keys, tok.(string))
		_, err = d.Token() // the values are numbers or strings
	}
	if err == nil {
		_, err = d.Token()
	}
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return keys
}

func TestNoRunKey(t *testing.T) {
	var b bytes.Buffer
	w, err := newWriter(&b, "", Options{}, fixedClock)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Log(Record{Split: Eval, Step: 7, Values: map[string]float64{"auc": 0.5}}); err != nil {
		t.Fatal(err)
	}
	if want := `{"split":"eval","step":7,"epoch":0,"wall_time":1795772034.125,"auc":0.5}` + "\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestNumbersAsJSON checks that numbers are written as encoding/json
// writes them.
func TestNumbersAsJSON(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1.0 / 3, 2.3125, 312.4, 1e-6, 9.99e-7, 1e-7, 1.5e-10,
		1e20, 1e21, 1.5e300, -2.5e-300, math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789012345678, float64(math.MaxFloat32)}
	for i := range 2000 {
		values = append(values, math.Float64frombits(uint64(i)*0x9e3779b97f4a7c15))
	}
	for _, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendNumber(nil, v); !bytes.Equal(got, want) {
			t.Errorf("%v: got %s, encoding/json writes %s", v, got, want)
		}
	}
}

func TestResumeAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	logSteps := func(steps ...int64) {
		t.Helper()
		w, err := Create(path, Options{Run: "r"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			if err := w.Log(Record{Split: Train, Step: s, Values: map[string]float64{"loss": 1}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	logSteps(1, 2)
	logSteps(3)
	// A run killed in the middle of a line: the next one starts a line.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"run":"r","split":"tr`)
	f.Close()
	logSteps(4)

	lines := readLines(t, path)
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if lines[3] != `{"run":"r","split":"tr` {
		t.Errorf("the cut-off line became %q", lines[3])
	}
	var steps []int64
	for _, l := range append(lines[:3:3], lines[4]) {
		var rec struct{ Step int64 }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		steps = append(steps, rec.Step)
	}
	if want := []int64{1, 2, 3, 4}; !slices.Equal(steps, want) {
		t.Errorf("steps %v, want %v", steps, want)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestConcurrentLog logs from several goroutines at once (run it with
// -race): every record arrives whole, on its own line and as its own event.
func TestConcurrentLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	w, err := Create(path, Options{Run: "par", TensorBoardDir: filepath.Join(dir, "tb")})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				r := Record{Split: Train, Step: int64(g*each + i), Values: map[string]float64{"loss": float64(g), "g": float64(g)}}
				if err := w.Log(r); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, l := range readLines(t, path) {
		var rec struct {
			Step    int64
			Loss, G float64
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if rec.Loss != rec.G || int(rec.Step)/each != int(rec.G) {
			t.Errorf("mixed-up record %q", l)
		}
		seen[rec.Step] = true
	}
	if len(seen) != goroutines*each {
		t.Errorf("%d distinct steps logged, want %d", len(seen), goroutines*each)
	}
	events := decodeEventFile(t, onlyEventFile(t, filepath.Join(dir, "tb")))
	if len(events) != 1+goroutines*each {
		t.Errorf("%d events, want %d", len(events), 1+goroutines*each)
	}
}

func TestErrors(t *testing.T) {
	ok := map[string]float64{"loss": 1}
	for _, c := range []struct {
		r    Record
		want string
	}{
		{Record{Step: 1, Values: ok}, `split "": want "train" or "eval"`},
		{Record{Split: "test", Values: ok}, `split "test"`},
		{Record{Split: Train, Step: -1, Values: ok}, "train record: step -1: must be at least 0"},
		{Record{Split: Eval, Step: 3, Epoch: -2, Values: ok}, "eval record at step 3: epoch -2: must be at least 0"},
		{Record{Split: Train, Values: map[string]float64{"loss": 1, "top 1": 0.5}}, `value name "top 1": character ' ': TensorBoard tags hold only letters, digits and _ . - /`},
		{Record{Split: Train, Values: map[string]float64{"genauigkeit_ä": 1}}, `value name "genauigkeit_ä": character 'ä'`},
		{Record{Split: Train, Values: map[string]float64{"": 1}}, `value name "": empty`},
		{Record{Split: Train, Values: map[string]float64{"step": 1}}, `value name "step": is one of the line's own keys`},
		{Record{Split: Train, Values: map[string]float64{"/grad": 1}}, `value name "/grad": starts or ends with /`},
		{Record{Split: Train, Values: map[string]float64{"quote\"": 1}}, `value name "quote\"": character '"'`},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "m.jsonl")
		w, err := Create(path, Options{TensorBoardDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		err = w.Log(c.r)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "metrics: "+path+": ") {
			t.Errorf("Log(%+v): error %v, want metrics: %s: …%s…", c.r, err, path, c.want)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); len(b) != 0 {
			t.Errorf("Log(%+v) failed but wrote %q", c.r, b)
		}
		if events := decodeEventFile(t, onlyEventFile(t, dir)); len(events) != 1 {
			t.Errorf("Log(%+v) failed but wrote %d events", c.r, len(events)-1)
		}
	}
}

func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		opts Options
		want string
	}{
		{dir, Options{}, "metrics: open " + dir + ": is a directory"},
		{filepath.Join(dir, "no", "such.jsonl"), Options{}, "metrics: open " + filepath.Join(dir, "no", "such.jsonl")},
		{filepath.Join(dir, "m.jsonl"), Options{TensorBoardDir: filepath.Join(file, "tb")}, "metrics: TensorBoard: mkdir " + file},
	} {
		if _, err := Create(c.path, c.opts); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Create(%s, %+v): error %v, want %s…", c.path, c.opts, err, c.want)
		}
	}

	w, err := Create(filepath.Join(dir, "closed.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Log(Record{Split: Train}); err == nil || !strings.Contains(err.Error(), "log after Close") {
		t.Errorf("Log after Close: error %v", err)
	}

	// A writer that fails: its error comes back, the event still written.
	tb := t.TempDir()
	w, err = NewWriter(failing{}, Options{TensorBoardDir: tb})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Log(Record{Split: Train}); !errors.Is(err, errDiskFull) {
		t.Errorf("Log to a failing writer: error %v, want %v", err, errDiskFull)
	}
	w.Close()
	if events := decodeEventFile(t, onlyEventFile(t, tb)); len(events) != 2 {
		t.Errorf("%d events, want 2", len(events))
	}
}

var errDiskFull = errors.New("disk full")

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errDiskFull }
