//go:build unix

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
