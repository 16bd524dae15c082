package datasets_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/datasets"
)

// idx builds an IDX file: magic, dimensions, data.
func idx(magic uint32, dims []uint32, data []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, magic)
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return append(b, data...)
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// pixelRamp returns n bytes 0, 1, 2, …
func pixelRamp(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestReadMNIST(t *testing.T) {
	// Two 3×4 images and their labels.
	images := idx(0x803, []uint32{2, 3, 4}, pixelRamp(24))
	labels := idx(0x801, []uint32{2}, []byte{7, 3})
	badCRC := gz(images)
	badCRC[len(badCRC)-6] ^= 0xff

	tests := []struct {
		name           string
		images, labels []byte
		bad            string // the file the error must name
		want           string // "" for success
	}{
		{"plain", images, labels, "", ""},
		{"gzip", gz(images), gz(labels), "", ""},
		{"mixed", gz(images), labels, "", ""},
		{"images magic", idx(0x801, []uint32{2, 3, 4}, pixelRamp(24)), labels, "images",
			"magic 0x00000801, want 0x00000803 (images)"},
		{"labels magic", images, idx(0x803, []uint32{2}, []byte{7, 3}), "labels",
			"magic 0x00000803, want 0x00000801 (labels)"},
		{"magic truncated", images[:2], labels, "images", "truncated in the magic number"},
		{"header truncated", images[:10], labels, "images", "truncated in the dimensions"},
		{"data truncated", images[:len(images)-4], labels, "images", "truncated: 20 of 24 data bytes for dimensions [2 3 4]"},
		{"gzip truncated", gz(images)[:20], labels, "images", "truncated"},
		{"gzip checksum", badCRC, labels, "images", "gzip: invalid checksum"},
		{"trailing bytes", append(slices.Clone(images), 0), labels, "images", "unexpected bytes after the data"},
		{"labels trailing", images, gz(append(slices.Clone(labels), 1, 2)), "labels", "unexpected bytes after the data"},
		{"count mismatch", images, idx(0x801, []uint32{3}, []byte{1, 2, 3}), "labels", "3 labels, but"},
		{"label range", images, idx(0x801, []uint32{2}, []byte{1, 10}), "labels", "label 10 of example 1 is not in [0, 10)"},
		{"empty image", idx(0x803, []uint32{2, 0, 4}, nil), labels, "images", "images of 0×4 pixels"},
		{"huge", idx(0x803, []uint32{60000, 60000, 60000}, nil), labels, "images", "announce more than"},
		{"empty file", nil, labels, "images", "truncated in the magic number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ip := writeFile(t, dir, "train-images-idx3-ubyte.gz", tc.images)
			lp := writeFile(t, dir, "train-labels-idx1-ubyte", tc.labels)
			set, err := datasets.ReadMNIST(ip, lp)
			if tc.want != "" {
				file := map[string]string{"images": ip, "labels": lp}[tc.bad]
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), file+": ") {
					t.Fatalf("error %v, want %q about %s", err, tc.want, file)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if set.Len() != 2 || set.Channels != 1 || set.Height != 3 || set.Width != 4 || set.Classes != 10 {
				t.Fatalf("set %d×[%d %d %d], %d classes", set.Len(), set.Channels, set.Height, set.Width, set.Classes)
			}
			ex, err := set.Get(1)
			if err != nil {
				t.Fatal(err)
			}
			if ex.Label != 3 || !slices.Equal(ex.Input.Shape(), []int{1, 3, 4}) {
				t.Errorf("example 1: label %d shape %v", ex.Label, ex.Input.Shape())
			}
			if got, want := ex.Input.Values()[5], float64(float32(17)/255); got != want {
				t.Errorf("pixel 5 of image 1 = %v, want %v", got, want)
			}
			if _, err := set.Get(2); err == nil {
				t.Error("Get(2) of 2 images: no error")
			}
		})
	}
}

func TestMNISTDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "train-images-idx3-ubyte.gz", gz(idx(0x803, []uint32{3, 2, 2}, pixelRamp(12))))
	writeFile(t, dir, "train-labels-idx1-ubyte.gz", gz(idx(0x801, []uint32{3}, []byte{0, 1, 2})))
	writeFile(t, dir, "t10k-images-idx3-ubyte", idx(0x803, []uint32{1, 2, 2}, pixelRamp(4)))
	writeFile(t, dir, "t10k-labels-idx1-ubyte", idx(0x801, []uint32{1}, []byte{9}))
	for train, want := range map[bool]int{true: 3, false: 1} {
		set, err := datasets.MNIST(dir, train)
		if err != nil {
			t.Fatalf("MNIST(train=%v): %v", train, err)
		}
		if set.Len() != want {
			t.Errorf("MNIST(train=%v): %d examples, want %d", train, set.Len(), want)
		}
	}
	if _, err := datasets.MNIST(t.TempDir(), true); err == nil || !strings.Contains(err.Error(), "neither train-images-idx3-ubyte nor") {
		t.Errorf("empty directory: error %v", err)
	}
}

// cifarRecords builds n CIFAR-10 records with labels 0, 1, 2, …
func cifarRecords(n int) []byte {
	var b []byte
	for i := range n {
		b = append(b, byte(i%10))
		b = append(b, pixelRamp(3072)...)
	}
	return b
}

func TestReadCIFAR10(t *testing.T) {
	badLabel := cifarRecords(2)
	badLabel[3073] = 10
	tests := []struct {
		name  string
		file  []byte
		want  string
		field string // the *datasets.FormatError's Field
	}{
		{"plain", cifarRecords(3), "", ""},
		{"gzip", gz(cifarRecords(3)), "", ""},
		{"truncated", cifarRecords(3)[:3*3073-1], "9218 bytes is not a whole number of 3073-byte records (2 records and 3072 bytes over)", "records"},
		{"gzip truncated", gz(cifarRecords(3))[:40], "truncated", "records"},
		{"extra", append(cifarRecords(1), 1), "3074 bytes is not a whole number", "records"},
		{"empty", nil, "empty file", "records"},
		{"label", badLabel, "label 10 of record 1 is not in [0, 10)", "labels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			good := writeFile(t, dir, "data_batch_1.bin", cifarRecords(2))
			path := writeFile(t, dir, "data_batch_2.bin", tc.file)
			set, err := datasets.ReadCIFAR10(good, path)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), path+": ") {
					t.Fatalf("error %v, want %q about %s", err, tc.want, path)
				}
				var fe *datasets.FormatError
				if !errors.As(err, &fe) || fe.File != path || fe.Field != tc.field {
					t.Fatalf("error %v (%#v), want a *datasets.FormatError for %s, field %q", err, fe, path, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if set.Len() != 5 {
				t.Fatalf("%d records, want 5", set.Len())
			}
			ex, err := set.Get(4)
			if err != nil {
				t.Fatal(err)
			}
			if ex.Label != 2 || !slices.Equal(ex.Input.Shape(), []int{3, 32, 32}) {
				t.Errorf("record 4: label %d shape %v", ex.Label, ex.Input.Shape())
			}
			// Pixel 1024 is the first of the green plane.
			if got, want := ex.Input.Values()[1024], float64(float32(1024%256)/255); got != want {
				t.Errorf("green pixel 0 = %v, want %v", got, want)
			}
		})
	}
	if _, err := datasets.ReadCIFAR10(); err == nil {
		t.Error("no files: no error")
	}
}

func TestCIFAR10Dir(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "cifar-10-batches-bin")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"} {
		writeFile(t, sub, name, cifarRecords(i+1))
	}
	writeFile(t, sub, "test_batch.bin", cifarRecords(2))
	for _, d := range []string{dir, sub} {
		for train, want := range map[bool]int{true: 15, false: 2} {
			set, err := datasets.CIFAR10(d, train)
			if err != nil {
				t.Fatalf("CIFAR10(%s, train=%v): %v", d, train, err)
			}
			if set.Len() != want {
				t.Errorf("CIFAR10(%s, train=%v): %d records, want %d", d, train, set.Len(), want)
			}
		}
	}
	if _, err := datasets.CIFAR10(t.TempDir(), false); err == nil || !strings.Contains(err.Error(), "test_batch.bin") {
		t.Errorf("empty directory: error %v", err)
	}
}

// Images' fields are public; sizes that disagree with the pixels held are
// an error from Get, not a slice panic.
func TestImagesInconsistent(t *testing.T) {
	tests := []struct {
		name string
		set  datasets.Images
		i    int
		want string
	}{
		{"too few pixels", datasets.Images{Channels: 1, Height: 2, Width: 2, Pixels: make([]uint8, 7), Labels: []int64{0, 1}, Scale: 1},
			1, "image 1 of shape [1 2 2] lies beyond the 7 pixels held"},
		{"no pixels", datasets.Images{Channels: 3, Height: 2, Width: 2, Labels: []int64{0}, Scale: 1}, 0, "image 0 of shape [3 2 2] lies beyond the 0 pixels held"},
		{"zero channels", datasets.Images{Channels: 0, Height: 2, Width: 2, Pixels: make([]uint8, 4), Labels: []int64{0}}, 0, "image 0 of shape [0 2 2]"},
		{"negative size", datasets.Images{Channels: 1, Height: -2, Width: 2, Pixels: make([]uint8, 4), Labels: []int64{0}}, 0, "image 0 of shape [1 -2 2]"},
		{"index past the labels", datasets.Images{Channels: 1, Height: 1, Width: 1, Pixels: make([]uint8, 4), Labels: []int64{0}}, 1, "index 1 out of range [0, 1)"},
		{"negative index", datasets.Images{Channels: 1, Height: 1, Width: 1, Pixels: make([]uint8, 1), Labels: []int64{0}}, -1, "index -1 out of range [0, 1)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex, err := tc.set.Get(tc.i)
			if err == nil || ex.Input != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Get(%d) = %v, %v; want an error containing %q", tc.i, ex.Input, err, tc.want)
			}
		})
	}
	// The image that is complete still loads.
	set := datasets.Images{Channels: 1, Height: 2, Width: 2, Pixels: []uint8{0, 51, 102, 255, 9}, Labels: []int64{3, 4}, Scale: 1.0 / 255}
	ex, err := set.Get(0)
	if err != nil || ex.Label != 3 || ex.Input.Values()[3] != 1 {
		t.Errorf("Get(0) = %v, %v", ex, err)
	}
}

func TestReadersMissingAndCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope-images")
	labels := writeFile(t, dir, "labels", idx(0x801, []uint32{1}, []byte{1}))
	if _, err := datasets.ReadMNIST(missing, labels); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("ReadMNIST of a missing file: %v", err)
	}
	images := writeFile(t, dir, "images", idx(0x803, []uint32{1, 1, 1}, []byte{1}))
	if _, err := datasets.ReadMNIST(images, filepath.Join(dir, "nope-labels")); err == nil || !strings.Contains(err.Error(), "nope-labels") {
		t.Errorf("ReadMNIST of a missing labels file: %v", err)
	}
	// A gzip magic followed by garbage.
	bad := writeFile(t, dir, "bad.gz", []byte{0x1f, 0x8b, 0, 0, 1, 2, 3})
	if _, err := datasets.ReadMNIST(bad, labels); err == nil || !strings.HasPrefix(err.Error(), bad+": gzip") {
		t.Errorf("ReadMNIST of a corrupt gzip file: %v", err)
	}
	if _, err := datasets.ReadCIFAR10(bad); err == nil || !strings.HasPrefix(err.Error(), bad+": gzip") {
		t.Errorf("ReadCIFAR10 of a corrupt gzip file: %v", err)
	}
	if _, err := datasets.ReadCIFAR10(filepath.Join(dir, "nope.bin")); err == nil || !strings.Contains(err.Error(), "nope.bin") {
		t.Errorf("ReadCIFAR10 of a missing file: %v", err)
	}
	// A directory where a file should be.
	if _, err := datasets.ReadCIFAR10(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("ReadCIFAR10 of a directory: %v", err)
	}
	// An IDX file of another element type (0x0D is float32) or rank.
	if _, err := datasets.ReadMNIST(writeFile(t, dir, "f32", idx(0x0d03, []uint32{1, 1, 1}, make([]byte, 4))), labels); err == nil ||
		!strings.Contains(err.Error(), "magic 0x00000d03, want 0x00000803 (images)") {
		t.Errorf("ReadMNIST of float images: %v", err)
	}
	if _, err := datasets.ReadMNIST(writeFile(t, dir, "rank2", idx(0x802, []uint32{1, 1}, []byte{1})), labels); err == nil ||
		!strings.Contains(err.Error(), "magic 0x00000802, want 0x00000803") {
		t.Errorf("ReadMNIST of 2-D images: %v", err)
	}
}

// A header is checked against the data that actually arrives before
// memory is set aside for what it declares.
func TestReadersAllocateWhatTheFileHolds(t *testing.T) {
	// 32768 images of 256×256 bytes: the most an IDX header may declare.
	header := idx(0x803, []uint32{32768, 256, 256}, nil)
	// 190 MB of zeros compress to 180 KB.
	var bomb bytes.Buffer
	w, _ := gzip.NewWriterLevel(&bomb, gzip.BestSpeed)
	if _, err := io.CopyN(w, zeros{}, 62_000*3073); err != nil {
		t.Fatal(err)
	}
	w.Close()
	tests := []struct {
		name     string
		file     []byte
		read     func(path string) error
		want     string
		maxAlloc uint64
	}{
		{"MNIST header alone", header, func(path string) error {
			_, err := datasets.ReadMNIST(path, path)
			return err
		}, "truncated: 0 of 2147483648 data bytes", 1 << 20},
		{"MNIST gzip with a little data", gz(append(slices.Clone(header), make([]byte, 1<<20)...)), func(path string) error {
			_, err := datasets.ReadMNIST(path, path)
			return err
		}, "truncated: 1048576 of 2147483648 data bytes", 4 << 20},
		// Reading stops after the 60,000 records of the whole data set, at
		// no more than twice their size; a 2 GB stream cost 2.6 GB.
		{"CIFAR gzip bomb", bomb.Bytes(), func(path string) error {
			_, err := datasets.ReadCIFAR10(path)
			return err
		}, "more than 60000 records of 3073 bytes", 2 * 60_000 * 3073},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "data", tc.file)
			var err error
			got := datasets.Allocated(func() { err = tc.read(path) })
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), path+": ") {
				t.Fatalf("error %v, want %q about %s", err, tc.want, path)
			}
			if got > tc.maxAlloc {
				t.Errorf("allocated %d bytes, want at most %d", got, tc.maxAlloc)
			}
		})
	}
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
