//go:build !amd64 || noasm

package kernels

// Without assembly joining and splitting have only their Generic variants.
var (
	joinBF16AVX2Span  func(dst []float32, top, bottom []uint16)
	splitBF16AVX2Span func(top, bottom []uint16, src []float32)
)

// sgdSplitFusedFor has no fused variant to offer without assembly.
func sgdSplitFusedFor(Level) func(s *SGDSplitStep, lo, hi int) int { return nil }

// adagradSplitFusedFor has no fused variant to offer without assembly.
func adagradSplitFusedFor(Level) func(s *AdagradSplitStep, lo, hi int) int { return nil }

// adamSplitFusedFor has no fused variant to offer without assembly.
func adamSplitFusedFor(Level) func(s *AdamSplitStep, lo, hi int) int { return nil }
