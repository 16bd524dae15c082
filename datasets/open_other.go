//go:build !unix

package datasets

// openFlags is empty where opening a file found in a folder tree does not
// block: there are no named pipes among ordinary files.
const openFlags = 0
