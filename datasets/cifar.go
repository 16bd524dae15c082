package datasets

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// CIFAR-10 binary records: one label byte, then a 32×32 image as three
// colour planes (red, green, blue).
const (
	cifarSide   = 32
	cifarPixels = 3 * cifarSide * cifarSide
	cifarRecord = 1 + cifarPixels
)

// maxCIFARRecords bounds the records one batch file may hold: the real
// ones hold 10,000, and 60,000 is the whole data set, train and test, in
// one file (184 MB). Reading stops there, so a wrong file or a gzip bomb
// costs no more memory than the largest true file.
const maxCIFARRecords = 60_000

// CIFAR10 reads the CIFAR-10 training set (data_batch_1.bin to
// data_batch_5.bin, when train is true) or test set (test_batch.bin) of
// the binary distribution from dir, or from dir/cifar-10-batches-bin where
// the archive unpacks. Images are [3, 32, 32] with pixels scaled to [0, 1].
func CIFAR10(dir string, train bool) (*Images, error) {
	names := []string{"test_batch.bin"}
	if train {
		names = []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"}
	}
	sub := filepath.Join(dir, "cifar-10-batches-bin")
	if _, err := os.Stat(filepath.Join(dir, names[0])); err != nil {
		if _, err := os.Stat(filepath.Join(sub, names[0])); err == nil {
			dir = sub
		}
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, n)
	}
	return ReadCIFAR10(paths...)
}

// ReadCIFAR10 reads and concatenates CIFAR-10 binary batch files, each
// plain or gzip-compressed. Every file must hold a whole, non-zero number
// of 3,073-byte records whose labels are in [0, 10).
func ReadCIFAR10(paths ...string) (*Images, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("datasets: ReadCIFAR10 needs at least one file")
	}
	set := &Images{Channels: 3, Height: cifarSide, Width: cifarSide, Classes: 10, Scale: 1.0 / 255}
	for _, path := range paths {
		if err := readCIFARBatch(path, set); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// readCIFARBatch appends the records of one batch file to set.
func readCIFARBatch(path string, set *Images) error {
	f, r, err := openData(path)
	if err != nil {
		return err
	}
	defer f.Close()
	raw, err := readAtMost(r, maxCIFARRecords*cifarRecord+1)
	if err != nil {
		return readError(path, "records", err)
	}
	switch {
	case len(raw) > maxCIFARRecords*cifarRecord:
		return formatError(path, "records", "more than %d records of 3073 bytes; not a CIFAR-10 batch", maxCIFARRecords)
	case len(raw) == 0:
		return formatError(path, "records", "empty file, want 3073-byte records")
	case len(raw)%cifarRecord != 0:
		return formatError(path, "records", "%d bytes is not a whole number of 3073-byte records (%d records and %d bytes over)",
			len(raw), len(raw)/cifarRecord, len(raw)%cifarRecord)
	}
	n := len(raw) / cifarRecord
	set.Pixels = slices.Grow(set.Pixels, n*cifarPixels)
	for k := range n {
		rec := raw[k*cifarRecord : (k+1)*cifarRecord]
		if rec[0] >= 10 {
			return formatError(path, "labels", "label %d of record %d is not in [0, 10)", rec[0], k)
		}
		set.Labels = append(set.Labels, int64(rec[0]))
		set.Pixels = append(set.Pixels, rec[1:]...)
	}
	return nil
}
