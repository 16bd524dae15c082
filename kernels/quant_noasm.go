//go:build !amd64 || noasm

package kernels

// Without assembly the quantizers run their Go loops.
var (
	quantizeU8Variants   = [levelCount]quantizeU8Func{Generic: quantizeU8Generic}
	quantizeS8Variants   = [levelCount]quantizeS8Func{Generic: quantizeS8Generic}
	dequantizeU8Variants = [levelCount]dequantizeU8Func{Generic: dequantizeU8Generic}
	dequantizeS8Variants = [levelCount]dequantizeS8Func{Generic: dequantizeS8Generic}
	int8DequantVariants  = [levelCount]func(y []float32, acc, corr []int32, cs, bias []float32){Generic: int8Dequant}
)

// Without assembly the one-pass epilogue is its reference loop.
var int8FinishVariants = [levelCount]func(dst []uint8, f *int8Finish){Generic: int8FinishGo}
