package kernels

import (
	"math/rand/v2"
	"testing"
)

// convBenchOps runs the three passes of a convolution on random operands.
func convBenchOps(s *ConvShape) []struct {
	name string
	run  func()
} {
	r := rand.New(rand.NewPCG(5, 6))
	x, w := randSlice(r, s.xLen()), randSlice(r, s.wLen())
	y, b := randSlice(r, s.yLen()), randSlice(r, s.O)
	dx, dw := make([]float32, s.xLen()), make([]float32, s.wLen())
	return []struct {
		name string
		run  func()
	}{
		{"fwd", func() { ConvForward(s, x, w, b, y) }},
		{"data", func() { ConvBackwardData(s, y, w, dx) }},
		{"weight", func() { ConvBackwardWeight(s, x, y, dw) }},
	}
}

func benchConv(b *testing.B, s *ConvShape) {
	for _, op := range convBenchOps(s) {
		b.Run(op.name, func(b *testing.B) {
			cpu0 := processCPU()
			for b.Loop() {
				op.run()
			}
			flops := s.FLOPs() * float64(b.N)
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			if cpu := processCPU() - cpu0; cpu > 0 {
				// Per CPU-second of all threads: the rate of one core.
				b.ReportMetric(flops/cpu/1e9, "GFLOP/cpu-s")
			}
		})
	}
}

// BenchmarkConvResNet50 times every distinct convolution of ResNet-50 at
// batch 16, channels-last: forward (with bias), backward-data and
// backward-weight.
func BenchmarkConvResNet50(b *testing.B) {
	for _, sh := range ResNet50ConvShapes(16) {
		b.Run(sh.Name, func(b *testing.B) { benchConv(b, &sh.ConvShape) })
	}
}

// BenchmarkConvResNet50NoGemm times the same passes with the matrix
// products skipped: the cost of weight rearrangement, im2col, col2im and
// bias, which stays when a faster GEMM lands.
func BenchmarkConvResNet50NoGemm(b *testing.B) {
	old := convSgemm
	defer func() { convSgemm = old }()
	convSgemm = func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	}
	for _, sh := range ResNet50ConvShapes(16) {
		b.Run(sh.Name, func(b *testing.B) {
			for _, op := range convBenchOps(&sh.ConvShape) {
				b.Run(op.name, func(b *testing.B) {
					for b.Loop() {
						op.run()
					}
				})
			}
		})
	}
}

// BenchmarkConvLayout compares channels-first calls with channels-last
// ones on ResNet-50 shapes of every image size at batch 16.
func BenchmarkConvLayout(b *testing.B) {
	for _, sh := range ResNet50ConvShapes(16) {
		switch sh.Name {
		case "k7s2_c3_o64_224", "k3s1_c64_o64_56", "k1s1_c64_o256_56", "k3s1_c128_o128_28", "k1s1_c512_o128_28",
			"k3s1_c256_o256_14", "k1s1_c1024_o256_14", "k3s1_c512_o512_7", "k1s1_c2048_o512_7":
		default:
			continue
		}
		for _, cl := range []bool{true, false} {
			s := sh.ConvShape
			s.ChannelsLast = cl
			name := sh.Name + map[bool]string{true: "/nhwc", false: "/nchw"}[cl]
			b.Run(name, func(b *testing.B) { benchConv(b, &s) })
		}
	}
}

// BenchmarkConvOther covers the paths ResNet-50 does not use: a
// MobileNet-style depthwise 3×3 and a 3-D 3×3×3 convolution, channels-last.
func BenchmarkConvOther(b *testing.B) {
	one := [3]int{1, 1, 1}
	shapes := []struct {
		name string
		s    ConvShape
	}{
		{"depthwise_k3s1_c128_56", ConvShape{N: 16, C: 128, O: 128, Groups: 128, In: [3]int{1, 56, 56},
			Kernel: [3]int{1, 3, 3}, Stride: one, Pad: [3]int{0, 1, 1}, Dil: one, ChannelsLast: true}},
		{"conv3d_k3s1_c64_o64_8x28", ConvShape{N: 2, C: 64, O: 64, Groups: 1, In: [3]int{8, 28, 28},
			Kernel: [3]int{3, 3, 3}, Stride: one, Pad: one, Dil: one, ChannelsLast: true}},
	}
	for _, sh := range shapes {
		s := sh.s
		for d := range 3 {
			s.Out[d] = ConvOutSize(s.In[d], s.Kernel[d], s.Stride[d], s.Pad[d], s.Dil[d])
		}
		b.Run(sh.name, func(b *testing.B) { benchConv(b, &s) })
	}
}
