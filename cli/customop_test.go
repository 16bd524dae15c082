package cli

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/npy"
)

// TestCustomOpFromOutside builds testdata/customop, a module outside Kiln
// that adds an op (Clip) with autograd.Function and registers it, and
// checks that a model using it trains, traces, freezes and saves there,
// and that its build of the kiln commands loads and runs the graph to the
// eager output's bits, while this process, without the op, refuses the
// file naming it.
func TestCustomOpFromOutside(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program; the kernel level does not change it")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// The outside module requires Kiln (this tree) and so Kiln's own
	// requirements, at Kiln's versions.
	mod := strings.Replace(string(gomod), "module github.com/kilnml/kiln", "module example.com/customop", 1)
	mod = strings.Replace(mod, "require (\n", "require (\n\tgithub.com/kilnml/kiln v0.0.0\n", 1)
	mod += "\nreplace github.com/kilnml/kiln => " + root + "\n"
	for name, data := range map[string]string{"go.mod": mod, "go.sum": read(t, filepath.Join(root, "go.sum")), "main.go": read(t, filepath.Join("testdata", "customop", "main.go"))} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "customop")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the outside module: %v\n%s", err, out)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("customop %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	model := filepath.Join(dir, "clip.kiln")
	want := strings.Fields(run("export", model))
	if out := run("inspect", model); !strings.Contains(out, `Clip(%3) {lo=-0.5, hi=0.5}`) {
		t.Errorf("inspect does not show the op:\n%s", out)
	}
	in, out := filepath.Join(dir, "in.npy"), filepath.Join(dir, "out.npy")
	if err := npy.Write(in, autograd.Randn(autograd.NewGenerator(2), 5, 4)); err != nil {
		t.Fatal(err)
	}
	run("run", model, "-i", in, "-o", out)
	y, err := npy.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	got := y.Float32s()
	if len(got) != len(want) {
		t.Fatalf("kiln run gave %d values, the eager model %d", len(got), len(want))
	}
	for i, v := range got {
		if b := fmt.Sprintf("%08x", math.Float32bits(v)); b != want[i] {
			t.Fatalf("output %d: kiln run gives %s, the eager model %s", i, b, want[i])
		}
	}
	code, _, errs := call("inspect", model)
	if code != 1 || !strings.Contains(errs, `"Clip"`) || !strings.Contains(errs, "graph.Register") {
		t.Errorf("this process has no Clip op: exit %d, %s", code, errs)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
