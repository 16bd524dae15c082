package datasets

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/autograd"
)

// SyntheticConfig describes a synthetic image-classification data set.
type SyntheticConfig struct {
	// N is the number of examples.
	N int
	// Classes is the number of classes; example i has label i mod Classes.
	Classes int
	// Channels, Height and Width give each image's shape [C, H, W].
	Channels, Height, Width int
	// Seed picks the class templates and every example's noise and shift.
	Seed uint64
	// Noise is the standard deviation of the Gaussian noise added to each
	// pixel; the templates have unit variance.
	Noise float64
	// Shift is the largest translation, in pixels along each axis, applied
	// to the template of each example.
	Shift int
}

// wavesPerTemplate is how many plane waves make up one channel of a class
// template: enough that no two classes look alike, few enough that a
// template stays smooth.
const wavesPerTemplate = 4

// maxCycles bounds a wave's frequency in cycles per image side, keeping
// templates smooth and below the Nyquist limit of an 8-pixel image.
const maxCycles = 3

// wave is one plane wave amp·cos(fx·x + fy·y + phase), frequencies in
// radians per pixel.
type wave struct{ fx, fy, phase, amp float64 }

// SyntheticImages is a data set of images drawn from per-class templates,
// made by Synthetic. Examples are computed when asked for, so N may be far
// larger than memory would hold.
type SyntheticImages struct {
	cfg   SyntheticConfig
	waves []wave // [class][channel][wave]
}

// Synthetic returns a learnable image-classification data set that needs
// no files: each class has a fixed random template per channel, a sum of a
// few smooth plane waves with unit variance, and example i is the template
// of class i mod Classes, shifted by up to Shift pixels, plus Gaussian
// noise. Everything is determined by Seed and the example's index, so the
// same configuration always gives the same images, in any order and from
// any number of goroutines.
func Synthetic(cfg SyntheticConfig) (*SyntheticImages, error) {
	switch {
	case cfg.N < 0:
		return nil, fmt.Errorf("datasets: synthetic: %d examples is negative", cfg.N)
	case cfg.Classes < 1:
		return nil, fmt.Errorf("datasets: synthetic: %d classes, want at least 1", cfg.Classes)
	case cfg.Channels < 1 || cfg.Height < 1 || cfg.Width < 1:
		return nil, fmt.Errorf("datasets: synthetic: image shape [%d %d %d] has a dimension below 1",
			cfg.Channels, cfg.Height, cfg.Width)
	case !(cfg.Noise >= 0) || math.IsInf(cfg.Noise, 0):
		return nil, fmt.Errorf("datasets: synthetic: noise %v is not a finite non-negative number", cfg.Noise)
	case cfg.Shift < 0:
		return nil, fmt.Errorf("datasets: synthetic: shift %d is negative", cfg.Shift)
	}
	g := autograd.NewGenerator(cfg.Seed)
	waves := make([]wave, cfg.Classes*cfg.Channels*wavesPerTemplate)
	// A cosine of amplitude a has variance a²/2, so this amplitude gives
	// each template unit variance.
	amp := math.Sqrt(2.0 / wavesPerTemplate)
	for i := range waves {
		waves[i] = wave{
			fx:    2 * math.Pi * g.Uniform(-maxCycles, maxCycles) / float64(cfg.Width),
			fy:    2 * math.Pi * g.Uniform(-maxCycles, maxCycles) / float64(cfg.Height),
			phase: g.Uniform(0, 2*math.Pi),
			amp:   amp,
		}
	}
	return &SyntheticImages{cfg: cfg, waves: waves}, nil
}

// Len returns the number of examples.
func (s *SyntheticImages) Len() int { return s.cfg.N }

// Get computes example i: a float32 image of shape [C, H, W] and its
// label i mod Classes.
func (s *SyntheticImages) Get(i int) (Example, error) {
	c := s.cfg
	if i < 0 || i >= c.N {
		return Example{}, fmt.Errorf("datasets: index %d out of range [0, %d)", i, c.N)
	}
	g := autograd.NewGenerator(mix(c.Seed, uint64(i)))
	label := i % c.Classes
	var dx, dy float64
	if c.Shift > 0 {
		dx = float64(g.IntN(2*c.Shift+1) - c.Shift)
		dy = float64(g.IntN(2*c.Shift+1) - c.Shift)
	}

	// cos(A+B) = cos A cos B − sin A sin B separates each wave into a row
	// factor and a column factor, so the trigonometry costs O(H+W) per
	// wave instead of O(H·W).
	cosX := make([]float64, c.Width)
	sinX := make([]float64, c.Width)
	cosY := make([]float64, c.Height)
	sinY := make([]float64, c.Height)
	out := make([]float32, c.Channels*c.Height*c.Width)
	plane := make([]float64, c.Height*c.Width)
	for ch := range c.Channels {
		clear(plane)
		base := (label*c.Channels + ch) * wavesPerTemplate
		for _, w := range s.waves[base : base+wavesPerTemplate] {
			for x := range c.Width {
				sinX[x], cosX[x] = math.Sincos(w.fx*(float64(x)-dx) + w.phase)
				sinX[x] *= w.amp
				cosX[x] *= w.amp
			}
			for y := range c.Height {
				sinY[y], cosY[y] = math.Sincos(w.fy * (float64(y) - dy))
			}
			for y := range c.Height {
				row := plane[y*c.Width : (y+1)*c.Width]
				for x := range row {
					row[x] += cosX[x]*cosY[y] - sinX[x]*sinY[y]
				}
			}
		}
		dst := out[ch*c.Height*c.Width : (ch+1)*c.Height*c.Width]
		for k, v := range plane {
			if c.Noise > 0 {
				v += g.Normal(0, c.Noise)
			}
			dst[k] = float32(v)
		}
	}
	return Example{Input: autograd.FromFloat32(out, c.Channels, c.Height, c.Width), Label: int64(label)}, nil
}
