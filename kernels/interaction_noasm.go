//go:build !amd64 || noasm

package kernels

// Without assembly the interaction runs its reference loops.
var (
	interactionTriangleVariants = [levelCount]triangleFunc{Generic: interactionTriangleGo}
	interactionGradsVariants    = [levelCount]gradsFunc{Generic: interactionGradsGo}
)
