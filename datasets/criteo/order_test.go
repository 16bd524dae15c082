package criteo_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/kilnml/kiln/datasets/criteo"
)

// TestPermutation checks that a Permutation is a bijection of [0, n) for
// sizes around and between powers of two, fixed by its seed, and that
// seeds differ.
func TestPermutation(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 64, 65, 1000, 1 << 12, 100003} {
		var orders [][]int
		for _, seed := range []uint64{1, 2} {
			p := criteo.NewPermutation(n, seed)
			if p.Len() != n {
				t.Fatalf("n %d: Len %d", n, p.Len())
			}
			seen := make([]bool, n)
			order := make([]int, n)
			for i := range n {
				j := p.At(i)
				if j < 0 || j >= n || seen[j] {
					t.Fatalf("n %d seed %d: At(%d) = %d, out of range or repeated", n, seed, i, j)
				}
				seen[j], order[i] = true, j
			}
			again := criteo.NewPermutation(n, seed)
			for i := range n {
				if again.At(i) != order[i] {
					t.Fatalf("n %d seed %d: At(%d) differs between two permutations of one seed", n, seed, i)
				}
			}
			if n >= 7 && slices.IsSorted(order) {
				t.Errorf("n %d seed %d: the identity", n, seed)
			}
			orders = append(orders, order)
		}
		if n >= 7 && slices.Equal(orders[0], orders[1]) {
			t.Errorf("n %d: seeds 1 and 2 give one order", n)
		}
	}
}

// oldUniform is the sub-sampling draw of Select, written out: SplitMix64
// of (seed, i) as a float64 in [0, 1).
func oldUniform(seed, i uint64) float64 {
	z := seed + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// collect gathers an iteration's lines.
func collect(t *testing.T, o *criteo.Order, from int) []int {
	t.Helper()
	var out []int
	for i, err := range o.Lines(from) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, i)
	}
	return out
}

// TestOrder checks the lazy training order over day files: the kept lines
// are those of the sub-sampling rule (all positives, the negatives whose
// draw is at least the rate), each once per epoch; Len counts them; none
// is file order, day keeps the days in order, total mixes them; starting
// from the k-th line, lines or batches, gives the iteration from 0 without
// its first k; and an Index over the same lines in one file, in memory,
// gives the same order.
func TestOrder(t *testing.T) {
	dir := t.TempDir()
	sizes := []int{300, 0, 257, 400, 1, 333, 120}
	writeDays(t, dir, sizes)
	var files []string
	for d := range sizes {
		files = append(files, filepath.Join(dir, "day_"+strconv.Itoa(d)))
	}
	s, err := criteo.OpenDays(files, criteo.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp := s.Split()
	days := sp.Days[:len(sp.Days)-1]
	dayOf := func(i int) int {
		for d, r := range days {
			if i >= r.Start && i < r.End {
				return d
			}
		}
		t.Fatalf("line %d in no training day", i)
		return -1
	}
	data, err := os.ReadFile(filepath.Join(dir, "all.txt"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := criteo.Scan(bytes.NewReader(data), criteo.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rate := range []float64{0, 0.3, 0.7, 1} {
		var want []int // the old rule, in file order
		for i := sp.Train.Start; i < sp.Train.End; i++ {
			if mustLabel(t, s, i) == 1 || oldUniform(9, uint64(i)) >= rate {
				want = append(want, i)
			}
		}
		if sel := mustSelect(t, s, sp.Train, rate, 9); !slices.Equal(sel, want) {
			t.Fatalf("rate %v: Select keeps %d lines, the rule %d", rate, len(sel), len(want))
		}
		for _, mode := range []string{criteo.RandomizeTotal, criteo.RandomizeDay, criteo.RandomizeNone} {
			name := fmt.Sprintf("rate %v %s", rate, mode)
			o, err := s.Order(days, rate, 9, mode)
			if err != nil {
				t.Fatal(err)
			}
			got := collect(t, o, 0)
			if o.Len() != len(want) || len(got) != len(want) {
				t.Fatalf("%s: Len %d, %d lines iterated, want %d", name, o.Len(), len(got), len(want))
			}
			if !slices.Equal(slices.Sorted(slices.Values(got)), want) {
				t.Fatalf("%s: not the kept lines, each once", name)
			}
			if inOrder := slices.Equal(got, want); inOrder != (mode == criteo.RandomizeNone) {
				t.Errorf("%s: in file order %v", name, inOrder)
			}
			if mode == criteo.RandomizeDay {
				for k := 1; k < len(got); k++ {
					if dayOf(got[k]) < dayOf(got[k-1]) {
						t.Fatalf("%s: line %d (day %d) after line %d (day %d)", name, got[k], dayOf(got[k]), got[k-1], dayOf(got[k-1]))
					}
				}
			}
			again, err := s.Order(days, rate, 9, mode)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(collect(t, again, 0), got) {
				t.Errorf("%s: two orders of one seed differ", name)
			}
			if other, _ := s.Order(days, rate, 10, mode); mode != criteo.RandomizeNone && rate < 1 && slices.Equal(collect(t, other, 0), got) {
				t.Errorf("%s: seeds 9 and 10 give one order", name)
			}
			one, err := all.Order(bytes.NewReader(data), days, rate, 9, mode)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(collect(t, one, 0), got) {
				t.Errorf("%s: an in-memory Index of the same lines gives another order", name)
			}
			for _, k := range []int{1, 17, len(got) / 2, len(got) - 1, len(got), len(got) + 5} {
				if from := collect(t, o, k); !slices.Equal(from, got[min(k, len(got)):]) {
					t.Fatalf("%s: from line %d: %d lines, not the iteration's last %d", name, k, len(from), len(got)-min(k, len(got)))
				}
			}
			const bs = 64
			for _, skip := range []int{0, 1, 5, len(got) / bs} {
				var a, b []*criteo.Batch
				for x, err := range o.Batches(bs, skip*bs) {
					if err != nil {
						t.Fatal(err)
					}
					a = append(a, x)
				}
				for x, err := range s.Batches(got[min(skip*bs, len(got)):], bs) {
					if err != nil {
						t.Fatal(err)
					}
					b = append(b, x)
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("%s: batches from batch %d: %d, want %d equal to those of the line list", name, skip, len(a), len(b))
				}
			}
		}
	}
	if _, err := s.Order(days, 0, 1, "weekly"); err == nil {
		t.Errorf("mode weekly: no error")
	}
	if _, err := s.Order([]criteo.Range{{0, 10}, {20, 30}}, 0, 1, criteo.RandomizeNone); err == nil {
		t.Errorf("days with a gap: no error")
	}
	if _, err := s.Order([]criteo.Range{{0, s.Len() + 1}}, 0, 1, criteo.RandomizeNone); err == nil {
		t.Errorf("a day past the last line: no error")
	}
	o, _ := s.Order(days, 0, 1, criteo.RandomizeNone)
	for _, err := range o.Batches(0, 0) {
		if err == nil {
			t.Errorf("batch size 0: no error")
		}
	}
}

// writeFlat writes n lines whose values come from small fixed sets (so
// that any file of a few thousand lines has every value: the same
// dictionaries at any n), a third of them positive.
func writeFlat(t testing.TB, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	var line []byte
	for i := range n {
		line = strconv.AppendInt(line[:0], int64(b2i(i%3 == 0)), 10)
		for j := range criteo.NumDense {
			line = append(line, '\t')
			line = strconv.AppendInt(line, int64((i+j)%10), 10)
		}
		for j := range criteo.NumSparse {
			line = append(line, '\t')
			line = strconv.AppendUint(line, uint64((i*7+j*13)%50), 16)
		}
		line = append(line, '\n')
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestOrderMemory is issue 19's memory check: opening a file of N lines
// and of 10·N (the same dictionaries), ordering its training lines (rate
// 0.5, total) and reading a few batches takes heap that does not grow
// with the number of lines.
func TestOrderMemory(t *testing.T) {
	const n = 20000
	dir := t.TempDir()
	used := map[bool][]int64{}
	for _, lines := range []int{n, 10 * n} {
		path := filepath.Join(dir, fmt.Sprintf("train%d.txt", lines))
		writeFlat(t, path, lines)
		// The first open scans; measure one that reads the sidecar, as
		// every later run does, and one that scans.
		for _, rescan := range []bool{true, false} {
			if rescan {
				os.Remove(path + criteo.SidecarSuffix)
			}
			before := heapInUse()
			s, err := criteo.OpenKaggle(path, criteo.ScanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sp := s.Split()
			o, err := s.Order(sp.Days[:len(sp.Days)-1], 0.5, 3, criteo.RandomizeTotal)
			if err != nil {
				t.Fatal(err)
			}
			if o.Len() < sp.Train.Len()/2 || o.Len() >= sp.Train.Len() {
				t.Fatalf("%d lines: kept %d of %d training lines at rate 0.5 with a third positive", lines, o.Len(), sp.Train.Len())
			}
			read := 0
			for b, err := range o.Batches(256, 1000) {
				if err != nil {
					t.Fatal(err)
				}
				if read += b.Size(); read >= 3*256 {
					break
				}
			}
			after := heapInUse()
			runtime.KeepAlive(o)
			used[rescan] = append(used[rescan], int64(after)-int64(before))
			t.Logf("%d lines (scan %v): heap %d bytes, %.3f bytes a line", lines, rescan, int64(after)-int64(before), float64(int64(after)-int64(before))/float64(lines))
			s.Close()
		}
	}
	// The old index took about 20 bytes a line here: 3.6 MB more for the
	// larger file.
	for rescan, u := range used {
		if grow := u[1] - u[0]; grow > 128<<10 {
			t.Errorf("scan %v: heap in use grew by %d bytes from %d to %d lines (%d -> %d)", rescan, grow, n, 10*n, u[0], u[1])
		}
	}
}
