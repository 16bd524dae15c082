package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/kilnml/kiln/datasets"
)

// The synthetic data's fixed properties. The seed is not --seed, so that
// every run, and evaluate, sees the same images.
const (
	syntheticSeed  = 2024
	syntheticNoise = 3.0
	// syntheticShiftDiv sets the largest shift, image side / syntheticShiftDiv.
	syntheticShiftDiv = 8
	// splitSeed picks the held-out part of an image folder without val/.
	splitSeed = 1
)

// data is what a subcommand reads: training and held-out images and the
// number of classes. train is nil for evaluate, val empty when nothing is
// held out.
type data struct {
	train, val datasets.Dataset
	classes    int
	// augmented is the image folder the training images come from, whose
	// random transforms SetEpoch puts in step with an epoch; nil for
	// synthetic data.
	augmented *datasets.ImageFolderSet
}

// synthetic returns the synthetic images: the held-out ones are the first
// valSize examples, the training ones the next trainSize, so the held-out
// set does not depend on the training set's size.
func synthetic(o *options, classes, trainSize int) (*data, error) {
	ds, err := datasets.Synthetic(datasets.SyntheticConfig{
		N: o.ValSize + trainSize, Classes: classes, Channels: 3, Height: o.ImageSize, Width: o.ImageSize,
		Seed: syntheticSeed, Noise: syntheticNoise, Shift: o.ImageSize / syntheticShiftDiv,
	})
	if err != nil {
		return nil, err
	}
	return &data{
		train:   &datasets.Subset{Dataset: ds, Indices: span(o.ValSize, o.ValSize+trainSize)},
		val:     &datasets.Subset{Dataset: ds, Indices: span(0, o.ValSize)},
		classes: classes,
	}, nil
}

// span returns the integers lo, lo+1, …, hi−1.
func span(lo, hi int) []int {
	s := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

// trainTransform and evalTransform are torchvision's standard ImageNet
// pipelines for an image side of size.
func trainTransform(size int) datasets.Transform {
	return datasets.Compose(
		datasets.RandomResizedCrop(size, datasets.ResizedCropOptions{}),
		datasets.RandomHorizontalFlip(0.5),
		datasets.Normalize(datasets.ImageNetMean, datasets.ImageNetStd),
	)
}

func evalTransform(size int) datasets.Transform {
	return datasets.Compose(
		datasets.Resize(size*256/224),
		datasets.CenterCrop(size),
		datasets.Normalize(datasets.ImageNetMean, datasets.ImageNetStd),
	)
}

// folder reads the image folder o.Data: DIR/train and DIR/val when DIR has
// a val/ sub-folder, else DIR's class folders with o.ValFraction held out.
// For evaluate (withTrain false) only the held-out images are read.
func folder(o *options, withTrain bool) (*data, error) {
	if fi, err := os.Stat(o.Data); err != nil {
		return nil, fmt.Errorf("--data: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("--data %s: not a folder (want an image folder or the word synthetic)", o.Data)
	}
	valDir := filepath.Join(o.Data, "val")
	if fi, err := os.Stat(valDir); err == nil && fi.IsDir() {
		return splitFolders(o, withTrain, filepath.Join(o.Data, "train"), valDir)
	}
	// Two views of one folder, differently transformed; Split depends only
	// on the number of files and the seed, so both split alike.
	val, err := datasets.ImageFolder(o.Data, datasets.ImageFolderOptions{Transform: evalTransform(o.ImageSize)})
	if err != nil {
		return nil, err
	}
	d := &data{val: val, classes: len(val.Classes)}
	switch {
	case o.ValFraction > 0:
		_, d.val = datasets.Split(val, o.ValFraction, splitSeed)
	case withTrain:
		d.val = &datasets.Subset{Dataset: val} // nothing held out
	}
	if withTrain {
		all, err := datasets.ImageFolder(o.Data, datasets.ImageFolderOptions{Transform: trainTransform(o.ImageSize), Seed: o.Seed})
		if err != nil {
			return nil, err
		}
		d.augmented, d.train = all, all
		if o.ValFraction > 0 {
			d.train, _ = datasets.Split(all, o.ValFraction, splitSeed)
		}
	}
	return d, nil
}

// splitFolders reads the ImageNet layout, trainDir and valDir holding the
// same class folders.
func splitFolders(o *options, withTrain bool, trainDir, valDir string) (*data, error) {
	val, err := datasets.ImageFolder(valDir, datasets.ImageFolderOptions{Transform: evalTransform(o.ImageSize)})
	if err != nil {
		return nil, err
	}
	d := &data{val: val, classes: len(val.Classes)}
	if !withTrain {
		return d, nil
	}
	tr, err := datasets.ImageFolder(trainDir, datasets.ImageFolderOptions{Transform: trainTransform(o.ImageSize), Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	if !slices.Equal(tr.Classes, val.Classes) {
		return nil, fmt.Errorf("--data %s: train/ has %d class folders and val/ %d, not the same ones", o.Data, len(tr.Classes), len(val.Classes))
	}
	d.train, d.augmented = tr, tr
	return d, nil
}

// loadData reads --data for train (withTrain) or evaluate; classes is
// the number of classes synthetic data should have.
func loadData(o *options, withTrain bool, classes int) (*data, error) {
	if o.Data != "synthetic" {
		return folder(o, withTrain)
	}
	trainSize := 0
	if withTrain {
		trainSize = o.TrainSize
	}
	return synthetic(o, classes, trainSize)
}
