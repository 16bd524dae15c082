//go:build unix

package datasets

import "syscall"

// openFlags makes opening a named pipe or a device return at once rather
// than wait for a writer, so that openImage can refuse it by its mode.
// Regular files ignore the flag.
const openFlags = syscall.O_NONBLOCK
