package nn

import "github.com/kilnml/kiln/autograd"

// To converts m's parameters and buffers to memory format f in place, like
// PyTorch's model.to(memory_format=f), and returns m. With ChannelsLast
// every 4-D tensor (2-D convolution weights) is reordered to NHWC; with
// ChannelsLast3d every 5-D tensor to NDHWC; with Contiguous every tensor
// goes back to row-major order. Tensors of other ranks are left alone
// (PyTorch would refuse a 5-D tensor for channels_last instead).
//
// The tensors keep their identity (autograd.Tensor.SetFormat reorders them
// in place, gradients included), so an optimizer built before the call
// keeps updating the same parameters.
func To[M Module](m M, f autograd.MemoryFormat) M {
	rank := map[autograd.MemoryFormat]int{autograd.ChannelsLast: 4, autograd.ChannelsLast3d: 5}[f]
	if f != autograd.Contiguous && rank == 0 {
		Fail(autograd.ErrArgument, "To", "unknown memory format %v", f)
	}
	for _, nt := range StateDict(m) {
		if rank == 0 || nt.Tensor.NDim() == rank {
			nt.Tensor.SetFormat(f)
		}
	}
	dropPackedWeights(m)
	return m
}
