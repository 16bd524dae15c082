// Package cli is the kiln command (cmd/kiln) as a library: it inspects
// and draws, runs, benchmarks, quantizes and serves graphs saved by
// graph.Save, and plots the metrics logs training writes. Programs that
// add ops of their own build their own kiln with it, registering those
// ops first.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

const usage = `Usage: kiln <command> [arguments]

Commands:
  inspect FILE [--dot | --svg] [-o OUT]
        print the graph and its parameter count, and for an int8 graph
        what runs in int8; --dot writes it in Graphviz DOT, --svg draws
        it as an SVG picture (no Graphviz needed), to OUT or stdout
  run FILE -i IN.npy [-i IN2.npy ...] [-o OUT.npy ...]
        run the graph on .npy inputs (one per graph input, in order) and
        write its outputs (one -o per output; default out.npy for one)
  bench FILE [--batch N] [--threads T] [--iters K] [--warmup W] [--profile]
        [--instances N --cores-per-instance C]
        time the graph on random inputs: latency percentiles, throughput;
        --profile adds the time of each node and of each op; --instances
        runs N instances at once, each pinned to C cores of its own, and
        reports their aggregate throughput
  quantize FILE --calib IN.npy [--calib IN.npy ...] [--symmetric]
        [--algorithm A] [--conf-out CONF.json] -o OUT.kiln
  quantize FILE --conf CONF.json -o OUT.kiln
        convert a float32 graph to int8 (post-training quantization):
        calibrate it on the --calib batches, one .npy file per batch
        (comma-separated files, one per graph input in order, for a graph
        with several inputs: --calib x1.npy,y1.npy), or convert with a
        conf saved by --conf-out; --symmetric gives int8 activations
        with zero point 0 instead of uint8, --algorithm picks the range
        observer (min_max, moving_averager_min_max, histogram)
  serve FILE [--addr HOST:PORT] [--instances N] [--cores-per-instance C]
        [--max-batch B] [--max-wait D] [--max-body BYTES] [--timeout D]
        answer HTTP requests with the graph: POST /predict (JSON or .npy
        bodies), GET /healthz, GET /metrics (Prometheus); --max-batch
        joins requests that arrive together into one run; SIGTERM or
        SIGINT stops it after answering the requests in flight
  cpu [--levels]
        print the CPU, the kernel variants in use and the levels
        KILN_ISA can select (--levels: only those, best first)
  plot METRICS.jsonl [MORE.jsonl ...] [-o OUT.svg|OUT.png]
        draw training curves from metrics files (JSON Lines): loss
        against step, and accuracy (AUC for a run without accuracy),
        train and eval of each run; several runs share the axes, named
        by their "run" field or their file (default -o curves.svg)

FILE is a graph written by graph.Save. Run "kiln <command> -h" for the
command's flags.
`

// usageError is a mistake in how the command was called: it exits with
// status 2, like a flag the flag package rejects.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// command is one subcommand: it parses its own flags from args.
type command func(args []string, stdout, stderr io.Writer) error

var commands = map[string]command{
	"inspect":  inspect,
	"run":      runCmd,
	"bench":    bench,
	"quantize": quantizeCmd,
	"serve":    serveCmd,
	"cpu":      cpu,
	"plot":     plotCmd,
}

// Main runs the kiln command line args (without the program name) and
// returns the exit status: 0 on success, 1 when the command fails, 2 when
// it is used wrongly. Command kiln is Main on os.Args; a program whose
// graphs use ops of its own registers them (graph.Register) and then
// calls Main, to get the same commands for those graphs:
//
//	func main() {
//		if err := graph.Register(myop.Function); err != nil {
//			log.Fatal(err)
//		}
//		os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
//	}
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "kiln: unknown command %q\n\n%s", name, usage)
		return 2
	}
	err := cmd(args[1:], stdout, stderr)
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "kiln %s: %v\nRun \"kiln %s -h\" for usage.\n", name, err, name)
		return 2
	case errors.Is(err, errFlags):
		return 2 // the flag package has printed the problem and the usage
	}
	fmt.Fprintf(stderr, "kiln %s: %v\n", name, err)
	return 1
}

// errFlags reports a flag the flag package rejected and already explained.
var errFlags = errors.New("bad flags")

// newFlags returns a flag set for a subcommand that prints its usage line
// and flags to stderr.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kiln "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kiln %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags that may come before, between or after positional
// arguments (the flag package stops at the first positional one) and
// returns the positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errFlags
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseFile parses the flags of a command that takes one graph file and
// returns that file.
func parseFile(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parse(fs, args)
	if err != nil {
		return "", err
	}
	return oneFile(pos)
}

// oneFile returns the single positional argument, the graph file.
func oneFile(pos []string) (string, error) {
	switch len(pos) {
	case 0:
		return "", usagef("missing FILE, the saved graph")
	case 1:
		return pos[0], nil
	}
	return "", usagef("want one FILE, got %d arguments: %s", len(pos), strings.Join(pos, " "))
}

// listFlag is a flag that may be given several times, collecting values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}
