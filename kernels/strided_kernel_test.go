//go:build amd64 && !noasm

package kernels

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkKernel12x32Packed(b *testing.B) {
	kc := 576
	a := make([]float32, 12*kc+8)
	bp := make([]float32, 32*kc)
	c := make([]float32, 12*64)
	for b.Loop() {
		for i := 0; i < 100; i++ {
			sgemmKernel12x32(kc, &a[0], &bp[0], &c[0], 64, 1, 12, 1, 0, negInf, &gemmNegZero[0], &gemmNegZero[0], 0, 0, 0, 0, 0)
		}
	}
	b.ReportMetric(float64(100*12*32*kc*2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkKernel12x32Strided(b *testing.B) {
	kc := 576
	a := make([]float32, 12*kc+8)
	bp := make([]float32, 32*kc)
	c := make([]float32, 12*64)
	for b.Loop() {
		for i := 0; i < 100; i++ {
			sgemmKernel12x32S(kc, &a[0], &bp[0], &c[0], 64, 1, 12, 1, 0, negInf, &gemmNegZero[0], &gemmNegZero[0], 0, 0, 0, 0, 0, kc)
		}
	}
	b.ReportMetric(float64(100*12*32*kc*2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// TestKernel12x32Strided checks the unpacked-A kernel against the packed
// one on the same data, every row count and odd depths.
func TestKernel12x32Strided(t *testing.T) {
	if level < AVX512 {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, kc := range []int{1, 3, 4, 7, 64, 65} {
		for rows := 1; rows <= 12; rows++ {
			lda := kc + 3
			a := make([]float32, 12*lda+8)
			for i := range a {
				a[i] = float32(r.NormFloat64())
			}
			packed := make([]float32, 12*kc+8)
			for p := 0; p < 2; p++ {
				for k := 0; k < kc; k++ {
					for i := 0; i < 6; i++ {
						packed[p*6*kc+k*6+i] = a[(p*6+i)*lda+k]
					}
				}
			}
			bp := make([]float32, 64*kc)
			for i := range bp {
				bp[i] = float32(r.NormFloat64())
			}
			want, got := make([]float32, 12*64), make([]float32, 12*64)
			for i := range want {
				want[i] = float32(r.NormFloat64())
				got[i] = want[i]
			}
			sgemmKernel12x32(kc, &packed[0], &bp[0], &want[0], 64, 2, rows, 1.5, 0.5, 0, &gemmNegZero[0], &gemmNegZero[0], 0, 8*kc*gemmNR, 8*gemmNR, 0, 0)
			sgemmKernel12x32S(kc, &a[0], &bp[0], &got[0], 64, 2, rows, 1.5, 0.5, 0, &gemmNegZero[0], &gemmNegZero[0], 0, 8*kc*gemmNR, 8*gemmNR, 0, 0, lda)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("kc %d rows %d: element %d = %v, want %v", kc, rows, i, got[i], want[i])
				}
			}
		}
	}
}
