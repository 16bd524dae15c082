package graph_test

import (
	"fmt"
	"log"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/kernels"
)

// A batch split across two pools of pinned cores, as IPEX's
// MultiStreamModule does; the joined result is the one-stream result.
func ExampleNewMultiStream() {
	g := autograd.NewGenerator(1)
	model := newBlock(g)
	x := autograd.Randn(g, 4, 3, 8, 8)
	traced, err := graph.Trace(model, x)
	if err != nil {
		log.Fatal(err)
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		log.Fatal(err)
	}

	cores, err := kernels.AvailableCores()
	if err != nil {
		log.Fatal(err)
	}
	var pools []*kernels.Pool
	for _, c := range []int{cores[0], cores[len(cores)-1]} { // one core each (the same one on a 1-core machine)
		p, err := kernels.NewPool([]int{c})
		if err != nil {
			log.Fatal(err)
		}
		defer p.Close()
		pools = append(pools, p)
	}
	ms, err := graph.NewMultiStream(frozen, pools)
	if err != nil {
		log.Fatal(err)
	}
	outs, err := ms.Run(x) // rows 0–1 on the first pool, 2–3 on the second
	if err != nil {
		log.Fatal(err)
	}

	one, err := graph.Compile(frozen)
	if err != nil {
		log.Fatal(err)
	}
	want, err := one.Run(x)
	if err != nil {
		log.Fatal(err)
	}
	same := true
	for i, v := range outs[0].Values() {
		same = same && v == want[0].Values()[i]
	}
	fmt.Println(outs[0].Shape(), "same as one stream:", same)
	// Output: [4 8 8 8] same as one stream: true
}
