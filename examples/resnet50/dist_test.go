package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/dist"
)

func TestShard(t *testing.T) {
	order := []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}
	cases := []struct {
		batch, rank, world int
		want               []int
	}{
		{4, 0, 1, order},
		{4, 0, 2, []int{9, 8, 5, 4}}, // the tail of 2 is no full batch
		{4, 1, 2, []int{7, 6, 3, 2}},
		{4, 3, 4, []int{6, 2}},
		{6, 2, 3, []int{5, 4}},
	}
	for _, c := range cases {
		if got := shard(order, c.batch, c.rank, c.world); !slices.Equal(got, c.want) {
			t.Errorf("shard(batch %d, rank %d of %d) = %v, want %v", c.batch, c.rank, c.world, got, c.want)
		}
	}
}

// Started by mpirun with two ranks, a binary without MPI refuses to train
// (each process would train the whole data set alone) and says how to
// build one that can.
func TestTrainUnderMPIWithoutMPI(t *testing.T) {
	if dist.MPIBuilt {
		t.Skip("built with MPI")
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	var stdout, stderr bytes.Buffer
	code := run([]string{"train", "--data", "synthetic", "--arch", "resnet18", "--image-size", "32", "--steps", "1", "--quiet"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "-tags mpi") {
		t.Errorf("exit code %d, stderr %q: want a failure saying to build with -tags mpi", code, stderr.String())
	}
}
