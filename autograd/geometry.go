package autograd

import "github.com/kilnml/kiln/kernels"

// The kernel shapes of autograd's ops, for code that calls the kernels
// itself on memory it manages (package graph's compiled plans) and must
// call them exactly as the op does. Each validates its operands as the op
// would and panics with the op's *Error when they are wrong, so the
// geometry is worked out in one place.

// ConvGeometry returns the kernel shape of Conv2d (w 4-D) or Conv3d (w
// 5-D) of x, w and b with opt. ChannelsLast is left false: the op picks
// the layout from x's and w's formats, and the result's format tells it.
func ConvGeometry(x, w, b *Tensor, opt ConvOptions) kernels.ConvShape {
	op, nsp := "Conv2d", 2
	if w != nil && w.NDim() == 5 {
		op, nsp = "Conv3d", 3
	}
	s, _ := convGeometry(op, nsp, x, w, b, opt)
	return s
}
