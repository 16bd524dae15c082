package opbind

import (
	"reflect"
	"testing"
)

type tensor struct{ v float64 }

type scale struct{ By float64 }

// TestDefineLookup: parts defined apart make one descriptor, found over
// its own types only; a part defined twice panics.
func TestDefineLookup(t *testing.T) {
	const op = "opbind.test.Scale"
	Define(op, Op[*tensor, tensor]{Attrs: scale{}, Bind: func(a any, ins, outs []*tensor, _ []bool) func() {
		return func() { outs[0].v = a.(scale).By * ins[0].v }
	}})
	Define(op, Op[*tensor, tensor]{Infer: func(_ any, ins []*tensor) []tensor { return []tensor{*ins[0]} }})
	d, ok := Lookup[*tensor, tensor](op)
	if !ok || d.Bind == nil || d.Infer == nil || d.Eager != nil {
		t.Fatalf("Lookup = %+v, %v; want the binder and inference defined", d, ok)
	}
	if d.AttrType() != reflect.TypeFor[scale]() {
		t.Errorf("AttrType = %v, want scale", d.AttrType())
	}
	x, y := &tensor{3}, &tensor{}
	d.Bind(scale{2}, []*tensor{x}, []*tensor{y}, nil)()
	if y.v != 6 {
		t.Errorf("bound function wrote %v, want 6", y.v)
	}
	if got := d.Infer(nil, []*tensor{{3}}); len(got) != 1 || got[0].v != 3 {
		t.Errorf("inference gave %v, want {3}", got)
	}
	if _, ok := Lookup[*tensor, tensor]("opbind.test.Missing"); ok {
		t.Error("Lookup found an op never defined")
	}
	if _, ok := Lookup[tensor, tensor](op); ok {
		t.Error("Lookup found a descriptor over another tensor type")
	}
	if (Op[*tensor, tensor]{}).AttrType() != nil {
		t.Error("an op without attributes has an attribute type")
	}
	defer func() {
		if recover() == nil {
			t.Error("defining a binder twice did not panic")
		}
	}()
	Define(op, Op[*tensor, tensor]{Bind: func(any, []*tensor, []*tensor, []bool) func() { return nil }})
}

func TestConst(t *testing.T) {
	c := []bool{false, true}
	if Const(c, 0) || !Const(c, 1) || Const(c, 2) || Const(nil, 0) {
		t.Error("Const misreads the constants")
	}
}
