//go:build !amd64 || noasm

package kernels

// vecAVX2 and vecAVX512 are absent without assembly; kitAt falls back to
// the reference.
var vecAVX2, vecAVX512 *vecKit
