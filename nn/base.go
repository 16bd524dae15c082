package nn

import "github.com/kilnml/kiln/autograd"

// param returns the tensor registered under a parameter name, or nil. The
// layers read their parameters through it on every Forward rather than
// caching them, so a parameter swapped with SetParameter (for example by
// BF16 conversion) takes effect.
func (b *Base) param(name string) *autograd.Tensor {
	for _, p := range b.params {
		if p.name == name {
			return p.val
		}
	}
	return nil
}

// buffer returns the tensor registered under a buffer name, or nil.
func (b *Base) buffer(name string) *autograd.Tensor {
	for _, s := range b.buffers {
		if s.name == name {
			return s.val
		}
	}
	return nil
}
