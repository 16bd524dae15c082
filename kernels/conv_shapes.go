package kernels

import "fmt"

// NamedConvShape is a convolution shape with a name, the layers it stands
// for and how many times one forward pass of its network runs it.
type NamedConvShape struct {
	Name  string // e.g. "k3s1_c64_o64_56": kernel, stride, channels in and out, input size
	Where string // the layers (torchvision names) with this shape
	Count int    // how many of them the network has
	ConvShape
}

// ResNet50ConvShapes returns every distinct convolution of torchvision's
// ResNet-50 (v1.5, the stride on the 3×3 of each stage's first bottleneck)
// on a batch of 224×224 images, channels-last, in network order. The 23
// shapes stand for all 53 convolutions (the counts add up to 53), so
// summing time × Count over the list gives the convolution time of a whole
// pass. Benchmarks of the kernels, the layers and the model use this one
// table so their numbers can be compared.
func ResNet50ConvShapes(batch int) []NamedConvShape {
	type def struct {
		where              string
		count              int
		c, o, k, stride, h int
	}
	defs := []def{
		{"conv1", 1, 3, 64, 7, 2, 224},
		{"layer1.0.conv1", 1, 64, 64, 1, 1, 56},
		{"layer1.*.conv2", 3, 64, 64, 3, 1, 56},
		{"layer1.*.conv3, layer1.0.downsample", 4, 64, 256, 1, 1, 56},
		{"layer1.{1,2}.conv1", 2, 256, 64, 1, 1, 56},
		{"layer2.0.conv1", 1, 256, 128, 1, 1, 56},
		{"layer2.0.conv2", 1, 128, 128, 3, 2, 56},
		{"layer2.*.conv3", 4, 128, 512, 1, 1, 28},
		{"layer2.0.downsample", 1, 256, 512, 1, 2, 56},
		{"layer2.{1,2,3}.conv1", 3, 512, 128, 1, 1, 28},
		{"layer2.{1,2,3}.conv2", 3, 128, 128, 3, 1, 28},
		{"layer3.0.conv1", 1, 512, 256, 1, 1, 28},
		{"layer3.0.conv2", 1, 256, 256, 3, 2, 28},
		{"layer3.*.conv3", 6, 256, 1024, 1, 1, 14},
		{"layer3.0.downsample", 1, 512, 1024, 1, 2, 28},
		{"layer3.{1-5}.conv1", 5, 1024, 256, 1, 1, 14},
		{"layer3.{1-5}.conv2", 5, 256, 256, 3, 1, 14},
		{"layer4.0.conv1", 1, 1024, 512, 1, 1, 14},
		{"layer4.0.conv2", 1, 512, 512, 3, 2, 14},
		{"layer4.*.conv3", 3, 512, 2048, 1, 1, 7},
		{"layer4.0.downsample", 1, 1024, 2048, 1, 2, 14},
		{"layer4.{1,2}.conv1", 2, 2048, 512, 1, 1, 7},
		{"layer4.{1,2}.conv2", 2, 512, 512, 3, 1, 7},
	}
	out := make([]NamedConvShape, len(defs))
	for i, d := range defs {
		pad := d.k / 2
		s := ConvShape{N: batch, C: d.c, O: d.o, Groups: 1, ChannelsLast: true,
			In: [3]int{1, d.h, d.h}, Kernel: [3]int{1, d.k, d.k}, Stride: [3]int{1, d.stride, d.stride},
			Pad: [3]int{0, pad, pad}, Dil: [3]int{1, 1, 1}}
		for j := range 3 {
			s.Out[j] = ConvOutSize(s.In[j], s.Kernel[j], s.Stride[j], s.Pad[j], s.Dil[j])
		}
		out[i] = NamedConvShape{
			Name:      fmt.Sprintf("k%ds%d_c%d_o%d_%d", d.k, d.stride, d.c, d.o, d.h),
			Where:     d.where,
			Count:     d.count,
			ConvShape: s,
		}
	}
	return out
}

// FLOPs is the floating-point operation count of one pass (forward,
// backward-data or backward-weight: each is the same number of
// multiply-adds) of the convolution, counting a multiply-add as two.
func (s *ConvShape) FLOPs() float64 { return 2 * float64(s.work()) }
