package shape

import (
	"errors"
	"testing"
)

func TestNumel(t *testing.T) {
	tests := []struct {
		dims []int
		want int
		err  error
	}{
		{nil, 1, nil},
		{[]int{}, 1, nil},
		{[]int{3, 4}, 12, nil},
		{[]int{0, 1 << 40}, 0, nil},
		{[]int{0, 1 << 62}, 0, ErrOverflow}, // zeros do not excuse the rest
		{[]int{1 << 30, 1 << 30, 0}, 0, ErrOverflow},
		{[]int{-1, 4}, 0, ErrNegative},
		{[]int{0, -1}, 0, ErrNegative},
		{[]int{1<<60 + 1, 16}, 0, ErrOverflow},
		{[]int{1 << 32, 1 << 32}, 0, ErrOverflow},
		{[]int{1 << 24, 1 << 24}, 1 << 48, nil},
		{[]int{1 << 24, 1<<24 + 1}, 0, ErrOverflow},
	}
	for _, tt := range tests {
		got, err := Numel(tt.dims)
		if !errors.Is(err, tt.err) || (err == nil && got != tt.want) {
			t.Errorf("Numel(%v) = %d, %v; want %d, %v", tt.dims, got, err, tt.want, tt.err)
		}
	}
}

func TestBytes(t *testing.T) {
	if n, err := Bytes([]int{2, 3}, 4); err != nil || n != 24 {
		t.Errorf("Bytes([2 3], 4) = %d, %v; want 24", n, err)
	}
	if _, err := Bytes([]int{1 << 24, 1 << 24}, 1<<20); !errors.Is(err, ErrOverflow) {
		t.Errorf("Bytes of 2^48 elements of 2^20 bytes: err %v, want ErrOverflow", err)
	}
}
