package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/serve"
)

// shutdownGrace bounds how long kiln serve waits, after SIGTERM or
// SIGINT, for the requests in flight to be answered.
const shutdownGrace = 30 * time.Second

// serveCmd answers HTTP requests with a saved graph (package serve) until
// SIGTERM or SIGINT, then stops taking connections, answers the requests
// in flight and exits.
func serveCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "FILE [--addr HOST:PORT] [--instances N] [--cores-per-instance C] [--max-batch B] [--max-wait D] [--max-body BYTES] [--timeout D]", stderr)
	addr := fs.String("addr", "localhost:8080", "`address` to listen on (\":8080\" for every interface)")
	var o serve.Options
	fs.IntVar(&o.Instances, "instances", 1, "compiled copies of the graph answering side by side")
	perInstance := fs.Int("cores-per-instance", 0, "pin each instance to this many cores of its own (0: the instances share the process-wide workers)")
	fs.IntVar(&o.MaxBatch, "max-batch", 1, "most requests joined into one run (1: no batching)")
	fs.DurationVar(&o.MaxWait, "max-wait", 2*time.Millisecond, "longest the first request of a batch waits for others")
	fs.Int64Var(&o.MaxBodyBytes, "max-body", 64<<20, "largest request body in `bytes` (413 beyond)")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "longest a request waits for its turn (503 beyond)")
	path, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	switch {
	case o.Instances < 1:
		return usagef("--instances %d: want 1 or more", o.Instances)
	case o.MaxBatch < 1:
		return usagef("--max-batch %d: want 1 or more", o.MaxBatch)
	case o.MaxWait <= 0 || o.Timeout <= 0:
		return usagef("--max-wait and --timeout must be positive")
	case o.MaxBodyBytes < 1:
		return usagef("--max-body %d: want 1 or more", o.MaxBodyBytes)
	case *perInstance < 0:
		return usagef("--cores-per-instance %d: want 0 or more", *perInstance)
	}
	g, err := graph.Load(path)
	if err != nil {
		return err
	}
	if o.Pools, err = instancePools(o.Instances, *perInstance); err != nil {
		return err
	}
	defer closePools(o.Pools)
	s, err := serve.New(g, o)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	batching := "off"
	if s.Batching() {
		batching = fmt.Sprintf("up to %d requests, %v wait", o.MaxBatch, o.MaxWait)
	}
	on := "sharing the process-wide workers"
	if len(o.Pools) > 0 {
		on = fmt.Sprintf("on cores %v", poolCores(o.Pools))
	}
	fmt.Fprintf(stdout, "serving %s on http://%s: inputs %s, outputs %s; %d instance(s) %s, batching %s\n",
		path, ln.Addr(), valueList(g, g.Inputs), valueList(g, g.Outputs), o.Instances, on, batching)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "shutting down: answering the requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	s.Close()
	fmt.Fprintln(stdout, "stopped")
	return nil
}
