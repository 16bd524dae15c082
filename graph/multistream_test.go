package graph

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

func testPools(t *testing.T) []*kernels.Pool {
	t.Helper()
	cores, err := kernels.AvailableCores()
	if err != nil {
		t.Fatal(err)
	}
	var pools []*kernels.Pool
	for _, c := range cores[:min(len(cores), 2)] {
		p, err := kernels.NewPool([]int{c})
		if err != nil {
			t.Skipf("no pools here: %v", err)
		}
		pools = append(pools, p)
		t.Cleanup(p.Close)
	}
	return pools
}

// TestMultiStreamBitIdentical runs a frozen ResNet-18 (channels-last, batch
// 5) as one stream and split across pools: the outputs are the same bits.
func TestMultiStreamBitIdentical(t *testing.T) {
	pools := testPools(t)
	g := autograd.NewGenerator(4)
	m := nn.Eval(models.ResNet18(g, models.ResNetOptions{NumClasses: 10}))
	x := autograd.Randn(g, 5, 3, 32, 32).To(autograd.ChannelsLast)
	one, frozen := freezeAndCompile(t, m, x)
	want, err := one.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := NewMultiStream(frozen, pools)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []*autograd.Tensor{x, autograd.Randn(g, 1, 3, 32, 32).To(autograd.ChannelsLast)} {
		got, err := ms.Run(batch)
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := one.Run(batch)
		if len(got) != 1 || !sameBits(got[0], ref[0]) {
			t.Fatalf("batch %v: multi-stream output differs from one stream", batch.Shape())
		}
	}
	got, _ := ms.Run(x)
	if !sameBits(got[0], want[0]) {
		t.Fatal("multi-stream output differs from one stream")
	}
}

// TestProgramOnPool checks a Program bound to a pool gives the unbound
// Program's bits.
func TestProgramOnPool(t *testing.T) {
	pools := testPools(t)
	p, g := traceResNet18(t, 2)
	x := autograd.Randn(g, 2, 3, 32, 32)
	want, err := p.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	want = clones(want)
	bound, err := Compile(p.g, WithPool(pools[0]))
	if err != nil {
		t.Fatal(err)
	}
	got, err := bound.Run(x)
	if err != nil || !sameBits(got[0], want[0]) {
		t.Fatalf("on a pool: %v, or different bits", err)
	}
}

func TestMultiStreamErrors(t *testing.T) {
	pools := testPools(t)
	_, frozen := freezeAndCompile(t, nn.NewLinear(autograd.NewGenerator(1), 4, 2, nn.LinearOptions{}), autograd.Ones(3, 4))
	if _, err := NewMultiStream(frozen, nil); err == nil || !strings.Contains(err.Error(), "no pools") {
		t.Errorf("no pools: %v", err)
	}
	ms, err := NewMultiStream(frozen, pools)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Run(autograd.Ones(3, 5)); err == nil {
		t.Error("wrong feature size: no error")
	}
	if _, err := ms.Run(); err == nil || !strings.Contains(err.Error(), "no inputs") {
		t.Errorf("no inputs: %v", err)
	}
}
