package datasets

// These tests sit inside the package to compare the fast pixel
// conversions with the generic one directly.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// putFile writes data to root/rel, making the folders on the way.
func putFile(t *testing.T, root, rel string, data []byte) string {
	t.Helper()
	path := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func pngBytes(t *testing.T, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func jpegBytes(t *testing.T, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// colourful returns an opaque w×h image whose pixels all differ, with a
// seed to tell images apart.
func colourful(w, h int, seed uint8) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetNRGBA(x, y, color.NRGBA{uint8(40*x) + seed, uint8(50*y) + seed, uint8(7*x*y) ^ seed, 0xff})
		}
	}
	return m
}

// straightPlanes is the reference conversion: each pixel's straight
// 8-bit colour divided by 255.
func straightPlanes(w, h int, at func(x, y int) color.NRGBA) []float32 {
	out := make([]float32, 3*w*h)
	for y := range h {
		for x := range w {
			c := at(x, y)
			for ch, v := range []uint8{c.R, c.G, c.B} {
				out[(ch*h+y)*w+x] = float32(v) / 255
			}
		}
	}
	return out
}

func mustFolder(t *testing.T, root string, opt ImageFolderOptions) *ImageFolderSet {
	t.Helper()
	s, err := ImageFolder(root, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustGet(t *testing.T, s Dataset, i int) Example {
	t.Helper()
	ex, err := s.Get(i)
	if err != nil {
		t.Fatalf("Get(%d): %v", i, err)
	}
	return ex
}

func TestImageFolderScan(t *testing.T) {
	root := t.TempDir()
	img := pngBytes(t, colourful(2, 2, 0))
	for _, rel := range []string{
		"dog/b.png", "dog/A.PNG", "dog/b0.png", "dog/b/c.png", "dog/sub/c.jpg", "dog/notes.txt",
		"cat/y.JPG", "cat/x.jpeg", "cat/x.gif", "zebra/z.png", "readme.png",
	} {
		putFile(t, root, rel, img)
	}
	if err := os.Symlink(filepath.Join(root, "dog"), filepath.Join(root, "dog", "loop")); err != nil {
		t.Logf("no symbolic link to test a cycle: %v", err)
	}
	s := mustFolder(t, root, ImageFolderOptions{})

	if want := []string{"cat", "dog", "zebra"}; !slices.Equal(s.Classes, want) {
		t.Errorf("Classes %v, want %v", s.Classes, want)
	}
	for k, c := range s.Classes {
		if s.ClassIndex[c] != k {
			t.Errorf("ClassIndex[%q] = %d, want %d", c, s.ClassIndex[c], k)
		}
	}
	// torchvision's order: folder by folder, so dog/b0.png before dog/b/c.png.
	want := []Sample{
		{"cat/x.jpeg", 0}, {"cat/y.JPG", 0},
		{"dog/A.PNG", 1}, {"dog/b.png", 1}, {"dog/b0.png", 1}, {"dog/b/c.png", 1}, {"dog/sub/c.jpg", 1},
		{"zebra/z.png", 2},
	}
	got := s.Samples()
	if len(got) != len(want) || s.Len() != len(want) {
		t.Fatalf("%d samples (Len %d), want %d: %v", len(got), s.Len(), len(want), got)
	}
	for i, w := range want {
		if rel, _ := filepath.Rel(root, got[i].Path); filepath.ToSlash(rel) != w.Path || got[i].Label != w.Label {
			t.Errorf("sample %d is %s (label %d), want %s (%d)", i, rel, got[i].Label, w.Path, w.Label)
		}
		if ex := mustGet(t, s, i); ex.Label != w.Label || !slices.Equal(ex.Input.Shape(), []int{3, 2, 2}) {
			t.Errorf("Get(%d): label %d shape %v, want %d [3 2 2]", i, ex.Label, ex.Input.Shape(), w.Label)
		}
	}
}

func TestImageFolderPixels(t *testing.T) {
	const w, h = 5, 3
	opaque := colourful(w, h, 3)
	alpha := colourful(w, h, 9)
	gray := image.NewGray(image.Rect(0, 0, w, h))
	gray16 := image.NewGray16(image.Rect(0, 0, w, h))
	pal := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{
		color.NRGBA{10, 20, 30, 255}, color.NRGBA{200, 100, 50, 128}, color.NRGBA{1, 2, 3, 0}})
	for y := range h {
		for x := range w {
			alpha.Pix[alpha.PixOffset(x, y)+3] = uint8(60 * (x + y))
			gray.SetGray(x, y, color.Gray{uint8(17*x + 70*y)})
			gray16.SetGray16(x, y, color.Gray16{uint16(4000*x + 9000*y + 1)})
			pal.SetColorIndex(x, y, uint8((x+y)%3))
		}
	}
	nrgba := func(m image.Image) func(x, y int) color.NRGBA {
		return func(x, y int) color.NRGBA { return color.NRGBAModel.Convert(m.At(x, y)).(color.NRGBA) }
	}
	tests := []struct {
		name string
		img  image.Image
		want []float32
	}{
		// PNG decodes an opaque image to *image.RGBA, one with alpha to
		// *image.NRGBA; alpha is dropped from the straight colours.
		{"rgb", opaque, straightPlanes(w, h, nrgba(opaque))},
		{"alpha", alpha, straightPlanes(w, h, func(x, y int) color.NRGBA { return alpha.NRGBAAt(x, y) })},
		{"gray", gray, straightPlanes(w, h, func(x, y int) color.NRGBA {
			v := gray.GrayAt(x, y).Y
			return color.NRGBA{v, v, v, 0xff}
		})},
		{"paletted", pal, straightPlanes(w, h, func(x, y int) color.NRGBA {
			return pal.Palette[pal.ColorIndexAt(x, y)].(color.NRGBA)
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			putFile(t, root, "c/img.png", pngBytes(t, tc.img))
			got := mustGet(t, mustFolder(t, root, ImageFolderOptions{}), 0).Input
			if !slices.Equal(got.Shape(), []int{3, h, w}) {
				t.Fatalf("shape %v, want [3 %d %d]", got.Shape(), h, w)
			}
			if !slices.Equal(got.Float32s(), tc.want) {
				t.Errorf("pixels\n%v\nwant\n%v", got.Float32s(), tc.want)
			}
		})
	}

	t.Run("gray16", func(t *testing.T) {
		root := t.TempDir()
		putFile(t, root, "c/img.png", pngBytes(t, gray16))
		got := mustGet(t, mustFolder(t, root, ImageFolderOptions{}), 0).Input.Float32s()
		for y := range h {
			for x := range w {
				want := float32(gray16.Gray16At(x, y).Y) / 0xffff
				for ch := range 3 {
					if v := got[(ch*h+y)*w+x]; v != want {
						t.Fatalf("channel %d pixel (%d, %d) = %v, want %v", ch, x, y, v, want)
					}
				}
			}
		}
	})
}

func TestImageFolderJPEG(t *testing.T) {
	const w, h = 17, 11 // odd sizes leave half-covered chroma blocks
	root := t.TempDir()
	data := jpegBytes(t, colourful(w, h, 5))
	putFile(t, root, "c/img.jpg", data)
	got := mustGet(t, mustFolder(t, root, ImageFolderOptions{}), 0).Input.Float32s()
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	want := straightPlanes(w, h, func(x, y int) color.NRGBA {
		c := img.At(x, y).(color.YCbCr)
		r, g, b := color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
		return color.NRGBA{r, g, b, 0xff}
	})
	if !slices.Equal(got, want) {
		t.Errorf("JPEG pixels differ from the decoder's colours")
	}
}

// The fast YCbCr path must convert as color.YCbCrToRGB does and find the
// chroma sample of every pixel as At does, for every subsampling and for
// sub-images at odd offsets.
func TestYCbCrPlanes(t *testing.T) {
	ratios := []image.YCbCrSubsampleRatio{
		image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422, image.YCbCrSubsampleRatio420,
		image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411, image.YCbCrSubsampleRatio410,
	}
	r := rand.New(rand.NewPCG(1, 2))
	// Every Y, Cb and Cr value, in many combinations, to check the
	// clamping.
	all := image.NewYCbCr(image.Rect(0, 0, 256, 256), image.YCbCrSubsampleRatio444)
	for k := range all.Y {
		x, y := k%256, k/256
		all.Y[k], all.Cb[k], all.Cr[k] = uint8(x), uint8(y), uint8(7*x+13*y)
	}
	tests := []*image.YCbCr{all}
	for _, ratio := range ratios {
		m := image.NewYCbCr(image.Rect(1, 3, 14, 12), ratio)
		for _, b := range [][]uint8{m.Y, m.Cb, m.Cr} {
			for k := range b {
				b[k] = uint8(r.Uint32())
			}
		}
		tests = append(tests, m, m.SubImage(image.Rect(3, 4, 12, 11)).(*image.YCbCr))
	}
	for _, img := range tests {
		t.Run(fmt.Sprint(img.SubsampleRatio, img.Rect), func(t *testing.T) {
			lo := img.Rect.Min
			got, h, w := rgbPlanes(img)
			want := straightPlanes(w, h, func(x, y int) color.NRGBA {
				c := img.YCbCrAt(lo.X+x, lo.Y+y)
				r, g, b := color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
				return color.NRGBA{r, g, b, 0xff}
			})
			if !slices.Equal(got, want) {
				t.Errorf("pixels differ from color.YCbCrToRGB's")
			}
		})
	}
}

// A premultiplied RGBA pixel converts to its straight colour, as PIL's
// RGBA has; fully transparent pixels are black.
func TestRGBAPlanesUnpremultiply(t *testing.T) {
	m := image.NewRGBA(image.Rect(0, 0, 3, 1))
	m.SetRGBA(0, 0, color.RGBA{255, 0, 0, 255})
	m.SetRGBA(1, 0, color.RGBA{50, 25, 0, 100})
	m.SetRGBA(2, 0, color.RGBA{0, 0, 0, 0})
	got, _, _ := rgbPlanes(m)
	want := []float32{1, 0.5, 0, 0, 0.25, 0, 0, 0, 0}
	if !slices.Equal(got, want) {
		t.Errorf("planes %v, want %v", got, want)
	}
}

// corruptTree writes three good images and three bad ones, in this order:
// a/0.png good, a/1.jpg random bytes, a/2.png good, b/3.png truncated,
// b/4.png empty, b/5.png good.
func corruptTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	noise := make([]byte, 300)
	for k := range noise {
		noise[k] = byte(k * 7919 >> 3)
	}
	truncated := pngBytes(t, colourful(9, 9, 3))
	putFile(t, root, "a/0.png", pngBytes(t, colourful(4, 4, 0)))
	putFile(t, root, "a/1.jpg", noise)
	putFile(t, root, "a/2.png", pngBytes(t, colourful(4, 4, 2)))
	putFile(t, root, "b/3.png", truncated[:len(truncated)/2])
	putFile(t, root, "b/4.png", nil)
	putFile(t, root, "b/5.png", pngBytes(t, colourful(4, 4, 5)))
	return root
}

func TestImageFolderCorruptFail(t *testing.T) {
	root := corruptTree(t)
	s := mustFolder(t, root, ImageFolderOptions{})
	tests := []struct {
		i    int
		file string
		want string
	}{
		{1, "a/1.jpg", "not a JPEG or PNG image"},
		{3, "b/3.png", "png: invalid format: not enough pixel data"},
		{4, "b/4.png", "empty file"},
	}
	for _, tc := range tests {
		_, err := s.Get(tc.i)
		path := filepath.Join(root, filepath.FromSlash(tc.file))
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Get(%d): error %v, want one naming %s and saying %q", tc.i, err, path, tc.want)
		}
	}
	for _, i := range []int{0, 2, 5} {
		mustGet(t, s, i)
	}
	if len(s.Skipped()) != 0 {
		t.Errorf("CorruptFail skipped %v", s.Skipped())
	}
}

func TestImageFolderCorruptSkip(t *testing.T) {
	root := corruptTree(t)
	var mu sync.Mutex
	reports := map[string]int{}
	s := mustFolder(t, root, ImageFolderOptions{OnCorrupt: CorruptSkip, Report: func(path string, err error) {
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("report for %s: error %v does not name the file", path, err)
		}
		mu.Lock()
		reports[path]++
		mu.Unlock()
	}})
	// Several goroutines race to find the bad files; each is reported once.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range s.Len() {
				if _, err := s.Get(i); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()

	var bad []string
	for _, f := range []string{"a/1.jpg", "b/3.png", "b/4.png"} {
		bad = append(bad, filepath.Join(root, filepath.FromSlash(f)))
	}
	var skipped []string
	for _, f := range s.Skipped() {
		skipped = append(skipped, f.Path)
	}
	if !slices.Equal(skipped, bad) {
		t.Errorf("Skipped() = %v, want %v", skipped, bad)
	}
	for _, p := range bad {
		if reports[p] != 1 {
			t.Errorf("%s reported %d times, want once", p, reports[p])
		}
	}
	// A bad file's example is the next good one's, label included.
	for bad, good := range map[int]int{1: 2, 3: 5, 4: 5} {
		got, want := mustGet(t, s, bad), mustGet(t, s, good)
		if got.Label != want.Label || !slices.Equal(got.Input.Float32s(), want.Input.Float32s()) {
			t.Errorf("Get(%d) is not example %d", bad, good)
		}
	}

	allBad := t.TempDir()
	putFile(t, allBad, "a/x.jpg", []byte("not an image"))
	s = mustFolder(t, allBad, ImageFolderOptions{OnCorrupt: CorruptSkip})
	if _, err := s.Get(0); err == nil || !strings.Contains(err.Error(), "none of the 1 files in "+allBad) {
		t.Errorf("all files bad: error %v", err)
	}
}

func TestImageFolderVerify(t *testing.T) {
	root := corruptTree(t)
	_, err := ImageFolder(root, ImageFolderOptions{Verify: true})
	first := filepath.Join(root, "a", "1.jpg")
	if err == nil || !strings.Contains(err.Error(), "2 of 6 files") || !strings.Contains(err.Error(), first) {
		t.Errorf("Verify with CorruptFail: error %v, want 2 of 6 files bad, the first %s", err, first)
	}

	s := mustFolder(t, root, ImageFolderOptions{Verify: true, OnCorrupt: CorruptSkip})
	if s.Len() != 4 || len(s.Skipped()) != 2 {
		t.Fatalf("Verify with CorruptSkip kept %d files and skipped %v, want 4 and 2", s.Len(), s.Skipped())
	}
	// The truncated file has a good header: it is found when loaded.
	got, want := mustGet(t, s, 2), mustGet(t, s, 3)
	if !slices.Equal(got.Input.Float32s(), want.Input.Float32s()) || len(s.Skipped()) != 3 {
		t.Errorf("truncated file not replaced by the next one, skipped %v", s.Skipped())
	}
}

// pngClaiming returns a 2×2 PNG whose header claims w×h pixels.
func pngClaiming(t *testing.T, w, h uint32) []byte {
	data := pngBytes(t, colourful(2, 2, 0))
	// IHDR follows the 8-byte signature: length, type, width, height, …,
	// then a CRC of type and data.
	binary.BigEndian.PutUint32(data[16:], w)
	binary.BigEndian.PutUint32(data[20:], h)
	binary.BigEndian.PutUint32(data[29:], crc32.ChecksumIEEE(data[12:29]))
	return data
}

// The bound is on the float32 RGB tensor an image becomes, 12 bytes a
// pixel, not on its 8-bit pixels.
func TestCheckHeaderBound(t *testing.T) {
	tests := []struct {
		w, h uint32
		ok   bool
	}{
		{9459, 9459, true},
		{9460, 9460, false},
		{1, 89_478_485, true}, // 1 GiB / 12
		{1, 89_478_486, false},
		{10000, 10000, false},
		{1 << 28, 1 << 28, false}, // more elements than internal/shape counts
	}
	for _, tc := range tests {
		err := checkHeader(bytes.NewReader(pngClaiming(t, tc.w, tc.h)))
		want := fmt.Sprintf("%d×%d image is more than the 1073741824 bytes allowed as float32 RGB", tc.w, tc.h)
		if tc.ok && err != nil || !tc.ok && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%d×%d: error %v, want ok %v", tc.w, tc.h, err, tc.ok)
		}
	}
}

// A header announcing a huge image is refused before the decoder
// allocates for it: a 10000×10000 PNG, 118 KB when real, once took
// 1.28 GB to load.
func TestImageFolderHugeHeader(t *testing.T) {
	for _, side := range []uint32{10_000, 100_000} {
		root := t.TempDir()
		path := putFile(t, root, "a/huge.png", pngClaiming(t, side, side))
		want := fmt.Sprintf("%d×%d image is more than the 1073741824 bytes allowed", side, side)
		for _, verify := range []bool{false, true} {
			var err error
			got := allocated(func() {
				var s *ImageFolderSet
				if s, err = ImageFolder(root, ImageFolderOptions{Verify: verify}); err == nil {
					_, err = s.Get(0)
				}
			})
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
				t.Errorf("%d², verify %v: error %v", side, verify, err)
			}
			if got > 16<<20 {
				t.Errorf("%d², verify %v: allocated %d bytes to refuse the image", side, verify, got)
			}
		}
	}
}

// allocated returns the bytes f allocates (the whole process's, so a
// bound checked against it must leave room for the runtime's own).
func allocated(f func()) uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	f()
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc - before
}

func TestImageFolderErrors(t *testing.T) {
	img := pngBytes(t, colourful(3, 3, 0))
	tests := []struct {
		name  string
		setup func(t *testing.T, root string)
		opt   ImageFolderOptions
		want  string // %s stands for the root
	}{
		{"missing root", func(t *testing.T, root string) { os.Remove(root) }, ImageFolderOptions{},
			"open %s: no such file"},
		{"empty root", func(*testing.T, string) {}, ImageFolderOptions{}, "%s has no class folders"},
		{"files only", func(t *testing.T, root string) { putFile(t, root, "x.png", img) }, ImageFolderOptions{},
			"%s has no class folders"},
		{"empty class", func(t *testing.T, root string) {
			putFile(t, root, "a/x.png", img)
			putFile(t, root, "b/notes.txt", img)
			putFile(t, root, "c/y.gif", img)
		}, ImageFolderOptions{}, "no .jpg, .jpeg or .png files in class folders b, c of %s"},
		{"no images", func(t *testing.T, root string) {
			putFile(t, root, "a/notes.txt", img)
			os.Mkdir(filepath.Join(root, "b"), 0o755)
		}, ImageFolderOptions{AllowEmptyClasses: true}, "no .jpg, .jpeg or .png files in the 2 class folders of %s"},
		{"bad transform", func(t *testing.T, root string) { putFile(t, root, "a/x.png", img) },
			ImageFolderOptions{Transform: Compose(CenterCrop(2), Resize(0))}, "datasets: Resize: size 0"},
		{"bad policy", func(t *testing.T, root string) { putFile(t, root, "a/x.png", img) },
			ImageFolderOptions{OnCorrupt: 7}, "unknown corrupt-file policy CorruptPolicy(7)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.setup(t, root)
			_, err := ImageFolder(root, tc.opt)
			want := strings.ReplaceAll(tc.want, "%s", root)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want %q", err, want)
			}
		})
	}

	t.Run("allow empty classes", func(t *testing.T) {
		root := t.TempDir()
		putFile(t, root, "b/x.png", img)
		os.Mkdir(filepath.Join(root, "a"), 0o755)
		s := mustFolder(t, root, ImageFolderOptions{AllowEmptyClasses: true})
		if !slices.Equal(s.Classes, []string{"a", "b"}) || s.Len() != 1 || mustGet(t, s, 0).Label != 1 {
			t.Errorf("classes %v, %d images", s.Classes, s.Len())
		}
	})

	t.Run("transform fails on an image", func(t *testing.T) {
		root := t.TempDir()
		path := putFile(t, root, "a/x.png", img)
		s := mustFolder(t, root, ImageFolderOptions{Transform: CenterCrop(100)})
		_, err := s.Get(0)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "CenterCrop: crop 100×100 is larger") {
			t.Errorf("error %v", err)
		}
		if _, err := s.Get(1); err == nil || !strings.Contains(err.Error(), "index 1 out of range [0, 1)") {
			t.Errorf("Get(1): error %v", err)
		}
	})
}

// augmentTree writes n differently coloured images of various sizes in
// two classes, alternating PNG and JPEG.
func augmentTree(t *testing.T, n int) string {
	t.Helper()
	root := t.TempDir()
	for i := range n {
		img := colourful(10+i%4, 9+i%3, uint8(30*i))
		name := fmt.Sprintf("%c/%02d.png", 'a'+i%2, i)
		data := pngBytes(t, img)
		if i%3 == 0 {
			name, data = fmt.Sprintf("%c/%02d.jpg", 'a'+i%2, i), jpegBytes(t, img)
		}
		putFile(t, root, name, data)
	}
	return root
}

func TestImageFolderDraws(t *testing.T) {
	root := augmentTree(t, 4)
	opt := ImageFolderOptions{
		Transform: Compose(RandomResizedCrop(6, ResizedCropOptions{}), RandomHorizontalFlip(0.5)),
		Seed:      7,
	}
	a, b := mustFolder(t, root, opt), mustFolder(t, root, opt)
	opt.Seed = 8
	c := mustFolder(t, root, opt)
	draws := make([][][]float32, 3)
	seedsDiffer := false
	for d := range draws {
		for i := range a.Len() {
			xa := mustGet(t, a, i).Input.Float32s()
			if xb := mustGet(t, b, i).Input.Float32s(); !slices.Equal(xa, xb) {
				t.Errorf("draw %d of example %d differs between sets with one seed", d, i)
			}
			if !slices.Equal(xa, mustGet(t, c, i).Input.Float32s()) {
				seedsDiffer = true
			}
			draws[d] = append(draws[d], xa)
		}
	}
	if !seedsDiffer {
		t.Error("seeds 7 and 8 give the same crops")
	}
	for d := 1; d < len(draws); d++ {
		if slices.EqualFunc(draws[0], draws[d], slices.Equal) {
			t.Errorf("draws 0 and %d are the same", d)
		}
	}
	a.SetEpoch(1)
	for i := range a.Len() {
		if !slices.Equal(mustGet(t, a, i).Input.Float32s(), draws[1][i]) {
			t.Errorf("after SetEpoch(1), example %d is not its draw 1", i)
		}
	}
}

// An ImageFolderSet feeds a DataLoader with workers and channels-last
// batches, and the augmented batches are the same whatever the number of
// workers.
func TestImageFolderLoader(t *testing.T) {
	root := augmentTree(t, 10)
	tf := Compose(RandomResizedCrop(8, ResizedCropOptions{}), RandomHorizontalFlip(0.5),
		Normalize(ImageNetMean, ImageNetStd))
	run := func(workers int) map[[2]int][]float64 {
		s := mustFolder(t, root, ImageFolderOptions{Transform: tf, Seed: 3})
		samples := s.Samples()
		l, err := NewDataLoader(s, LoaderOptions{
			BatchSize: 4, Shuffle: true, Seed: 1, Workers: workers, ChannelsLast: true})
		if err != nil {
			t.Fatal(err)
		}
		out := map[[2]int][]float64{}
		for epoch := range 2 {
			for b, err := range l.Epoch(epoch) {
				if err != nil {
					t.Fatal(err)
				}
				n := len(b.Indices)
				if !slices.Equal(b.Inputs.Shape(), []int{n, 3, 8, 8}) || b.Inputs.Format() != autograd.ChannelsLast {
					t.Fatalf("batch %v %v, want [%d 3 8 8] channels-last", b.Inputs.Shape(), b.Inputs.Format(), n)
				}
				vals := b.Inputs.Values()
				for k, i := range b.Indices {
					if got := b.Labels.Int64s()[k]; got != samples[i].Label {
						t.Errorf("example %d: label %d, want %d", i, got, samples[i].Label)
					}
					out[[2]int{epoch, i}] = vals[k*3*8*8 : (k+1)*3*8*8]
				}
			}
		}
		return out
	}
	serial, parallel := run(0), run(2)
	if len(serial) != 20 {
		t.Fatalf("%d examples loaded in two epochs, want 20", len(serial))
	}
	for key, want := range serial {
		if !slices.Equal(parallel[key], want) {
			t.Errorf("epoch %d example %d differs with 2 workers", key[0], key[1])
		}
	}
	if slices.Equal(serial[[2]int{0, 0}], serial[[2]int{1, 0}]) {
		t.Error("example 0 is augmented the same way in epochs 0 and 1")
	}
}
