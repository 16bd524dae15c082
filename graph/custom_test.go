package graph

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
)

type scaleAttrs struct {
	Factor float64 `kiln:"factor"`
	Note   string
}

func scaleOp(name string) *autograd.Function[scaleAttrs] {
	return &autograd.Function[scaleAttrs]{
		Name: name,
		Forward: func(a scaleAttrs, in []*autograd.Tensor) *autograd.Tensor {
			return autograd.MulScalar(in[0], float32(a.Factor))
		},
		Backward: func(a scaleAttrs, _ []*autograd.Tensor, _, g *autograd.Tensor) []*autograd.Tensor {
			return []*autograd.Tensor{autograd.MulScalar(g, float32(a.Factor))}
		},
		Infer: func(_ scaleAttrs, in []autograd.TensorType) (autograd.TensorType, error) {
			if len(in) != 1 {
				return autograd.TensorType{}, fmt.Errorf("takes one operand, got %d", len(in))
			}
			return in[0], nil
		},
	}
}

func TestRegisterRejects(t *testing.T) {
	noInfer := scaleOp("ScaleNoInfer")
	noInfer.Infer = nil
	badAttrs := &autograd.Function[struct{ F float32 }]{Name: "BadAttrs", Forward: func(struct{ F float32 }, []*autograd.Tensor) *autograd.Tensor { return nil },
		Infer: func(struct{ F float32 }, []autograd.TensorType) (autograd.TensorType, error) {
			return autograd.TensorType{}, nil
		}}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"built-in name", Register(scaleOp("Conv2d")), "built-in op"},
		{"fused part", Register(scaleOp("SigmoidMul")), "fused"},
		{"not an identifier", Register(scaleOp("Scale+ReLU")), "not an identifier"},
		{"empty name", Register(scaleOp("")), "not an identifier"},
		{"no Infer", Register(noInfer), "needs a Forward and an Infer"},
		{"float32 attribute", Register(badAttrs), "field F has type float32"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, c.err, c.want)
		}
	}
	if err := Register(scaleOp("ScaleTwice")); err != nil {
		t.Fatal(err)
	}
	if err := Register(scaleOp("ScaleTwice")); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Errorf("registering a name twice: %v", err)
	}
	same := scaleOp("ScaleSame")
	if err := errors.Join(Register(same), Register(same)); err != nil {
		t.Errorf("registering one function twice: %v", err)
	}
}

// TestRegisteredOpRoundTrip traces, saves and loads a registered op with
// attributes, checks its inference against the file, and that a process
// without the op refuses the file naming it.
func TestRegisteredOpRoundTrip(t *testing.T) {
	op := scaleOp("ScaleRoundTrip")
	if err := Register(op); err != nil {
		t.Fatal(err)
	}
	x := autograd.Randn(autograd.NewGenerator(1), 2, 3)
	g, err := TraceFunc(nil, func(in []*autograd.Tensor) []*autograd.Tensor {
		return []*autograd.Tensor{autograd.ReLU(op.Apply(scaleAttrs{Factor: 2.5, Note: "n"}, in[0]))}
	}, x)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.String(); !strings.Contains(got, `ScaleRoundTrip(%input0) {factor=2.5, note="n"}`) {
		t.Errorf("trace:\n%s", got)
	}
	path := filepath.Join(t.TempDir(), "scale.kiln")
	if err := Save(path, g); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(loaded)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	want := autograd.ReLU(autograd.MulScalar(x, 2.5)).Float32s()
	for i, v := range out[0].Float32s() {
		if v != want[i] {
			t.Fatalf("element %d: %v, want %v", i, v, want[i])
		}
	}
	// A wrong operand count fails in the op's own inference.
	bad := loaded.Clone()
	bad.Nodes[0].Inputs = append(bad.Nodes[0].Inputs, bad.Nodes[0].Inputs[0])
	if _, err := Compile(bad); err == nil || !strings.Contains(err.Error(), "takes one operand") {
		t.Errorf("two operands: %v", err)
	}
	// Another process, without the op.
	customOps.Delete("ScaleRoundTrip")
	_, err = Load(path)
	if !errors.Is(err, ErrUnknownOp) || !strings.Contains(err.Error(), `"ScaleRoundTrip"`) {
		t.Errorf("loading without the op: %v", err)
	}
}
