package datasets_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/datasets"
)

// samplerGolden is testdata/distributed_sampler.json, written by
// testdata/distributed_sampler.py from PyTorch's DistributedSampler.
type samplerGolden struct {
	Torch string `json:"torch"`
	Cases []struct {
		N        int  `json:"n"`
		World    int  `json:"world"`
		Drop     bool `json:"drop"`
		Batch    int  `json:"batch"`
		DropLast bool `json:"drop_last"`
		Ranks    []struct {
			Indices []int   `json:"indices"`
			Batches [][]int `json:"batches"`
			Len     int     `json:"len"`
		} `json:"ranks"`
	} `json:"cases"`
}

func flatten(batches [][]int) []int {
	out := []int{}
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}

func equalBatches(a, b [][]int) bool {
	return slices.EqualFunc(a, b, func(x, y []int) bool { return slices.Equal(x, y) })
}

// TestShardGolden compares every rank's batches with those of PyTorch's
// DataLoader over DistributedSampler(shuffle=False).
func TestShardGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/distributed_sampler.json")
	if err != nil {
		t.Fatal(err)
	}
	var g samplerGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g.Torch, "1.13") || len(g.Cases) < 4 {
		t.Fatalf("golden file from torch %q with %d cases; regenerate it with PyTorch 1.13", g.Torch, len(g.Cases))
	}
	for _, c := range g.Cases {
		if len(c.Ranks) != c.World {
			t.Fatalf("n=%d world=%d: golden file has %d ranks", c.N, c.World, len(c.Ranks))
		}
		for rank, want := range c.Ranks {
			for _, workers := range []int{0, 2} {
				name := fmt.Sprintf("n=%d/world=%d/drop=%v/batch=%d/droplast=%v/rank=%d/workers=%d",
					c.N, c.World, c.Drop, c.Batch, c.DropLast, rank, workers)
				t.Run(name, func(t *testing.T) {
					l, err := datasets.NewDataLoader(newSeqSet(c.N), datasets.LoaderOptions{
						BatchSize: c.Batch, DropLast: c.DropLast, Workers: workers,
						Rank: rank, WorldSize: c.World, DropUneven: c.Drop,
					})
					if err != nil {
						t.Fatal(err)
					}
					got := epochOrder(t, l, 3)
					if !equalBatches(got, want.Batches) || l.Len() != want.Len {
						t.Errorf("batches %v (Len %d), PyTorch gives %v (len %d)", got, l.Len(), want.Batches, want.Len)
					}
					// Without DropLast the batches hold the sampler's whole shard.
					all, err := datasets.NewDataLoader(newSeqSet(c.N), datasets.LoaderOptions{
						BatchSize: max(c.N, 1), Rank: rank, WorldSize: c.World, DropUneven: c.Drop,
					})
					if err != nil {
						t.Fatal(err)
					}
					if got := flatten(epochOrder(t, all, 0)); !slices.Equal(got, want.Indices) {
						t.Errorf("shard %v, PyTorch's sampler gives %v", got, want.Indices)
					}
				})
			}
		}
	}
}

// TestShardStructure checks, shuffled or not, that the ranks' shards
// interleave back into the unsharded loader's order of the same Seed and
// epoch (so every rank drew the same permutation), padded by repeating it
// from the start or cut short; that the shards are disjoint and cover the
// data set; and that every rank gets as many examples and batches.
func TestShardStructure(t *testing.T) {
	tests := []struct {
		n, world int
		drop     bool
	}{
		{12, 3, false}, {12, 3, true}, // divisible: the two modes agree
		{10, 3, false}, {10, 3, true},
		{10, 4, false}, {10, 4, true},
		{3, 4, false}, {3, 4, true},
		{1, 5, false}, {2, 7, false}, // padding longer than the data set
		{100, 8, false}, {100, 8, true},
		{0, 2, false}, {5, 1, false}, {5, 1, true},
	}
	for _, tc := range tests {
		for _, shuffle := range []bool{false, true} {
			name := fmt.Sprintf("n=%d/world=%d/drop=%v/shuffle=%v", tc.n, tc.world, tc.drop, shuffle)
			t.Run(name, func(t *testing.T) {
				var perEpoch [][]int
				for epoch := range 3 {
					whole, err := datasets.NewDataLoader(newSeqSet(tc.n), datasets.LoaderOptions{
						BatchSize: 4, Shuffle: shuffle, Seed: 7,
					})
					if err != nil {
						t.Fatal(err)
					}
					global := flatten(epochOrder(t, whole, epoch))

					per := tc.n / tc.world // DistributedSampler's num_samples
					if !tc.drop && tc.n%tc.world != 0 {
						per++
					}
					shards := make([][]int, tc.world)
					for rank := range tc.world {
						l, err := datasets.NewDataLoader(newSeqSet(tc.n), datasets.LoaderOptions{
							BatchSize: 4, Shuffle: shuffle, Seed: 7, Workers: rank % 2,
							Rank: rank, WorldSize: tc.world, DropUneven: tc.drop,
						})
						if err != nil {
							t.Fatal(err)
						}
						batches := epochOrder(t, l, epoch)
						if len(batches) != l.Len() || l.Len() != (per+3)/4 {
							t.Fatalf("rank %d: %d batches, Len %d; want %d", rank, len(batches), l.Len(), (per+3)/4)
						}
						shards[rank] = flatten(batches)
						if len(shards[rank]) != per {
							t.Fatalf("rank %d: %d examples, want %d", rank, len(shards[rank]), per)
						}
					}

					// Interleave the shards: position p of the padded or cut
					// order is example p/world of rank p%world.
					seen := make([]int, tc.n)
					var order []int
					for p := range per * tc.world {
						i := shards[p%tc.world][p/tc.world]
						if want := global[p%tc.n]; i != want {
							t.Fatalf("epoch %d: position %d of the sharded order is %d, the unsharded order has %d there (order %v)",
								epoch, p, i, want, global)
						}
						seen[i]++
						order = append(order, i)
					}
					for i, k := range seen {
						switch {
						case tc.drop && k > 1:
							t.Errorf("epoch %d: example %d in %d shards despite DropUneven", epoch, i, k)
						case !tc.drop && k == 0:
							t.Errorf("epoch %d: example %d in no shard", epoch, i)
						case tc.n >= tc.world && k > 2:
							t.Errorf("epoch %d: example %d in %d shards", epoch, i, k)
						}
					}
					if tc.drop {
						if skipped := tc.n - len(order); skipped != tc.n%tc.world {
							t.Errorf("epoch %d: %d examples skipped, want %d", epoch, skipped, tc.n%tc.world)
						}
					}
					perEpoch = append(perEpoch, order)
				}
				if shuffle && tc.n > 3 && (slices.Equal(perEpoch[0], perEpoch[1]) || slices.Equal(perEpoch[1], perEpoch[2])) {
					t.Errorf("the same order in two epochs: %v", perEpoch)
				}
				if !shuffle && !slices.Equal(perEpoch[0], perEpoch[1]) {
					t.Errorf("the order changed between epochs without Shuffle: %v", perEpoch)
				}
			})
		}
	}
}

// TestShardBatchCounts: with any BatchSize and DropLast, every rank steps
// the same number of times, so no rank waits on another.
func TestShardBatchCounts(t *testing.T) {
	for _, n := range []int{0, 1, 7, 10, 33, 64} {
		for _, world := range []int{2, 3, 4, 8} {
			for _, batch := range []int{1, 3, 4} {
				for _, flags := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
					counts := make([]int, world)
					for rank := range world {
						l, err := datasets.NewDataLoader(newSeqSet(n), datasets.LoaderOptions{
							BatchSize: batch, Shuffle: true, Seed: uint64(n),
							DropUneven: flags[0], DropLast: flags[1], Rank: rank, WorldSize: world,
						})
						if err != nil {
							t.Fatal(err)
						}
						for _, err := range l.Epoch(1) {
							if err != nil {
								t.Fatal(err)
							}
							counts[rank]++
						}
						if counts[rank] != l.Len() {
							t.Fatalf("n=%d world=%d rank %d: %d batches, Len %d", n, world, rank, counts[rank], l.Len())
						}
					}
					for rank, c := range counts {
						if c != counts[0] {
							t.Errorf("n=%d world=%d batch=%d DropUneven=%v DropLast=%v: rank %d steps %d times, rank 0 %d",
								n, world, batch, flags[0], flags[1], rank, c, counts[0])
						}
					}
				}
			}
		}
	}
}

// TestShardNone: WorldSize 0 and 1 leave the loader as it was.
func TestShardNone(t *testing.T) {
	base, err := datasets.NewDataLoader(newSeqSet(11), datasets.LoaderOptions{BatchSize: 3, Shuffle: true, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := epochOrder(t, base, 2)
	for _, world := range []int{0, 1} {
		for _, drop := range []bool{false, true} {
			l, err := datasets.NewDataLoader(newSeqSet(11), datasets.LoaderOptions{
				BatchSize: 3, Shuffle: true, Seed: 5, WorldSize: world, DropUneven: drop,
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := epochOrder(t, l, 2); !equalBatches(got, want) || l.Len() != base.Len() {
				t.Errorf("WorldSize %d DropUneven %v: %v, want %v", world, drop, got, want)
			}
		}
	}
}

func TestShardOptionErrors(t *testing.T) {
	tests := []struct {
		rank, world int
		want        string // "" for valid options
	}{
		{0, 0, ""},
		{0, 1, ""},
		{1, 2, ""},
		{7, 8, ""},
		{-1, 2, "LoaderOptions.Rank -1 is outside [0, 2) for WorldSize 2"},
		{2, 2, "LoaderOptions.Rank 2 is outside [0, 2) for WorldSize 2"},
		{1, 1, "LoaderOptions.Rank 1 is outside [0, 1) for WorldSize 1"},
		{1, 0, "LoaderOptions.Rank 1 is outside [0, 1) for WorldSize 0"},
		{0, -1, "LoaderOptions.WorldSize -1 is negative"},
		{-3, -2, "LoaderOptions.WorldSize -2 is negative"},
	}
	for _, tc := range tests {
		l, err := datasets.NewDataLoader(newSeqSet(4), datasets.LoaderOptions{Rank: tc.rank, WorldSize: tc.world})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Rank %d WorldSize %d: %v", tc.rank, tc.world, err)
		case tc.want != "" && (err == nil || l != nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Rank %d WorldSize %d: %v, %v; want error %q", tc.rank, tc.world, l, err, tc.want)
		}
	}
}
