package nn

import (
	"strconv"

	"github.com/kilnml/kiln/autograd"
)

// Sequential chains layers: its Forward feeds each layer's output to the
// next. Its children are named "0", "1", … as in torch.nn.Sequential, so
// a Sequential held under "features" names its first layer's weight
// "features.0.weight".
type Sequential struct {
	Base
	layers []Layer
}

// NewSequential returns a Sequential of layers, in order.
func NewSequential(layers ...Layer) *Sequential {
	s := &Sequential{}
	for _, l := range layers {
		s.Append(l)
	}
	return s
}

// Append adds l at the end, named by its position, and returns s.
func (s *Sequential) Append(l Layer) *Sequential {
	s.RegisterModule(strconv.Itoa(len(s.layers)), l)
	s.layers = append(s.layers, l)
	return s
}

// Len returns the number of layers.
func (s *Sequential) Len() int { return len(s.layers) }

// At returns layer i.
func (s *Sequential) At(i int) Layer {
	checkIndex("Sequential.At", i, len(s.layers))
	return s.layers[i]
}

// Forward runs x through every layer in order; an empty Sequential returns
// x.
func (s *Sequential) Forward(x *autograd.Tensor) *autograd.Tensor {
	defer Enter(s, x)()
	for i := 0; i < len(s.layers); i++ {
		// A Linear then a ReLU run as one autograd.LinearReLU (the same
		// bits, one pass over the result fewer) unless a trace records
		// each module's ops in its own scope.
		if lin, ok := s.layers[i].(*Linear); ok && i+1 < len(s.layers) && x != nil && !x.Mode().Tracing() {
			if relu, ok := s.layers[i+1].(*ReLU); ok {
				x = lin.forwardReLU(x, relu)
				i++
				continue
			}
		}
		x = s.layers[i].Forward(x)
	}
	return x
}

// ModuleList holds modules in a list, named "0", "1", … as in
// torch.nn.ModuleList, so their parameters are registered; it has no
// Forward.
type ModuleList struct {
	Base
	modules []Module
}

// NewModuleList returns a ModuleList of ms.
func NewModuleList(ms ...Module) *ModuleList {
	l := &ModuleList{}
	for _, m := range ms {
		l.Append(m)
	}
	return l
}

// Append adds m at the end and returns l.
func (l *ModuleList) Append(m Module) *ModuleList {
	l.RegisterModule(strconv.Itoa(len(l.modules)), m)
	l.modules = append(l.modules, m)
	return l
}

// Len returns the number of modules.
func (l *ModuleList) Len() int { return len(l.modules) }

// At returns module i.
func (l *ModuleList) At(i int) Module {
	checkIndex("ModuleList.At", i, len(l.modules))
	return l.modules[i]
}

// checkIndex panics with an *autograd.Error, rather than Go's index panic,
// unless i indexes one of n entries.
func checkIndex(op string, i, n int) {
	if i < 0 || i >= n {
		Fail(autograd.ErrIndex, op, "index %d out of range for %d entries", i, n)
	}
}

// replace puts l in place of layer i, under the same name.
func (s *Sequential) replace(i int, l Layer) {
	name := strconv.Itoa(i)
	for j := range s.children {
		if s.children[j].name == name {
			s.children[j].val = l
		}
	}
	s.layers[i] = l
}
