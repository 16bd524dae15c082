// Package datasets feeds training loops: the Dataset interface, a DataLoader
// that batches, shuffles and prefetches in parallel, readers for the MNIST
// and CIFAR-10 file formats, ImageFolder for a class-per-folder tree of
// JPEG and PNG files (decoded in the loader's workers) with torchvision's
// transforms (RandomResizedCrop, RandomHorizontalFlip, Resize, CenterCrop,
// Normalize), the small UCI handwritten digits set embedded in the binary,
// and a synthetic image generator of any size.
//
// A Dataset returns single examples: an image as a float32 tensor of shape
// [C, H, W] and its class. A DataLoader turns a Dataset into batches of shape
// [N, C, H, W] (optionally channels-last) with Int64 labels [N], and a
// training loop ranges over one epoch at a time:
//
//	loader, err := datasets.NewDataLoader(train, datasets.LoaderOptions{
//		BatchSize: 64, Shuffle: true, Seed: 1, Workers: 4,
//	})
//	...
//	for epoch := range 10 {
//		for batch, err := range loader.Epoch(epoch) {
//			if err != nil {
//				return err
//			}
//			logits := model.Forward(batch.Inputs)
//			...
//		}
//	}
//
// Readers and loaders report bad files and failing examples as errors that
// name the file or the example and what is wrong with it.
package datasets
