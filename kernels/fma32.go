package kernels

import "math"

// fma32 returns a·b + c rounded once to float32, as VFMADD231PS does, for
// the pure-Go references of assembly loops that fuse: the same bits on
// every platform, where the compiler may or may not fuse a*b + c.
//
// The product of two float32 values is exact in float64; the sum is not,
// and rounding it to float64 and then to float32 can round twice (to a
// float32 halfway point, then to even). So the float64 sum is rounded to
// odd instead (its last bit set where it is inexact), which float64's 29
// extra bits make safe to round again.
func fma32(a, b, c float32) float32 {
	p, z := float64(a)*float64(b), float64(c)
	s := p + z
	bb := s - p
	e := (p - (s - bb)) + (z - bb) // p + z − s exactly (Knuth's TwoSum)
	if e != 0 && !math.IsNaN(e) {
		if u := math.Float64bits(s); u&1 == 0 {
			// The exact sum lies between s and its neighbour toward e,
			// which is odd.
			if (e > 0) == (s > 0) {
				u++
			} else {
				u--
			}
			s = math.Float64frombits(u)
		}
	}
	return float32(s)
}
