package models_test

import (
	"fmt"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
)

// A DLRM with two tables predicts click probabilities from 3 dense
// features and one bag of rows per table per sample; its parameters carry
// DLRM_Net's names.
func ExampleNewDLRM() {
	m, err := models.NewDLRM(autograd.NewGenerator(1), models.DLRMConfig{
		SparseFeatureSize: 4,
		EmbeddingSizes:    []int{10, 20},
		BottomMLP:         []int{3, 8, 4},
		TopMLP:            []int{8, 1},
		SparseTables:      true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("top input:", m.Config.TopInput())
	for _, p := range nn.NamedParameters(m) {
		fmt.Println(p.Name, p.Tensor.Shape())
	}

	// Two samples: table 0's bags are {1, 2} and {}, table 1's {5} and {7, 7}.
	dense := autograd.FromFloat32([]float32{0.1, 0.2, 0.3, 1, 2, 3}, 2, 3)
	indices := []*autograd.Tensor{autograd.FromInt64([]int64{1, 2}, 2), autograd.FromInt64([]int64{5, 7, 7}, 3)}
	offsets := []*autograd.Tensor{autograd.FromInt64([]int64{0, 2}, 2), autograd.FromInt64([]int64{0, 1}, 2)}
	p := m.Forward(dense, indices, offsets)
	fmt.Println("probabilities:", p.Shape())
	// Output:
	// top input: 7
	// emb_l.0.weight [10 4]
	// emb_l.1.weight [20 4]
	// bot_l.0.weight [8 3]
	// bot_l.0.bias [8]
	// bot_l.2.weight [4 8]
	// bot_l.2.bias [4]
	// top_l.0.weight [8 7]
	// top_l.0.bias [8]
	// top_l.2.weight [1 8]
	// top_l.2.bias [1]
	// probabilities: [2 1]
}
