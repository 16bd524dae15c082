// Package shape counts the elements of tensor shapes without letting the
// count wrap: every reader and op that builds a shape from numbers it was
// handed (a file's header, a graph's IR, a user's Reshape) counts through
// here, so a shape whose product an int cannot hold is an error rather than
// a small, wrong size that later indexes out of bounds.
package shape

import (
	"errors"
	"fmt"
	"math"
)

// ErrNegative and ErrOverflow classify the errors Numel returns; test for
// them with errors.Is.
var (
	ErrNegative = errors.New("negative dimension")
	ErrOverflow = errors.New("element count overflows")
)

// MaxElements bounds the element count of any one tensor: 2^48 elements of
// the smallest dtype is Go's largest allocation on 64-bit platforms, so a
// larger count can never be backed by memory and is refused before a make
// panics on it.
const MaxElements = 1 << 48

// Numel returns the product of dims. A negative dimension, or a product of
// the non-zero dimensions over MaxElements, is an error naming the shape.
// A zero dimension makes the count 0 but does not excuse the others, as in
// NumPy: parts of an empty tensor's shape still multiply into strides and
// output sizes, which must not wrap.
func Numel(dims []int) (int, error) {
	n, empty := 1, false
	for _, d := range dims {
		switch {
		case d < 0:
			return 0, fmt.Errorf("shape %v: %w %d", dims, ErrNegative, d)
		case d == 0:
			empty = true
		case d > MaxElements || n > MaxElements/d:
			return 0, fmt.Errorf("shape %v: %w (more than 2^48 elements)", dims, ErrOverflow)
		default:
			n *= d
		}
	}
	if empty {
		return 0, nil
	}
	return n, nil
}

// Bytes returns Numel(dims)·size, the bytes a tensor of that shape needs
// with size-byte elements, with the same errors.
func Bytes(dims []int, size int) (int, error) {
	n, err := Numel(dims)
	if err != nil {
		return 0, err
	}
	if size > 0 && n > math.MaxInt/size {
		return 0, fmt.Errorf("shape %v: %w (%d-byte elements)", dims, ErrOverflow, size)
	}
	return n * size, nil
}
