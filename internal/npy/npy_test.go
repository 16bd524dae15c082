package npy

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

// TestReadNumPyFixtures reads files NumPy wrote (testdata/gen_npy.py) in
// each supported dtype and header version.
func TestReadNumPyFixtures(t *testing.T) {
	cases := []struct {
		file  string
		dtype autograd.DType
		shape []int
		want  []float64
	}{
		{"f4_2x3.npy", autograd.Float32, []int{2, 3}, []float64{1.5, -2, 0, 3.25, float64(float32(1e-30)), math.Copysign(0, -1)}},
		{"f8_3.npy", autograd.Float32, []int{3}, []float64{float64(float32(0.1)), math.Inf(-1), 2.5}},
		{"i8_3.npy", autograd.Int64, []int{3}, []float64{-(1 << 63), 7, 1<<63 - 1}},
		{"i4_2x2_v2.npy", autograd.Int32, []int{2, 2}, []float64{1, -2, 3, 1<<31 - 1}},
		{"u1_0d_v3.npy", autograd.Uint8, []int{}, []float64{200}},
		{"i1_4.npy", autograd.Int8, []int{4}, []float64{-128, -1, 0, 127}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			x, err := Read(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if x.DType() != c.dtype || !slices.Equal(x.Shape(), c.shape) {
				t.Fatalf("got %v %v, want %v %v", x.DType(), x.Shape(), c.dtype, c.shape)
			}
			got := x.Values()
			for i := range c.want {
				if math.Float64bits(got[i]) != math.Float64bits(c.want[i]) {
					t.Errorf("element %d = %v, want %v", i, got[i], c.want[i])
				}
			}
		})
	}
}

// TestWriteMatchesNumPy checks that Write produces NumPy's bytes exactly
// for a version 1.0 file.
func TestWriteMatchesNumPy(t *testing.T) {
	for _, file := range []string{"f4_2x3.npy", "i8_3.npy", "i1_4.npy"} {
		t.Run(file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			x, err := Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := Encode(&got, x); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("Encode wrote\n%q\nNumPy wrote\n%q", got.Bytes(), want)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	gen := autograd.NewGenerator(1)
	f := autograd.Randn(gen, 2, 3, 4, 5)
	cases := []struct {
		name  string
		in    *autograd.Tensor
		dtype autograd.DType // what reading gives back
	}{
		{"float32", f, autograd.Float32},
		{"channels-last", f.To(autograd.ChannelsLast), autograd.Float32},
		{"bfloat16 as float32", autograd.Cast(f, autograd.BFloat16), autograd.Float32},
		{"int64", autograd.FromInt64([]int64{math.MinInt64, 0, math.MaxInt64}, 3), autograd.Int64},
		{"int32", autograd.FromInt32([]int32{-5, 6}, 2, 1), autograd.Int32},
		{"uint8", autograd.FromUint8([]uint8{0, 255}, 2), autograd.Uint8},
		{"int8", autograd.FromInt8([]int8{-128, 127}, 1, 2), autograd.Int8},
		{"0-d", autograd.Scalar(3.5), autograd.Float32},
		{"empty", autograd.Zeros(0, 7), autograd.Float32},
	}
	// Enough dimensions that the header outgrows version 1.0's 16-bit
	// length.
	ones := make([]int, 30000)
	for i := range ones {
		ones[i] = 1
	}
	cases = append(cases, struct {
		name  string
		in    *autograd.Tensor
		dtype autograd.DType
	}{"version 2.0 header", autograd.Full(2, ones...), autograd.Float32})
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".npy")
			if err := Write(path, c.in); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if hlen := len(raw) - c.in.Numel()*c.dtype.Size(); hlen%64 != 0 {
				t.Errorf("data starts at byte %d, not on a 64-byte boundary", hlen)
			}
			wantMajor := byte(1)
			if c.in.NDim() == len(ones) {
				wantMajor = 2
			}
			if raw[6] != wantMajor {
				t.Errorf("format version %d, want %d", raw[6], wantMajor)
			}
			got, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if got.DType() != c.dtype || !slices.Equal(got.Shape(), c.in.Shape()) || got.Format() != autograd.Contiguous {
				t.Fatalf("got %v %v %v, want %v %v contiguous", got.DType(), got.Shape(), got.Format(), c.dtype, c.in.Shape())
			}
			want := c.in.Contiguous().Values()
			if !slices.Equal(got.Values(), want) {
				t.Errorf("values changed in a round trip")
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "f4_2x3.npy"))
	if err != nil {
		t.Fatal(err)
	}
	// header builds a version 1.0 file around a header dict and data.
	header := func(dict string, data int) []byte {
		b := []byte(magic + "\x01\x00")
		b = append(b, byte(len(dict)), byte(len(dict)>>8))
		return append(append(b, dict...), make([]byte, data)...)
	}
	cases := []struct {
		name string
		file string // a fixture, or "" to use data
		data []byte
		want string
	}{
		{"fortran order", "f4_fortran.npy", nil, "fortran_order is True"},
		{"big-endian", "f4_bigendian.npy", nil, `dtype ">f4" is not supported`},
		{"not npy", "", []byte("PK\x03\x04 a zip file"), "not a .npy file"},
		{"empty", "", nil, "not a .npy file"},
		{"version 4", "", append([]byte(magic+"\x04\x00"), good[8:]...), "version 4.0"},
		{"truncated data", "", good[:len(good)-3], "truncated"},
		{"truncated header", "", good[:40], "exceeds"},
		{"trailing data", "", append(slices.Clone(good), 0), "1 more"},
		{"missing shape", "", header("{'descr': '<f4', 'fortran_order': False}", 4), `missing key "shape"`},
		{"unknown key", "", header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4), `unexpected key "x"`},
		{"duplicate key", "", header("{'descr': '<f4', 'descr': '<f4'}", 4), "appears twice"},
		{"negative dim", "", header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 4), "non-negative"},
		{"huge shape", "", header("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 4), "larger than can be allocated: shape [4294967296 4294967296]: element count overflows"},
		{"overflowing dim", "", header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 4), "out of range"},
		{"bad bool", "", header("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", 4), "True or False"},
		{"not a dict", "", header("[1, 2]", 4), "want '{'"},
		{"unterminated string", "", header("{'descr: '<f4'}", 4), "want ':'"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join("testdata", c.file)
			if c.file == "" {
				path = filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".npy")
				if err := os.WriteFile(path, c.data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Read(path)
			if err == nil {
				t.Fatal("Read succeeded")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not mention %q and the file", err, c.want)
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.npy")
	if err := Write(path, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Write(nil) = %v, want an error naming the file", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a failed Write left %s behind", path)
	}
}

// FuzzDecode checks that no input makes Decode panic, and that what it
// accepts survives a round trip through Encode unchanged.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.npy"))
	if err != nil || len(files) == 0 {
		f.Fatal("no fixtures:", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Empty arrays, whose other dimensions may be anything.
	for _, dict := range []string{
		"{'descr': '|u1', 'fortran_order': False, 'shape': (0, 3), }",
		"{'descr': '<i8', 'fortran_order': False, 'shape': (9223372036854775807, 0), }",
	} {
		b := []byte(magic + "\x01\x00")
		b = append(b, byte(len(dict)), byte(len(dict)>>8))
		f.Add(append(b, dict...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := Decode(b)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := Encode(&out, x); err != nil {
			t.Fatalf("a decoded array does not encode: %v", err)
		}
		y, err := Decode(out.Bytes())
		if err != nil || !slices.Equal(y.Shape(), x.Shape()) || y.DType() != x.DType() {
			t.Fatalf("re-encoded array decodes to %v, %v", y, err)
		}
		var again bytes.Buffer
		if err := Encode(&again, y); err != nil || !bytes.Equal(again.Bytes(), out.Bytes()) {
			t.Fatalf("a second round trip changed the file: %v", err)
		}
	})
}
