package bench

import "fmt"

// ResNet50Conv is one distinct convolution of torchvision's resnet50
// (ResNet v1.5: the stride sits on the 3×3 convolution) for a 224×224
// input, with the name of its first occurrence and how often the network
// uses it.
//
// This table stands in for kernels.ResNet50ConvShapes until that exists;
// switch to it then. TestResNet50ConvsMatchTorchvision checks the table
// against torchvision when it is installed.
type ResNet50Conv struct {
	Name                       string
	C, O, K, Stride, Pad, H, W int
	Uses                       int
	// Quick marks the representative shapes of a -quick run: the 7×7
	// stem, a 3×3 and a 1×1.
	Quick bool
}

// Dims returns the convolution at batch n.
func (c ResNet50Conv) Dims(n int) ConvDims {
	return ConvDims{N: n, C: c.C, H: c.H, W: c.W, O: c.O, K: c.K, Stride: c.Stride, Pad: c.Pad}
}

// Shape is a short description: "256→64 1×1 56²" (with "/2" when strided).
func (c ResNet50Conv) Shape() string {
	s := fmt.Sprintf("%d→%d %d×%d %d²", c.C, c.O, c.K, c.K, c.H)
	if c.Stride != 1 {
		s += fmt.Sprintf(" /%d", c.Stride)
	}
	return s
}

// ResNet50Convs returns the 23 distinct convolution shapes of ResNet-50 in
// network order.
func ResNet50Convs() []ResNet50Conv {
	return []ResNet50Conv{
		{Name: "conv1", C: 3, O: 64, K: 7, Stride: 2, Pad: 3, H: 224, W: 224, Uses: 1, Quick: true},
		{Name: "layer1.0.conv1", C: 64, O: 64, K: 1, Stride: 1, H: 56, W: 56, Uses: 1},
		{Name: "layer1.0.conv2", C: 64, O: 64, K: 3, Stride: 1, Pad: 1, H: 56, W: 56, Uses: 3, Quick: true},
		{Name: "layer1.0.conv3", C: 64, O: 256, K: 1, Stride: 1, H: 56, W: 56, Uses: 4}, // with layer1.0.downsample.0
		{Name: "layer1.1.conv1", C: 256, O: 64, K: 1, Stride: 1, H: 56, W: 56, Uses: 2},
		{Name: "layer2.0.conv1", C: 256, O: 128, K: 1, Stride: 1, H: 56, W: 56, Uses: 1},
		{Name: "layer2.0.conv2", C: 128, O: 128, K: 3, Stride: 2, Pad: 1, H: 56, W: 56, Uses: 1},
		{Name: "layer2.0.conv3", C: 128, O: 512, K: 1, Stride: 1, H: 28, W: 28, Uses: 4},
		{Name: "layer2.0.downsample.0", C: 256, O: 512, K: 1, Stride: 2, H: 56, W: 56, Uses: 1},
		{Name: "layer2.1.conv1", C: 512, O: 128, K: 1, Stride: 1, H: 28, W: 28, Uses: 3},
		{Name: "layer2.1.conv2", C: 128, O: 128, K: 3, Stride: 1, Pad: 1, H: 28, W: 28, Uses: 3},
		{Name: "layer3.0.conv1", C: 512, O: 256, K: 1, Stride: 1, H: 28, W: 28, Uses: 1},
		{Name: "layer3.0.conv2", C: 256, O: 256, K: 3, Stride: 2, Pad: 1, H: 28, W: 28, Uses: 1},
		{Name: "layer3.0.conv3", C: 256, O: 1024, K: 1, Stride: 1, H: 14, W: 14, Uses: 6},
		{Name: "layer3.0.downsample.0", C: 512, O: 1024, K: 1, Stride: 2, H: 28, W: 28, Uses: 1},
		{Name: "layer3.1.conv1", C: 1024, O: 256, K: 1, Stride: 1, H: 14, W: 14, Uses: 5, Quick: true},
		{Name: "layer3.1.conv2", C: 256, O: 256, K: 3, Stride: 1, Pad: 1, H: 14, W: 14, Uses: 5},
		{Name: "layer4.0.conv1", C: 1024, O: 512, K: 1, Stride: 1, H: 14, W: 14, Uses: 1},
		{Name: "layer4.0.conv2", C: 512, O: 512, K: 3, Stride: 2, Pad: 1, H: 14, W: 14, Uses: 1},
		{Name: "layer4.0.conv3", C: 512, O: 2048, K: 1, Stride: 1, H: 7, W: 7, Uses: 3},
		{Name: "layer4.0.downsample.0", C: 1024, O: 2048, K: 1, Stride: 2, H: 14, W: 14, Uses: 1},
		{Name: "layer4.1.conv1", C: 2048, O: 512, K: 1, Stride: 1, H: 7, W: 7, Uses: 2},
		{Name: "layer4.1.conv2", C: 512, O: 512, K: 3, Stride: 1, Pad: 1, H: 7, W: 7, Uses: 2},
	}
}
