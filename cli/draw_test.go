package cli

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/graph"
)

// TestInspectDraw draws saved graphs with --dot and --svg, to stdout and
// to a file.
func TestInspectDraw(t *testing.T) {
	dir := t.TempDir()
	one, two := saveGraphs(t, dir)
	frozen, err := graph.Freeze(one.g)
	if err != nil {
		t.Fatal(err)
	}
	fused := filepath.Join(dir, "frozen.kiln")
	if err := graph.Save(fused, frozen); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		args   []string
		out    string   // the -o file, or "" for stdout
		want   []string // in the drawing
		isSVG  bool
		inputs int
	}{
		{"dot", []string{"inspect", "--dot", one.path}, "", []string{"digraph kiln {", `label="one.kiln"`, "Conv2d", "ReLU", "AdaptiveAvgPool2d"}, false, 1},
		{"dot fused", []string{"inspect", fused, "--dot"}, "", []string{"Conv2d+ReLU", "weight 4×3×3×3 f32", "penwidth=2.5"}, false, 1},
		{"dot to file", []string{"inspect", "--dot", two.path, "-o", filepath.Join(dir, "two.dot")}, filepath.Join(dir, "two.dot"), []string{"in1 [", "out1 ["}, false, 2},
		{"svg", []string{"inspect", "--svg", fused}, "", []string{"<svg ", "Conv2d+ReLU", "frozen.kiln"}, true, 1},
		{"svg to file", []string{"inspect", "--svg", "-o", filepath.Join(dir, "two.svg"), two.path}, filepath.Join(dir, "two.svg"), []string{"Linear", "output 1"}, true, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := call(c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			drawing := stdout
			if c.out != "" {
				if stdout != "" {
					t.Errorf("-o given, yet stdout has %q", stdout)
				}
				data, err := os.ReadFile(c.out)
				if err != nil {
					t.Fatal(err)
				}
				drawing = string(data)
			}
			for _, w := range c.want {
				if !strings.Contains(drawing, w) {
					t.Errorf("drawing lacks %q:\n%s", w, drawing)
				}
			}
			if c.isSVG {
				var root struct {
					XMLName xml.Name `xml:"svg"`
				}
				if err := xml.Unmarshal([]byte(drawing), &root); err != nil {
					t.Fatalf("not an SVG: %v", err)
				}
				if n := strings.Count(drawing, `<rect class="input"`); n != c.inputs {
					t.Errorf("%d input boxes, want %d", n, c.inputs)
				}
			}
		})
	}
	// The files were written whole, with no temporary file left beside.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// TestInspectDrawErrors checks that misuse and bad files give clear
// messages and exit codes, never a panic or a partial file.
func TestInspectDrawErrors(t *testing.T) {
	dir := t.TempDir()
	one, _ := saveGraphs(t, dir)
	data, err := os.ReadFile(one.path)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt.kiln")
	data[len(data)-1] ^= 1
	if err := os.WriteFile(corrupt, data, 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.kiln")
	if err := os.WriteFile(garbage, []byte("not a graph"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.kiln")
	out := filepath.Join(dir, "out.svg")
	cases := []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"both formats", []string{"inspect", "--dot", "--svg", one.path}, 2, []string{"--dot and --svg", "give one"}},
		{"-o alone", []string{"inspect", one.path, "-o", out}, 2, []string{"-o " + out, "--dot or --svg"}},
		{"-o without a file", []string{"inspect", one.path, "--svg", "-o"}, 2, []string{"flag needs an argument: -o"}},
		{"no graph", []string{"inspect", "--svg"}, 2, []string{"missing FILE"}},
		{"missing graph", []string{"inspect", "--svg", missing, "-o", out}, 1, []string{missing}},
		{"corrupt graph", []string{"inspect", "--dot", corrupt, "-o", out}, 1, []string{corrupt, "checksum mismatch"}},
		{"not a graph", []string{"inspect", "--svg", garbage}, 1, []string{garbage}},
		{"no such folder", []string{"inspect", "--svg", one.path, "-o", filepath.Join(dir, "no", "such", "g.svg")}, 1, []string{filepath.Join(dir, "no", "such")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := call(c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout has %q", stdout)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a failed command wrote %s", out)
			}
		})
	}
}

func TestInspectHelp(t *testing.T) {
	code, stdout, stderr := call("inspect", "-h")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"Usage: kiln inspect FILE [--dot | --svg] [-o OUT]", "-dot", "-svg", "-o file", "bfloat16 amber"} {
		if !strings.Contains(stdout+stderr, w) {
			t.Errorf("help lacks %q:\n%s", w, stdout+stderr)
		}
	}
}
