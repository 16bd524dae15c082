package quant

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// entry builds an OpConf with all inputs and outputs quantized, as
// calibration leaves them before the recipe; ins names each input's
// flow: an earlier entry's "name<id>" for its first output, "" for an
// input no recorded op makes. Scales are the id plus a tenth per position,
// so the tests can see where a scale came from.
func entry(id int, name string, ins ...string) OpConf {
	op := OpConf{ID: id, Name: name, OutputsFlow: []string{fmt.Sprintf("%s%d.output0", name, id)},
		OutputScales: []float64{float64(id) + 0.5}, OutputZeroPoints: []int32{int32(id)}, OutputsQuantized: []bool{true}}
	for j, in := range ins {
		f := fmt.Sprintf("%s%d.input%d", name, id, j)
		if in != "" {
			f = in + ".output0"
		}
		op.InputsFlow = append(op.InputsFlow, f)
		op.InputScales = append(op.InputScales, float64(id)+0.1*float64(j+1))
		op.InputZeroPoints = append(op.InputZeroPoints, int32(100+id))
		op.InputsQuantized = append(op.InputsQuantized, true)
	}
	return op
}

// quantized summarises the recipe's decisions as "name: ins→outs" with T
// and F per position.
func quantized(ops []OpConf) []string {
	tf := func(bs []bool) string {
		var b strings.Builder
		for _, v := range bs {
			b.WriteByte("FT"[map[bool]int{false: 0, true: 1}[v]])
		}
		return b.String()
	}
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = fmt.Sprintf("%s%d: %s→%s", op.Name, op.ID, tf(op.InputsQuantized), tf(op.OutputsQuantized))
	}
	return out
}

func TestDefaultRecipe(t *testing.T) {
	cases := []struct {
		name string
		ops  []OpConf
		want []string
	}{
		{"residual block", []OpConf{
			entry(0, "conv2d", ""), entry(1, "relu", "conv2d0"), entry(2, "max_pool2d", "relu1"),
			entry(3, "conv2d", "max_pool2d2"), entry(4, "relu", "conv2d3"), entry(5, "conv2d", "relu4"),
			entry(6, "add", "conv2d5", "max_pool2d2"), entry(7, "relu", "add6"),
			entry(8, "adaptive_avg_pool2d", "relu7"), entry(9, "flatten", "adaptive_avg_pool2d8"), entry(10, "linear", "flatten9"),
		}, []string{
			"conv2d0: T→F", "relu1: F→F", "max_pool2d2: T→F", "conv2d3: T→F", "relu4: F→F", "conv2d5: T→F",
			"add6: FT→F", "relu7: F→F", "adaptive_avg_pool2d8: T→F", "flatten9: T→F", "linear10: T→F",
		}},
		{"add of two non-layer results", []OpConf{
			entry(0, "relu", ""), entry(1, "sigmoid", ""), entry(2, "add", "relu0", "sigmoid1"), entry(3, "gelu", "add2"),
		}, []string{"relu0: T→F", "sigmoid1: T→F", "add2: FF→F", "gelu3: F→T"}},
		{"add of two layers keeps the second input quantized", []OpConf{
			entry(0, "linear", ""), entry(1, "linear", ""), entry(2, "add", "linear0", "linear1"),
		}, []string{"linear0: T→F", "linear1: T→F", "add2: FT→F"}},
		{"flatten between float32 ops", []OpConf{
			entry(0, "flatten", ""),
		}, []string{"flatten0: F→F"}},
		{"matmul and bmm", []OpConf{
			entry(0, "matmul", "", ""), entry(1, "bmm", "matmul0", ""),
		}, []string{"matmul0: TT→F", "bmm1: TT→T"}},
		{"dropout passes nothing on", []OpConf{
			entry(0, "linear", ""), entry(1, "dropout", "linear0"), entry(2, "relu", "dropout1"),
		}, []string{"linear0: T→F", "dropout1: T→T", "relu2: T→T"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defaultRecipe(c.ops)
			if got := quantized(c.ops); !slices.Equal(got, c.want) {
				t.Errorf("got  %v\nwant %v", got, c.want)
			}
		})
	}
}

// TestDefaultRecipeScales checks the parameters the recipe moves: a
// flatten after a pool takes the pool's output parameters for its input
// and output, and the op after a flatten reads with the flatten's.
func TestDefaultRecipeScales(t *testing.T) {
	ops := []OpConf{entry(0, "max_pool2d", ""), entry(1, "flatten", "max_pool2d0"), entry(2, "linear", "flatten1")}
	defaultRecipe(ops)
	if ops[1].InputScales[0] != 0.5 || ops[1].OutputScales[0] != 0.5 || ops[1].InputZeroPoints[0] != 0 || ops[1].OutputZeroPoints[0] != 0 {
		t.Errorf("flatten after a pool: input %v/%v output %v/%v, want the pool's 0.5/0", ops[1].InputScales, ops[1].InputZeroPoints, ops[1].OutputScales, ops[1].OutputZeroPoints)
	}
	if ops[2].InputScales[0] != 0.5 || ops[2].InputZeroPoints[0] != 0 {
		t.Errorf("linear after flatten reads with %v/%v, want the flatten's 0.5/0", ops[2].InputScales, ops[2].InputZeroPoints)
	}
}
