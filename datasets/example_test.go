package datasets_test

import (
	"fmt"
	"log"

	"github.com/kilnml/kiln/autograd"
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

// Data-parallel training over two processes: each builds the same loader
// but for its own Rank. Both ranks shuffle with the same Seed and epoch,
// so they split one permutation between them: rank 0 takes positions 0, 2,
// 4, … of it and rank 1 positions 1, 3, 5, …. Nine examples do not split
// evenly in two, so the permutation is padded with its first example and
// both ranks take three batches a step at a time, never waiting on each
// other; DropUneven would skip the ninth example instead.
func ExampleLoaderOptions_sharded() {
	ds, err := datasets.Synthetic(datasets.SyntheticConfig{N: 9, Classes: 3, Channels: 1, Height: 4, Width: 4, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	for epoch := range 2 {
		for rank := range 2 { // in practice, one rank per process
			loader, err := datasets.NewDataLoader(ds, datasets.LoaderOptions{
				BatchSize: 2, Shuffle: true, Seed: 1, Rank: rank, WorldSize: 2,
			})
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("epoch %d rank %d:", epoch, rank)
			for batch, err := range loader.Epoch(epoch) {
				if err != nil {
					log.Fatal(err)
				}
				fmt.Printf(" %v", batch.Indices)
			}
			fmt.Println()
		}
	}
	// Output:
	// epoch 0 rank 0: [1 0] [4 8] [7]
	// epoch 0 rank 1: [5 6] [2 3] [1]
	// epoch 1 rank 0: [2 8] [5 1] [3]
	// epoch 1 rank 1: [0 6] [7 4] [2]
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

// An ImageNet training set: one folder per class, JPEGs decoded by the
// loader's workers, each image cropped and flipped afresh every epoch,
// batches laid out channels-last.
func ExampleImageFolder() {
	train, err := datasets.ImageFolder("data/imagenet/train", datasets.ImageFolderOptions{
		Transform: datasets.Compose(
			datasets.RandomResizedCrop(224, datasets.ResizedCropOptions{}),
			datasets.RandomHorizontalFlip(0.5),
			datasets.Normalize(datasets.ImageNetMean, datasets.ImageNetStd),
		),
		Seed:      1,
		OnCorrupt: datasets.CorruptSkip,
		Report:    func(path string, err error) { log.Printf("skipped: %v", err) },
	})
	if err != nil {
		log.Fatal(err) // e.g. "datasets: ImageFolder: open data/imagenet/train: no such file or directory"
	}
	loader, err := datasets.NewDataLoader(train, datasets.LoaderOptions{
		BatchSize: 256, Shuffle: true, Seed: 1, DropLast: true, Workers: 8, ChannelsLast: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(train.Classes), train.Len()) // 1000 1281167
	for batch, err := range loader.Epoch(0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(batch.Inputs.Shape(), batch.Inputs.Format()) // [256 3 224 224] channels_last
		break
	}
}

// The evaluation transforms of torchvision's ImageNet models, with a
// custom transform written as a function. None of them is random, so no
// generator is needed.
func ExampleCompose() {
	clip := datasets.TransformFunc(func(x *autograd.Tensor, _ *autograd.Generator) (*autograd.Tensor, error) {
		out := make([]float32, x.Numel())
		for k, v := range x.ContiguousFloat32s() {
			out[k] = min(max(v, 0), 1)
		}
		return autograd.FromFloat32(out, x.Shape()...), nil
	})
	eval := datasets.Compose(
		datasets.Resize(256),
		datasets.CenterCrop(224),
		clip,
		datasets.Normalize(datasets.ImageNetMean, datasets.ImageNetStd),
	)
	photo := autograd.Full(0.5, 3, 375, 500) // a decoded 500×375 image
	x, err := eval.Apply(photo, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v %.4f\n", x.Shape(), x.Float32s()[0])
	// Output: [3 224 224] 0.0655
}
