package metrics

import (
	"path/filepath"
	"testing"
)

// BenchmarkWriterLog logs a training record of four values to a JSON
// Lines file and a TensorBoard event file, as a trainer does at each
// report.
func BenchmarkWriterLog(b *testing.B) {
	dir := b.TempDir()
	w, err := Create(filepath.Join(dir, "run.jsonl"), Options{Run: "resnet18", TensorBoardDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	values := map[string]float64{"loss": 2.3125, "accuracy": 0.40625, "lr": 0.0125, "samples_per_s": 312.4}
	b.ReportAllocs()
	var step int64
	for b.Loop() {
		step++
		if err := w.Log(Record{Split: Train, Step: step, Epoch: 1, Values: values}); err != nil {
			b.Fatal(err)
		}
	}
}
