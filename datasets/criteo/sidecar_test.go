package criteo_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln/datasets/criteo"
)

// sameIndex fails unless a and b describe the same lines, labels,
// dictionaries and bad lines.
func sameIndex(t *testing.T, a, b *criteo.Index) {
	t.Helper()
	if a.Len() != b.Len() || a.Counts() != b.Counts() || a.MaxIndRange() != b.MaxIndRange() {
		t.Fatalf("lines %d/%d, counts %v/%v, max index range %d/%d", a.Len(), b.Len(), a.Counts(), b.Counts(), a.MaxIndRange(), b.MaxIndRange())
	}
	for i := range a.Len() {
		ao, an := mustOffset(t, a, i)
		bo, bn := mustOffset(t, b, i)
		if ao != bo || an != bn || mustLabel(t, a, i) != mustLabel(t, b, i) {
			t.Fatalf("line %d: offset %d/%d, length %d/%d, label %d/%d", i, ao, bo, an, bn, mustLabel(t, a, i), mustLabel(t, b, i))
		}
	}
	ac, af := a.BadLines()
	bc, bf := b.BadLines()
	if ac != bc || !slices.Equal(af, bf) {
		t.Fatalf("bad lines %d %v / %d %v", ac, af, bc, bf)
	}
}

// copyFile copies testdata/name into dir and returns its path.
func copyFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestIndexRoundTrip writes indexes (with and without skipped bad lines
// and a max index range) and reads them back, ids included.
func TestIndexRoundTrip(t *testing.T) {
	for _, c := range []struct {
		file string
		opts criteo.ScanOptions
	}{
		{"sample.txt", criteo.ScanOptions{}},
		{"sample.txt", criteo.ScanOptions{MaxIndRange: 7}},
		{"bad.txt", criteo.ScanOptions{SkipBadLines: true}},
		{"planted.txt", criteo.ScanOptions{}},
	} {
		f, err := os.Open(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		ix, err := criteo.Scan(f, c.opts)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		n, err := ix.WriteTo(&buf)
		if err != nil || n != int64(buf.Len()) {
			t.Fatalf("%s: WriteTo = %d, %v; wrote %d bytes", c.file, n, err, buf.Len())
		}
		back, err := criteo.ReadIndex(&buf)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		sameIndex(t, ix, back)
		for v := range uint32(1 << 12) {
			for tab := range criteo.NumSparse {
				a, aok := ix.ID(tab, v)
				b, bok := back.ID(tab, v)
				if a != b || aok != bok {
					t.Fatalf("%s: table %d value %d: id %d %v / %d %v", c.file, tab, v, a, aok, b, bok)
				}
			}
		}
	}
}

// TestReadIndexErrors checks that damaged and truncated sidecars and
// other files are refused with ErrBadSidecar.
func TestReadIndexErrors(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "sample.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := criteo.Scan(f, criteo.ScanOptions{})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := ix.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	flipped := slices.Clone(good)
	flipped[len(flipped)/2] ^= 1
	// The records end, the last field before the checksum, gives the
	// line count.
	foot := len(good) - 32 - 8
	huge := slices.Clone(good)
	copy(huge[foot:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	misaligned := slices.Clone(good)
	misaligned[foot]++
	short := slices.Clone(good)
	short[foot] -= 12 // one record fewer
	old := slices.Clone(good)
	old[8] = 1 // version 1: the records in separate arrays
	linesField := 37 + 12*ix.Len()
	lines := slices.Clone(good)
	lines[linesField]++ // a line count that disagrees with the records
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"a data file", []byte("0\t1\t2\n")},
		{"truncated", good[:len(good)-40]},
		{"no checksum", good[:len(good)-32]},
		{"a flipped bit", flipped},
		{"a huge line count", huge},
		{"a records end between records", misaligned},
		{"a records end one record short", short},
		{"a line count other than the records'", lines},
		{"version 1", old},
		{"a trailing byte", append(slices.Clone(good), 0)},
	} {
		if _, err := criteo.ReadIndex(bytes.NewReader(c.data)); !errors.Is(err, criteo.ErrBadSidecar) {
			t.Errorf("%s: error %v, want ErrBadSidecar", c.name, err)
		}
	}
	if _, err := criteo.ReadIndex(bytes.NewReader(old)); err == nil || !strings.Contains(err.Error(), "version 1") {
		t.Errorf("version 1: %v, want an error naming the version", err)
	}
}

// TestScanFileSidecar checks that ScanFile writes a sidecar, reads it
// back while the file and options are unchanged, and scans again when
// either changes or the sidecar is damaged.
func TestScanFileSidecar(t *testing.T) {
	dir := t.TempDir()
	path := copyFile(t, dir, "sample.txt")
	first, err := criteo.ScanFile(path, criteo.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	side := path + criteo.SidecarSuffix
	if _, err := os.Stat(side); err != nil {
		t.Fatalf("no sidecar: %v", err)
	}
	// The Index reads its records from the sidecar: the same as Scan's,
	// in memory, and as that of a second open.
	mem, err := criteo.Scan(bytes.NewReader(mustRead(t, path)), criteo.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameIndex(t, first, mem)
	var buf bytes.Buffer
	if _, err := first.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if back, err := criteo.ReadIndex(&buf); err != nil {
		t.Errorf("WriteTo of a file-backed Index: %v", err)
	} else {
		sameIndex(t, back, mem)
	}
	reopened, err := criteo.ScanFile(path, criteo.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameIndex(t, reopened, mem)
	if err := reopened.Close(); err != nil {
		t.Error(err)
	}
	// Old-version and truncated sidecars are scanned over and rewritten.
	good := mustRead(t, side)
	for _, bad := range [][]byte{append(slices.Clone(good[:8]), append([]byte{1}, good[9:]...)...), good[:len(good)-50], good[:20]} {
		if err := os.WriteFile(side, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		ix, err := criteo.ScanFile(path, criteo.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameIndex(t, ix, mem)
		if !bytes.Equal(mustRead(t, side), good) {
			t.Errorf("a bad sidecar of %d bytes was not rewritten", len(bad))
		}
		ix.Close()
	}
	// Change a label in place, keeping the size and time: the sidecar
	// still stands for the file, so its (old) label is what comes back.
	data, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	flipped := slices.Clone(data)
	flipped[0] ^= '0' ^ '1'
	os.WriteFile(path, flipped, 0o644)
	os.Chtimes(path, fi.ModTime(), fi.ModTime())
	again, err := criteo.ScanFile(path, criteo.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameIndex(t, first, again)

	// Another time: the sidecar is stale and the new label is read.
	later := fi.ModTime().Add(time.Second)
	os.Chtimes(path, later, later)
	rescanned, err := criteo.ScanFile(path, criteo.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mustLabel(t, rescanned, 0) == mustLabel(t, first, 0) {
		t.Errorf("a changed file kept the sidecar's label %d", mustLabel(t, first, 0))
	}
	// Other options scan again too.
	folded, err := criteo.ScanFile(path, criteo.ScanOptions{MaxIndRange: 5})
	if err != nil {
		t.Fatal(err)
	}
	if folded.MaxIndRange() != 5 || folded.Counts()[0] > 5 {
		t.Errorf("max index range 5 gave %d and counts %v", folded.MaxIndRange(), folded.Counts())
	}
	// A damaged sidecar is scanned over.
	sc, _ := os.ReadFile(side)
	sc[len(sc)/2] ^= 1
	os.WriteFile(side, sc, 0o644)
	if ix, err := criteo.ScanFile(path, criteo.ScanOptions{MaxIndRange: 5}); err != nil || ix.Len() != folded.Len() {
		t.Errorf("damaged sidecar: %v", err)
	}
	if _, err := criteo.ReadIndex(bytes.NewReader(mustRead(t, side))); err != nil {
		t.Errorf("the sidecar was not rewritten after the damage: %v", err)
	}
	// A bad line still fails the scan, naming the file.
	bad := copyFile(t, dir, "bad.txt")
	if _, err := criteo.ScanFile(bad, criteo.ScanOptions{}); !errors.Is(err, criteo.ErrBadLine) {
		t.Errorf("bad.txt: %v, want a bad-line error", err)
	}
	if _, err := os.Stat(bad + criteo.SidecarSuffix); err == nil {
		t.Errorf("a failed scan left a sidecar")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestShuffle checks dlrm's three training orders: a permutation of all
// lines, permutations within each day with the days in order, and file
// order; and that the seed fixes the order.
func TestShuffle(t *testing.T) {
	split := criteo.KaggleSplit(700)
	base := make([]int, 0, 600)
	for i := range 600 {
		if i%3 != 1 { // as Select leaves gaps
			base = append(base, i)
		}
	}
	for _, mode := range []string{criteo.RandomizeTotal, criteo.RandomizeDay, criteo.RandomizeNone} {
		a, b := slices.Clone(base), slices.Clone(base)
		if err := criteo.Shuffle(a, split.Days[:6], mode, 5); err != nil {
			t.Fatal(err)
		}
		criteo.Shuffle(b, split.Days[:6], mode, 5)
		if !slices.Equal(a, b) {
			t.Errorf("%s: two shuffles with one seed differ", mode)
		}
		sorted := slices.Sorted(slices.Values(a))
		if !slices.Equal(sorted, base) {
			t.Fatalf("%s: not a permutation of the lines", mode)
		}
		inOrder := slices.Equal(a, base)
		if inOrder != (mode == criteo.RandomizeNone) {
			t.Errorf("%s: in file order %v", mode, inOrder)
		}
		if mode == criteo.RandomizeDay {
			day := func(l int) int { return l / 100 }
			for i := 1; i < len(a); i++ {
				if day(a[i]) < day(a[i-1]) {
					t.Fatalf("day: line %d (day %d) after line %d (day %d)", a[i], day(a[i]), a[i-1], day(a[i-1]))
				}
			}
		}
	}
	if err := criteo.Shuffle(base, nil, "weekly", 1); err == nil || !strings.Contains(err.Error(), `"weekly"`) {
		t.Errorf("unknown mode: %v", err)
	}
}

// TestIndexAccessorErrors: a line out of range, or a sidecar that can no
// longer be read, is an error of Label, Offset and Select, not a panic.
func TestIndexAccessorErrors(t *testing.T) {
	ix, err := criteo.ScanFile(copyFile(t, t.TempDir(), "sample.txt"), criteo.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Label(-1); err == nil {
		t.Error("Label(-1): no error")
	}
	if _, _, err := ix.Offset(ix.Len()); err == nil {
		t.Errorf("Offset(%d) of %d lines: no error", ix.Len(), ix.Len())
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Label(0); err == nil {
		t.Error("Label after Close: no error")
	}
	if _, err := ix.Select(criteo.Range{Start: 0, End: ix.Len()}, 0.5, 1); err == nil {
		t.Error("Select after Close: no error")
	}
}
