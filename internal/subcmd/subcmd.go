// Package subcmd runs the example programs' subcommands the same way:
// the usage text, dispatch by name, one-line errors and the exit status
// (0 on success or -h, 2 for a wrong command line, 1 for a failure while
// running).
package subcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
)

// UsageError is a mistake on the command line: exit status 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError with the formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Sprintf(format, args...)}
}

// Command is one subcommand as the usage lists it.
type Command struct {
	Name, Summary string
}

// Program is a command with subcommands.
type Program struct {
	Name     string
	Commands []Command
	// Hint ends the usage text, e.g. "run 'prog <subcommand> -h' for its
	// flags".
	Hint string
	// Run parses args for Commands[i] and runs it. It returns
	// flag.ErrHelp after printing a subcommand's -h, a *UsageError for a
	// wrong command line, and any other error for a failure.
	Run func(i int, args []string, stdout, stderr io.Writer) error
}

// Main runs the command line args (without the program name) and returns
// the exit status.
func (p *Program) Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		w, status := stderr, 2
		if len(args) > 0 {
			w, status = stdout, 0
		}
		p.usage(w)
		return status
	}
	i := slices.IndexFunc(p.Commands, func(c Command) bool { return c.Name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "%s: unknown subcommand %q\n", p.Name, args[0])
		p.usage(stderr)
		return 2
	}
	err := p.Run(i, args[1:], stdout, stderr)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	}
	name := p.Name + " " + p.Commands[i].Name
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if _, ok := errors.AsType[*UsageError](err); ok {
		fmt.Fprintf(stderr, "run '%s -h' for its flags\n", name)
		return 2
	}
	return 1
}

func (p *Program) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s <subcommand> [flags]\n\nsubcommands:\n", p.Name)
	for _, c := range p.Commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\n"+p.Hint)
}
