// Package opbind holds the kernel bindings and type inference of the ops,
// by op name: for each op, the one function that binds its kernel calls
// over given operand and result buffers, and the one that gives its result
// types. Package autograd registers them, runs them
// on the results it allocates in eager mode, and package graph looks them
// up to bind its compiled plans' buffers, so an eager and a compiled run
// make the same kernel calls. The package is generic over the tensor type,
// so it imports neither.
package opbind

import (
	"fmt"
	"sync"
)

// Binder binds an op's kernel calls over ins and outs: it returns the
// function that computes outs from ins with them, or nil when it does not
// cover the operands (a mix of memory formats, a dtype it does not take),
// and the caller computes the op some other way. attrs are the op's
// attributes in the type its registration documents: a typed options
// struct, or Attrs read by the names the op's trace records. consts[j]
// reports that ins[j] is a constant, which a binder may prepare (pack,
// reorder) once, now; consts may be shorter than ins. Scratch memory the
// function needs is allocated by the binder, not by each call. A binder
// may panic with its op's error for operands the op rejects.
type Binder[T any] func(attrs any, ins, outs []T, consts []bool) func()

// Attrs reads an op's attributes by name, as its trace recorded them.
type Attrs interface {
	Int(name string) int
	Ints(name string) []int
	Float(name string) float64
	Bool(name string) bool
	Str(name string) string
}

// Fused are the attributes of an op whose binder also applies the parts
// that follow it in a fused op to its result, in its own epilogue: Attrs
// are the op's own attributes; with Residual the result adds an operand
// of its shape, the last of ins; Act names an activation applied last
// ("" for none), with its attributes ActAttrs. A binder that cannot fuse
// them returns nil.
type Fused struct {
	Attrs    any
	Residual bool
	Act      string
	ActAttrs Attrs
}

// Const reports whether consts marks operand j as a constant.
func Const(consts []bool, j int) bool { return j < len(consts) && consts[j] }

// Infer gives an op's result types from its operands' (nil for an absent
// operand) with attrs as its Binder takes them, panicking with the op's
// error where the op would fail. It allocates nothing sized by the
// operands' shapes: the eager op and package graph's checks of a decoded
// file run the same rule.
type Infer[T any] func(attrs any, ins []*T) []T

var (
	mu      sync.RWMutex
	binders = map[string]any{}
	infers  = map[string]any{}
)

// Register makes b the binder of op. Registering an op twice panics.
func Register[T any](op string, b Binder[T]) { register(binders, op, b) }

// RegisterInfer makes f the type inference of op. Registering an op twice
// panics.
func RegisterInfer[T any](op string, f Infer[T]) { register(infers, op, f) }

func register(m map[string]any, op string, f any) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := m[op]; dup {
		panic(fmt.Sprintf("opbind: op %q registered twice", op))
	}
	m[op] = f
}

// Lookup returns op's binder over tensors of type T, and whether there is
// one.
func Lookup[T any](op string) (Binder[T], bool) { return lookup[Binder[T]](binders, op) }

// LookupInfer returns op's type inference over types T, and whether there
// is one.
func LookupInfer[T any](op string) (Infer[T], bool) { return lookup[Infer[T]](infers, op) }

func lookup[F any](m map[string]any, op string) (F, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := m[op].(F)
	return f, ok
}
