package datasets

import (
	"fmt"
	"math"
	"slices"

	"github.com/kilnml/kiln/autograd"
)

// Example is one labelled sample: for images, Input is a float32 tensor of
// shape [C, H, W] and Label its class index.
type Example struct {
	Input *autograd.Tensor
	Label int64
}

// Dataset is a finite, indexable collection of examples, the equivalent of
// a PyTorch map-style dataset.
//
// Get must be safe for concurrent use: a DataLoader with workers calls it from
// several goroutines at once. Each call should return an Input the caller
// may keep, not a buffer that a later call overwrites.
type Dataset interface {
	// Len returns the number of examples.
	Len() int
	// Get returns example i, 0 <= i < Len().
	Get(i int) (Example, error)
}

// Images is an in-memory image-classification data set of 8-bit pixels,
// as the MNIST, CIFAR-10 and Digits readers return it. Get converts one
// image to float32 on demand, so the set holds one byte per pixel.
type Images struct {
	// Channels, Height and Width give the shape of each image.
	Channels, Height, Width int
	// Pixels holds the images one after another, each in C, H, W order.
	Pixels []uint8
	// Labels holds one class index per image.
	Labels []int64
	// Classes is the number of classes; labels lie in [0, Classes).
	Classes int
	// Scale multiplies every pixel on the way out: 1/255 maps 8-bit
	// pixels to [0, 1].
	Scale float32
}

// Len returns the number of images.
func (s *Images) Len() int { return len(s.Labels) }

// Get returns image i as a float32 tensor of shape [C, H, W] with the
// pixels multiplied by Scale.
func (s *Images) Get(i int) (Example, error) {
	if i < 0 || i >= len(s.Labels) {
		return Example{}, fmt.Errorf("datasets: index %d out of range [0, %d)", i, len(s.Labels))
	}
	size := s.Channels * s.Height * s.Width
	// The fields are public, so the sizes may not agree with the data.
	if s.Channels <= 0 || s.Height <= 0 || s.Width <= 0 || len(s.Pixels)/size < i+1 {
		return Example{}, fmt.Errorf("datasets: image %d of shape [%d %d %d] lies beyond the %d pixels held", i, s.Channels, s.Height, s.Width, len(s.Pixels))
	}
	px := s.Pixels[i*size : (i+1)*size]
	x := make([]float32, size)
	for k, p := range px {
		x[k] = float32(p) * s.Scale
	}
	return Example{Input: autograd.FromFloat32(x, s.Channels, s.Height, s.Width), Label: s.Labels[i]}, nil
}

// Subset is the part of a Dataset picked out by a list of indices, like
// torch.utils.data.Subset. Example i of the subset is example Indices[i]
// of the underlying set.
type Subset struct {
	Dataset Dataset
	Indices []int
}

// Len returns the number of indices.
func (s *Subset) Len() int { return len(s.Indices) }

// Get returns example Indices[i] of the underlying data set.
func (s *Subset) Get(i int) (Example, error) {
	if i < 0 || i >= len(s.Indices) {
		return Example{}, fmt.Errorf("datasets: subset index %d out of range [0, %d)", i, len(s.Indices))
	}
	if s.Dataset == nil {
		return Example{}, fmt.Errorf("datasets: subset of a nil data set")
	}
	return s.Dataset.Get(s.Indices[i])
}

// Split divides ds at random into a training part and a held-out test part
// holding round(testFraction·Len) examples. The same seed always gives the
// same split; each part keeps the examples in their original order. Split
// panics if testFraction is not in [0, 1] or ds is nil.
func Split(ds Dataset, testFraction float64, seed uint64) (train, test *Subset) {
	if !(testFraction >= 0 && testFraction <= 1) {
		panic(fmt.Sprintf("datasets: Split: test fraction %v is not in [0, 1]", testFraction))
	}
	if ds == nil {
		panic("datasets: Split: data set is nil")
	}
	n := ds.Len()
	perm := autograd.NewGenerator(seed).Perm(n)
	nTest := int(math.Round(testFraction * float64(n)))
	testIdx, trainIdx := perm[:nTest], perm[nTest:]
	slices.Sort(testIdx)
	slices.Sort(trainIdx)
	return &Subset{Dataset: ds, Indices: trainIdx}, &Subset{Dataset: ds, Indices: testIdx}
}

// mix derives a well-spread seed from a seed and a counter (an epoch, an
// example index), so that neighbouring counters give unrelated streams.
func mix(seed, n uint64) uint64 {
	return splitmix64(seed ^ splitmix64(n+0x632be59bd9b4e019))
}

// splitmix64 is the finaliser of the SplitMix64 generator, a bijective
// bit mixer.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
