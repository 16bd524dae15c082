//go:build !amd64 || noasm

package kernels

// asmBuild reports whether assembly variants are compiled in: not in a
// -tags noasm build or off amd64, where every kernel runs its Generic
// variant.
const asmBuild = false
