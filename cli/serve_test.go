package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnml/kiln/kernels"
)

// syncBuffer is a bytes.Buffer safe to write from the command's goroutine
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServe starts kiln serve on a free port, asks it for a prediction,
// then sends the process SIGTERM: the command must answer, then stop
// cleanly with status 0.
func TestServe(t *testing.T) {
	one, _ := saveGraphs(t, t.TempDir())
	var stdout, stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- Main([]string{"serve", one.path, "--addr", "127.0.0.1:0", "--max-batch", "4"}, &stdout, &stderr)
	}()
	var url string
	re := regexp.MustCompile(`on (http://\S+):`)
	for deadline := time.Now().Add(10 * time.Second); url == ""; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no serving line; stdout %q, stderr %q", stdout.String(), stderr.String())
		}
	}
	x := one.inputs[0]
	body, _ := json.Marshal(map[string]any{"inputs": []map[string]any{{"shape": x.Shape(), "data": x.Values()}}})
	resp, err := http.Post(url+"/predict", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"outputs"`) {
		t.Fatalf("predict: %d %s", resp.StatusCode, b)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 || !strings.Contains(stdout.String(), "stopped") {
			t.Fatalf("exit %d; stdout %q, stderr %q", c, stdout.String(), stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("kiln serve did not stop after SIGTERM")
	}
}

func TestServeUsage(t *testing.T) {
	one, _ := saveGraphs(t, t.TempDir())
	for _, args := range [][]string{
		{"serve"},
		{"serve", one.path, "--instances", "0"},
		{"serve", one.path, "--max-batch", "-1"},
		{"serve", one.path, "--max-body", "0"},
	} {
		if code, stdout, stderr := call(args...); code != 2 {
			t.Errorf("kiln %v: exit %d, output %q", args, code, stdout+stderr)
		}
	}
	if code, _, stderr := call("serve", one.path+".missing"); code != 1 || !strings.Contains(stderr, "missing") {
		t.Errorf("missing file: exit %d, %q", code, stderr)
	}
}

// TestBenchInstances times two instances pinned to a core each.
func TestBenchInstances(t *testing.T) {
	one, _ := saveGraphs(t, t.TempDir())
	if cores, err := kernels.AvailableCores(); err != nil || len(cores) < 2 {
		t.Skipf("needs 2 cores: %v %v", cores, err)
	}
	code, stdout, stderr := call("bench", one.path, "--instances", "2", "--cores-per-instance", "1", "--iters", "3", "--warmup", "1")
	if code != 0 || !strings.Contains(stdout, "2 instances × 1 cores") || !strings.Contains(stdout, "throughput:") {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	for _, args := range [][]string{
		{"bench", one.path, "--instances", "2"},
		{"bench", one.path, "--instances", "1000", "--cores-per-instance", "1"},
		{"bench", one.path, "--cores-per-instance", "1", "--profile"},
	} {
		if code, stdout, stderr := call(args...); code != 2 {
			t.Errorf("kiln %v: exit %d, output %q", args, code, stdout+stderr)
		}
	}
}
