package opbind

import "testing"

type tensor struct{ v float64 }

func TestRegisterLookup(t *testing.T) {
	Register("opbind.test.Double", func(_ any, ins, outs []*tensor, _ []bool) func() {
		return func() { outs[0].v = 2 * ins[0].v }
	})
	b, ok := Lookup[*tensor]("opbind.test.Double")
	if !ok {
		t.Fatal("registered binder not found")
	}
	x, y := &tensor{3}, &tensor{}
	b(nil, []*tensor{x}, []*tensor{y}, nil)()
	if y.v != 6 {
		t.Errorf("bound function wrote %v, want 6", y.v)
	}
	if _, ok := Lookup[*tensor]("opbind.test.Missing"); ok {
		t.Error("Lookup found an op never registered")
	}
	if _, ok := Lookup[tensor]("opbind.test.Double"); ok {
		t.Error("Lookup found a binder over another tensor type")
	}
	defer func() {
		if recover() == nil {
			t.Error("registering an op twice did not panic")
		}
	}()
	Register("opbind.test.Double", Binder[*tensor](nil))
}

func TestConst(t *testing.T) {
	c := []bool{false, true}
	if Const(c, 0) || !Const(c, 1) || Const(c, 2) || Const(nil, 0) {
		t.Error("Const misreads the constants")
	}
}

func TestRegisterLookupInfer(t *testing.T) {
	RegisterInfer("opbind.test.Twice", func(_ any, ins []*tensor) []tensor { return []tensor{*ins[0], *ins[0]} })
	f, ok := LookupInfer[tensor]("opbind.test.Twice")
	if !ok {
		t.Fatal("registered inference not found")
	}
	if got := f(nil, []*tensor{{3}}); len(got) != 2 || got[1].v != 3 {
		t.Errorf("inference gave %v, want two of {3}", got)
	}
	if _, ok := LookupInfer[float64]("opbind.test.Twice"); ok {
		t.Error("LookupInfer found an inference over another type")
	}
	if _, ok := Lookup[*tensor]("opbind.test.Twice"); ok {
		t.Error("Lookup found a binder for an op with only an inference")
	}
}
