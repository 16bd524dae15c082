package criteo_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnml/kiln/datasets/criteo"
)

// line builds a Kaggle line from a label and sparse overrides of the other
// fields (key 1..13: I1..I13, 14..39: C1..C26); the rest are empty.
func line(label string, set map[int]string) string {
	f := make([]string, criteo.NumFields)
	f[0] = label
	for k, v := range set {
		f[k] = v
	}
	return strings.Join(f, "\t") + "\n"
}

func logp1(x int64) float32 { return float32(math.Log(float64(float32(x) + 1))) }

func TestParseLine(t *testing.T) {
	tests := []struct {
		name   string
		line   string
		m      int
		label  float32
		dense  map[int]float32 // index 0..12
		sparse map[int]uint32  // index 0..25
	}{
		{"all empty", line("0", nil), 0, 0, map[int]float32{0: 0, 12: 0}, map[int]uint32{0: 0, 25: 0}},
		{"label 1", line("1", nil), 0, 1, nil, nil},
		{"integers", line("0", map[int]string{1: "0", 2: "1", 3: "999", 13: "2147483647"}), 0, 0,
			map[int]float32{0: 0, 1: float32(math.Log(2)), 2: float32(math.Log(1000)), 12: logp1(2147483647)}, nil},
		{"negatives clip to 0", line("0", map[int]string{1: "-1", 5: "-2147483648"}), 0, 0,
			map[int]float32{0: 0, 4: 0}, nil},
		{"hex", line("0", map[int]string{14: "ff", 15: "FFFFFFFF", 39: "05db9164"}), 0, 0, nil,
			map[int]uint32{0: 255, 1: 0xffffffff, 25: 0x05db9164}},
		{"max-ind-range", line("0", map[int]string{14: "ffffffff", 15: "3e8", 16: ""}), 1000, 0, nil,
			map[int]uint32{0: 0xffffffff % 1000, 1: 0, 2: 0}},
		{"CRLF and no newline", strings.TrimSuffix(line("1", map[int]string{13: "3", 39: "a"}), "\n") + "\r\n", 0, 1,
			map[int]float32{12: float32(math.Log(4))}, map[int]uint32{25: 10}},
		{"no trailing newline", strings.TrimSuffix(line("0", map[int]string{39: "b"}), "\n"), 0, 0, nil, map[int]uint32{25: 11}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s criteo.Sample
			if err := criteo.ParseLine([]byte(tc.line), tc.m, &s); err != nil {
				t.Fatal(err)
			}
			if s.Label != tc.label {
				t.Errorf("label %v, want %v", s.Label, tc.label)
			}
			for i, want := range tc.dense {
				if s.Dense[i] != want {
					t.Errorf("I%d = %v, want %v", i+1, s.Dense[i], want)
				}
			}
			for i, want := range tc.sparse {
				if s.Sparse[i] != want {
					t.Errorf("C%d = %d, want %d", i+1, s.Sparse[i], want)
				}
			}
		})
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
}

// badCases are the bad lines of testdata/bad.txt (lines 1 and 8 are good).
var badCases = []struct {
	line  int
	field string
	msg   string
	cause error
}{
	{2, "count", "bad.txt:2: field count: 39 fields, want 40", nil},
	{3, "label", `bad.txt:3: field label: label "2", want 0 or 1`, nil},
	{4, "I3", `bad.txt:4: field I3: strconv.ParseInt: parsing "x12": invalid syntax`, strconv.ErrSyntax},
	{5, "C7", `bad.txt:5: field C7: "zz" is not hexadecimal`, nil},
	{6, "C26", `bad.txt:6: field C26: "123456789" has 9 hex digits, at most 8 allowed`, nil},
	{7, "I13", `bad.txt:7: field I13: strconv.ParseInt: parsing "1.5": invalid syntax`, strconv.ErrSyntax},
}

func TestBadLines(t *testing.T) {
	lines := readLines(t, "testdata/bad.txt")
	for _, tc := range badCases {
		t.Run(tc.field, func(t *testing.T) {
			// Keep this bad line where it is; replace the others with good ones.
			in := slices.Clone(lines)
			for _, o := range badCases {
				if o.line != tc.line {
					in[o.line-1] = lines[0]
				}
			}
			_, err := criteo.Scan(strings.NewReader(strings.Join(in, "")), criteo.ScanOptions{File: "bad.txt"})
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.msg {
				t.Errorf("error %q,\nwant  %q", err, tc.msg)
			}
			if !errors.Is(err, criteo.ErrBadLine) {
				t.Error("errors.Is(err, ErrBadLine) is false")
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("errors.Is(err, %v) is false", tc.cause)
			}
			var le *criteo.LineError
			if !errors.As(err, &le) || le.File != "bad.txt" || le.Line != tc.line || le.Field != tc.field {
				t.Errorf("LineError %+v, want bad.txt line %d field %s", le, tc.line, tc.field)
			}
		})
	}
	// Unchanged, the file fails at its first bad line.
	f, err := os.Open("testdata/bad.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := criteo.Scan(f, criteo.ScanOptions{File: "bad.txt"}); err == nil || err.Error() != badCases[0].msg {
		t.Errorf("scan of bad.txt: %v, want %s", err, badCases[0].msg)
	}
}

func TestSkipBadLines(t *testing.T) {
	f, err := os.Open("testdata/bad.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ix, err := criteo.Scan(f, criteo.ScanOptions{File: "bad.txt", SkipBadLines: true})
	if err != nil {
		t.Fatal(err)
	}
	n, first := ix.BadLines()
	if ix.Len() != 2 || n != 6 || !slices.Equal(first, []int{2, 3, 4, 5, 6, 7}) {
		t.Errorf("Len %d, bad %d %v; want 2, 6 [2 3 4 5 6 7]", ix.Len(), n, first)
	}
	if off, l := mustOffset(t, ix, 1); off+int64(l) != mustSize(t, "testdata/bad.txt") {
		t.Errorf("last good line ends at %d", off+int64(l))
	}

	// Fifteen bad lines among good ones: all counted, the first ten kept.
	var b strings.Builder
	var want []int
	for i := 1; i <= 40; i++ {
		if i%2 == 0 && len(want) < 15 {
			b.WriteString("2" + line("", nil)) // label "2"
			want = append(want, i)
		} else {
			b.WriteString(line("1", nil))
		}
	}
	ix, err = criteo.Scan(strings.NewReader(b.String()), criteo.ScanOptions{File: "x", SkipBadLines: true})
	if err != nil {
		t.Fatal(err)
	}
	n, first = ix.BadLines()
	if n != 15 || !slices.Equal(first, want[:10]) || ix.Len() != 25 {
		t.Errorf("bad %d %v, Len %d; want 15 %v, 25", n, first, ix.Len(), want[:10])
	}
}

func mustSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestDictionary(t *testing.T) {
	in := line("0", map[int]string{14: "b", 15: "1"}) +
		line("1", map[int]string{14: "a", 15: "1"}) +
		line("0", map[int]string{14: "b", 15: "2"}) +
		line("0", map[int]string{14: "c", 15: "0b"})
	tests := []struct {
		m       int
		c1, c2  map[uint32]int32
		counts2 int
	}{
		{0, map[uint32]int32{0xb: 0, 0xa: 1, 0xc: 2}, map[uint32]int32{1: 0, 2: 1, 0xb: 2}, 3},
		{10, map[uint32]int32{1: 0, 0: 1, 2: 2}, map[uint32]int32{1: 0, 2: 1}, 2}, // b%10=1 a%10=0 c%10=2; 0b%10=1
	}
	for _, tc := range tests {
		ix, err := criteo.Scan(strings.NewReader(in), criteo.ScanOptions{MaxIndRange: tc.m})
		if err != nil {
			t.Fatal(err)
		}
		for v, want := range tc.c1 {
			if id, ok := ix.ID(0, v); !ok || id != want {
				t.Errorf("m=%d: C1 %x -> %d %v, want %d", tc.m, v, id, ok, want)
			}
		}
		for v, want := range tc.c2 {
			if id, ok := ix.ID(1, v); !ok || id != want {
				t.Errorf("m=%d: C2 %x -> %d %v, want %d", tc.m, v, id, ok, want)
			}
		}
		c := ix.Counts()
		if c[0] != len(tc.c1) || c[1] != tc.counts2 || c[2] != 1 {
			t.Errorf("m=%d: counts %v", tc.m, c[:3])
		}
	}
}

// sampleRows parses testdata/sample.txt independently of the package's
// scanner: first-appearance ids by strings.Split and strconv.
func sampleRows(t *testing.T, m int) (rows []criteo.Sample, ids [][criteo.NumSparse]int64, counts [criteo.NumSparse]int) {
	dict := make([]map[uint32]int64, criteo.NumSparse)
	for i := range dict {
		dict[i] = map[uint32]int64{}
	}
	for _, l := range readLines(t, "testdata/sample.txt") {
		f := strings.Split(strings.TrimSuffix(l, "\n"), "\t")
		var s criteo.Sample
		lab, _ := strconv.Atoi(f[0])
		s.Label = float32(lab)
		for i := range criteo.NumDense {
			x, _ := strconv.ParseInt(f[1+i], 10, 64) // "" -> 0
			s.Dense[i] = logp1(max(x, 0))
		}
		var r [criteo.NumSparse]int64
		for i := range criteo.NumSparse {
			v, _ := strconv.ParseUint(f[14+i], 16, 32)
			if m > 0 {
				v %= uint64(m)
			}
			s.Sparse[i] = uint32(v)
			id, ok := dict[i][uint32(v)]
			if !ok {
				id = int64(len(dict[i]))
				dict[i][uint32(v)] = id
			}
			r[i] = id
		}
		rows = append(rows, s)
		ids = append(ids, r)
	}
	for i := range counts {
		counts[i] = len(dict[i])
	}
	return rows, ids, counts
}

func TestSampleFile(t *testing.T) {
	for _, m := range []int{0, 7} {
		rows, _, counts := sampleRows(t, m)
		f, err := os.Open("testdata/sample.txt")
		if err != nil {
			t.Fatal(err)
		}
		ix, err := criteo.Scan(f, criteo.ScanOptions{File: "sample.txt", MaxIndRange: m})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ix.Len() != 200 || len(rows) != 200 || ix.Counts() != counts {
			t.Errorf("m=%d: Len %d, counts %v; want 200, %v", m, ix.Len(), ix.Counts(), counts)
		}
		if m == 7 && slices.Max(counts[:]) > 7 {
			t.Errorf("counts %v above max-ind-range 7", counts)
		}
		// The sample exercises what it is meant to: repeats, empties, negatives.
		if m == 0 && (counts[0] >= 200 || counts[0] < 2) {
			t.Errorf("C1 has %d distinct values in 200 lines", counts[0])
		}
	}
	b, _ := os.ReadFile("testdata/sample.txt")
	if !bytes.Contains(b, []byte("\t-")) || !bytes.Contains(b, []byte("\t\t")) {
		t.Error("sample.txt lacks negative integers or empty fields")
	}
}

func TestKaggleSplit(t *testing.T) {
	sizes := func(s criteo.Split) (d []int) {
		for _, r := range s.Days {
			d = append(d, r.Len())
		}
		return d
	}
	tests := []struct {
		n                int
		days             []int
		train, test, val criteo.Range
	}{
		{0, []int{0, 0, 0, 0, 0, 0, 0}, criteo.Range{0, 0}, criteo.Range{0, 0}, criteo.Range{0, 0}},
		{3, []int{1, 1, 1, 0, 0, 0, 0}, criteo.Range{0, 3}, criteo.Range{3, 3}, criteo.Range{3, 3}},
		{7, []int{1, 1, 1, 1, 1, 1, 1}, criteo.Range{0, 6}, criteo.Range{6, 7}, criteo.Range{7, 7}},
		{10, []int{2, 2, 2, 1, 1, 1, 1}, criteo.Range{0, 9}, criteo.Range{9, 10}, criteo.Range{10, 10}},
		{14, []int{2, 2, 2, 2, 2, 2, 2}, criteo.Range{0, 12}, criteo.Range{12, 13}, criteo.Range{13, 14}},
		{16, []int{3, 3, 2, 2, 2, 2, 2}, criteo.Range{0, 14}, criteo.Range{14, 15}, criteo.Range{15, 16}},
		{200, []int{29, 29, 29, 29, 28, 28, 28}, criteo.Range{0, 172}, criteo.Range{172, 186}, criteo.Range{186, 200}},
		{45840617, []int{6548660, 6548660, 6548660, 6548660, 6548659, 6548659, 6548659}, // the Kaggle train.txt
			criteo.Range{0, 39291958}, criteo.Range{39291958, 39295288}, criteo.Range{39295288, 45840617}},
	}
	// The last row: 45840617 = 7*6548659 + 4; test is ⌈6548659/2⌉ = 3274330 lines.
	tests[len(tests)-1].test.End = 39291958 + 3274330
	tests[len(tests)-1].val.Start = tests[len(tests)-1].test.End
	for _, tc := range tests {
		s := criteo.KaggleSplit(tc.n)
		if !slices.Equal(sizes(s), tc.days) || s.Train != tc.train || s.Test != tc.test || s.Val != tc.val {
			t.Errorf("n=%d: days %v train %v test %v val %v;\nwant days %v train %v test %v val %v",
				tc.n, sizes(s), s.Train, s.Test, s.Val, tc.days, tc.train, tc.test, tc.val)
		}
		if s.Days[6].End != tc.n || s.Days[0].Start != 0 {
			t.Errorf("n=%d: days %v do not cover the lines", tc.n, s.Days)
		}
	}
}

func TestSubSample(t *testing.T) {
	var b strings.Builder
	const n = 20000
	for i := range n {
		if i%4 == 0 {
			b.WriteString(line("1", nil))
		} else {
			b.WriteString(line("0", nil))
		}
	}
	ix, err := criteo.Scan(strings.NewReader(b.String()), criteo.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all := criteo.Range{0, n}
	if got := mustSelect(t, ix, all, 0, 1); len(got) != n {
		t.Errorf("rate 0 kept %d of %d", len(got), n)
	}
	if got := mustSelect(t, ix, all, 1, 1); len(got) != n/4 {
		t.Errorf("rate 1 kept %d, want the %d positives", len(got), n/4)
	}
	for _, rate := range []float64{0.1, 0.5, 0.875} {
		got := mustSelect(t, ix, all, rate, 42)
		pos, neg := 0, 0
		for _, i := range got {
			if mustLabel(t, ix, i) == 1 {
				pos++
			} else {
				neg++
			}
		}
		negs := float64(n - n/4)
		want := negs * (1 - rate)
		sd := math.Sqrt(negs * rate * (1 - rate))
		if pos != n/4 || math.Abs(float64(neg)-want) > 4*sd {
			t.Errorf("rate %v: kept %d positives, %d negatives; want %d, %.0f±%.0f", rate, pos, neg, n/4, want, 4*sd)
		}
		if !slices.IsSorted(got) {
			t.Errorf("rate %v: lines out of order", rate)
		}
		if again := mustSelect(t, ix, all, rate, 42); !slices.Equal(again, got) {
			t.Errorf("rate %v: same seed, different lines", rate)
		}
		if other := mustSelect(t, ix, all, rate, 43); slices.Equal(other, got) {
			t.Errorf("rate %v: seeds 42 and 43 give the same lines", rate)
		}
		// A sub-range makes the same choice for each of its lines.
		sub := mustSelect(t, ix, criteo.Range{100, 900}, rate, 42)
		var inRange []int
		for _, i := range got {
			if i >= 100 && i < 900 {
				inRange = append(inRange, i)
			}
		}
		if !slices.Equal(sub, inRange) {
			t.Errorf("rate %v: a sub-range chooses differently", rate)
		}
	}
}

func TestBatches(t *testing.T) {
	rows, ids, _ := sampleRows(t, 0)
	f, err := os.Open("testdata/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ix, err := criteo.Scan(f, criteo.ScanOptions{File: "sample.txt"})
	if err != nil {
		t.Fatal(err)
	}
	split := criteo.KaggleSplit(ix.Len())
	shuffled := mustSelect(t, ix, split.Train, 0.5, 3)
	slices.Reverse(shuffled) // out of file order, with gaps
	for _, tc := range []struct {
		name  string
		lines []int
		bs    int
	}{
		{"train", mustSelect(t, ix, split.Train, 0, 0), 32},
		{"test", mustSelect(t, ix, split.Test, 0, 0), 5},
		{"subsampled in order", mustSelect(t, ix, split.Train, 0.5, 3), 16}, // gaps read through
		{"subsampled reversed", shuffled, 7},
		{"one", []int{199}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []int
			nb := 0
			for b, err := range ix.Batches(f, tc.lines, tc.bs) {
				if err != nil {
					t.Fatal(err)
				}
				nb++
				B := b.Size()
				if B == 0 || B > tc.bs || len(b.Dense) != B*criteo.NumDense || len(b.Offsets) != B+1 || b.Offsets[B] != int64(B) {
					t.Fatalf("batch shape: B=%d dense %d offsets %v", B, len(b.Dense), b.Offsets)
				}
				for j, li := range b.Lines {
					r := rows[li]
					if b.Labels[j] != r.Label || !slices.Equal(b.Dense[j*13:j*13+13], r.Dense[:]) {
						t.Errorf("line %d: label %v dense %v; want %v %v", li, b.Labels[j], b.Dense[j*13:j*13+13], r.Label, r.Dense)
					}
					for tb := range criteo.NumSparse {
						if b.Indices[tb][j] != ids[li][tb] {
							t.Errorf("line %d table %d: id %d, want %d", li, tb, b.Indices[tb][j], ids[li][tb])
						}
					}
				}
				seen = append(seen, b.Lines...)
			}
			if !slices.Equal(seen, tc.lines) || nb != (len(tc.lines)+tc.bs-1)/tc.bs {
				t.Errorf("%d batches over lines %v, want %v", nb, seen, tc.lines)
			}
		})
	}
	for _, bad := range []struct {
		lines []int
		bs    int
	}{{[]int{0, 200}, 4}, {[]int{-1}, 4}, {[]int{0}, 0}} {
		for _, err := range ix.Batches(f, bad.lines, bad.bs) {
			if err == nil {
				t.Errorf("lines %v batch %d: no error", bad.lines, bad.bs)
			}
		}
	}
}

// After bad lines are skipped, batches read around them.
func TestBatchesAfterSkip(t *testing.T) {
	b, err := os.ReadFile("testdata/bad.txt")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := criteo.Scan(bytes.NewReader(b), criteo.ScanOptions{File: "bad.txt", SkipBadLines: true})
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, "testdata/bad.txt")
	for batch, err := range ix.Batches(bytes.NewReader(b), []int{0, 1}, 2) {
		if err != nil {
			t.Fatal(err)
		}
		for j, l := range []string{lines[0], lines[7]} {
			var s criteo.Sample
			if err := criteo.ParseLine([]byte(l), 0, &s); err != nil {
				t.Fatal(err)
			}
			if batch.Labels[j] != s.Label || !slices.Equal(batch.Dense[j*13:j*13+13], s.Dense[:]) {
				t.Errorf("row %d differs from file line", j)
			}
		}
	}
	// A file that changed after the scan is reported, not misread.
	changed := bytes.Replace(b, []byte(strings.Split(lines[0], "\t")[14]), []byte("0000000z"), 1)
	for _, err := range ix.Batches(bytes.NewReader(changed), []int{0}, 1) {
		if !errors.Is(err, criteo.ErrBadLine) || !strings.HasPrefix(fmt.Sprint(err), "bad.txt: field C1: good line 0 changed") {
			t.Errorf("changed file: %v", err)
		}
	}
}

// The accessors that read a file-backed index's sidecar, failing the test
// on an error.
type labeled interface {
	Label(i int) (int, error)
	Select(r criteo.Range, rate float64, seed uint64) ([]int, error)
}

func mustLabel(t testing.TB, ix labeled, i int) int {
	t.Helper()
	l, err := ix.Label(i)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustSelect(t testing.TB, ix labeled, r criteo.Range, rate float64, seed uint64) []int {
	t.Helper()
	lines, err := ix.Select(r, rate, seed)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func mustOffset(t testing.TB, ix *criteo.Index, i int) (int64, int) {
	t.Helper()
	off, n, err := ix.Offset(i)
	if err != nil {
		t.Fatal(err)
	}
	return off, n
}
