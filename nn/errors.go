package nn

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/safetensors"
)

// Error is the value nn's constructors and layers panic with when they are
// misused (a negative size, an unknown mode, an input of the wrong shape).
// Op names the constructor or layer; Kind is one of autograd's kinds
// (autograd.ErrShape, ErrDType, ErrIndex, ErrArgument), returned by Unwrap so
// errors.Is classifies it. It implements autograd.Misuse, so autograd.Try
// returns it as an error.
type Error struct {
	Op   string
	Kind error
	Msg  string
}

func (e *Error) Error() string { return "nn: " + e.Op + ": " + e.Msg }

// Unwrap returns the error's kind.
func (e *Error) Unwrap() error { return e.Kind }

// Misuse marks *Error as a misuse panic that autograd.Try converts.
func (e *Error) Misuse() {}

var _ autograd.Misuse = (*Error)(nil)

// Fail panics with an *Error of kind for op. It is exported for the packages
// built on nn (nn/models) so their misuse reads "nn: Op: …" too.
func Fail(kind error, op, format string, args ...any) {
	panic(&Error{Op: op, Kind: kind, Msg: fmt.Sprintf(format, args...)})
}

// FileError reports a file nn could not read, decode or write: a state dict
// or checkpoint in safetensors. File is its path; Field is the entry at fault
// (a tensor's name), or "" when the fault is the file's as a whole; Err is
// the cause, which errors.As reaches: an *fs.PathError for a file that cannot
// be opened, the safetensors reader's *FormatError for a broken container
// (whose Tensor names the same entry), or the tensor codec's error.
type FileError struct {
	Op    string // what nn was doing: "loading state dict", "saving"; "" for ReadTensors
	File  string
	Field string
	Err   error
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString("nn: ")
	var pe *fs.PathError
	named := errors.As(e.Err, &pe) && pe.Path == e.File // "open x: no such file"
	switch {
	case e.Op != "" && named:
		b.WriteString(e.Op + ": ")
	case e.Op != "":
		b.WriteString(e.Op + " " + e.File + ": ")
	case !named:
		b.WriteString(e.File + ": ")
	}
	var fe *safetensors.FormatError
	if e.Field != "" && !(errors.As(e.Err, &fe) && fe.Tensor == e.Field) {
		fmt.Fprintf(&b, "tensor %q: ", e.Field)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// fileError wraps err, met while op worked on file, as a *FileError, taking
// the field from a safetensors *FormatError when the caller names none.
func fileError(op, file, field string, err error) error {
	var fe *safetensors.FormatError
	if field == "" && errors.As(err, &fe) {
		field = fe.Tensor
	}
	return &FileError{Op: op, File: file, Field: field, Err: err}
}

// readSafetensors reads the safetensors container at path; errors are
// *FileError for op.
func readSafetensors(op, path string) (*safetensors.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileError(op, path, "", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileError(op, path, "", err)
	}
	st, err := safetensors.Read(f, fi.Size())
	if err != nil {
		return nil, fileError(op, path, "", err)
	}
	return st, nil
}
