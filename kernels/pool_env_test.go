package kernels

import (
	"strings"
	"testing"
)

func TestChooseThreads(t *testing.T) {
	cases := []struct {
		req     string
		want    int
		warning string // "" for none
	}{
		{"", 6, ""},
		{"1", 1, ""},
		{"4", 4, ""},
		{"+4", 4, ""},
		{"1024", 1024, ""},
		{"0", 6, `KILN_NUM_THREADS="0" is not a thread count (a whole number from 1 to 1024); using 6`},
		{"-1", 6, `KILN_NUM_THREADS="-1" is not a thread count`},
		{"abc", 6, `KILN_NUM_THREADS="abc" is not a thread count`},
		{"2.5", 6, `KILN_NUM_THREADS="2.5" is not a thread count`},
		{" 4", 6, `KILN_NUM_THREADS=" 4" is not a thread count`},
		{"1e9", 6, `KILN_NUM_THREADS="1e9" is not a thread count`},
		{"-99999999999999999999", 6, "is not a thread count"},
		{"1025", 1024, "KILN_NUM_THREADS=1025 is more than the 1024 threads allowed; using 1024"},
		{"1000000000", 1024, "KILN_NUM_THREADS=1000000000 is more than the 1024 threads allowed; using 1024"},
		{"9223372036854775807", 1024, "more than the 1024 threads allowed"},
		{"99999999999999999999", 1024, "more than the 1024 threads allowed"},
	}
	for _, c := range cases {
		got, warning := chooseThreads(6, c.req)
		if got != c.want || (c.warning == "") != (warning == "") || !strings.Contains(warning, c.warning) {
			t.Errorf("chooseThreads(6, %q) = %d, %q; want %d and a warning containing %q", c.req, got, warning, c.want, c.warning)
		}
	}
}
