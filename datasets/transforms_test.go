package datasets

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// positions returns a [c, h, w] image whose value at (ch, y, x) is
// ch·1000 + y·w + x, so a crop shows where it came from.
func positions(c, h, w int) *autograd.Tensor {
	x := make([]float32, c*h*w)
	for k := range x {
		x[k] = float32(k/(h*w)*1000 + k%(h*w))
	}
	return autograd.FromFloat32(x, c, h, w)
}

func mustApply(t *testing.T, tr Transform, x *autograd.Tensor, seed uint64) *autograd.Tensor {
	t.Helper()
	y, err := tr.Apply(x, autograd.NewGenerator(seed))
	if err != nil {
		t.Fatal(err)
	}
	return y
}

func TestTransformShapes(t *testing.T) {
	clone := TransformFunc(func(x *autograd.Tensor, _ *autograd.Generator) (*autograd.Tensor, error) {
		return autograd.FromFloat32(slices.Clone(x.Float32s()), x.Shape()...), nil
	})
	tests := []struct {
		name string
		tr   Transform
		want []int
	}{
		{"Resize", Resize(5), []int{3, 7, 5}}, // int(5·10/7) = 7
		{"CenterCrop", CenterCrop(4), []int{3, 4, 4}},
		{"RandomResizedCrop", RandomResizedCrop(6, ResizedCropOptions{}), []int{3, 6, 6}},
		{"RandomHorizontalFlip", RandomHorizontalFlip(0.5), []int{3, 10, 7}},
		{"Normalize", Normalize(ImageNetMean, ImageNetStd), []int{3, 10, 7}},
		{"Compose", Compose(Resize(8), CenterCrop(8), clone, RandomResizedCrop(3, ResizedCropOptions{})), []int{3, 3, 3}},
		{"empty Compose", Compose(), []int{3, 10, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := positions(3, 10, 7)
			before := slices.Clone(x.Float32s())
			y := mustApply(t, tc.tr, x, 1)
			if !slices.Equal(y.Shape(), tc.want) || y.DType() != autograd.Float32 {
				t.Errorf("%v %v, want float32 %v", y.DType(), y.Shape(), tc.want)
			}
			if !slices.Equal(x.Float32s(), before) {
				t.Error("the input changed")
			}
		})
	}
}

func TestResizeShape(t *testing.T) {
	tests := []struct{ h, w, size, wantH, wantW int }{
		{3, 5, 4, 4, 6},  // int(4·5/3) = int(6.67)
		{7, 3, 2, 4, 2},  // int(2·7/3) = int(4.67)
		{4, 4, 2, 2, 2},  // square stays square
		{10, 7, 5, 7, 5}, // int(7.14)
		{2, 3, 6, 6, 9},  // enlarging
		{1, 100, 3, 3, 300},
	}
	for _, tc := range tests {
		y := mustApply(t, Resize(tc.size), positions(1, tc.h, tc.w), 0)
		if want := []int{1, tc.wantH, tc.wantW}; !slices.Equal(y.Shape(), want) {
			t.Errorf("Resize(%d) of %d×%d: shape %v, want %v", tc.size, tc.h, tc.w, y.Shape(), want)
		}
	}
	if x := positions(2, 5, 8); mustApply(t, Resize(5), x, 0) != x {
		t.Error("Resize to the same size did not return its input")
	}
}

// Resize interpolates as F.interpolate(mode="bilinear",
// align_corners=False): source coordinate (o + ½)·in/out − ½, clamped.
func TestResizeValues(t *testing.T) {
	// Upsampling rows 0 and 1 to 4 rows reads 0, 0.25, 0.75 and 1 of the
	// way; the columns stay constant.
	up := mustApply(t, Resize(4), autograd.FromFloat32([]float32{0, 0, 8, 8}, 1, 2, 2), 0)
	wantUp := []float32{0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 8, 8, 8, 8}
	if !slices.Equal(up.Float32s(), wantUp) {
		t.Errorf("upsampled %v, want %v", up.Float32s(), wantUp)
	}
	// Halving reads between pixel pairs: (0+1)/2 and (2+3)/2.
	down := mustApply(t, Resize(2), positions(1, 4, 4), 0)
	wantDown := []float32{2.5, 4.5, 10.5, 12.5}
	if !slices.Equal(down.Float32s(), wantDown) {
		t.Errorf("downsampled %v, want %v", down.Float32s(), wantDown)
	}
}

func TestCenterCrop(t *testing.T) {
	// torchvision: top = int(round((h − size)/2.0)), Python rounding half
	// to even.
	tests := []struct{ h, w, size, top, left int }{
		{4, 4, 2, 1, 1},
		{5, 5, 2, 2, 2}, // 1.5 rounds to 2
		{7, 7, 2, 2, 2}, // 2.5 rounds to 2
		{6, 5, 3, 2, 1}, // 1.5 → 2, 1
		{5, 4, 3, 1, 0}, // 1, 0.5 → 0
		{9, 8, 2, 4, 3},
		{3, 3, 3, 0, 0},
	}
	for _, tc := range tests {
		x := positions(2, tc.h, tc.w)
		y := mustApply(t, CenterCrop(tc.size), x, 0)
		if !slices.Equal(y.Shape(), []int{2, tc.size, tc.size}) {
			t.Fatalf("CenterCrop(%d) of %d×%d: shape %v", tc.size, tc.h, tc.w, y.Shape())
		}
		got := y.Float32s()
		for c := range 2 {
			for r := range tc.size {
				for k := range tc.size {
					want := float32(c*1000 + (tc.top+r)*tc.w + tc.left + k)
					if v := got[(c*tc.size+r)*tc.size+k]; v != want {
						t.Fatalf("CenterCrop(%d) of %d×%d: (%d, %d, %d) = %v, want %v (top %d, left %d)",
							tc.size, tc.h, tc.w, c, r, k, v, want, tc.top, tc.left)
					}
				}
			}
		}
	}
}

func TestRandomHorizontalFlip(t *testing.T) {
	x := positions(2, 3, 5)
	flipped := mustApply(t, RandomHorizontalFlip(1), x, 0).Float32s()
	for k, v := range x.Float32s() {
		row, col := k/5, k%5
		if got := flipped[row*5+4-col]; got != v {
			t.Fatalf("flipped (%d, %d) = %v, want %v", row, 4-col, got, v)
		}
	}
	if y := mustApply(t, RandomHorizontalFlip(0), x, 0); !slices.Equal(y.Float32s(), x.Float32s()) {
		t.Error("p = 0 changed the image")
	}
	n := 0
	for seed := range uint64(200) {
		if mustApply(t, RandomHorizontalFlip(0.5), x, seed).Float32s()[0] != 0 {
			n++
		}
	}
	if n < 70 || n > 130 {
		t.Errorf("p = 0.5 flipped %d of 200 images", n)
	}
}

func TestNormalize(t *testing.T) {
	x := autograd.FromFloat32([]float32{0, 1, 0.5, 0.25, 2, -1}, 2, 1, 3)
	y := mustApply(t, Normalize([]float32{0.5, 1}, []float32{0.25, 2}), x, 0)
	want := []float32{-2, 2, 0, -0.375, 0.5, -1}
	if !slices.Equal(y.Float32s(), want) {
		t.Errorf("Normalize: %v, want %v", y.Float32s(), want)
	}
	y = mustApply(t, Normalize([]float32{1}, []float32{0.5}), x, 0)
	want = []float32{-2, 0, -1, -1.5, 2, -4}
	if !slices.Equal(y.Float32s(), want) {
		t.Errorf("Normalize with one mean: %v, want %v", y.Float32s(), want)
	}
	// Normalize keeps its own copy of the statistics.
	mean := []float32{0.5}
	tr := Normalize(mean, []float32{1})
	mean[0] = 100
	if v := mustApply(t, tr, x, 0).Float32s()[0]; v != -0.5 {
		t.Errorf("after changing the caller's mean: %v, want -0.5", v)
	}
}

func TestResizedCropParams(t *testing.T) {
	def := RandomResizedCrop(1, ResizedCropOptions{}).(resizedCrop)
	const h, w = 20, 30
	seen := map[box]bool{}
	for seed := range uint64(300) {
		b := def.params(h, w, autograd.NewGenerator(seed))
		seen[b] = true
		if b.h < 1 || b.w < 1 || b.top < 0 || b.left < 0 || b.top+b.h > h || b.left+b.w > w {
			t.Fatalf("seed %d: crop %+v outside the %d×%d image", seed, b, h, w)
		}
		// Rounding each side moves the area and ratio a little.
		if area := float64(b.h*b.w) / (h * w); area < 0.08*0.8 || area > 1 {
			t.Errorf("seed %d: crop %+v covers %.3f of the image", seed, b, area)
		}
		if ratio := float64(b.w) / float64(b.h); b != (box{0, 0, h, w}) && (ratio < 0.75*0.8 || ratio > 4.0/3/0.8) {
			t.Errorf("seed %d: crop %+v has aspect ratio %.3f", seed, b, ratio)
		}
	}
	if len(seen) < 250 {
		t.Errorf("300 seeds gave only %d different crops", len(seen))
	}

	// When ten tries miss, the largest central crop within the ratio range.
	tests := []struct {
		h, w  int
		ratio [2]float64
		want  box
	}{
		{10, 10, [2]float64{0.75, 4.0 / 3}, box{0, 0, 10, 10}},
		{10, 10, [2]float64{2, 3}, box{2, 0, 5, 10}},      // too tall: h = round(10/2)
		{10, 10, [2]float64{0.2, 0.5}, box{0, 2, 10, 5}},  // too wide: w = round(10·0.5)
		{10, 10, [2]float64{0.1, 0.25}, box{0, 4, 10, 2}}, // round(2.5) = 2, half to even
		{9, 10, [2]float64{2, 3}, box{2, 0, 5, 10}},       // (9 − 5)/2
	}
	for _, tc := range tests {
		tr := RandomResizedCrop(1, ResizedCropOptions{Scale: [2]float64{50, 60}, Ratio: tc.ratio}).(resizedCrop)
		if got := tr.params(tc.h, tc.w, autograd.NewGenerator(1)); got != tc.want {
			t.Errorf("fallback for %d×%d, ratio %v: %+v, want %+v", tc.h, tc.w, tc.ratio, got, tc.want)
		}
	}
}

func TestRandomResizedCrop(t *testing.T) {
	x := positions(3, 24, 32)
	tr := RandomResizedCrop(8, ResizedCropOptions{})
	// One stream per example, as ImageFolderSet.Get derives it.
	stream := func(i int) uint64 { return mix(mix(42, uint64(i)), 0) }
	distinct := map[string]bool{}
	for i := range 20 {
		a := mustApply(t, tr, x, stream(i)).Float32s()
		if b := mustApply(t, tr, x, stream(i)).Float32s(); !slices.Equal(a, b) {
			t.Fatalf("example %d: two crops from one seed differ", i)
		}
		distinct[fmt.Sprint(a)] = true
	}
	if len(distinct) < 18 {
		t.Errorf("20 examples gave %d different crops", len(distinct))
	}
	// After ten misses on a square image the crop is the whole image, so
	// the result is a plain resize.
	sq := positions(3, 10, 10)
	whole := mustApply(t, RandomResizedCrop(4, ResizedCropOptions{Scale: [2]float64{4, 5}}), sq, 3)
	if want := mustApply(t, Resize(4), sq, 0); !slices.Equal(whole.Float32s(), want.Float32s()) {
		t.Errorf("fallback crop %v, want the resized image %v", whole.Float32s(), want.Float32s())
	}
}

func TestTransformErrors(t *testing.T) {
	img := positions(3, 4, 5)
	tests := []struct {
		name string
		tr   Transform
		x    *autograd.Tensor
		bad  bool // the error is one of the arguments, seen before any Apply
		want string
	}{
		{"Resize 0", Resize(0), img, true, "datasets: Resize: size 0, want a positive number of pixels"},
		{"Resize negative", Resize(-3), img, true, "Resize: size -3"},
		{"CenterCrop 0", CenterCrop(0), img, true, "CenterCrop: size 0"},
		{"CenterCrop too large", CenterCrop(5), img, false, "CenterCrop: crop 5×5 is larger than the 4×5 image"},
		{"RandomResizedCrop 0", RandomResizedCrop(0, ResizedCropOptions{}), img, true, "RandomResizedCrop: size 0"},
		{"scale reversed", RandomResizedCrop(2, ResizedCropOptions{Scale: [2]float64{0.9, 0.1}}), img, true,
			"RandomResizedCrop: scale range (0.9, 0.1)"},
		{"scale infinite", RandomResizedCrop(2, ResizedCropOptions{Scale: [2]float64{0.1, math.Inf(1)}}), img, true,
			"RandomResizedCrop: scale range (0.1, +Inf)"},
		{"ratio zero", RandomResizedCrop(2, ResizedCropOptions{Ratio: [2]float64{0, 1}}), img, true,
			"RandomResizedCrop: ratio range (0, 1)"},
		{"ratio reversed", RandomResizedCrop(2, ResizedCropOptions{Ratio: [2]float64{2, 1}}), img, true,
			"RandomResizedCrop: ratio range (2, 1)"},
		{"flip p > 1", RandomHorizontalFlip(1.5), img, true, "RandomHorizontalFlip: probability 1.5 is not in [0, 1]"},
		{"flip p NaN", RandomHorizontalFlip(math.NaN()), img, true, "probability NaN"},
		{"Normalize lengths", Normalize([]float32{1, 2}, []float32{1}), img, true,
			"Normalize: 2 means and 1 standard deviations"},
		{"Normalize empty", Normalize(nil, nil), img, true, "Normalize: 0 means and 0 standard deviations"},
		{"Normalize std 0", Normalize([]float32{0, 0, 0}, []float32{1, 0, 1}), img, true,
			"Normalize: standard deviation 0 of channel 1"},
		{"Normalize channels", Normalize([]float32{0, 0}, []float32{1, 1}), img, false,
			"Normalize: 2 means and standard deviations for an image of 3 channels"},
		{"Compose nil", Compose(Resize(2), nil), img, true, "Compose: transform 1 of 2 is nil"},
		{"Compose inner", Compose(Resize(2), RandomHorizontalFlip(-1)), img, true, "RandomHorizontalFlip: probability -1"},
		{"Compose apply", Compose(Resize(2), CenterCrop(3)), img, false, "CenterCrop: crop 3×3 is larger than the 2×2 image"},
		{"nil input", Resize(2), nil, false, "Resize: input is nil"},
		{"2-D input", CenterCrop(2), autograd.Zeros(4, 4), false, "CenterCrop: input is float32 of shape [4 4], want a float32 image [C, H, W]"},
		{"int input", Normalize([]float32{0}, []float32{1}), autograd.FromInt64(make([]int64, 8), 2, 2, 2), false,
			"Normalize: input is int64 of shape [2 2 2]"},
		{"empty input", RandomHorizontalFlip(1), autograd.Zeros(3, 0, 4), false, "RandomHorizontalFlip: input is float32 of shape [3 0 4]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.tr.Apply(tc.x, autograd.NewGenerator(1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Apply: error %v, want %q", err, tc.want)
			}
			if early := checkTransform(tc.tr); (early != nil) != tc.bad {
				t.Errorf("argument check: %v", early)
			}
		})
	}

	for _, tr := range []Transform{RandomResizedCrop(2, ResizedCropOptions{}), RandomHorizontalFlip(0.5)} {
		if _, err := tr.Apply(img, nil); err == nil || !strings.Contains(err.Error(), "random generator is nil") {
			t.Errorf("%T with no generator: error %v", tr, err)
		}
	}
}
