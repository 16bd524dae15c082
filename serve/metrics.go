package serve

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// metrics counts what /metrics reports, in Prometheus' text format.
type metrics struct {
	mu        sync.Mutex
	codes     map[int]uint64
	latency   histogram
	batchSize histogram
}

// histogram is a Prometheus histogram: counts at or below each bound.
type histogram struct {
	bounds []float64
	counts []uint64 // per bound, not cumulative; one more for +Inf
	sum    float64
	n      uint64
}

func newHistogram(bounds ...float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.counts[i]++
	h.sum += v
	h.n++
}

func (h *histogram) write(w http.ResponseWriter, name, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{le=%q} %d\n", name, strconv.FormatFloat(b, 'g', -1, 64), cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, cum, name, h.sum, name, h.n)
}

func newMetrics() *metrics {
	return &metrics{
		codes:     map[int]uint64{},
		latency:   newHistogram(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
		batchSize: newHistogram(1, 2, 4, 8, 16, 32, 64, 128),
	}
}

func (m *metrics) request(code int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.codes[code]++
	m.latency.observe(d.Seconds())
}

func (m *metrics) batch(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batchSize.observe(float64(n))
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	codes := make([]int, 0, len(m.codes))
	for c := range m.codes {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	fmt.Fprint(w, "# HELP kiln_requests_total Prediction requests answered, by HTTP status.\n# TYPE kiln_requests_total counter\n")
	var errs uint64
	for _, c := range codes {
		fmt.Fprintf(w, "kiln_requests_total{code=\"%d\"} %d\n", c, m.codes[c])
		if c >= 400 {
			errs += m.codes[c]
		}
	}
	fmt.Fprintf(w, "# HELP kiln_request_errors_total Prediction requests answered with a 4xx or 5xx status.\n# TYPE kiln_request_errors_total counter\nkiln_request_errors_total %d\n", errs)
	m.latency.write(w, "kiln_request_duration_seconds", "Time from a prediction request's arrival to its answer.")
	m.batchSize.write(w, "kiln_batch_size", "Requests run together in one call of the graph.")
}
