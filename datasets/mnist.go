package datasets

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/kilnml/kiln/internal/shape"
)

// IDX magic numbers: two zero bytes, the element type (0x08, unsigned
// byte) and the number of dimensions.
const (
	idxImagesMagic = 0x00000803
	idxLabelsMagic = 0x00000801
)

// maxIDXBytes bounds the data a header may announce, so that a corrupt
// header gives an error instead of a huge allocation.
const maxIDXBytes = 1 << 31

// MNIST reads the MNIST training set (train is true) or test set from dir,
// which holds the four files as distributed, gzipped or not:
// train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte
// and t10k-labels-idx1-ubyte, each optionally ending in .gz.
// Fashion-MNIST and KMNIST use the same names and format. Images are
// [1, 28, 28] with pixels scaled to [0, 1].
func MNIST(dir string, train bool) (*Images, error) {
	prefix := "t10k"
	if train {
		prefix = "train"
	}
	images, err := findFile(dir, prefix+"-images-idx3-ubyte")
	if err != nil {
		return nil, err
	}
	labels, err := findFile(dir, prefix+"-labels-idx1-ubyte")
	if err != nil {
		return nil, err
	}
	return ReadMNIST(images, labels)
}

// findFile returns the path of name or name.gz in dir.
func findFile(dir, name string) (string, error) {
	for _, p := range []string{name, name + ".gz"} {
		path := filepath.Join(dir, p)
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("datasets: neither %s nor %s.gz is in %s", name, name, dir)
}

// ReadMNIST reads an images file and a labels file in the IDX format of
// the MNIST distribution, each plain or gzip-compressed (told apart by
// their first bytes). It checks the magic numbers, that the data is
// neither truncated nor followed by extra bytes, that both files count the
// same number of examples and that every label is a digit. Pixels are
// scaled to [0, 1]; images have shape [1, rows, cols].
func ReadMNIST(imagesPath, labelsPath string) (*Images, error) {
	dims, pixels, err := readIDX(imagesPath, idxImagesMagic, "images")
	if err != nil {
		return nil, err
	}
	if dims[1] == 0 || dims[2] == 0 {
		return nil, formatError(imagesPath, "dimensions", "images of %d×%d pixels", dims[1], dims[2])
	}
	ldims, raw, err := readIDX(labelsPath, idxLabelsMagic, "labels")
	if err != nil {
		return nil, err
	}
	if ldims[0] != dims[0] {
		return nil, formatError(labelsPath, "dimensions", "%d labels, but %s has %d images", ldims[0], imagesPath, dims[0])
	}
	labels, err := checkLabels(labelsPath, raw, 10)
	if err != nil {
		return nil, err
	}
	return &Images{Channels: 1, Height: dims[1], Width: dims[2], Pixels: pixels,
		Labels: labels, Classes: 10, Scale: 1.0 / 255}, nil
}

// checkLabels converts one-byte labels, checking each is below classes.
func checkLabels(path string, raw []byte, classes int) ([]int64, error) {
	labels := make([]int64, len(raw))
	for k, v := range raw {
		if int(v) >= classes {
			return nil, formatError(path, "labels", "label %d of example %d is not in [0, %d)", v, k, classes)
		}
		labels[k] = int64(v)
	}
	return labels, nil
}

// readIDX reads an IDX file of unsigned bytes whose magic must be magic,
// returning its dimensions and data. what names the expected content in
// errors.
func readIDX(path string, magic uint32, what string) ([]int, []byte, error) {
	f, r, err := openData(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()

	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, nil, readError(path, "magic number", err)
	}
	if got := binary.BigEndian.Uint32(head[:]); got != magic {
		return nil, nil, formatError(path, "magic number", "magic 0x%08x, want 0x%08x (%s)", got, magic, what)
	}
	dims := make([]int, magic&0xff)
	for i := range dims {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return nil, nil, readError(path, "dimensions", err)
		}
		dims[i] = int(binary.BigEndian.Uint32(head[:]))
	}
	size, err := shape.Numel(dims)
	if err != nil || size > maxIDXBytes {
		return nil, nil, formatError(path, "dimensions", "dimensions %v announce more than %d bytes", dims, maxIDXBytes)
	}
	data, err := readAtMost(r, size)
	if err != nil {
		return nil, nil, readError(path, "data", err)
	}
	if len(data) < size {
		return nil, nil, formatError(path, "data", "truncated: %d of %d data bytes for dimensions %v", len(data), size, dims)
	}
	if err := expectEOF(path, r); err != nil {
		return nil, nil, err
	}
	return dims, data, nil
}

// openData opens path and returns a reader of its contents, decompressed
// when the file starts with the gzip magic bytes.
func openData(path string) (io.Closer, io.Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(f, 1<<16)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, nil, formatError(path, "gzip header", "gzip: %w", err)
		}
		return f, zr, nil
	}
	return f, br, nil
}

// readChunk is the first allocation of readAtMost.
const readChunk = 1 << 16

// readAtMost reads r until it ends or n bytes have come. The buffer starts
// at readChunk and doubles as data arrives, never past n: n comes from a
// header or a bound, and neither a truncated file nor a gzip stream can be
// checked against it before reading, so what is allocated follows what
// the file holds, not what it claims.
func readAtMost(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, 0, min(n, readChunk))
	for len(b) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(len(b), n-len(b)))
		}
		m, err := r.Read(b[len(b):min(cap(b), n)])
		b = b[:len(b)+m]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// expectEOF checks that r has nothing left. For a gzip stream reaching the
// end also verifies its checksum.
func expectEOF(path string, r io.Reader) error {
	var b [1]byte
	n, err := io.ReadFull(r, b[:])
	switch {
	case n > 0:
		return formatError(path, "end of file", "unexpected bytes after the data")
	case errors.Is(err, io.EOF):
		return nil
	}
	return readError(path, "end of file", err)
}

// readError describes a failure to read part of a file.
func readError(path, part string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return formatError(path, part, "truncated in the %s", part)
	}
	return formatError(path, part, "reading the %s: %w", part, err)
}
