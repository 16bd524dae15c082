package datasets

import (
	"fmt"
	"math"
	"slices"

	"github.com/kilnml/kiln/autograd"
)

// Transform changes one example's input, like a torchvision transform. The
// transforms of this package take and return float32 images of shape
// [C, H, W], such as ImageFolder decodes.
//
// Apply must not change x's data: it returns a new tensor, or x itself when
// there is nothing to do. A transform that needs randomness draws it from
// g, which the data set derives from its seed, the example's index and how
// many times the example has been drawn; it keeps no state of its own, so
// one Transform serves every worker goroutine at once and a run repeats
// exactly. Write a custom transform as a TransformFunc.
type Transform interface {
	Apply(x *autograd.Tensor, g *autograd.Generator) (*autograd.Tensor, error)
}

// TransformFunc adapts a function to the Transform interface.
type TransformFunc func(x *autograd.Tensor, g *autograd.Generator) (*autograd.Tensor, error)

// Apply returns f(x, g).
func (f TransformFunc) Apply(x *autograd.Tensor, g *autograd.Generator) (*autograd.Tensor, error) {
	return f(x, g)
}

// ImageNetMean and ImageNetStd are the per-channel RGB statistics of the
// ImageNet training set that torchvision's pretrained models expect, for
// Normalize(ImageNetMean, ImageNetStd).
var (
	ImageNetMean = []float32{0.485, 0.456, 0.406}
	ImageNetStd  = []float32{0.229, 0.224, 0.225}
)

// invalid is what a constructor returns for bad arguments. Returning an
// error from every constructor would make Compose(…) calls unreadable, so
// the error waits in the transform instead: Apply returns it, and
// ImageFolder reports it when the data set is built, before any example
// is loaded.
type invalid struct{ err error }

func (t invalid) Apply(*autograd.Tensor, *autograd.Generator) (*autograd.Tensor, error) {
	return nil, t.err
}

func (t invalid) check() error { return t.err }

func invalidf(format string, args ...any) Transform {
	return invalid{fmt.Errorf("datasets: "+format, args...)}
}

// checkTransform returns the argument error waiting in t, if any.
func checkTransform(t Transform) error {
	if c, ok := t.(interface{ check() error }); ok {
		return c.check()
	}
	return nil
}

type composed []Transform

// Compose chains transforms: each one's output is the next one's input,
// and all draw from the same generator in turn. Compose() does nothing.
func Compose(ts ...Transform) Transform {
	for k, t := range ts {
		if t == nil {
			return invalidf("Compose: transform %d of %d is nil", k, len(ts))
		}
	}
	return composed(slices.Clone(ts))
}

func (c composed) Apply(x *autograd.Tensor, g *autograd.Generator) (*autograd.Tensor, error) {
	for _, t := range c {
		var err error
		if x, err = t.Apply(x, g); err != nil {
			return nil, err
		}
	}
	return x, nil
}

func (c composed) check() error {
	for _, t := range c {
		if err := checkTransform(t); err != nil {
			return err
		}
	}
	return nil
}

// image3 is a float32 [C, H, W] image taken apart.
type image3 struct {
	c, h, w int
	pix     []float32 // C, H, W order
}

// imageArg checks that x is a non-empty float32 [C, H, W] image; name is
// the transform, for the error.
func imageArg(name string, x *autograd.Tensor) (image3, error) {
	if x == nil {
		return image3{}, fmt.Errorf("datasets: %s: input is nil", name)
	}
	s := x.Shape()
	if x.DType() != autograd.Float32 || len(s) != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1 {
		return image3{}, fmt.Errorf("datasets: %s: input is %v of shape %v, want a float32 image [C, H, W]",
			name, x.DType(), s)
	}
	return image3{c: s[0], h: s[1], w: s[2], pix: x.ContiguousFloat32s()}, nil
}

// generatorArg checks that a random transform was given a generator, which
// a caller applying transforms by hand may forget.
func generatorArg(name string, g *autograd.Generator) error {
	if g == nil {
		return fmt.Errorf("datasets: %s: random generator is nil", name)
	}
	return nil
}

// roundHalfEven rounds as Python 3's round does, so that crop positions
// and sizes agree with torchvision's to the pixel.
func roundHalfEven(v float64) int { return int(math.RoundToEven(v)) }

// sized returns t, the transform called name, if size is a positive
// number of pixels.
func sized(name string, size int, t Transform) Transform {
	if size <= 0 {
		return invalidf("%s: size %d, want a positive number of pixels", name, size)
	}
	return t
}

// box is a rectangle of an image: its top-left pixel and its size.
type box struct{ top, left, h, w int }

type resize struct{ size int }

// Resize scales an image so that its shorter side becomes size pixels,
// keeping the aspect ratio, like torchvision's Resize(size) with an int:
// the longer side becomes int(size·long/short), truncated. Interpolation is
// bilinear with half-pixel centres and no antialiasing, matching
// torch.nn.functional.interpolate(mode="bilinear", align_corners=False)
// and torchvision's tensor path with antialias=False; shrinking by more
// than 2× therefore aliases where PIL's filter would blur. An image
// already of the target size is returned as it is.
func Resize(size int) Transform { return sized("Resize", size, resize{size}) }

func (t resize) Apply(x *autograd.Tensor, _ *autograd.Generator) (*autograd.Tensor, error) {
	im, err := imageArg("Resize", x)
	if err != nil {
		return nil, err
	}
	h, w := resizedShape(im.h, im.w, t.size)
	if h == im.h && w == im.w {
		return x, nil
	}
	return resample(im, box{0, 0, im.h, im.w}, h, w), nil
}

// resizedShape is torchvision's _compute_resized_output_size for an int
// size: the shorter side becomes size, the longer int(size·long/short).
func resizedShape(h, w, size int) (int, int) {
	if w <= h {
		return int(float64(size*h) / float64(w)), size
	}
	return size, int(float64(size*w) / float64(h))
}

type centerCrop struct{ size int }

// CenterCrop cuts the central size×size square out of an image. Where the
// margin is odd the crop sits as torchvision puts it: top =
// round((H − size)/2) with Python's half-to-even rounding, and likewise
// for left. An image smaller than the crop is an error; torchvision would
// pad it with zeros, which on a training set usually hides a mistake.
func CenterCrop(size int) Transform { return sized("CenterCrop", size, centerCrop{size}) }

func (t centerCrop) Apply(x *autograd.Tensor, _ *autograd.Generator) (*autograd.Tensor, error) {
	im, err := imageArg("CenterCrop", x)
	if err != nil {
		return nil, err
	}
	if t.size > im.h || t.size > im.w {
		return nil, fmt.Errorf("datasets: CenterCrop: crop %d×%d is larger than the %d×%d image (height×width)",
			t.size, t.size, im.h, im.w)
	}
	top := roundHalfEven(float64(im.h-t.size) / 2)
	left := roundHalfEven(float64(im.w-t.size) / 2)
	return resample(im, box{top, left, t.size, t.size}, t.size, t.size), nil
}

// ResizedCropOptions are the ranges RandomResizedCrop draws from. A zero
// range means torchvision's default.
type ResizedCropOptions struct {
	// Scale bounds the crop's area as a fraction of the image's;
	// default (0.08, 1).
	Scale [2]float64
	// Ratio bounds the crop's aspect ratio, width over height, drawn
	// uniformly in log space; default (3/4, 4/3).
	Ratio [2]float64
}

type resizedCrop struct {
	size         int
	scale, ratio [2]float64
}

// RandomResizedCrop cuts a random part of an image and resizes it to
// size×size, the standard ImageNet training augmentation. The crop is
// chosen as torchvision's RandomResizedCrop.get_params chooses it: up to
// ten tries of an area fraction drawn uniformly from opt.Scale and an
// aspect ratio drawn log-uniformly from opt.Ratio, keeping the first that
// fits; after ten misses, the largest central crop whose aspect ratio lies
// in opt.Ratio. Resizing is as in Resize.
func RandomResizedCrop(size int, opt ResizedCropOptions) Transform {
	if opt.Scale == [2]float64{} {
		opt.Scale = [2]float64{0.08, 1}
	}
	if opt.Ratio == [2]float64{} {
		opt.Ratio = [2]float64{3.0 / 4, 4.0 / 3}
	}
	s, r := opt.Scale, opt.Ratio
	switch {
	case !(0 <= s[0] && s[0] <= s[1] && s[1] > 0) || math.IsInf(s[1], 0):
		return invalidf("RandomResizedCrop: scale range (%v, %v), want finite 0 <= low <= high, high > 0", s[0], s[1])
	case !(0 < r[0] && r[0] <= r[1]) || math.IsInf(r[1], 0):
		return invalidf("RandomResizedCrop: ratio range (%v, %v), want finite 0 < low <= high", r[0], r[1])
	}
	return sized("RandomResizedCrop", size, resizedCrop{size, s, r})
}

func (t resizedCrop) Apply(x *autograd.Tensor, g *autograd.Generator) (*autograd.Tensor, error) {
	im, err := imageArg("RandomResizedCrop", x)
	if err != nil {
		return nil, err
	}
	if err := generatorArg("RandomResizedCrop", g); err != nil {
		return nil, err
	}
	return resample(im, t.params(im.h, im.w, g), t.size, t.size), nil
}

// params picks the crop of an h×w image, following torchvision's
// get_params line by line (its round is Python's, half to even).
func (t resizedCrop) params(h, w int, g *autograd.Generator) box {
	area := float64(h * w)
	logLo, logHi := math.Log(t.ratio[0]), math.Log(t.ratio[1])
	for range 10 {
		target := area * g.Uniform(t.scale[0], t.scale[1])
		aspect := math.Exp(g.Uniform(logLo, logHi))
		cw := roundHalfEven(math.Sqrt(target * aspect))
		ch := roundHalfEven(math.Sqrt(target / aspect))
		if 0 < cw && cw <= w && 0 < ch && ch <= h {
			top := g.IntN(h - ch + 1)
			left := g.IntN(w - cw + 1)
			return box{top, left, ch, cw}
		}
	}
	cw, ch := w, h
	switch in := float64(w) / float64(h); {
	case in < t.ratio[0]:
		ch = roundHalfEven(float64(cw) / t.ratio[0])
	case in > t.ratio[1]:
		cw = roundHalfEven(float64(ch) * t.ratio[1])
	}
	return box{(h - ch) / 2, (w - cw) / 2, ch, cw}
}

type horizontalFlip struct{ p float64 }

// RandomHorizontalFlip mirrors an image left to right with probability p.
// It draws one number per call whatever p is, so adding it to a pipeline
// shifts later transforms' draws the same way for every p.
func RandomHorizontalFlip(p float64) Transform {
	if !(0 <= p && p <= 1) {
		return invalidf("RandomHorizontalFlip: probability %v is not in [0, 1]", p)
	}
	return horizontalFlip{p}
}

func (t horizontalFlip) Apply(x *autograd.Tensor, g *autograd.Generator) (*autograd.Tensor, error) {
	im, err := imageArg("RandomHorizontalFlip", x)
	if err != nil {
		return nil, err
	}
	if err := generatorArg("RandomHorizontalFlip", g); err != nil {
		return nil, err
	}
	if g.Float64() >= t.p {
		return x, nil
	}
	out := make([]float32, len(im.pix))
	for r := 0; r < len(out); r += im.w {
		src, dst := im.pix[r:r+im.w], out[r:r+im.w]
		for k, v := range src {
			dst[im.w-1-k] = v
		}
	}
	return autograd.FromFloat32(out, im.c, im.h, im.w), nil
}

type normalize struct{ mean, std []float32 }

// Normalize maps each channel c to (x − mean[c]) / std[c], like
// torchvision's Normalize; with one mean and one std, every channel uses
// them. Pass ImageNetMean and ImageNetStd for torchvision's pretrained
// models. The slices are copied.
func Normalize(mean, std []float32) Transform {
	if len(mean) == 0 || len(mean) != len(std) {
		return invalidf("Normalize: %d means and %d standard deviations, want as many of each, at least one",
			len(mean), len(std))
	}
	for c, s := range std {
		if s == 0 || s != s {
			return invalidf("Normalize: standard deviation %v of channel %d, want a non-zero number", s, c)
		}
	}
	return normalize{slices.Clone(mean), slices.Clone(std)}
}

func (t normalize) Apply(x *autograd.Tensor, _ *autograd.Generator) (*autograd.Tensor, error) {
	im, err := imageArg("Normalize", x)
	if err != nil {
		return nil, err
	}
	if n := len(t.mean); n != 1 && n != im.c {
		return nil, fmt.Errorf("datasets: Normalize: %d means and standard deviations for an image of %d channels", n, im.c)
	}
	plane := im.h * im.w
	out := make([]float32, len(im.pix))
	for c := range im.c {
		m, s := t.mean[0], t.std[0]
		if len(t.mean) > 1 {
			m, s = t.mean[c], t.std[c]
		}
		src, dst := im.pix[c*plane:(c+1)*plane], out[c*plane:(c+1)*plane]
		for k, v := range src {
			dst[k] = (v - m) / s
		}
	}
	return autograd.FromFloat32(out, im.c, im.h, im.w), nil
}

// resample returns the part b of im resized to h×w: a copy when the sizes
// agree, else bilinear interpolation as in Resize.
func resample(im image3, b box, h, w int) *autograd.Tensor {
	out := make([]float32, im.c*h*w)
	plane := im.h * im.w
	if b.h == h && b.w == w {
		for c := range im.c {
			for y := range h {
				src := im.pix[c*plane+(b.top+y)*im.w+b.left:]
				copy(out[(c*h+y)*w:(c*h+y+1)*w], src[:w])
			}
		}
		return autograd.FromFloat32(out, im.c, h, w)
	}
	ys, xs := taps(b.top, b.h, h), taps(b.left, b.w, w)
	for c := range im.c {
		src := im.pix[c*plane : (c+1)*plane]
		for y, ty := range ys {
			r0, r1 := src[ty.i0*im.w:], src[ty.i1*im.w:]
			dst := out[(c*h+y)*w : (c*h+y+1)*w]
			for x, tx := range xs {
				top := tx.w0*r0[tx.i0] + tx.w1*r0[tx.i1]
				bottom := tx.w0*r1[tx.i0] + tx.w1*r1[tx.i1]
				dst[x] = ty.w0*top + ty.w1*bottom
			}
		}
	}
	return autograd.FromFloat32(out, im.c, h, w)
}

// tap is where one output pixel reads along an axis: two input pixels and
// their weights.
type tap struct {
	i0, i1 int
	w0, w1 float32
}

// taps computes, for each of n output pixels along an axis, the input
// pixels of the span [start, start+size) it interpolates, as PyTorch's
// bilinear upsampling does without align_corners: the source coordinate is
// (o + ½)·size/n − ½, clamped at 0, and the last pixel repeats at the edge.
func taps(start, size, n int) []tap {
	out := make([]tap, n)
	scale := float32(size) / float32(n)
	for o := range out {
		src := max(scale*(float32(o)+0.5)-0.5, 0)
		i0 := int(src)
		step := 0
		if i0 < size-1 {
			step = 1
		}
		l1 := src - float32(i0)
		out[o] = tap{start + i0, start + i0 + step, 1 - l1, l1}
	}
	return out
}
