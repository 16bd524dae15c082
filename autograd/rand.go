package autograd

import (
	"math"
	"math/rand/v2"
)

// Generator is a seeded source of random numbers for initialisers, dropout
// and data shuffling. Runs with the same seed give the same numbers. A
// Generator is not safe for concurrent use.
type Generator struct {
	r *rand.Rand
}

// NewGenerator returns a generator seeded with seed.
func NewGenerator(seed uint64) *Generator {
	return &Generator{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

// Float64 returns a uniform number in [0, 1).
func (g *Generator) Float64() float64 { return g.r.Float64() }

// Uniform returns a uniform number in [lo, hi).
func (g *Generator) Uniform(lo, hi float64) float64 { return lo + (hi-lo)*g.r.Float64() }

// Normal returns a normally distributed number with the given mean and
// standard deviation.
func (g *Generator) Normal(mean, std float64) float64 { return mean + std*g.r.NormFloat64() }

// IntN returns a uniform integer in [0, n); n must be positive.
func (g *Generator) IntN(n int) int {
	// math/rand's own panic for these is a bare string, not an *Error.
	if n <= 0 {
		Fail("IntN", "empty range [0, %d)", n)
	}
	return g.r.IntN(n)
}

// Perm returns a random permutation of [0, n); n must not be negative.
func (g *Generator) Perm(n int) []int {
	if n < 0 {
		Fail("Perm", "negative length %d", n)
	}
	return g.r.Perm(n)
}

// Uint64 returns 64 random bits, for seeding other generators.
func (g *Generator) Uint64() uint64 { return g.r.Uint64() }

// checkGen panics unless g is a generator; a nil one would crash with a
// nil dereference on the first draw.
func checkGen(op string, g *Generator) {
	if g == nil {
		Fail(op, "generator is nil")
	}
}

// Rand returns a float32 tensor of uniform numbers in [0, 1).
func Rand(g *Generator, shape ...int) *Tensor {
	checkGen("Rand", g)
	t := empty("Rand", Float32, shape)
	for i, d := 0, t.Float32s(); i < len(d); i++ {
		d[i] = float32(g.Float64())
	}
	return t
}

// Randn returns a float32 tensor of standard normal numbers.
func Randn(g *Generator, shape ...int) *Tensor {
	checkGen("Randn", g)
	t := empty("Randn", Float32, shape)
	for i, d := 0, t.Float32s(); i < len(d); i++ {
		d[i] = float32(g.r.NormFloat64())
	}
	return t
}

// RandInt returns an Int64 tensor of uniform integers in [low, high).
func RandInt(g *Generator, low, high int64, shape ...int) *Tensor {
	checkGen("RandInt", g)
	if high <= low {
		Fail("RandInt", "empty range [%d, %d)", low, high)
	}
	t := empty("RandInt", Int64, shape)
	for i, d := 0, t.Int64s(); i < len(d); i++ {
		d[i] = low + g.r.Int64N(high-low)
	}
	return t
}

// Uniform fills a float32 tensor in place with uniform numbers in [lo, hi)
// and returns it; initialisers use it on parameters. lo must not exceed hi,
// as in PyTorch's uniform_.
func (t *Tensor) Uniform(g *Generator, lo, hi float64) *Tensor {
	checkGen("Uniform", g)
	if !(lo <= hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		Fail("Uniform", "expects a finite range [from, to) with from <= to, got [%v, %v)", lo, hi)
	}
	for i, d := 0, t.Float32s(); i < len(d); i++ {
		d[i] = float32(g.Uniform(lo, hi))
	}
	return t
}

// Normal fills a float32 tensor in place with normal numbers and returns it.
func (t *Tensor) Normal(g *Generator, mean, std float64) *Tensor {
	checkGen("Normal", g)
	if std < 0 || math.IsNaN(std) {
		Fail("Normal", "standard deviation %v is not a non-negative number", std)
	}
	for i, d := 0, t.Float32s(); i < len(d); i++ {
		d[i] = float32(g.Normal(mean, std))
	}
	return t
}

// Fill sets every element of a float32 tensor to v and returns it.
func (t *Tensor) Fill(v float32) *Tensor {
	d := t.Float32s()
	for i := range d {
		d[i] = v
	}
	return t
}
