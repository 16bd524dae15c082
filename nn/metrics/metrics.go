// Package metrics evaluates binary classifiers such as DLRM's click
// models the way dlrm_s_pytorch.py reports them: ROC AUC and log loss as
// sklearn.metrics computes them, and accuracy as dlrm counts it. Inputs
// are the float32 slices a model's output and a batch's labels already
// are; labels must be exactly 0 or 1. Results are float64, computed so
// that they match sklearn's to about 1e-12 relative.
//
// The metrics return errors rather than NaN, naming the sample at fault,
// because a bad evaluation (a NaN from a diverged model, mismatched
// lengths) should stop a run's report, not hide in it.
package metrics

import "github.com/kilnml/kiln/internal/evalmetrics"

// ErrOneClass is matched (errors.Is) by AUC's error when every label is
// the same, for which sklearn raises too. An evaluation over small
// batches can test for it and skip the batch.
var ErrOneClass = evalmetrics.ErrOneClass

// LogLossEps is LogLoss's clipping bound, 1e-15: sklearn's default eps in
// the versions dlrm's metrics were written against (newer sklearn clips
// at the dtype's machine epsilon instead).
const LogLossEps = evalmetrics.LogLossEps

// AUC returns the area under the ROC curve of scores (any monotone
// function of the probability: logits work as well) against labels, as
// sklearn.metrics.roc_auc_score: tied scores count half, so all-equal
// scores give 0.5, a perfect ranking 1 and an inverted one 0. It is the
// Mann–Whitney U statistic divided by positives × negatives, computed
// exactly in integers before one division, in O(n log n) time and 8n
// bytes. It fails when the lengths differ, there are no samples, a label
// is not 0 or 1, a score is NaN, or the labels hold only one class
// (ErrOneClass). Infinite scores are ranked as numbers; sklearn would
// reject them.
func AUC(scores, labels []float32) (float64, error) { return evalmetrics.AUC(scores, labels) }

// LogLoss returns the mean binary cross-entropy
// −mean(y·log p + (1−y)·log(1−p)) with every p clipped to [LogLossEps,
// 1−LogLossEps] in float64, as sklearn.metrics.log_loss (≤ 1.2) computes
// it for float64 input. Two choices differ from sklearn: a probability
// outside [0, 1] is an error here (sklearn clips it silently, which hides
// logits passed by mistake), and labels of a single class are fine here
// (sklearn asks for its labels argument). LogLoss clips in float64
// whatever the input; sklearn given float32 arrays clips in float32, where
// 1−1e-15 rounds to 1, so the two differ for p exactly 0 or 1 with the
// wrong label.
func LogLoss(probs, labels []float32) (float64, error) { return evalmetrics.LogLoss(probs, labels) }

// Accuracy returns the fraction of samples whose probability, rounded
// half to even as np.round rounds in dlrm's evaluation, equals the label:
// p = 0.5 predicts 0. It fails on mismatched lengths, no samples, a label
// not 0 or 1, or a NaN probability.
func Accuracy(probs, labels []float32) (float64, error) { return evalmetrics.Accuracy(probs, labels) }
