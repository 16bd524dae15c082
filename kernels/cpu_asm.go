//go:build amd64 && !noasm

package kernels

// asmBuild reports whether assembly variants are compiled in.
const asmBuild = true
