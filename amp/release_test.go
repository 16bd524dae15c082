package amp

import (
	"runtime"
	"testing"
	"weak"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// TestReplaceParamsReleases checks that each original is garbage once its
// last name is replaced, while the others are still being converted: the
// peak of a split is one original beside the split model, not all of them.
func TestReplaceParamsReleases(t *testing.T) {
	g := autograd.NewGenerator(1)
	lin := nn.NewLinear(g, 8, 8, nn.LinearOptions{})
	m := nn.NewModuleList(nn.NewEmbeddingBag(g, 50, 8, nn.EmbeddingBagOptions{}), lin,
		nn.NewEmbeddingBag(g, 70, 8, nn.EmbeddingBagOptions{}))
	lin = nil
	slots, err := selectParams("test", "split", m, nil)
	if err != nil {
		t.Fatal(err)
	}
	var weaks []weak.Pointer[autograd.Tensor]
	for _, s := range slots {
		weaks = append(weaks, weak.Make(s.orig))
	}
	calls := 0
	replaceParams(slots, func(_ string, p *autograd.Tensor) *autograd.Tensor {
		runtime.GC()
		for k := range calls {
			if weaks[k].Value() != nil {
				t.Errorf("converting parameter %d: parameter %d is still reachable", calls, k)
			}
		}
		if weaks[calls].Value() == nil {
			t.Errorf("parameter %d was collected before its conversion", calls)
		}
		calls++
		return Split(p).Top
	})
	if calls != len(slots) {
		t.Fatalf("%d conversions for %d parameters", calls, len(slots))
	}
}
