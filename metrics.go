package kiln

import "github.com/kilnml/kiln/metrics"

// MetricsWriter is package metrics' Writer: the log a training loop
// appends its loss, accuracy, learning rate and throughput to, and each
// evaluation's results, as JSON Lines and, optionally, TensorBoard event
// files.
type MetricsWriter = metrics.Writer

// CreateMetrics opens the metrics log at path for appending (creating it
// if need be), so a resumed run adds to its log, and with
// opts.TensorBoardDir writes a TensorBoard event file there too. It is
// metrics.Create.
func CreateMetrics(path string, opts metrics.Options) (*MetricsWriter, error) {
	return metrics.Create(path, opts)
}
