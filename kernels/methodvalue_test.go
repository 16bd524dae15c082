package kernels

import (
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"testing"
)

// TestParallelTakesNoMethodValues guards the rule that keeps kernel calls
// free of allocations: a method value (x.method) handed to Parallel
// escapes, so writing one in a kernel allocates a closure on every call.
// Kernels bind their methods once, in a pooled object's constructor, and
// pass the bound field. The rule is checked on the source of every build
// variant, since an allocation on a path this CPU does not take (the
// AVX512_BF16 kernels on a CPU without them) shows in no run here.
func TestParallelTakesNoMethodValues(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the package from source")
	}
	// A test binary copied to a machine without Go (the device runs)
	// cannot type-check: the source importer runs the go command.
	if _, err := os.Stat(filepath.Join(build.Default.GOROOT, "bin", "go")); err != nil {
		t.Skip("no Go toolchain to type-check with:", err)
	}
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	if _, err := conf.Check("kernels", fset, files, info); err != nil {
		t.Fatal(err)
	}
	for sel, s := range info.Selections {
		if s.Kind() != types.MethodVal {
			continue
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 || call.Args[len(call.Args)-1] != sel {
					return true
				}
				if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "Parallel" {
					t.Errorf("%v: Parallel is handed the method value %s, which allocates a closure per call; bind it once in the pooled object",
						fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}
