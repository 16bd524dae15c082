// Package feed fits arrays from outside (a .npy file, a request body) to
// the inputs of a saved graph: the conversions a user would expect where
// the file format lacks Kiln's dtype, and an error naming the input where
// nothing fits.
package feed

import (
	"fmt"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
)

// Conform checks an array against the graph's input value v. A float32
// array feeds a bfloat16 input by rounding, since .npy and JSON have no
// bfloat16, and an int32 array an int64 input (embedding indices and
// offsets) exactly, since NumPy makes int32 arrays where its default
// integer is 32 bits; any other dtype difference is an error. Shapes are
// left to the graph, which may run at other batch sizes than it was
// traced at, and numbers of indices; only the rank must match. The result
// is in v's memory format.
func Conform(x *autograd.Tensor, v graph.Value) (*autograd.Tensor, error) {
	switch {
	case x.DType() == v.DType:
	case x.DType() == autograd.Float32 && v.DType == autograd.BFloat16,
		x.DType() == autograd.Int32 && v.DType == autograd.Int64:
		x = autograd.Cast(autograd.NoGrad(x), v.DType)
	default:
		return nil, fmt.Errorf("array is %v, the graph's input %s is %v", x.DType(), v.Name, v.DType)
	}
	if len(x.Shape()) != len(v.Shape) {
		return nil, fmt.Errorf("array has shape %v, the graph's input %s has %d dimensions (traced at %v)", x.Shape(), v.Name, len(v.Shape), v.Shape)
	}
	if v.Format != autograd.Contiguous {
		x = autograd.NoGrad(x).To(v.Format)
	}
	return x, nil
}
