package amp_test

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// Split cuts each float32 into a truncated bfloat16 top half and the low
// 16 bits; Join puts the exact float32 back.
func ExampleSplit() {
	x := math.Float32frombits(0x3f80c000) // 1.005859375
	sp := amp.Split(autograd.FromFloat32([]float32{x}))
	fmt.Printf("top %#04x bottom %#04x\n", sp.Top.BFloat16s()[0], sp.Bottom[0])
	fmt.Println("model computes with", sp.Top.Values()[0])
	fmt.Println("exact join:", sp.Join().Float32s()[0] == x)
	// Output:
	// top 0x3f80 bottom 0xc000
	// model computes with 1
	// exact join: true
}

// Step runs an FP32 update on the joined values and splits them again. The
// update is plain SGD here (state kept per element would be indexed from
// off). Each update is far below a bfloat16 unit, so the weights rounded to
// bfloat16 alone would never move; the FP32 master keeps every one.
func ExampleSplitParam_Step() {
	sp := amp.Split(autograd.FromFloat32([]float32{1, 2, 3}))
	grad := autograd.FromFloat32([]float32{1e-3, 1e-3, -1e-3})
	sgd := func(off int, param, grad []float32) {
		for i := range param {
			param[i] -= 0.5 * grad[i]
		}
	}
	for range 3 {
		sp.Step(grad, sgd)
	}
	fmt.Printf("bf16 weights: %.7g\n", sp.Top.Values())
	fmt.Printf("fp32 master:  %.6g\n", sp.Join().Values())
	// Output:
	// bf16 weights: [0.9960938 1.992188 3]
	// fp32 master:  [0.9985 1.9985 3.0015]
}

// SplitModule swaps a module's float32 parameters for their bfloat16 top
// halves; its state dict still holds the joined FP32 values.
func ExampleSplitModule() {
	lin := nn.NewLinear(autograd.NewGenerator(0), 4, 2, nn.LinearOptions{})
	w := append([]float32(nil), lin.Weight().Float32s()...)
	sm, err := amp.SplitModule(lin)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("module weight:", lin.Weight().DType())
	for _, nt := range sm.StateDict() {
		fmt.Println("state dict:", nt.Name, nt.Tensor.DType(), nt.Tensor.Shape())
	}
	same := true
	for i, v := range sm.StateDict()[0].Tensor.Float32s() {
		same = same && math.Float32bits(v) == math.Float32bits(w[i])
	}
	fmt.Println("weight saved exactly:", same)
	// Output:
	// module weight: bfloat16
	// state dict: weight float32 [2 4]
	// state dict: bias float32 [2]
	// weight saved exactly: true
}

// MasterCopy keeps the FP32 parameter and a bfloat16 copy rounded to
// nearest even.
func ExampleMasterCopy() {
	p := autograd.FromFloat32([]float32{math.Float32frombits(0x3f80c000)}) // 1.005859375
	mc := amp.NewMasterCopy(p)
	fmt.Println(mc.Master == p, mc.Copy.DType(), mc.Copy.Values())
	// Output: true bfloat16 [1.0078125]
}

// From an Autocast input a float32 layer computes in BF16 and returns
// bfloat16 activations; its float32 parameters still get float32
// gradients.
func ExampleAutocast() {
	g := autograd.NewGenerator(1)
	layer := nn.NewLinear(g, 8, 4, nn.LinearOptions{})
	x := autograd.Randn(g, 2, 8)
	y := layer.Forward(amp.Autocast(x))
	autograd.Sum(autograd.Cast(y, autograd.Float32), nil, false).Backward()
	fmt.Println(y.DType(), layer.Weight().Grad().DType())
	// Output: bfloat16 float32
}
