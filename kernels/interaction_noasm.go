//go:build !amd64 || noasm

package kernels

// Without assembly the interaction runs its reference loops.
var (
	interactionTriangleVariants = [levelCount]func(dst []float32, rows [][]float32, self bool){Generic: interactionTriangleGo}
	interactionGradsVariants    = [levelCount]gradsFunc{Generic: interactionGradsGo}
)
