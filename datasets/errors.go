package datasets

import "fmt"

// A FormatError reports a data file (an MNIST IDX file, a CIFAR-10 batch)
// that cannot be read or breaks its format. File is its path; Field names the
// part at fault ("magic number", "dimensions", "data", "labels", "records",
// "end of file"); Err is the cause, wrapping any read error, so errors.Is
// reaches io errors and errors.As the *FormatError.
type FormatError struct {
	File  string
	Field string
	Err   error
}

func (e *FormatError) Error() string { return e.File + ": " + e.Err.Error() }

func (e *FormatError) Unwrap() error { return e.Err }

// formatError returns a *FormatError for field of file, its cause formatted
// as fmt.Errorf does (so %w wraps).
func formatError(file, field, format string, args ...any) error {
	return &FormatError{File: file, Field: field, Err: fmt.Errorf(format, args...)}
}
