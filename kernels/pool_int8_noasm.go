//go:build !amd64 || noasm

package kernels

// Without assembly the uint8 max pool runs its reference loop.
var maxU8Variants = [levelCount]func(y, x []uint8){Generic: maxU8Go}
