package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	for _, c := range []struct {
		name    string
		path    string
		write   func(io.Writer) error
		wantErr string // "" for success
		want    string // path's contents after
	}{
		{"writes", path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }, "", "new"},
		{"a failing write leaves the file", path, func(w io.Writer) error { io.WriteString(w, "half"); return boom }, "boom", "new"},
		{"a missing directory is named, not the temporary file", filepath.Join(dir, "no", "out.bin"),
			func(io.Writer) error { return nil }, "create " + filepath.Join(dir, "no", "out.bin") + ": no such file or directory", ""},
	} {
		err := Write(c.path, c.write)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || err.Error() != c.wantErr && !errors.Is(err, boom)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
		}
		if c.want != "" {
			if b, _ := os.ReadFile(c.path); string(b) != c.want {
				t.Errorf("%s: %s holds %q, want %q", c.name, c.path, b, c.want)
			}
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v), want 0644", fi.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	// Renaming over a directory fails: the error names the destination.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	os.WriteFile(filepath.Join(sub, "x"), nil, 0o644)
	var pe *fs.PathError
	if err := Write(sub, func(io.Writer) error { return nil }); !errors.As(err, &pe) || pe.Path != sub {
		t.Errorf("writing over a directory: %v, want an error naming %s", err, sub)
	}
}
