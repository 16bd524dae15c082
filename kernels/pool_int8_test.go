package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kilnml/kiln/internal/safetensors"
)

// poolU8Offset is the offset of element (n, c, h, w) of a [N][C][h][w]
// tensor in s's memory format.
func poolU8Offset(s *Pool2dShape, n, c, h, w, hs, ws int) int {
	if s.ChannelsLast {
		return ((n*hs+h)*ws+w)*s.C + c
	}
	return ((n*s.C+c)*hs+h)*ws + w
}

// maxPoolU8Ref is uint8 max pooling from its definition: the largest
// input under each window's taps that lie inside the input, 0 if none.
func maxPoolU8Ref(s *Pool2dShape, x []uint8) []uint8 {
	y := make([]uint8, s.outLen())
	for n := range s.N {
		for c := range s.C {
			for oh := range s.OutH {
				for ow := range s.OutW {
					var m uint8
					for kh := range s.KH {
						for kw := range s.KW {
							ih, iw := oh*s.SH-s.PH+kh*s.DH, ow*s.SW-s.PW+kw*s.DW
							if ih >= 0 && ih < s.H && iw >= 0 && iw < s.W {
								m = max(m, x[poolU8Offset(s, n, c, ih, iw, s.H, s.W)])
							}
						}
					}
					y[poolU8Offset(s, n, c, oh, ow, s.OutH, s.OutW)] = m
				}
			}
		}
	}
	return y
}

// adaptiveAvgU8Ref is the adaptive mean of uint8 values from its
// definition: PyTorch's windows, and the mean sum/(kh·kw) rounded to the
// nearest integer, ties to even, with the sum times PyTorch's float32
// reciprocal standing in for the exact quotient. nearHalf counts where
// the two differ (a quotient within float32 rounding of a half).
func adaptiveAvgU8Ref(s *Pool2dShape, x []uint8) (y []uint8, nearHalf int) {
	y = make([]uint8, s.outLen())
	for n := range s.N {
		for c := range s.C {
			for oh := range s.OutH {
				h0, h1 := oh*s.H/s.OutH, int(math.Ceil(float64((oh+1)*s.H)/float64(s.OutH)))
				for ow := range s.OutW {
					w0, w1 := ow*s.W/s.OutW, int(math.Ceil(float64((ow+1)*s.W)/float64(s.OutW)))
					var sum int64
					for ih := h0; ih < h1; ih++ {
						for iw := w0; iw < w1; iw++ {
							sum += int64(x[poolU8Offset(s, n, c, ih, iw, s.H, s.W)])
						}
					}
					size := int64((h1 - h0) * (w1 - w0))
					exact := math.RoundToEven(float64(sum) / float64(size))
					got := math.RoundToEven(float64(float32(sum) * (float32(1) / float32(h1-h0) / float32(w1-w0))))
					if exact != got {
						nearHalf++
					}
					y[poolU8Offset(s, n, c, oh, ow, s.OutH, s.OutW)] = uint8(got)
				}
			}
		}
	}
	return y, nearHalf
}

// poolU8Shapes are windowed geometries: padding, strides, dilation, a
// ceil-mode output size, more channels than a chunk, and enough work to
// split across the worker pool.
var poolU8Shapes = []Pool2dShape{
	{N: 2, C: 5, H: 9, W: 8, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1},
	{N: 1, C: 3, H: 6, W: 7, KH: 2, KW: 2, SH: 2, SW: 2, DH: 1, DW: 1},
	{N: 2, C: 4, H: 9, W: 10, KH: 3, KW: 2, SH: 2, SW: 1, PH: 1, PW: 1, DH: 2, DW: 3},
	{N: 3, C: 300, H: 7, W: 6, KH: 3, KW: 3, SH: 1, SW: 1, PH: 1, PW: 1, DH: 1, DW: 1},
	{N: 4, C: 64, H: 56, W: 56, KH: 3, KW: 3, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1},
}

func withPoolOut(s Pool2dShape, ceil bool) Pool2dShape {
	s.OutH = PoolOutSize(s.H, s.KH, s.SH, s.PH, s.DH, ceil)
	s.OutW = PoolOutSize(s.W, s.KW, s.SW, s.PW, s.DW, ceil)
	return s
}

func randomU8(r *rand.Rand, n int) []uint8 {
	x := make([]uint8, n)
	for i := range x {
		x[i] = uint8(r.IntN(256))
	}
	return x
}

func TestMaxPoolU8(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 31))
	for i, base := range poolU8Shapes {
		for _, ceil := range []bool{false, true} {
			for _, cl := range []bool{false, true} {
				s := withPoolOut(base, ceil)
				s.ChannelsLast = cl
				x := randomU8(r, s.N*s.C*s.H*s.W)
				y := make([]uint8, s.outLen()+9)
				for j := range y {
					y[j] = 0xa5
				}
				MaxPool2dU8(&s, x, y[:s.outLen()])
				want := maxPoolU8Ref(&s, x)
				for j, w := range want {
					if y[j] != w {
						t.Fatalf("shape %d ceil %v cl %v: y[%d] = %d, want %d", i, ceil, cl, j, y[j], w)
					}
				}
				for j := s.outLen(); j < len(y); j++ {
					if y[j] != 0xa5 {
						t.Fatalf("shape %d: guard %d overwritten", i, j)
					}
				}
			}
		}
	}
}

// TestMaxPoolU8MatchesFloat checks that pooling the quantized values
// commutes with dequantization: MaxPool2d of the dequantized input
// equals the dequantized MaxPool2dU8.
func TestMaxPoolU8MatchesFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 32))
	s := withPoolOut(poolU8Shapes[0], false)
	s.ChannelsLast = true
	x := randomU8(r, s.N*s.C*s.H*s.W)
	xf, yf := make([]float32, len(x)), make([]float32, s.outLen())
	DequantizeU8(xf, x, 0.1, 77)
	MaxPool2d(&s, xf, yf, make([]int32, s.outLen()))
	y := make([]uint8, s.outLen())
	MaxPool2dU8(&s, x, y)
	yd := make([]float32, len(y))
	DequantizeU8(yd, y, 0.1, 77)
	for i := range yd {
		if yd[i] != yf[i] {
			t.Fatalf("y[%d]: dequantized %v, float pooling %v", i, yd[i], yf[i])
		}
	}
}

func TestAdaptiveAvgPoolU8(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 33))
	nearHalf := 0
	for _, sz := range [][6]int{{2, 5, 7, 7, 1, 1}, {2, 7, 13, 11, 5, 3}, {1, 300, 10, 10, 3, 3}, {1, 3, 100, 90, 7, 7},
		{3, 4, 5, 5, 7, 8}, {8, 64, 14, 14, 1, 1}} {
		for _, cl := range []bool{false, true} {
			for _, narrow := range []bool{false, true} {
				s := Pool2dShape{N: sz[0], C: sz[1], H: sz[2], W: sz[3], OutH: sz[4], OutW: sz[5], ChannelsLast: cl}
				x := randomU8(r, s.N*s.C*s.H*s.W)
				if narrow {
					// Two neighbouring values: many means on a half.
					for i := range x {
						x[i] = 100 + x[i]%2
					}
				}
				y := make([]uint8, s.outLen())
				AdaptiveAvgPool2dU8(&s, x, y)
				want, nh := adaptiveAvgU8Ref(&s, x)
				nearHalf += nh
				for j, w := range want {
					if y[j] != w {
						t.Fatalf("%v cl %v: y[%d] = %d, want %d", sz, cl, j, y[j], w)
					}
				}
			}
		}
	}
	if nearHalf == 0 {
		t.Error("no mean where PyTorch's float32 reciprocal rounds otherwise than the exact quotient: the data misses the case")
	}
}

func TestPoolU8Misuse(t *testing.T) {
	s := withPoolOut(poolU8Shapes[0], false)
	nx, ny := s.N*s.C*s.H*s.W, s.outLen()
	a := Pool2dShape{N: 1, C: 2, H: 4, W: 4, OutH: 2, OutW: 2}
	cases := []misuseCase{
		{"max short x", ErrShape, func() { MaxPool2dU8(&s, make([]uint8, nx-1), make([]uint8, ny)) }},
		{"max short y", ErrShape, func() { MaxPool2dU8(&s, make([]uint8, nx), make([]uint8, ny-1)) }},
		{"max zero stride", ErrShape, func() {
			b := s
			b.SH = 0
			MaxPool2dU8(&b, make([]uint8, nx), make([]uint8, ny))
		}},
		{"adaptive short y", ErrShape, func() { AdaptiveAvgPool2dU8(&a, make([]uint8, 32), make([]uint8, 7)) }},
		{"adaptive zero output", ErrShape, func() {
			b := a
			b.OutW = 0
			AdaptiveAvgPool2dU8(&b, make([]uint8, 32), make([]uint8, 8))
		}},
	}
	checkMisuse(t, cases)
}

// poolU8GoldenOffByOne is the number of adaptive-average outputs of
// pool_int8.safetensors that differ from PyTorch by one: all in the
// channels-last cases, whose kernel rounds (Σq − z·size)/size rather than
// Σq/size (see AdaptiveAvgPool2dU8) and so differs at means on a half when
// the zero point is odd. The channels-first ones and every max pooling
// are bit-equal.
const poolU8GoldenOffByOne = 244

// TestPoolU8Golden compares both kernels with PyTorch 1.13's quantized
// pooling (testdata/golden/gen_pool_int8.py).
func TestPoolU8Golden(t *testing.T) {
	f, err := safetensors.ReadFile(filepath.Join("..", "testdata", "golden", "pool_int8.safetensors"))
	if err != nil {
		t.Fatalf("%v (regenerate with `make golden`)", err)
	}
	get := func(name, dtype string) safetensors.Tensor {
		e, ok := f.Get(name)
		if !ok || e.DType != dtype {
			t.Fatalf("no %s tensor %q", dtype, name)
		}
		return e
	}
	var cases []string
	for _, e := range f.Tensors {
		if k, ok := strings.CutSuffix(e.Name, ".params"); ok {
			cases = append(cases, k)
		}
	}
	sort.Strings(cases)
	if len(cases) < 16 {
		t.Fatalf("only %d cases in the golden file", len(cases))
	}
	offByOne := 0
	for _, name := range cases {
		xe, ye, pe := get(name+".x", "U8"), get(name+".y", "U8"), get(name+".params", "I64")
		p := make([]int, len(pe.Data)/8)
		for i := range p {
			p[i] = int(int64(binary.LittleEndian.Uint64(pe.Data[8*i:])))
		}
		cl := strings.HasSuffix(name, ".cl")
		s := Pool2dShape{N: xe.Shape[0], C: xe.Shape[1], H: xe.Shape[2], W: xe.Shape[3], OutH: ye.Shape[2], OutW: ye.Shape[3],
			KH: p[0], KW: p[1], SH: p[2], SW: p[3], PH: p[4], PW: p[5], DH: p[6], DW: p[7], ChannelsLast: cl}
		x, want := xe.Data, ye.Data
		if cl {
			x, want = make([]uint8, len(xe.Data)), make([]uint8, len(ye.Data))
			transposeEach(x, xe.Data, s.N, s.C, s.H*s.W)
			transposeEach(want, ye.Data, s.N, s.C, s.OutH*s.OutW)
		}
		y := make([]uint8, len(want))
		adaptive := strings.HasPrefix(name, "avg.")
		if adaptive {
			AdaptiveAvgPool2dU8(&s, x, y)
		} else {
			MaxPool2dU8(&s, x, y)
		}
		for i, w := range want {
			d := int(y[i]) - int(w)
			switch {
			case d == 0:
			case adaptive && cl && (d == 1 || d == -1):
				offByOne++
			default:
				t.Errorf("%s: y[%d] = %d, PyTorch %d", name, i, y[i], w)
			}
		}
	}
	if offByOne != poolU8GoldenOffByOne {
		t.Errorf("%d outputs one off PyTorch's channels-last kernel, want %d", offByOne, poolU8GoldenOffByOne)
	}
	t.Logf("%d cases, %d channels-last adaptive outputs one off", len(cases), offByOne)
}

func TestPoolU8Allocs(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 34))
	s := withPoolOut(poolU8Shapes[4], false)
	s.ChannelsLast = true
	x, y := randomU8(r, s.N*s.C*s.H*s.W), make([]uint8, s.outLen())
	a := Pool2dShape{N: 4, C: 64, H: 14, W: 14, OutH: 1, OutW: 1, ChannelsLast: true}
	ya := make([]uint8, a.outLen())
	MaxPool2dU8(&s, x, y)
	AdaptiveAvgPool2dU8(&a, x[:a.N*a.C*a.H*a.W], ya)
	if n := testing.AllocsPerRun(10, func() { MaxPool2dU8(&s, x, y) }); n != 0 {
		t.Errorf("MaxPool2dU8 allocates %v times a call", n)
	}
	if n := testing.AllocsPerRun(10, func() { AdaptiveAvgPool2dU8(&a, x[:a.N*a.C*a.H*a.W], ya) }); n != 0 {
		t.Errorf("AdaptiveAvgPool2dU8 allocates %v times a call", n)
	}
}
