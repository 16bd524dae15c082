package metrics_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/kilnml/kiln/metrics"
)

func ExampleCreate() {
	dir, err := os.MkdirTemp("", "metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "r18.metrics.jsonl")

	// A training loop opens the log once and logs as it reports; a
	// resumed run opens the same file and appends.
	w, err := metrics.Create(path, metrics.Options{Run: "r18", TensorBoardDir: filepath.Join(dir, "tb")})
	if err != nil {
		log.Fatal(err)
	}
	start := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for step := int64(10); step <= 20; step += 10 {
		err := w.Log(metrics.Record{Split: metrics.Train, Step: step, Time: start.Add(time.Duration(step) * time.Second),
			Values: map[string]float64{"loss": 2.5 - float64(step)/20, "lr": 0.1, "samples_per_s": 312.5}})
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(b))
	events, _ := filepath.Glob(filepath.Join(dir, "tb", "events.out.tfevents.*"))
	fmt.Println(len(events), "TensorBoard event file")
	// Output:
	// {"run":"r18","split":"train","step":10,"epoch":0,"wall_time":1795770010,"loss":2,"lr":0.1,"samples_per_s":312.5}
	// {"run":"r18","split":"train","step":20,"epoch":0,"wall_time":1795770020,"loss":1.5,"lr":0.1,"samples_per_s":312.5}
	// 1 TensorBoard event file
}

func ExampleWriter_Log() {
	w, err := metrics.NewWriter(os.Stdout, metrics.Options{Run: "dlrm"})
	if err != nil {
		log.Fatal(err)
	}
	at := time.UnixMilli(1795770000125)
	// The standard names come first in their order, others sorted after.
	w.Log(metrics.Record{Split: metrics.Eval, Step: 2048, Epoch: 1, Time: at,
		Values: map[string]float64{"log_loss": 0.4471, "auc": 0.80125, "accuracy": 0.7875}})
	// Bad input is an error, not a line.
	err = w.Log(metrics.Record{Split: metrics.Train, Values: map[string]float64{"top 5": 0.9}})
	fmt.Println(err)
	// Output:
	// {"run":"dlrm","split":"eval","step":2048,"epoch":1,"wall_time":1795770000.125,"accuracy":0.7875,"auc":0.80125,"log_loss":0.4471}
	// metrics: train record at step 0: value name "top 5": character ' ': TensorBoard tags hold only letters, digits and _ . - /
}
