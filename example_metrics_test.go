package kiln_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/metrics"
)

// A training loop logs a train record at each report and an eval record
// after each evaluation; kiln plot and TensorBoard read them.
func ExampleCreateMetrics() {
	dir, err := os.MkdirTemp("", "kiln")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "run.metrics.jsonl")
	w, err := kiln.CreateMetrics(path, metrics.Options{Run: "demo", TensorBoardDir: filepath.Join(dir, "tb")})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	for step := int64(1); step <= 3; step++ {
		loss := 1 / float64(step)
		if err := w.Log(metrics.Record{Split: metrics.Train, Step: step, Values: map[string]float64{"loss": loss, "lr": 0.1}}); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Log(metrics.Record{Split: metrics.Eval, Step: 3, Values: map[string]float64{"accuracy": 0.75}}); err != nil {
		log.Fatal(err)
	}

	// Each line is a JSON object.
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var r struct {
			Split    string
			Step     int64
			Loss     *float64
			Accuracy *float64
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			log.Fatal(err)
		}
		if r.Loss != nil {
			fmt.Printf("%s step %d loss %.3f\n", r.Split, r.Step, *r.Loss)
		} else {
			fmt.Printf("%s step %d accuracy %.2f\n", r.Split, r.Step, *r.Accuracy)
		}
	}
	// Output:
	// train step 1 loss 1.000
	// train step 2 loss 0.500
	// train step 3 loss 0.333
	// eval step 3 accuracy 0.75
}
