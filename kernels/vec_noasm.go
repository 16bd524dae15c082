//go:build !amd64 || noasm

package kernels

// vecAVX2 is absent without assembly; kitAt falls back to the reference.
var vecAVX2 *vecKit
