package datasets

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // registers the JPEG decoder with image.Decode
	_ "image/png"  // registers the PNG decoder with image.Decode
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/shape"
)

// maxImageBytes bounds the float32 RGB tensor an image header may
// announce. At 12 bytes a pixel, 1 GiB is PIL's Image.MAX_IMAGE_PIXELS
// (89,478,485), above which PIL warns of a decompression bomb; but PIL
// counts 8-bit pixels of 3 or 4 bytes, and a loader holds one image per
// worker and more in prefetched batches, so the bound is on the bytes
// Kiln allocates. A corrupt or hostile header is refused before the
// decoder allocates for it.
const maxImageBytes = 1 << 30

// maxImageFileBytes bounds the size of a file read whole for decoding, so
// that a large non-image with an image extension is not read into memory.
const maxImageFileBytes = 1 << 30

// ErrNotRegular is wrapped by the error for an image path that names a
// named pipe, device, socket or other special file: reading one could
// block a worker for ever or never end.
var ErrNotRegular = errors.New("not a regular file")

// CorruptPolicy says what an ImageFolderSet does with a file it cannot read
// or decode.
type CorruptPolicy int

const (
	// CorruptFail makes Get return an error naming the file and what is
	// wrong with it, which stops a DataLoader's epoch. It is the default,
	// as in torchvision.
	CorruptFail CorruptPolicy = iota
	// CorruptSkip drops bad files. A file found bad while loading is
	// reported, listed by Skipped, never decoded again, and its example
	// replaced by the next readable file in order (wrapping round at the
	// end), label included: Len cannot change during an epoch, or a
	// DataLoader's batches would lose their size.
	CorruptSkip
)

func (p CorruptPolicy) String() string {
	switch p {
	case CorruptFail:
		return "CorruptFail"
	case CorruptSkip:
		return "CorruptSkip"
	}
	return fmt.Sprintf("CorruptPolicy(%d)", int(p))
}

// ImageFolderOptions configures ImageFolder. The zero value decodes images
// as they are and fails on a corrupt file.
type ImageFolderOptions struct {
	// Transform, if not nil, is applied to every image after decoding.
	Transform Transform
	// Seed seeds the Transform's randomness; see ImageFolderSet.Get.
	Seed uint64
	// OnCorrupt says what to do with files that cannot be read or decoded.
	OnCorrupt CorruptPolicy
	// Report, if not nil, is called once for each file CorruptSkip drops,
	// possibly from several goroutines at once.
	Report func(path string, err error)
	// Verify reads every file's header when the set is built, from
	// GOMAXPROCS goroutines, so that files that are empty, not JPEG or
	// PNG, or of absurd size show up at once: under CorruptFail as an
	// error from ImageFolder, under CorruptSkip dropped from the set so
	// that Len counts only the rest. Data truncated after a good header
	// is still only found when the image is loaded. Verifying costs one
	// small read per file.
	Verify bool
	// AllowEmptyClasses accepts class folders holding no images, as
	// torchvision's allow_empty does; by default they are an error.
	AllowEmptyClasses bool
}

// Sample is one file of an ImageFolderSet and its class.
type Sample struct {
	Path  string
	Label int64
}

// SkippedFile is a file that CorruptSkip dropped, and why.
type SkippedFile struct {
	Path string
	Err  error
}

// ImageFolderSet is a data set of image files laid out one folder per
// class, made by ImageFolder. It holds only the file names; images are
// decoded when asked for, so Get is where the work happens and a
// DataLoader with workers decodes in parallel. Its methods are safe for
// concurrent use.
type ImageFolderSet struct {
	// Root is the folder that was scanned.
	Root string
	// Classes are the class folders' names in sorted order: label k is
	// Classes[k].
	Classes []string
	// ClassIndex maps a class name to its label, like torchvision's
	// class_to_idx.
	ClassIndex map[string]int

	opt     ImageFolderOptions
	samples []Sample
	draws   []atomic.Uint32 // how many times each example has been drawn
	bad     []atomic.Bool   // files CorruptSkip has dropped

	mu      sync.Mutex
	skipped []SkippedFile
}

// ImageFolder scans root for images stored one folder per class, like
// torchvision.datasets.ImageFolder: every sub-folder of root is a class,
// the classes are sorted by name and numbered in that order, and each
// class holds the files with extension .jpg, .jpeg or .png (in any case)
// found anywhere below its folder, following links to folders, sorted as
// torchvision sorts them (by folder, then by name). Formats are told
// apart by content, not extension.
//
// Examples are float32 RGB images [3, H, W] with values in [0, 1], like
// torchvision's ToTensor after PIL's convert("RGB"): grey, palette, CMYK
// and alpha images become three channels, alpha is dropped. JPEG pixels
// come from Go's decoder and may differ from libjpeg's by a level or two;
// 16-bit PNGs keep their precision where PIL would cut them to 8 bits.
//
// A root with no class folders, or a class folder with no images (unless
// opt.AllowEmptyClasses), is an error naming the folder, as is a bad
// option or a Transform built with bad arguments. Files are listed by
// name, as torchvision lists them: a named pipe, device or socket with an
// image's name is found when opened (ErrNotRegular) and handled by
// opt.OnCorrupt like any unreadable image.
func ImageFolder(root string, opt ImageFolderOptions) (*ImageFolderSet, error) {
	if opt.OnCorrupt != CorruptFail && opt.OnCorrupt != CorruptSkip {
		return nil, fmt.Errorf("datasets: ImageFolder: unknown corrupt-file policy %v", opt.OnCorrupt)
	}
	if opt.Transform != nil {
		if err := checkTransform(opt.Transform); err != nil {
			return nil, err
		}
	}
	classes, err := classFolders(root)
	if err != nil {
		return nil, err
	}
	s := &ImageFolderSet{Root: root, Classes: classes, ClassIndex: make(map[string]int, len(classes)), opt: opt}
	var empty []string
	for k, c := range classes {
		s.ClassIndex[c] = k
		files, err := imageFiles(filepath.Join(root, c))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			empty = append(empty, c)
		}
		for _, f := range files {
			s.samples = append(s.samples, Sample{Path: f, Label: int64(k)})
		}
	}
	switch {
	case len(s.samples) == 0:
		return nil, fmt.Errorf("datasets: ImageFolder: no .jpg, .jpeg or .png files in the %d class folders of %s",
			len(classes), root)
	case len(empty) > 0 && !opt.AllowEmptyClasses:
		return nil, fmt.Errorf("datasets: ImageFolder: no .jpg, .jpeg or .png files in class folders %s of %s",
			strings.Join(empty, ", "), root)
	}
	if opt.Verify {
		if err := s.verify(); err != nil {
			return nil, err
		}
	}
	s.draws = make([]atomic.Uint32, len(s.samples))
	s.bad = make([]atomic.Bool, len(s.samples))
	return s, nil
}

// Len returns the number of image files.
func (s *ImageFolderSet) Len() int { return len(s.samples) }

// Samples returns a copy of the files and their labels in example order,
// like torchvision's samples.
func (s *ImageFolderSet) Samples() []Sample { return slices.Clone(s.samples) }

// Skipped returns the files CorruptSkip has dropped so far, sorted by
// path.
func (s *ImageFolderSet) Skipped() []SkippedFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.skipped)
	slices.SortFunc(out, func(a, b SkippedFile) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Get decodes file i and applies the set's Transform.
//
// The Transform draws from a generator seeded by the set's Seed, i and
// how many times example i has been drawn before. A DataLoader gets each
// example once per epoch, so epoch k sees draw k of every example,
// whatever the number of workers and the order they run in: runs repeat
// exactly, and each epoch is augmented anew. An epoch left early may
// leave some examples a draw ahead (workers load ahead of the consumer);
// SetEpoch puts them back in step, e.g. when resuming a run.
func (s *ImageFolderSet) Get(i int) (Example, error) {
	if i < 0 || i >= len(s.samples) {
		return Example{}, fmt.Errorf("datasets: index %d out of range [0, %d)", i, len(s.samples))
	}
	draw := s.draws[i].Add(1) - 1
	x, j, err := s.load(i)
	if err != nil {
		return Example{}, err
	}
	if s.opt.Transform != nil {
		g := autograd.NewGenerator(mix(mix(s.opt.Seed, uint64(i)), uint64(draw)))
		if x, err = s.opt.Transform.Apply(x, g); err != nil {
			return Example{}, fmt.Errorf("%s: %w", s.samples[j].Path, err)
		}
		if x == nil {
			return Example{}, fmt.Errorf("%s: transform returned no image", s.samples[j].Path)
		}
	}
	return Example{Input: x, Label: s.samples[j].Label}, nil
}

// SetEpoch makes the next Get of every example its draw number epoch, so
// that epoch's random transforms are those of an uninterrupted run. Call
// it between epochs, not while a loader is running.
func (s *ImageFolderSet) SetEpoch(epoch int) {
	for i := range s.draws {
		s.draws[i].Store(uint32(epoch))
	}
}

// load decodes file i or, under CorruptSkip, the first readable file from
// i on; it returns the image and the index of the file it came from.
// Trying the files in order, rather than remembering substitutes, keeps
// the choice the same whichever goroutine found a bad file first.
func (s *ImageFolderSet) load(i int) (*autograd.Tensor, int, error) {
	n := len(s.samples)
	for k := range n {
		j := (i + k) % n
		if s.bad[j].Load() {
			continue
		}
		x, err := decodeFile(s.samples[j].Path)
		if err == nil {
			return x, j, nil
		}
		if s.opt.OnCorrupt == CorruptFail {
			return nil, j, err
		}
		if s.bad[j].CompareAndSwap(false, true) {
			s.skip(s.samples[j].Path, err)
		}
	}
	return nil, i, fmt.Errorf("datasets: ImageFolder: none of the %d files in %s is a readable image", n, s.Root)
}

// skip records a dropped file. Report runs outside the lock, so that it
// may call Skipped.
func (s *ImageFolderSet) skip(path string, err error) {
	s.mu.Lock()
	s.skipped = append(s.skipped, SkippedFile{path, err})
	s.mu.Unlock()
	if s.opt.Report != nil {
		s.opt.Report(path, err)
	}
}

// verify checks every file's header in parallel, then fails on the first
// bad file in order or drops the bad files, by policy.
func (s *ImageFolderSet) verify() error {
	errs := make([]error, len(s.samples))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(s.samples)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(s.samples); i = int(next.Add(1) - 1) {
				errs[i] = checkFile(s.samples[i].Path)
			}
		})
	}
	wg.Wait()

	var kept []Sample
	var first error
	bad := 0
	for i, err := range errs {
		switch {
		case err == nil:
			kept = append(kept, s.samples[i])
		case s.opt.OnCorrupt == CorruptFail:
			bad++
			if first == nil {
				first = err
			}
		default:
			s.skip(s.samples[i].Path, err)
		}
	}
	if first != nil {
		return fmt.Errorf("datasets: ImageFolder: %d of %d files in %s are not readable images; the first: %w",
			bad, len(s.samples), s.Root, first)
	}
	if len(kept) == 0 {
		return fmt.Errorf("datasets: ImageFolder: none of the %d files in %s is a readable image", len(s.samples), s.Root)
	}
	s.samples = kept
	return nil
}

// classFolders returns the names of root's sub-folders, sorted.
func classFolders(root string) ([]string, error) {
	entries, err := os.ReadDir(root) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("datasets: ImageFolder: %w", err)
	}
	var classes []string
	for _, e := range entries {
		if isDir(root, e) {
			classes = append(classes, e.Name())
		}
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("datasets: ImageFolder: %s has no class folders", root)
	}
	return classes, nil
}

// isDir reports whether entry e of dir is a folder, following a link as
// Python's os.scandir does for torchvision.
func isDir(dir string, e os.DirEntry) bool {
	if e.Type()&os.ModeSymlink != 0 {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		return err == nil && fi.IsDir()
	}
	return e.IsDir()
}

// imageFiles lists the image files below dir in the order torchvision's
// sorted(os.walk(dir, followlinks=True)) gives: by folder path, then by
// name within a folder, which is not quite the order of the full paths
// ("a/b0.png" comes before "a/b/c.png"). Links to folders are followed,
// but not round a cycle, where os.walk would recurse until the path grew
// too long.
func imageFiles(dir string) ([]string, error) {
	type file struct{ dir, name string }
	var files []file
	var walk func(dir string, parents []os.FileInfo) error
	walk = func(dir string, parents []os.FileInfo) error {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		for _, p := range parents {
			if os.SameFile(p, fi) {
				return nil
			}
		}
		parents = append(parents[:len(parents):len(parents)], fi)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			switch {
			case isDir(dir, e):
				if err := walk(filepath.Join(dir, e.Name()), parents); err != nil {
					return err
				}
			case hasImageExt(e.Name()):
				files = append(files, file{dir, e.Name()})
			}
		}
		return nil
	}
	if err := walk(dir, nil); err != nil {
		return nil, fmt.Errorf("datasets: ImageFolder: %w", err)
	}
	slices.SortFunc(files, func(a, b file) int {
		return cmp.Or(strings.Compare(a.dir, b.dir), strings.Compare(a.name, b.name))
	})
	paths := make([]string, len(files))
	for k, f := range files {
		paths[k] = filepath.Join(f.dir, f.name)
	}
	return paths, nil
}

// hasImageExt reports whether name ends in .jpg, .jpeg or .png, in any
// case.
func hasImageExt(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".jpg", ".jpeg", ".png":
		return true
	}
	return false
}

// openImage opens an image file, refusing what cannot be one: an empty
// file, or something other than a regular file. torchvision lists files
// by extension alone and would then block for ever opening a named pipe
// called x.png; here it is an error naming the file, which OnCorrupt
// fails on or skips like any unreadable image. Links to regular files are
// followed.
func openImage(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, 0, err // an *os.PathError names the path
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, 0, err
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, 0, fmt.Errorf("%s: %w (mode %v)", path, ErrNotRegular, fi.Mode())
	case fi.Size() == 0:
		f.Close()
		return nil, 0, fmt.Errorf("%s: empty file", path)
	}
	return f, fi.Size(), nil
}

// checkHeader reads an image header and checks that the image is one we
// can and should decode.
func checkHeader(r io.Reader) error {
	cfg, _, err := image.DecodeConfig(r)
	switch {
	case errors.Is(err, image.ErrFormat):
		return fmt.Errorf("not a JPEG or PNG image (%w)", err)
	case err != nil:
		return err
	case cfg.Width < 1 || cfg.Height < 1:
		return fmt.Errorf("image of %d×%d pixels", cfg.Width, cfg.Height)
	}
	if n, err := shape.Bytes([]int{3, cfg.Height, cfg.Width}, 4); err != nil || n > maxImageBytes {
		return fmt.Errorf("%d×%d image is more than the %d bytes allowed as float32 RGB (12 a pixel); is the header corrupt?",
			cfg.Width, cfg.Height, maxImageBytes)
	}
	return nil
}

// checkFile checks the header of an image file without reading the rest.
func checkFile(path string) error {
	f, _, err := openImage(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := checkHeader(bufio.NewReader(f)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// decodeFile reads and decodes an image file into a float32 RGB image
// [3, H, W] in [0, 1]. The whole file is read first, in one call: decoders
// make many small reads, and the header must be checked before the
// decoder allocates what it announces.
func decodeFile(path string) (x *autograd.Tensor, err error) {
	defer func() {
		// The standard decoders are fuzzed and should not panic; a panic
		// on one bad file must not take down the training run anyway.
		if p := recover(); p != nil {
			x, err = nil, fmt.Errorf("%s: decoder panicked: %v", path, p)
		}
	}()
	f, size, err := openImage(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > maxImageFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d an image file may have", path, size, maxImageFileBytes)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("%s: reading: %w", path, err)
	}
	if err := checkHeader(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pix, h, w := rgbPlanes(img)
	return autograd.FromFloat32(pix, 3, h, w), nil
}

// unit8[v] is v/255, ToTensor's scaling of an 8-bit sample; looking it up
// gives the same float32 as dividing, for less.
var unit8 = func() (t [256]float32) {
	for v := range t {
		t[v] = float32(v) / 255
	}
	return t
}()

// planes are the three colour planes of an RGB image of h×w pixels, each
// in row-major order.
type planes struct {
	r, g, b []float32
	h, w    int
}

// row returns row y of each plane. Filling rows of known length lets the
// compiler drop the bounds checks from the per-pixel loops.
func (p planes) row(y int) (r, g, b []float32) {
	k := y * p.w
	return p.r[k : k+p.w], p.g[k : k+p.w], p.b[k : k+p.w]
}

// rgbPlanes converts an image to float32 R, G, B planes in [0, 1]. The
// types the JPEG and PNG decoders return for 8-bit images are read
// straight from their pixel slices; others go through the slow generic
// At, one interface call and colour conversion per pixel.
func rgbPlanes(img image.Image) (pix []float32, h, w int) {
	b := img.Bounds()
	h, w = b.Dy(), b.Dx()
	n := h * w
	pix = make([]float32, 3*n)
	p := planes{pix[:n], pix[n : 2*n], pix[2*n:], h, w}
	fast := true
	switch m := img.(type) {
	case *image.YCbCr:
		fast = ycbcrPlanes(m, p)
	case *image.RGBA:
		bytesPlanes(m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], m.Stride, true, p)
	case *image.NRGBA:
		bytesPlanes(m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], m.Stride, false, p)
	case *image.Gray:
		for y := range h {
			r, g, bl := p.row(y)
			for x, v := range m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:w] {
				r[x], g[x], bl[x] = unit8[v], unit8[v], unit8[v]
			}
		}
	case *image.Paletted:
		palettedPlanes(m, p)
	default:
		fast = false
	}
	if !fast {
		for y := range h {
			r, g, bl := p.row(y)
			for x := range w {
				c := color.NRGBA64Model.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA64)
				r[x], g[x], bl[x] = float32(c.R)/0xffff, float32(c.G)/0xffff, float32(c.B)/0xffff
			}
		}
	}
	return pix, h, w
}

// bytesPlanes converts 4-byte R, G, B, A pixels starting at pix, rows
// stride bytes apart. PIL's convert("RGB") drops alpha from straight
// colours, so premultiplied pixels are divided by their alpha first.
func bytesPlanes(pix []uint8, stride int, premultiplied bool, p planes) {
	for y := range p.h {
		r, g, b := p.row(y)
		src := pix[y*stride:][:4*p.w]
		for x := range r {
			px := src[4*x : 4*x+4 : 4*x+4]
			if a := px[3]; !premultiplied || a == 0xff {
				r[x], g[x], b[x] = unit8[px[0]], unit8[px[1]], unit8[px[2]]
			} else if a > 0 {
				fa := float32(a)
				r[x], g[x], b[x] = min(float32(px[0])/fa, 1), min(float32(px[1])/fa, 1), min(float32(px[2])/fa, 1)
			}
		}
	}
}

// palettedPlanes converts a palette image through a table of the
// palette's straight (not premultiplied) colours. Indices beyond the
// palette read as black rather than panicking.
func palettedPlanes(m *image.Paletted, p planes) {
	var table [256][3]float32
	for k, c := range m.Palette[:min(len(m.Palette), 256)] {
		if c == nil {
			continue
		}
		n := color.NRGBAModel.Convert(c).(color.NRGBA)
		table[k] = [3]float32{unit8[n.R], unit8[n.G], unit8[n.B]}
	}
	lo := m.Rect.Min
	for y := range p.h {
		r, g, b := p.row(y)
		for x, i := range m.Pix[m.PixOffset(lo.X, lo.Y+y):][:p.w] {
			c := &table[i]
			r[x], g[x], b[x] = c[0], c[1], c[2]
		}
	}
}

// chromaBlock is, for each chroma subsampling, the luma samples one
// chroma sample covers across and down.
var chromaBlock = map[image.YCbCrSubsampleRatio][2]int{
	image.YCbCrSubsampleRatio444: {1, 1},
	image.YCbCrSubsampleRatio422: {2, 1},
	image.YCbCrSubsampleRatio420: {2, 2},
	image.YCbCrSubsampleRatio440: {1, 2},
	image.YCbCrSubsampleRatio411: {4, 1},
	image.YCbCrSubsampleRatio410: {4, 2},
}

// ycbcrPlanes converts a YCbCr image, as JPEG decodes to, with the
// standard library's 8-bit colour conversion, color.YCbCrToRGB. It returns false
// for a chroma subsampling it does not know.
func ycbcrPlanes(m *image.YCbCr, p planes) bool {
	block, ok := chromaBlock[m.SubsampleRatio]
	if !ok {
		return false
	}
	sx, sy := block[0], block[1]
	// The chroma column of each x, as image.YCbCr.COffset computes it.
	lo := m.Rect.Min
	cx := make([]int, p.w)
	for x := range cx {
		cx[x] = (lo.X+x)/sx - lo.X/sx
	}
	for y := range p.h {
		r, g, b := p.row(y)
		ys := m.Y[y*m.YStride:][:p.w]
		crow := ((lo.Y+y)/sy - lo.Y/sy) * m.CStride
		cb, cr := m.Cb[crow:], m.Cr[crow:]
		for x, c := range cx[:p.w] {
			// color.YCbCrToRGB's fixed-point arithmetic, written out:
			// the call is too big to inline and costs as much as the
			// arithmetic.
			yy := int32(ys[x]) * 0x10101
			cbx, crx := int32(cb[c])-128, int32(cr[c])-128
			r[x] = unit8[clamp16(yy+91881*crx)]
			g[x] = unit8[clamp16(yy-22554*cbx-46802*crx)]
			b[x] = unit8[clamp16(yy+116130*cbx)]
		}
	}
	return true
}

// clamp16 turns a 16.16 fixed-point colour value into 8 bits, clamping to
// [0, 255] as color.YCbCrToRGB does.
func clamp16(v int32) uint8 {
	if uint32(v)&0xff000000 == 0 {
		return uint8(v >> 16)
	}
	return uint8(^(v >> 31))
}
