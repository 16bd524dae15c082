package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kilnml/kiln/kernels"
)

// cpu prints what the kernels run on: the CPU, the variants in use and
// every instruction-set level KILN_ISA may select here. With --levels it
// prints only the levels, best first, one line for scripts (make test
// runs the suites once per level).
func cpu(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cpu", "[--levels]", stderr)
	only := fs.Bool("levels", false, "print only the levels this CPU runs, best first")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("cpu takes no arguments, got %q", pos[0])
	}
	var names []string
	for _, l := range slices.Backward(kernels.Levels()) {
		names = append(names, l.String())
	}
	if *only {
		fmt.Fprintln(stdout, strings.Join(names, " "))
		return nil
	}
	fmt.Fprintf(stdout, "kernels: %s\nlevels (KILN_ISA): %s\n", kernels.Features(), strings.Join(names, " "))
	return nil
}
