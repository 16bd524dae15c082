package nn

import (
	"fmt"
	"math"
	"strings"

	"github.com/kilnml/kiln/autograd"
)

// BatchNormFolder is implemented by modules whose Forward feeds a child
// convolution or linear layer straight into a child BatchNorm outside any
// Sequential (a ResNet block's conv1 and bn1), a pairing FoldBatchNorm
// cannot see in the module tree alone.
type BatchNormFolder interface {
	Module
	// FoldPairs lists each pair as dotted names of descendants relative
	// to the module, the layer first: {"conv1", "bn1"}, as in the lists
	// given to PyTorch's fuse_modules. Every listed pair must be foldable;
	// a pair that is not is an error, not a skip.
	FoldPairs() [][2]string
}

// foldPair is one layer and the BatchNorm that reads its output.
type foldPair struct {
	layerName, bnName string // dotted from the root, for messages
	layer             Module
	bn                *BatchNorm
}

// FoldBatchNorm folds every BatchNorm that directly follows a Conv2d,
// Conv3d or Linear into that layer's weight and bias, the rewrite of
// PyTorch's fuse_conv_bn_eval and fuse_linear_bn_eval, and returns the
// number of pairs folded. m must be in evaluation mode (see Eval): folding
// bakes in the running statistics, which training would go on changing.
//
// A pair is a layer followed by a BatchNorm in a Sequential, or one
// declared by a module implementing BatchNormFolder. In a Sequential a
// BatchNorm that keeps no running statistics (it normalises with each
// batch's own) is left in place, as is a Linear whose output features are
// not the BatchNorm's channels (the Linear then maps the last dimension of
// a 3-D input and the BatchNorm normalises dimension 1); a convolution
// followed by a BatchNorm of the wrong rank or channel count is an error,
// since the model could not run. A Linear-BatchNorm1d pair is folded
// assuming [N, features] inputs, as PyTorch does: with a [N, C, L] input
// whose C happens to equal the features the fold would be wrong. Grouped
// convolutions fold like any other: the scale is per output channel.
//
// The layer's weight is scaled in place per output channel by
// gamma/sqrt(running_var+eps), gamma the BatchNorm's weight, keeping its
// memory format and identity, and its bias becomes
// (bias-running_mean)·that scale + the BatchNorm's bias,
// with the rounding of PyTorch's float32 ops, so a folded Kiln model's
// state dict matches PyTorch's fused one bit for bit. A layer without a
// bias gains one. Weights must be float32: fold before BF16 conversion.
//
// A folded BatchNorm stays in the tree, so model code that calls it needs
// no change, but acts as the identity (ForwardReLU as a ReLU) and owns no
// parameters or buffers: the state dict loses its entries and gains the
// layer's bias, as after PyTorch's fusion, so a fused PyTorch model's
// state dict loads strictly and an unfused one no longer does (load
// weights before folding). Training a folded model trains the layer
// alone. Calling FoldBatchNorm again folds nothing more.
//
// Nothing is changed unless every pair is foldable; an error names the
// pair and the problem.
func FoldBatchNorm(m Module) (int, error) {
	if m.base().Training() {
		return 0, fmt.Errorf("nn: FoldBatchNorm: the model is in training mode; folding needs an eval model: call nn.Eval(m) first")
	}
	pairs, err := findFoldPairs(m)
	if err != nil {
		return 0, err
	}
	for _, p := range pairs {
		p.fold()
	}
	dropPackedWeights(m)
	return len(pairs), nil
}

// findFoldPairs lists the foldable pairs under m, checking them all
// before anything changes.
func findFoldPairs(m Module) ([]foldPair, error) {
	var pairs []foldPair
	byLayer := map[Module]foldPair{}
	byBN := map[*BatchNorm]foldPair{}
	add := func(p foldPair) error {
		if q, ok := byLayer[p.layer]; ok && q.bn != p.bn {
			return fmt.Errorf("nn: FoldBatchNorm: %s is paired with both %s and %s", p.layerName, q.bnName, p.bnName)
		}
		if q, ok := byBN[p.bn]; ok && q.layer != p.layer {
			return fmt.Errorf("nn: FoldBatchNorm: %s is paired with both %s and %s", p.bnName, q.layerName, p.layerName)
		}
		if _, ok := byBN[p.bn]; ok {
			return nil // declared and also in a Sequential: fold once
		}
		byLayer[p.layer], byBN[p.bn] = p, p
		pairs = append(pairs, p)
		return nil
	}
	for _, nm := range NamedModules(m) {
		if f, ok := nm.Module.(BatchNormFolder); ok {
			for _, names := range f.FoldPairs() {
				p, err := declaredPair(nm, names)
				if err == nil {
					err = p.check(true)
				}
				if err == nil && !p.bn.folded {
					err = add(p)
				}
				if err != nil {
					return nil, err
				}
			}
		}
		s, ok := nm.Module.(*Sequential)
		if !ok {
			continue
		}
		for i := 0; i+1 < s.Len(); i++ {
			bn, ok := s.At(i + 1).(*BatchNorm)
			if !ok || bn.folded || bn.RunningMean() == nil {
				continue
			}
			if l, ok := s.At(i).(*Linear); ok && (l.Out != bn.NumFeatures || bn.name != "BatchNorm1d") {
				continue
			}
			p := foldPair{join(nm.Name, fmt.Sprint(i)), join(nm.Name, fmt.Sprint(i+1)), s.At(i), bn}
			if _, _, ok := layerOut(p.layer); !ok {
				continue
			}
			if err := p.check(false); err != nil {
				return nil, err
			}
			if err := add(p); err != nil {
				return nil, err
			}
		}
	}
	return pairs, nil
}

// declaredPair resolves one of a BatchNormFolder's pairs.
func declaredPair(owner NamedModule, names [2]string) (foldPair, error) {
	var found [2]Module
	for i, name := range names {
		found[i] = descendant(owner.Module, name)
		if found[i] == nil {
			return foldPair{}, fmt.Errorf("nn: FoldBatchNorm: %T at %q declares fold pair %q but has no submodule %q", owner.Module, owner.Name, names, name)
		}
	}
	p := foldPair{layerName: join(owner.Name, names[0]), bnName: join(owner.Name, names[1]), layer: found[0]}
	if _, _, ok := layerOut(p.layer); !ok {
		return p, fmt.Errorf("nn: FoldBatchNorm: %s is a %T; only Conv2d, Conv3d and Linear fold a BatchNorm", p.layerName, p.layer)
	}
	bn, ok := found[1].(*BatchNorm)
	if !ok {
		return p, fmt.Errorf("nn: FoldBatchNorm: %s is a %T, not a BatchNorm", p.bnName, found[1])
	}
	p.bn = bn
	return p, nil
}

// descendant finds the module at a dotted path below m, or nil.
func descendant(m Module, path string) Module {
	for _, name := range strings.Split(path, ".") {
		var next Module
		for _, c := range m.base().children {
			if c.name == name {
				next = c.val
				break
			}
		}
		if next == nil {
			return nil
		}
		m = next
	}
	return m
}

// layerOut returns the output channels of a layer FoldBatchNorm can fold
// into and the BatchNorm constructor that matches it, or ok false for any
// other module.
func layerOut(m Module) (out int, bn string, ok bool) {
	switch l := m.(type) {
	case *Conv2d:
		return l.Out, "BatchNorm2d", true
	case *Conv3d:
		return l.Out, "BatchNorm3d", true
	case *Linear:
		return l.Out, "BatchNorm1d", true
	}
	return 0, "", false
}

// check reports why p cannot be folded. declared pairs must also have
// running statistics; Sequential ones without are skipped before this.
func (p foldPair) check(declared bool) error {
	problem := func(format string, args ...any) error {
		return fmt.Errorf("nn: FoldBatchNorm: cannot fold %s into %s: %s", p.bnName, p.layerName, fmt.Sprintf(format, args...))
	}
	if p.bn.folded {
		return nil
	}
	if p.layer.base().Training() || p.bn.Training() {
		return problem("a module is in training mode; call nn.Eval on the whole model")
	}
	if declared && p.bn.RunningMean() == nil {
		return problem("the BatchNorm keeps no running statistics (NoTrackRunningStats) and normalises with each batch's own")
	}
	out, want, _ := layerOut(p.layer)
	switch {
	case p.bn.name != want:
		return problem("a %T is followed by a %s, want a %s", p.layer, p.bn.name, want)
	case out != p.bn.NumFeatures:
		return problem("the layer has %d output channels and the BatchNorm %d", out, p.bn.NumFeatures)
	}
	w, b := p.layer.base().param("weight"), p.layer.base().param("bias")
	for _, t := range []*autograd.Tensor{w, b, p.bn.Weight(), p.bn.Bias(), p.bn.RunningMean(), p.bn.RunningVar()} {
		if t != nil && t.DType() != autograd.Float32 {
			return problem("it holds %v tensors; fold before converting the model to BF16", t.DType())
		}
	}
	return nil
}

// fold rewrites the layer's weight and bias and makes the BatchNorm the
// identity. The arithmetic is PyTorch's fuse_conv_bn_weights and
// fuse_linear_bn_weights, one float32 op at a time (the explicit
// conversions keep Go from fusing a multiply and an add), so the results
// are the same bits: the scale is gamma·rsqrt(var+eps), conv bias
// ((b−mean)·rsqrt)·gamma+beta, linear bias (b−mean)·scale+beta.
func (p foldPair) fold() {
	lb := p.layer.base()
	c := p.bn.NumFeatures
	rm, rv := p.bn.RunningMean().Float32s(), p.bn.RunningVar().Float32s()
	gamma, beta := vecOr(p.bn.Weight(), 1, c), vecOr(p.bn.Bias(), 0, c)
	bias := lb.param("bias")
	if bias == nil {
		bias = lb.RegisterParameter("bias", autograd.Zeros(c))
		switch l := p.layer.(type) {
		case *Conv2d:
			l.Options.NoBias = false
		case *Conv3d:
			l.Options.NoBias = false
		}
	}
	_, linear := p.layer.(*Linear)
	eps := float32(p.bn.Eps)
	w, b := lb.param("weight").Float32s(), bias.Float32s()
	FoldBatchNormWeights(w, b, rm, rv, gamma, beta, eps, linear)
	p.bn.fold()
}

// FoldBatchNormWeights folds an evaluation-mode batch norm (running mean
// rm and variance rv, affine gamma and beta, eps) into the weights w and
// bias b of the convolution or linear layer before it, in place: PyTorch's
// fuse_conv_bn_weights (or fuse_linear_bn_weights) one float32 op at a
// time, so the result is PyTorch's fused model bit for bit. Dimension 0 of
// w, the output channel, is the outermost in every memory format, so each
// channel's weights are one run of w.
func FoldBatchNormWeights(w, b, rm, rv, gamma, beta []float32, eps float32, linear bool) {
	c := len(b)
	per := len(w) / c
	for o := range c {
		r := rsqrt32(float32(rv[o] + eps))
		scale := float32(gamma[o] * r)
		for i := o * per; i < (o+1)*per; i++ {
			w[i] = float32(w[i] * scale)
		}
		// The explicit conversions keep Go from fusing a multiply and
		// an add, which PyTorch does not.
		if linear {
			b[o] = float32(float32((b[o]-rm[o])*scale) + beta[o])
		} else {
			b[o] = float32(float32(float32((b[o]-rm[o])*r)*gamma[o]) + beta[o])
		}
	}
}

// rsqrt32 is torch.rsqrt on float32: a correctly rounded square root, then
// a correctly rounded reciprocal (float64 then float32 rounds each
// correctly, having more than twice the bits).
func rsqrt32(v float32) float32 {
	return float32(1 / float64(float32(math.Sqrt(float64(v)))))
}

// vecOr returns t's values, or c copies of v for a nil t.
func vecOr(t *autograd.Tensor, v float32, c int) []float32 {
	if t != nil {
		return t.Float32s()
	}
	out := make([]float32, c)
	for i := range out {
		out[i] = v
	}
	return out
}

// RemoveDropout replaces each Dropout held in a Sequential with an
// Identity and returns how many it replaced: in evaluation mode dropout
// already returns its input, so this only removes a layer from the path, as
// PyTorch's inference optimisers do. A Dropout in training mode is left
// alone, as is one a module holds in a field of its own (it is the
// identity in evaluation mode all the same). State dict names do not
// change: Dropout has no state.
func RemoveDropout(m Module) int {
	n := 0
	for _, nm := range NamedModules(m) {
		s, ok := nm.Module.(*Sequential)
		if !ok {
			continue
		}
		for i := range s.Len() {
			if d, ok := s.At(i).(*Dropout); ok && !d.Training() {
				s.replace(i, Eval(NewIdentity()))
				n++
			}
		}
	}
	return n
}
