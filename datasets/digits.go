package datasets

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
)

// digitsCSV is the UCI "Optical Recognition of Handwritten Digits" test
// set by E. Alpaydin and C. Kaynak (CC BY 4.0, doi:10.24432/C50P49); see
// data/README.
//
//go:embed data/digits.csv.gz
var digitsCSV []byte

const (
	digitsCount  = 1797
	digitsSide   = 8
	digitsLevels = 16 // pixels count set bits in a 4×4 block: 0..16
)

// Digits returns the UCI handwritten digits: 1,797 images of shape
// [1, 8, 8] with pixels in [0, 1] (16 grey levels), labelled 0 to 9. It is
// small enough to embed and to train on in seconds, which makes it the
// data set of the quickstart example and of end-to-end tests; use Split
// for a held-out part.
//
// The data is "Optical Recognition of Handwritten Digits" by E. Alpaydin
// and C. Kaynak, UCI Machine Learning Repository, doi:10.24432/C50P49,
// licensed CC BY 4.0.
func Digits() *Images {
	set, err := parseDigits(digitsCSV)
	if err != nil {
		panic("datasets: embedded digits data is corrupt: " + err.Error())
	}
	return set
}

// parseDigits reads the gzipped CSV: per line 64 pixels then the label.
func parseDigits(gz []byte) (*Images, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	const pixels = digitsSide * digitsSide
	set := &Images{Channels: 1, Height: digitsSide, Width: digitsSide, Classes: 10, Scale: 1.0 / digitsLevels,
		Pixels: make([]uint8, 0, digitsCount*pixels), Labels: make([]int64, 0, digitsCount)}
	sc := bufio.NewScanner(zr)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Split(sc.Text(), ",")
		if len(fields) != pixels+1 {
			return nil, fmt.Errorf("line %d: %d fields, want %d", line, len(fields), pixels+1)
		}
		for k, f := range fields {
			v, err := strconv.Atoi(f)
			limit := digitsLevels
			if k == pixels {
				limit = 9
			}
			if err != nil || v < 0 || v > limit {
				return nil, fmt.Errorf("line %d: field %d is %q, want an integer in [0, %d]", line, k+1, f, limit)
			}
			if k == pixels {
				set.Labels = append(set.Labels, int64(v))
			} else {
				set.Pixels = append(set.Pixels, uint8(v))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return set, nil
}
