// Package evalmetrics holds the binary-classification metrics that
// nn/metrics exports. They live here, below every layer, because
// datasets (which may import only autograd) needs AUC too: the planted
// Criteo generator reports the AUC of its true click probabilities.
package evalmetrics

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrOneClass is matched by the error AUC returns when every label is the
// same: the ROC curve then has no area to measure.
var ErrOneClass = errors.New("labels hold only one class")

// check checks that scores and labels pair up, that every label is 0 or 1
// and every score a number, naming the first offender; what is "score" or
// "probability".
func check(op, what string, scores, labels []float32) error {
	if len(scores) != len(labels) {
		return fmt.Errorf("metrics: %s: %d %s values but %d labels", op, len(scores), what, len(labels))
	}
	if len(labels) == 0 {
		return fmt.Errorf("metrics: %s: no samples", op)
	}
	for i, y := range labels {
		if y != 0 && y != 1 {
			return fmt.Errorf("metrics: %s: label %d is %v, want 0 or 1", op, i, y)
		}
	}
	for i, s := range scores {
		if s != s {
			return fmt.Errorf("metrics: %s: %s %d is NaN", op, what, i)
		}
	}
	return nil
}

// AUC is the area under the ROC curve of scores against binary labels,
// ties averaged: the Mann–Whitney U statistic over (positives × negatives),
// which equals sklearn's roc_auc_score (the trapezoidal area under the
// curve whose points are the distinct score thresholds).
//
// Pairs are sorted as single uint64 keys (order-preserving score bits
// above the label bit) and areas are summed as integers, so the result
// is exact until it is divided once at the end.
func AUC(scores, labels []float32) (float64, error) {
	if err := check("AUC", "score", scores, labels); err != nil {
		return 0, err
	}
	keys := make([]uint64, len(scores))
	for i, s := range scores {
		keys[i] = uint64(orderBits(s))<<32 | uint64(labels[i])
	}
	slices.Sort(keys)
	// Walk tie groups from the lowest score up: each positive in a group
	// beats the negatives below the group and ties half of those in it.
	// twice is 2·U so that half counts stay integers.
	var below, pos, twice uint64
	for i := 0; i < len(keys); {
		j, p := i, uint64(0)
		for ; j < len(keys) && keys[j]>>32 == keys[i]>>32; j++ {
			p += keys[j] & 1
		}
		n := uint64(j-i) - p
		twice += p * (2*below + n)
		below += n
		pos += p
		i = j
	}
	if pos == 0 || below == 0 {
		return 0, fmt.Errorf("metrics: AUC: %w (%d samples, all labelled %v)", ErrOneClass, len(labels), labels[0])
	}
	return float64(twice) / (2 * float64(pos) * float64(below)), nil
}

// orderBits maps a float32 to a uint32 with the same order, -0 and +0
// equal so that they tie as numbers do.
func orderBits(s float32) uint32 {
	if s == 0 {
		s = 0
	}
	b := math.Float32bits(s)
	if b>>31 != 0 {
		return ^b
	}
	return b | 1<<31
}

// LogLossEps is the clipping bound of LogLoss, sklearn's old default eps.
const LogLossEps = 1e-15

// LogLoss is the mean binary cross-entropy of probabilities against
// labels, each probability clipped to [eps, 1−eps] in float64 as sklearn's
// log_loss does with its default eps. A probability outside [0, 1] is an
// error (sklearn clips it silently; here it is most likely a logit).
func LogLoss(probs, labels []float32) (float64, error) {
	if err := check("LogLoss", "probability", probs, labels); err != nil {
		return 0, err
	}
	var sum, comp float64 // Neumaier's compensated sum, near NumPy's pairwise one
	for i, p := range probs {
		if p < 0 || p > 1 {
			return 0, fmt.Errorf("metrics: LogLoss: probability %d is %v, outside [0, 1]", i, p)
		}
		q := min(max(float64(p), LogLossEps), 1-LogLossEps)
		l := -math.Log(q)
		if labels[i] == 0 {
			l = -math.Log(1 - q)
		}
		t := sum + l
		if math.Abs(sum) >= l {
			comp += (sum - t) + l
		} else {
			comp += (l - t) + sum
		}
		sum = t
	}
	return (sum + comp) / float64(len(probs)), nil
}

// Accuracy is the fraction of samples whose probability rounds to the
// label, rounding half to even as NumPy's np.round does in dlrm, so 0.5
// counts as a prediction of 0.
func Accuracy(probs, labels []float32) (float64, error) {
	if err := check("Accuracy", "probability", probs, labels); err != nil {
		return 0, err
	}
	right := 0
	for i, p := range probs {
		if float32(math.RoundToEven(float64(p))) == labels[i] {
			right++
		}
	}
	return float64(right) / float64(len(probs)), nil
}
