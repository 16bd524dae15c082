package datasets_test

import (
	"fmt"
	"log"

	"github.com/kilnml/kiln/datasets"
)

// A training loop ranges over one epoch at a time; batches come out in
// order even when several workers load them.
func ExampleDataLoader_Epoch() {
	train, _ := datasets.Split(datasets.Digits(), 0.2, 1)
	loader, err := datasets.NewDataLoader(train, datasets.LoaderOptions{
		BatchSize: 256, Shuffle: true, Seed: 1, DropLast: true, Workers: 2,
	})
	if err != nil {
		log.Fatal(err)
	}
	for epoch := range 2 {
		for batch, err := range loader.Epoch(epoch) {
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(epoch, batch.Inputs.Shape(), batch.Labels.Shape())
		}
	}
	// Output:
	// 0 [256 1 8 8] [256]
	// 0 [256 1 8 8] [256]
	// 0 [256 1 8 8] [256]
	// 0 [256 1 8 8] [256]
	// 0 [256 1 8 8] [256]
	// 1 [256 1 8 8] [256]
	// 1 [256 1 8 8] [256]
	// 1 [256 1 8 8] [256]
	// 1 [256 1 8 8] [256]
	// 1 [256 1 8 8] [256]
}

// The embedded digits split into reproducible training and test parts.
func ExampleDigits() {
	digits := datasets.Digits()
	train, test := datasets.Split(digits, 0.25, 42)
	ex, _ := digits.Get(0)
	fmt.Println(digits.Len(), train.Len(), test.Len(), ex.Input.Shape(), ex.Label)
	// Output: 1797 1348 449 [1 8 8] 0
}

// Synthetic images stand in for ImageNet when benchmarking a ResNet: a
// million 224×224 examples cost nothing until they are asked for.
func ExampleSynthetic() {
	ds, err := datasets.Synthetic(datasets.SyntheticConfig{
		N: 1_000_000, Classes: 1000, Channels: 3, Height: 224, Width: 224, Seed: 1, Noise: 0.5, Shift: 16,
	})
	if err != nil {
		log.Fatal(err)
	}
	ex, _ := ds.Get(123_456)
	fmt.Println(ds.Len(), ex.Input.Shape(), ex.Label)
	// Output: 1000000 [3 224 224] 456
}

// MNIST reads the files of the original distribution, gzipped or not.
func ExampleMNIST() {
	train, err := datasets.MNIST("data/mnist", true)
	if err != nil {
		log.Fatal(err) // e.g. "data/mnist/train-images-idx3-ubyte.gz: truncated: …"
	}
	fmt.Println(train.Len()) // 60000
}
