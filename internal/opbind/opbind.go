// Package opbind holds the descriptors of the built-in ops, by op name:
// for each op, its typed attribute struct, the one function that gives its
// result types, the one that binds its kernel calls over given operand and
// result buffers, and its eager form. Package autograd defines them next
// to its ops, runs the binders on the results it allocates in eager mode
// and traces the attribute structs; package graph decodes a node's
// attributes into the op's struct and runs the same inference, binders and
// eager forms, so an eager and a compiled run make the same kernel calls.
// The package is generic over the tensor type, so it imports neither.
package opbind

import (
	"fmt"
	"reflect"
	"sync"
)

// Op describes one op over tensors of type T whose types are Type.
// Every function takes the op's attributes as a value of its attribute
// struct (the type of Attrs), or nil for an op without attributes.
type Op[T, Type any] struct {
	// Attrs is the zero value of the op's attribute struct, whose
	// exported fields (int, []int, float64, bool, string) are the
	// attributes a trace records and a graph file holds; nil for none.
	Attrs any
	// Infer gives the result types from the operands' (nil for an absent
	// operand), panicking with the op's error where the op would fail. It
	// allocates nothing sized by the operands' shapes: the eager op and
	// package graph's checks of a decoded file run the same rule.
	Infer func(attrs any, ins []*Type) []Type
	// Bind binds the op's kernel calls over ins and outs: it returns the
	// function that computes outs from ins with them, or nil when it does
	// not cover the operands (a mix of memory formats, a dtype it does not
	// take), and the caller computes the op some other way. consts[j]
	// reports that ins[j] is a constant, which a binder may prepare (pack,
	// reorder) once, now; consts may be shorter than ins. Scratch memory
	// the function needs is allocated by the binder, not by each call. It
	// may panic with its op's error for operands the op rejects.
	Bind func(attrs any, ins, outs []T, consts []bool) func()
	// Eager computes the op on ins as the public op does, allocating its
	// results: the reference every bound form must match bit for bit.
	Eager func(attrs any, ins []T) []T
}

// AttrType is the type of the op's attribute struct, nil for none.
func (o Op[T, Type]) AttrType() reflect.Type {
	if o.Attrs == nil {
		return nil
	}
	return reflect.TypeOf(o.Attrs)
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
	ActAttrs any
}

// Const reports whether consts marks operand j as a constant.
func Const(consts []bool, j int) bool { return j < len(consts) && consts[j] }

var (
	mu  sync.RWMutex
	ops = map[string]any{}
)

// Define adds the non-nil parts of d to op's descriptor, so the parts may
// be defined where they are written. Defining a part twice panics.
func Define[T, Type any](op string, d Op[T, Type]) {
	mu.Lock()
	defer mu.Unlock()
	old, _ := ops[op].(Op[T, Type])
	twice := d.Attrs != nil && old.Attrs != nil || d.Infer != nil && old.Infer != nil ||
		d.Bind != nil && old.Bind != nil || d.Eager != nil && old.Eager != nil
	if twice {
		panic(fmt.Sprintf("opbind: a part of op %q defined twice", op))
	}
	if d.Attrs == nil {
		d.Attrs = old.Attrs
	}
	if d.Infer == nil {
		d.Infer = old.Infer
	}
	if d.Bind == nil {
		d.Bind = old.Bind
	}
	if d.Eager == nil {
		d.Eager = old.Eager
	}
	ops[op] = d
}

// Lookup returns op's descriptor over tensors of type T, and whether
// there is one.
func Lookup[T, Type any](op string) (Op[T, Type], bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := ops[op].(Op[T, Type])
	return d, ok
}
