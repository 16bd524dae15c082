// Package atomicfile writes files that no reader ever sees half-written:
// models, confs, arrays and pictures are written to a temporary file
// beside their destination and renamed over it only once complete.
package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write creates path (mode 0644) by calling write on a temporary file in
// path's directory, syncing it and renaming it into place. On any error
// the temporary file is removed and path is left as it was. Errors name
// path, not the temporary file.
func Write(path string, write func(w io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return named(err, "", path)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = named(err, tmp.Name(), path)
		}
	}()
	// CreateTemp makes the file private (0600); what is written here is
	// meant to be shared like any file the user writes.
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// named rewrites a path error about the temporary file tmp (any path
// error, when tmp is "") as one about path, the file the caller asked for.
func named(err error, tmp, path string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && (tmp == "" || pe.Path == tmp) {
		op := pe.Op
		if tmp == "" {
			op = "create"
		}
		return &fs.PathError{Op: op, Path: path, Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) && le.Old == tmp {
		return &fs.PathError{Op: "rename", Path: path, Err: le.Err}
	}
	return err
}
