//go:build !linux || !amd64 || noasm

package kernels

import "errors"

// requestTilePermission is never called here: amxDecide turns AMX down on
// any OS but Linux, the only one whose permission request Kiln knows.
func requestTilePermission() (uint64, error) {
	return 0, errors.New("tile data permission is requested only on Linux")
}
