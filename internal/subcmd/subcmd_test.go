package subcmd_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/kilnml/kiln/internal/subcmd"
)

// prog has one subcommand, greet, whose argument decides what it returns.
var prog = &subcmd.Program{
	Name:     "prog",
	Commands: []subcmd.Command{{Name: "greet", Summary: "say hello"}},
	Hint:     "run 'prog <subcommand> -h' for its flags",
	Run: func(i int, args []string, stdout, _ io.Writer) error {
		switch {
		case len(args) == 0:
			fmt.Fprintln(stdout, "hello")
			return nil
		case args[0] == "-h":
			fmt.Fprintln(stdout, "usage: prog greet")
			return flag.ErrHelp
		case args[0] == "--bad":
			return subcmd.Usagef("--bad: not a flag of greet")
		}
		return errors.New("the greeting failed")
	},
}

func TestProgramMain(t *testing.T) {
	for _, c := range []struct {
		args           []string
		status         int
		stdout, stderr string
	}{
		{nil, 2, "", "usage: prog <subcommand> [flags]"},
		{[]string{"-h"}, 0, "  greet     say hello", ""},
		{[]string{"help"}, 0, "run 'prog <subcommand> -h' for its flags", ""},
		{[]string{"wave"}, 2, "", `prog: unknown subcommand "wave"`},
		{[]string{"greet"}, 0, "hello", ""},
		{[]string{"greet", "-h"}, 0, "usage: prog greet", ""},
		{[]string{"greet", "--bad"}, 2, "", "prog greet: --bad: not a flag of greet\nrun 'prog greet -h' for its flags"},
		{[]string{"greet", "x"}, 1, "", "prog greet: the greeting failed\n"},
	} {
		var stdout, stderr bytes.Buffer
		status := prog.Main(c.args, &stdout, &stderr)
		if status != c.status || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("prog %v: exit %d, stdout %q, stderr %q; want %d, %q and %q", c.args, status, stdout.String(), stderr.String(), c.status, c.stdout, c.stderr)
		}
		if c.status == 1 && strings.Contains(stderr.String(), "-h' for its flags") {
			t.Errorf("prog %v: a failure while running suggests -h", c.args)
		}
	}
}

func ExampleProgram_Main() {
	p := &subcmd.Program{
		Name:     "tool",
		Commands: []subcmd.Command{{Name: "count", Summary: "count the arguments"}},
		Hint:     "run 'tool <subcommand> -h' for its flags",
		Run: func(i int, args []string, stdout, _ io.Writer) error {
			if len(args) == 0 {
				return subcmd.Usagef("count needs arguments")
			}
			fmt.Fprintln(stdout, len(args), "arguments")
			return nil
		},
	}
	fmt.Println("exit", p.Main([]string{"count", "a", "b"}, os.Stdout, os.Stdout))
	fmt.Println("exit", p.Main([]string{"count"}, os.Stdout, os.Stdout))
	// Output:
	// 2 arguments
	// exit 0
	// tool count: count needs arguments
	// run 'tool count -h' for its flags
	// exit 2
}
