package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/internal/npy"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
)

// mlp returns a small batch-major model (8 → 16 → 3) and its traced graph.
func mlp(t testing.TB) (*nn.Sequential, *graph.Graph) {
	t.Helper()
	gen := autograd.NewGenerator(7)
	m := nn.NewSequential(
		nn.NewLinear(gen, 8, 16, nn.LinearOptions{}),
		nn.NewReLU(),
		nn.NewLinear(gen, 16, 3, nn.LinearOptions{}),
	)
	g, err := graph.Trace(m, autograd.Randn(gen, 1, 8))
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

// eager is the model's own output for x.
func eager(m *nn.Sequential, x *autograd.Tensor) []float64 {
	return m.Forward(autograd.NoGrad(x)).Values()
}

// input makes a distinct input of rows rows for request i.
func input(i, rows int) *autograd.Tensor {
	d := make([]float32, rows*8)
	for k := range d {
		d[k] = float32(math.Sin(float64(i*131+k))) * 2
	}
	return autograd.FromFloat32(d, rows, 8)
}

func jsonBody(xs ...*autograd.Tensor) []byte {
	type in struct {
		Shape []int     `json:"shape"`
		Data  []float64 `json:"data"`
	}
	var body struct {
		Inputs []in `json:"inputs"`
	}
	for _, x := range xs {
		body.Inputs = append(body.Inputs, in{x.Shape(), x.Values()})
	}
	b, _ := json.Marshal(body)
	return b
}

type response struct {
	Outputs []struct {
		Name  string   `json:"name"`
		DType string   `json:"dtype"`
		Shape []int    `json:"shape"`
		Data  []number `json:"data"`
	} `json:"outputs"`
}

func post(t testing.TB, url, ctype string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url+"/predict", ctype, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// close1e5 reports whether got matches want to 1e-5 relative (batches may
// round differently from single calls).
func close1e5(got []number, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); d > 1e-5*(math.Abs(want[i])+1e-3) {
			return false
		}
	}
	return true
}

func newTestServer(t testing.TB, g *graph.Graph, o Options) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(g, o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	return s, hs
}

func TestPredictJSON(t *testing.T) {
	m, g := mlp(t)
	_, hs := newTestServer(t, g, Options{})
	x := input(1, 3)
	code, b := post(t, hs.URL, "application/json", jsonBody(x))
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, b)
	}
	var r response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(r.Outputs) != 1 || !slices.Equal(r.Outputs[0].Shape, []int{3, 3}) || r.Outputs[0].DType != "float32" {
		t.Fatalf("outputs %s", b)
	}
	if !close1e5(r.Outputs[0].Data, eager(m, x)) {
		t.Fatalf("got %v, eager model %v", r.Outputs[0].Data, eager(m, x))
	}
}

func TestPredictNPY(t *testing.T) {
	m, g := mlp(t)
	_, hs := newTestServer(t, g, Options{})
	x := input(2, 2)
	var body bytes.Buffer
	if err := npy.Encode(&body, x); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", hs.URL+"/predict", &body)
	req.Header.Set("Content-Type", "application/x-npy")
	req.Header.Set("Accept", "application/x-npy")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-npy" {
		t.Fatalf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	y, err := npy.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]number, 0)
	for _, v := range y.Values() {
		got = append(got, number(v))
	}
	if !slices.Equal(y.Shape(), []int{2, 3}) || !close1e5(got, eager(m, x)) {
		t.Fatalf("got %v %v, eager %v", y.Shape(), y.Values(), eager(m, x))
	}
}

// TestBadRequests sends what a client may get wrong: each gets its status
// and a message naming the problem.
func TestBadRequests(t *testing.T) {
	_, g := mlp(t)
	_, hs := newTestServer(t, g, Options{MaxBodyBytes: 4096})
	good := string(jsonBody(input(0, 1)))
	cases := []struct {
		name, ctype, body string
		code              int
		msg               string
	}{
		{"malformed JSON", "application/json", `{"inputs": [`, 400, "malformed JSON"},
		{"unknown field", "application/json", `{"input": []}`, 400, "malformed JSON"},
		{"two values", "application/json", good + good, 400, "more than one value"},
		{"no inputs", "application/json", `{"inputs": []}`, 400, "takes 1 input(s), the body has 0"},
		{"shape and data", "application/json", `{"inputs": [{"shape": [1, 8], "data": [1, 2]}]}`, 400, "needs 8 numbers, data has 2"},
		{"bad shape", "application/json", `{"inputs": [{"shape": [-1, 8], "data": []}]}`, 400, "bad shape"},
		{"rank", "application/json", `{"inputs": [{"shape": [8], "data": [1, 2, 3, 4, 5, 6, 7, 8]}]}`, 400, "has 2 dimensions"},
		{"not a number", "application/json", `{"inputs": [{"shape": [1, 1], "data": ["one"]}]}`, 400, "not a number"},
		{"dtype", "application/json", `{"inputs": [{"dtype": "int64", "shape": [1, 1], "data": [1]}]}`, 400, "dtype \"int64\""},
		{"graph cannot take it", "application/json", `{"inputs": [{"shape": [1, 7], "data": [1, 2, 3, 4, 5, 6, 7]}]}`, 422, ""},
		{"too large", "application/json", `{"inputs": [{"shape": [1, 8], "data": [` + strings.Repeat("1,", 4000) + `1]}]}`, 413, "body over 4096 bytes"},
		{"media type", "text/csv", "1,2,3", 415, "send application/json or application/x-npy"},
		{"bad npy", "application/x-npy", "not npy", 400, "npy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, b := post(t, hs.URL, c.ctype, []byte(c.body))
			if code != c.code || !strings.Contains(string(b), c.msg) {
				t.Fatalf("status %d %q, want %d with %q", code, b, c.code, c.msg)
			}
		})
	}
	// Afterwards a good request still works.
	if code, b := post(t, hs.URL, "application/json", []byte(good)); code != http.StatusOK {
		t.Fatalf("good request after bad ones: %d %s", code, b)
	}
	resp, err := http.Get(hs.URL + "/predict")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /predict: %d", resp.StatusCode)
	}
}

// TestConcurrentClients is the bounded load test: 32 clients, each
// sending its own inputs, with batching and two instances; every client
// must get the eager model's output for its own input and nothing fails.
func TestConcurrentClients(t *testing.T) {
	m, g := mlp(t)
	s, hs := newTestServer(t, g, Options{Instances: 2, MaxBatch: 8, MaxWait: time.Millisecond})
	if !s.Batching() {
		t.Fatal("the MLP is not served in batches")
	}
	const clients, each = 32, 10
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				x := input(c*each+k, 1+(c+k)%3)
				t0 := time.Now()
				code, b := post(t, hs.URL, "application/json", jsonBody(x))
				d := time.Since(t0)
				var r response
				ok := code == http.StatusOK && json.Unmarshal(b, &r) == nil && len(r.Outputs) == 1 &&
					close1e5(r.Outputs[0].Data, eager(m, x))
				mu.Lock()
				lat = append(lat, d)
				if !ok {
					errs++
					if errs < 3 {
						t.Errorf("client %d request %d: status %d, %.200s", c, k, code, b)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if time.Since(start) > 30*time.Second {
		t.Errorf("load test took %v", time.Since(start))
	}
	slices.Sort(lat)
	t.Logf("%d requests, %d errors, p50 %v, p99 %v, %v in all", len(lat), errs, lat[len(lat)/2], lat[len(lat)*99/100], time.Since(start))
	if errs != 0 {
		t.Fatalf("%d of %d requests failed", errs, len(lat))
	}
	// Batches formed: the batch-size histogram saw more than one request a run.
	s.metrics.mu.Lock()
	runs, reqs := s.metrics.batchSize.n, s.metrics.batchSize.sum
	s.metrics.mu.Unlock()
	t.Logf("%d runs for %.0f requests", runs, reqs)
	if reqs != clients*each {
		t.Errorf("batches hold %v requests, want %d", reqs, clients*each)
	}
}

// TestUnbatchableOutputs: a graph whose output does not follow the batch
// (a sum over it) still answers each request with its own result.
func TestUnbatchableOutputs(t *testing.T) {
	gen := autograd.NewGenerator(3)
	w := autograd.Randn(gen, 8, 2)
	g, err := graph.TraceFunc(nn.NewSequential(), func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{autograd.Sum(autograd.Matmul(in[0], w), []int{0}, false)}
	}, autograd.Randn(gen, 4, 8))
	if err != nil {
		t.Fatal(err)
	}
	s, hs := newTestServer(t, g, Options{MaxBatch: 4, MaxWait: 20 * time.Millisecond})
	if s.Batching() {
		t.Error("a graph summing over its batch is served in batches")
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := input(i, 4)
			want := autograd.Sum(autograd.Matmul(autograd.NoGrad(x), w), []int{0}, false).Values()
			code, b := post(t, hs.URL, "application/json", jsonBody(x))
			var r response
			if code != http.StatusOK || json.Unmarshal(b, &r) != nil || !close1e5(r.Outputs[0].Data, want) {
				t.Errorf("request %d: %d %s, want %v", i, code, b, want)
			}
		}()
	}
	wg.Wait()
}

// TestShutdownDrains closes the server while a request waits in a batch:
// the request still gets its answer, and later ones are refused.
func TestShutdownDrains(t *testing.T) {
	m, g := mlp(t)
	s, err := New(g, Options{MaxBatch: 4, MaxWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	x := input(9, 1)
	got := make(chan error, 1)
	go func() {
		code, b := post(t, hs.URL, "application/json", jsonBody(x))
		var r response
		if code != http.StatusOK || json.Unmarshal(b, &r) != nil || !close1e5(r.Outputs[0].Data, eager(m, x)) {
			got <- fmt.Errorf("in-flight request: %d %s", code, b)
			return
		}
		got <- nil
	}()
	time.Sleep(50 * time.Millisecond) // the request is now waiting for its batch
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Config.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/predict", bytes.NewReader(jsonBody(x))))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("after Close: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("healthz after Close: %d", rec.Code)
	}
}

func TestHealthzAndMetrics(t *testing.T) {
	_, g := mlp(t)
	_, hs := newTestServer(t, g, Options{})
	resp, err := http.Get(hs.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok\n" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, b)
	}
	post(t, hs.URL, "application/json", jsonBody(input(0, 1)))
	post(t, hs.URL, "application/json", jsonBody(input(1, 2)))
	post(t, hs.URL, "application/json", []byte("{"))
	resp, err = http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`kiln_requests_total{code="200"} 2`,
		`kiln_requests_total{code="400"} 1`,
		"kiln_request_errors_total 1",
		`kiln_request_duration_seconds_bucket{le="+Inf"} 3`,
		"kiln_request_duration_seconds_count 3",
		`kiln_batch_size_bucket{le="1"} 2`,
		"kiln_batch_size_count 2",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}

func TestNonFiniteJSON(t *testing.T) {
	_, g := mlp(t)
	_, hs := newTestServer(t, g, Options{})
	body := `{"inputs": [{"shape": [1, 8], "data": ["NaN", 1, 2, 3, 4, 5, 6, "Infinity"]}]}`
	code, b := post(t, hs.URL, "application/json", []byte(body))
	if code != http.StatusOK || !strings.Contains(string(b), `"NaN"`) {
		t.Fatalf("%d %s", code, b)
	}
}

// TestInstancesOnPools serves from two instances pinned to a core each.
func TestInstancesOnPools(t *testing.T) {
	m, g := mlp(t)
	cores, err := kernels.AvailableCores()
	if err != nil {
		t.Fatal(err)
	}
	var pools []*kernels.Pool
	for _, c := range cores[:min(2, len(cores))] {
		p, err := kernels.NewPool([]int{c})
		if err != nil {
			t.Skip(err)
		}
		defer p.Close()
		pools = append(pools, p)
	}
	_, hs := newTestServer(t, g, Options{Pools: pools})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := input(i, 2)
			code, b := post(t, hs.URL, "application/json", jsonBody(x))
			var r response
			if code != http.StatusOK || json.Unmarshal(b, &r) != nil || !close1e5(r.Outputs[0].Data, eager(m, x)) {
				t.Errorf("request %d: %d %s", i, code, b)
			}
		}()
	}
	wg.Wait()
}

// TestPlansBounded sends more batch sizes than an instance keeps plans
// for: every answer is right, and the instance has let old plans go.
func TestPlansBounded(t *testing.T) {
	m, g := mlp(t)
	s, hs := newTestServer(t, g, Options{})
	for rows := 1; rows <= maxPlans+5; rows++ {
		x := input(rows, rows)
		code, b := post(t, hs.URL, "application/json", jsonBody(x))
		var r response
		if code != http.StatusOK || json.Unmarshal(b, &r) != nil || !close1e5(r.Outputs[0].Data, eager(m, x)) {
			t.Fatalf("%d rows: %d %.200s", rows, code, b)
		}
	}
	if n := len(s.instances[0].seen); n > maxPlans {
		t.Errorf("the instance holds %d plans, want at most %d", n, maxPlans)
	}
}
