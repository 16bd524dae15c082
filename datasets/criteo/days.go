package criteo

import (
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
)

// A DaySet is a scanned Criteo data set on disk, cut into dlrm's days:
// the Kaggle train.txt (one file, seven days cut by line count) or the
// Terabyte set (one file per day, day_0 to day_23). Lines are numbered
// back to back across the files, 0..Len()-1, and the categorical values
// of every file share one dictionary, numbered in order of first
// appearance over the files in day order, as dlrm's convertDicts count
// over all days; Counts is therefore the table sizes of the whole set.
// A DaySet keeps its files and their sidecars open until Close. Its
// memory is the shared dictionary alone, O(vocabulary) (a --max-ind-range
// bounds it): the per-line records (offset, length, label; 12 bytes a
// line) stay in the sidecars and are read on demand. Order describes the
// training lines lazily and reads them in batches with O(batch size)
// memory; Select and Batches, which take a slice of line numbers, cost
// 8 bytes per selected line.
type DaySet struct {
	parts []part
	files []*os.File
	split Split
}

// OpenKaggle scans (through its sidecar, see ScanFile) and opens the
// Kaggle train.txt at path, split by KaggleSplit.
func OpenKaggle(path string, opts ScanOptions) (*DaySet, error) {
	s, err := openFiles([]string{path}, opts)
	if err != nil {
		return nil, err
	}
	s.split = KaggleSplit(s.Len())
	return s, nil
}

// TerabyteFiles names the days files of the Terabyte set at path the way
// dlrm's --raw-data-file does: path_0, path_1, …, path_{days-1} (dlrm's
// scripts pass …/day for day_0 to day_23). When path is a directory the
// files are day_0 … inside it.
func TerabyteFiles(path string, days int) []string {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "day")
	}
	files := make([]string, days)
	for d := range files {
		files[d] = path + "_" + strconv.Itoa(d)
	}
	return files
}

// OpenTerabyte scans and opens the TerabyteDays day files that
// TerabyteFiles names for path, each through its own sidecar, and splits
// them by DaySplit: days 0 to 22 train, day 23's first ⌈half⌉ tests and
// the rest validates. A missing day file is an error naming it.
func OpenTerabyte(path string, opts ScanOptions) (*DaySet, error) {
	return OpenDays(TerabyteFiles(path, TerabyteDays), opts)
}

// OpenDays is OpenTerabyte for any list of day files, in day order.
func OpenDays(files []string, opts ScanOptions) (*DaySet, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("criteo: no day files")
	}
	for d, f := range files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("criteo: day %d of %d: %w", d, len(files), err)
		}
	}
	s, err := openFiles(files, opts)
	if err != nil {
		return nil, err
	}
	sizes := make([]int, len(s.parts))
	for d, p := range s.parts {
		sizes[d] = p.ix.Len()
	}
	s.split = DaySplit(sizes)
	return s, nil
}

// openFiles scans each file in turn and merges its dictionaries into the
// first file's, so that memory holds the shared dictionary and one file's
// own at a time.
func openFiles(paths []string, opts ScanOptions) (*DaySet, error) {
	s := &DaySet{}
	fail := func(err error) (*DaySet, error) {
		s.Close()
		return nil, err
	}
	start := 0
	for _, path := range paths {
		o := opts
		if o.File == "" || len(paths) > 1 {
			o.File = path
		}
		ix, err := ScanFile(path, o)
		if err != nil {
			return fail(err)
		}
		if len(s.parts) > 0 {
			ix.shareVocab(s.parts[0].ix)
		}
		f, err := os.Open(path)
		if err != nil {
			ix.Close()
			return fail(err)
		}
		s.files = append(s.files, f)
		s.parts = append(s.parts, part{ix: ix, r: f, start: start})
		start += ix.Len()
	}
	return s, nil
}

// shareVocab adds ix's values that to's dictionaries lack, in ix's id
// order, and makes ix use to's dictionaries.
func (ix *Index) shareVocab(to *Index) {
	for t, m := range ix.vocab {
		raw := make([]uint32, len(m))
		for v, id := range m {
			raw[id] = v
		}
		for _, v := range raw {
			if _, ok := to.vocab[t][v]; !ok {
				to.vocab[t][v] = int32(len(to.vocab[t]))
			}
		}
		ix.vocab[t] = to.vocab[t]
	}
}

// Close closes the files and their sidecars.
func (s *DaySet) Close() error {
	var first error
	for _, f := range s.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	for _, p := range s.parts {
		if err := p.ix.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.files = nil
	return first
}

// Split returns the days and the training, test and validation lines.
func (s *DaySet) Split() Split { return s.split }

// Len is the number of good lines over all files.
func (s *DaySet) Len() int {
	last := s.parts[len(s.parts)-1]
	return last.start + last.ix.Len()
}

// Label returns good line i's label, 0 or 1, read from its file's
// sidecar (see Index.Label).
func (s *DaySet) Label(i int) (int, error) {
	if i < 0 || i >= s.Len() {
		return 0, fmt.Errorf("criteo: good line %d out of range [0, %d)", i, s.Len())
	}
	p, j := locate(s.parts, i)
	return p.ix.Label(j)
}

// Counts returns each categorical feature's number of distinct values
// over all files: the row counts of the embedding tables.
func (s *DaySet) Counts() [NumSparse]int { return s.parts[0].ix.Counts() }

// Files returns each file's Index, in day order; they share their
// dictionaries.
func (s *DaySet) Files() []*Index {
	out := make([]*Index, len(s.parts))
	for d, p := range s.parts {
		out[d] = p.ix
	}
	return out
}

// BadLines returns how many bad lines a scan with SkipBadLines skipped
// over all files, and up to ten of them as FILE:LINE, the earliest first.
func (s *DaySet) BadLines() (count int, first []string) {
	for _, p := range s.parts {
		n, lines := p.ix.BadLines()
		count += n
		for _, l := range lines {
			if len(first) < maxBadLinesKept {
				first = append(first, fmt.Sprintf("%s:%d", p.ix.file, l))
			}
		}
	}
	return count, first
}

// Select is Index.Select over the set's lines: the lines of r left after
// dropping the fraction rate of negatives, each choice fixed by seed and
// the line's number. The slice costs 8 bytes a line; Order gives the same
// lines lazily.
func (s *DaySet) Select(r Range, rate float64, seed uint64) ([]int, error) {
	return selectLines(s.parts, r, rate, seed)
}

// Batches is Index.Batches over the set's files: lines (numbers from
// Select, in any order, from any files) are read back in batches of
// batchSize, each run of nearby lines of one file with one ReadAt.
func (s *DaySet) Batches(lines []int, batchSize int) iter.Seq2[*Batch, error] {
	return batches(s.parts, lines, batchSize)
}
