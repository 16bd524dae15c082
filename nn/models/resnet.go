// Package models holds ready-made networks with torchvision's module
// structure and parameter names, so a torchvision state dict saved as
// safetensors loads into them strictly and their outputs match PyTorch's.
package models

import (
	"fmt"
	"slices"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// ResNetOptions configures the ResNet constructors. The zero value is
// torchvision's default: 1000 classes, plain residual initialisation,
// one group of width 64 per bottleneck.
type ResNetOptions struct {
	// NumClasses is the size of the final linear layer; 0 means 1000.
	NumClasses int
	// ZeroInitResidual starts the last BatchNorm of every residual branch
	// at weight 0, so each block begins as the identity (torchvision's
	// zero_init_residual).
	ZeroInitResidual bool
	// Groups and WidthPerGroup shape the 3×3 convolution of each
	// bottleneck as in ResNeXt and Wide ResNet (torchvision's groups and
	// width_per_group); 0 means 1 and 64. Basic blocks accept only the
	// defaults, as in torchvision.
	Groups, WidthPerGroup int
	// ChannelsLast lays the weights out channels-last (NHWC), the layout
	// Kiln's convolutions run fastest on; feed such a model channels-last
	// inputs.
	ChannelsLast bool
}

// Block is one residual block: BasicBlock or Bottleneck.
type Block interface {
	nn.Layer
	isBlock()
}

// BasicBlock is the two-convolution residual block of ResNet-18 and -34
// (torchvision.models.resnet.BasicBlock).
type BasicBlock struct {
	nn.Base
	Conv1, Conv2 *nn.Conv2d
	BN1, BN2     *nn.BatchNorm
	// Downsample maps the block's input to the output's shape when the
	// stride or width changes; nil otherwise.
	Downsample *nn.Sequential
}

// Bottleneck is the 1×1-3×3-1×1 residual block of ResNet-50 and deeper,
// with the stride on the 3×3 convolution (ResNet v1.5, as torchvision
// builds it).
type Bottleneck struct {
	nn.Base
	Conv1, Conv2, Conv3 *nn.Conv2d
	BN1, BN2, BN3       *nn.BatchNorm
	Downsample          *nn.Sequential
}

func (*BasicBlock) isBlock() {}
func (*Bottleneck) isBlock() {}

// FoldPairs declares the convolution-BatchNorm pairs that Forward chains
// outside a Sequential, for nn.FoldBatchNorm; the downsample Sequential's
// pair is found without help.
func (*BasicBlock) FoldPairs() [][2]string { return [][2]string{{"conv1", "bn1"}, {"conv2", "bn2"}} }

// FoldPairs declares the block's three convolution-BatchNorm pairs.
func (*Bottleneck) FoldPairs() [][2]string {
	return [][2]string{{"conv1", "bn1"}, {"conv2", "bn2"}, {"conv3", "bn3"}}
}

// Forward computes relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
// Each BatchNorm-ReLU pair and the final sum-ReLU run as one fused op,
// with PyTorch's results bit for bit.
func (b *BasicBlock) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(b, x)()
	out := bnReLU(b.BN1, b.Conv1.Forward(x))
	out = bn(b.BN2, b.Conv2.Forward(out))
	return addReLU(out, shortcut(b.Downsample, x))
}

// Forward computes the bottleneck branch plus the shortcut, then ReLU.
func (b *Bottleneck) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(b, x)()
	out := bnReLU(b.BN1, b.Conv1.Forward(x))
	out = bnReLU(b.BN2, b.Conv2.Forward(out))
	out = bn(b.BN3, b.Conv3.Forward(out))
	return addReLU(out, shortcut(b.Downsample, x))
}

// In a computation without gradient recording (inference) a block's convolution outputs
// are temporaries that only the next op reads, so batch norm, ReLU and the
// residual sum overwrite them, as torchvision's ReLU(inplace=True) and
// `out += identity` do; with recording they are the fused out-of-place
// ops autograd needs.

func bnReLU(n *nn.BatchNorm, x *autograd.Tensor) *autograd.Tensor {
	if x.Mode().NoGrad() {
		return n.ForwardInPlace(x, true)
	}
	return n.ForwardReLU(x)
}

func bn(n *nn.BatchNorm, x *autograd.Tensor) *autograd.Tensor {
	if x.Mode().NoGrad() {
		return n.ForwardInPlace(x, false)
	}
	return n.Forward(x)
}

func addReLU(out, identity *autograd.Tensor) *autograd.Tensor {
	if out.Mode().NoGrad() && slices.Equal(out.Shape(), identity.Shape()) && out.Format() == identity.Format() {
		return autograd.AddReLUInPlace(out, identity)
	}
	return autograd.AddReLU(out, identity)
}

func shortcut(down *nn.Sequential, x *autograd.Tensor) *autograd.Tensor {
	if down == nil {
		return x
	}
	if down.Len() == 2 {
		// The downsample's convolution output is a temporary too.
		if n, ok := down.At(1).(*nn.BatchNorm); ok {
			return bn(n, down.At(0).Forward(x))
		}
	}
	return down.Forward(x)
}

// ResNet is torchvision's ResNet: a 7×7 stem, four stages of residual
// blocks, global average pooling and a linear classifier. Its state dict
// names ("conv1.weight", "layer1.0.bn1.running_mean", "fc.bias", …) are
// torchvision's.
type ResNet struct {
	nn.Base
	Conv1   *nn.Conv2d
	BN1     *nn.BatchNorm
	MaxPool *nn.MaxPool2d
	// Layers are the four stages, layer1 … layer4.
	Layers  [4]*nn.Sequential
	AvgPool *nn.AdaptiveAvgPool2d
	FC      *nn.Linear
}

// FoldPairs declares the stem's convolution-BatchNorm pair; the blocks
// declare their own.
func (*ResNet) FoldPairs() [][2]string { return [][2]string{{"conv1", "bn1"}} }

// Forward maps images [N, 3, H, W] (any H, W ≥ 32 for the standard stem)
// to logits [N, NumClasses].
func (r *ResNet) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer nn.Enter(r, x)()
	if x.NDim() != 4 || x.Shape()[1] != 3 {
		nn.Fail(autograd.ErrShape, "ResNet.Forward", "input must be images [N, 3, H, W], got shape %v", x.Shape())
	}
	x = r.MaxPool.Forward(bnReLU(r.BN1, r.Conv1.Forward(x)))
	for _, l := range r.Layers {
		x = l.Forward(x)
	}
	x = r.AvgPool.Forward(x)
	return r.FC.Forward(autograd.Flatten(x, 1, -1))
}

// blockKind builds one family of residual blocks.
type blockKind struct {
	expansion int
	build     func(g *autograd.Generator, in, planes, stride int, down *nn.Sequential, opt ResNetOptions) Block
}

var basic = blockKind{1, func(g *autograd.Generator, in, planes, stride int, down *nn.Sequential, _ ResNetOptions) Block {
	b := &BasicBlock{Downsample: down}
	b.Conv1 = register(&b.Base, "conv1", conv(g, in, planes, 3, stride))
	b.BN1 = register(&b.Base, "bn1", batchNorm(planes))
	b.Conv2 = register(&b.Base, "conv2", conv(g, planes, planes, 3, 1))
	b.BN2 = register(&b.Base, "bn2", batchNorm(planes))
	if down != nil {
		b.RegisterModule("downsample", down)
	}
	return b
}}

var bottleneck = blockKind{4, func(g *autograd.Generator, in, planes, stride int, down *nn.Sequential, opt ResNetOptions) Block {
	width := planes * opt.WidthPerGroup / 64 * opt.Groups
	b := &Bottleneck{Downsample: down}
	b.Conv1 = register(&b.Base, "conv1", conv(g, in, width, 1, 1))
	b.BN1 = register(&b.Base, "bn1", batchNorm(width))
	b.Conv2 = register(&b.Base, "conv2", groupConv(g, width, width, 3, stride, opt.Groups))
	b.BN2 = register(&b.Base, "bn2", batchNorm(width))
	b.Conv3 = register(&b.Base, "conv3", conv(g, width, planes*4, 1, 1))
	b.BN3 = register(&b.Base, "bn3", batchNorm(planes*4))
	if down != nil {
		b.RegisterModule("downsample", down)
	}
	return b
}}

func register[M nn.Module](b *nn.Base, name string, m M) M {
	b.RegisterModule(name, m)
	return m
}

func conv(g *autograd.Generator, in, out, kernel, stride int) *nn.Conv2d {
	return groupConv(g, in, out, kernel, stride, 1)
}

// groupConv is a bias-free convolution padded to keep the size (for odd
// kernels) and initialised as torchvision's ResNet does.
func groupConv(g *autograd.Generator, in, out, kernel, stride, groups int) *nn.Conv2d {
	c := nn.NewConv2d(g, in, out, kernel, nn.ConvOptions{Stride: stride, Padding: kernel / 2, Groups: groups, NoBias: true})
	nn.KaimingNormal(g, c.Weight(), nn.KaimingOptions{Mode: nn.FanOut, Nonlinearity: "relu"})
	return c
}

func batchNorm(c int) *nn.BatchNorm { return nn.NewBatchNorm2d(c, nn.BatchNormOptions{}) }

// NewResNet builds a ResNet from a block kind ("basic" or "bottleneck")
// and the number of blocks in each of the four stages, as torchvision's
// ResNet(block, layers) does. Weights are drawn from g in torchvision's
// order of initialisation; the values differ from PyTorch's random ones,
// so load a state dict to reproduce a PyTorch model.
func NewResNet(g *autograd.Generator, block string, layers [4]int, opt ResNetOptions) *ResNet {
	const op = "NewResNet"
	kinds := map[string]blockKind{"basic": basic, "bottleneck": bottleneck}
	kind, ok := kinds[block]
	if !ok {
		nn.Fail(autograd.ErrArgument, op, "unknown block kind %q (want \"basic\" or \"bottleneck\")", block)
	}
	if opt.NumClasses == 0 {
		opt.NumClasses = 1000
	}
	if opt.Groups == 0 {
		opt.Groups = 1
	}
	if opt.WidthPerGroup == 0 {
		opt.WidthPerGroup = 64
	}
	switch {
	case opt.NumClasses < 0:
		nn.Fail(autograd.ErrArgument, op, "number of classes must be positive, got %d", opt.NumClasses)
	case opt.Groups < 0 || opt.WidthPerGroup < 0:
		nn.Fail(autograd.ErrArgument, op, "groups %d and width per group %d must be positive", opt.Groups, opt.WidthPerGroup)
	case block == "basic" && (opt.Groups != 1 || opt.WidthPerGroup != 64):
		nn.Fail(autograd.ErrArgument, op, "basic blocks only support groups=1 and width per group 64, got %d and %d", opt.Groups, opt.WidthPerGroup)
	}
	for i, n := range layers {
		if n < 1 {
			nn.Fail(autograd.ErrArgument, op, "stage %d must have at least one block, got %d", i+1, n)
		}
	}

	r := &ResNet{}
	r.Conv1 = register(&r.Base, "conv1", nn.NewConv2d(g, 3, 64, 7, nn.ConvOptions{Stride: 2, Padding: 3, NoBias: true}))
	nn.KaimingNormal(g, r.Conv1.Weight(), nn.KaimingOptions{Mode: nn.FanOut, Nonlinearity: "relu"})
	r.BN1 = register(&r.Base, "bn1", batchNorm(64))
	r.RegisterModule("relu", nn.NewReLU())
	r.MaxPool = register(&r.Base, "maxpool", nn.NewMaxPool2d(3, nn.MaxPoolOptions{Stride: 2, Padding: 1}))
	in := 64
	for i, n := range layers {
		planes := 64 << i
		stride := 2 // each later stage halves the resolution
		if i == 0 {
			stride = 1
		}
		stage := nn.NewSequential()
		for j := range n {
			s := 1
			var down *nn.Sequential
			if j == 0 {
				s = stride
				if s != 1 || in != planes*kind.expansion {
					down = nn.NewSequential(conv(g, in, planes*kind.expansion, 1, s), batchNorm(planes*kind.expansion))
				}
			}
			stage.Append(kind.build(g, in, planes, s, down, opt))
			in = planes * kind.expansion
		}
		r.Layers[i] = register(&r.Base, fmt.Sprintf("layer%d", i+1), stage)
	}
	r.AvgPool = register(&r.Base, "avgpool", nn.NewAdaptiveAvgPool2d(1, 1))
	r.FC = register(&r.Base, "fc", nn.NewLinear(g, in, opt.NumClasses, nn.LinearOptions{}))

	if opt.ZeroInitResidual {
		for _, m := range nn.NamedModules(r) {
			switch b := m.Module.(type) {
			case *BasicBlock:
				nn.Zeros(b.BN2.Weight())
			case *Bottleneck:
				nn.Zeros(b.BN3.Weight())
			}
		}
	}
	if opt.ChannelsLast {
		nn.To(r, autograd.ChannelsLast)
	}
	return r
}

// ResNet18 is torchvision's resnet18: basic blocks [2, 2, 2, 2].
func ResNet18(g *autograd.Generator, opt ResNetOptions) *ResNet {
	return NewResNet(g, "basic", [4]int{2, 2, 2, 2}, opt)
}

// ResNet34 is torchvision's resnet34: basic blocks [3, 4, 6, 3].
func ResNet34(g *autograd.Generator, opt ResNetOptions) *ResNet {
	return NewResNet(g, "basic", [4]int{3, 4, 6, 3}, opt)
}

// ResNet50 is torchvision's resnet50: bottlenecks [3, 4, 6, 3].
func ResNet50(g *autograd.Generator, opt ResNetOptions) *ResNet {
	return NewResNet(g, "bottleneck", [4]int{3, 4, 6, 3}, opt)
}

// ResNet101 is torchvision's resnet101: bottlenecks [3, 4, 23, 3].
func ResNet101(g *autograd.Generator, opt ResNetOptions) *ResNet {
	return NewResNet(g, "bottleneck", [4]int{3, 4, 23, 3}, opt)
}

// ResNet152 is torchvision's resnet152: bottlenecks [3, 8, 36, 3].
func ResNet152(g *autograd.Generator, opt ResNetOptions) *ResNet {
	return NewResNet(g, "bottleneck", [4]int{3, 8, 36, 3}, opt)
}

// ResNetByName builds one of "resnet18", "resnet34", "resnet50",
// "resnet101", "resnet152", or returns an error naming the choices.
func ResNetByName(g *autograd.Generator, arch string, opt ResNetOptions) (*ResNet, error) {
	build := map[string]func(*autograd.Generator, ResNetOptions) *ResNet{
		"resnet18": ResNet18, "resnet34": ResNet34, "resnet50": ResNet50,
		"resnet101": ResNet101, "resnet152": ResNet152,
	}[arch]
	if build == nil {
		return nil, fmt.Errorf("models: unknown architecture %q (want resnet18, resnet34, resnet50, resnet101 or resnet152)", arch)
	}
	var r *ResNet
	err := autograd.Try(func() { r = build(g, opt) })
	return r, err
}
