package metrics_test

import (
	"errors"
	"fmt"

	"github.com/kilnml/kiln/nn/metrics"
)

func ExampleAUC() {
	// A model's click probabilities and the clicks: one positive (0.4)
	// ranks below one negative (0.6), and 0.6 is tied across classes:
	// 7.5 of the 9 (positive, negative) pairs are ordered right.
	probs := []float32{0.1, 0.4, 0.35, 0.6, 0.6, 0.9}
	labels := []float32{0, 1, 0, 0, 1, 1}
	auc, err := metrics.AUC(probs, labels)
	fmt.Printf("AUC %.4f %v\n", auc, err)

	// A batch with no positives has no ROC curve.
	_, err = metrics.AUC([]float32{0.2, 0.3}, []float32{0, 0})
	fmt.Println(errors.Is(err, metrics.ErrOneClass), err)
	// Output:
	// AUC 0.8333 <nil>
	// true metrics: AUC: labels hold only one class (2 samples, all labelled 0)
}

func ExampleLogLoss() {
	loss, err := metrics.LogLoss([]float32{0.9, 0.2, 0.5}, []float32{1, 0, 1})
	fmt.Printf("%.6f %v\n", loss, err)
	// Output: 0.340550 <nil>
}

func ExampleAccuracy() {
	// 0.5 rounds to 0 (half to even), so the third sample is wrong.
	acc, err := metrics.Accuracy([]float32{0.9, 0.2, 0.5, 0.51}, []float32{1, 0, 1, 1})
	fmt.Println(acc, err)
	// Output: 0.75 <nil>
}
