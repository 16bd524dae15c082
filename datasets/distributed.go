package datasets

// Sharding for data-parallel training, with the semantics of PyTorch 1.13's
// torch.utils.data.distributed.DistributedSampler.
//
// Each of WorldSize processes (ranks) trains a replica of the model on its
// own share of every epoch and the replicas average their gradients after
// each step. Two things make that work:
//
//   - Every rank computes the same epoch order: the permutation comes from
//     Seed and the epoch number alone, never from Rank, so the shards of one
//     epoch are disjoint slices of one permutation and together cover the
//     data set. A new epoch gives every rank the same new permutation (the
//     epoch argument of DataLoader.Epoch plays the role of PyTorch's
//     set_epoch).
//   - Every rank gets the same number of examples, hence the same number of
//     batches, so no rank waits in a gradient all-reduce for a step its
//     peers never take. When the data set does not divide evenly, the order
//     is either padded with examples repeated from its start (the default)
//     or cut short (DropUneven).

// shardLen returns how many examples each rank visits per epoch when n
// examples are spread over world ranks: PyTorch's num_samples.
func shardLen(n, world int, dropUneven bool) int {
	if world <= 1 {
		return n
	}
	if dropUneven {
		// PyTorch writes ceil((n - world) / world) when world does not
		// divide n, and n / world when it does: both are floor(n / world).
		return n / world
	}
	return (n + world - 1) / world
}

// shard returns rank's share of an epoch order over world ranks, as
// DistributedSampler.__iter__ does: the order is padded to the next
// multiple of world by repeating it from the start (as many times as it
// takes when world exceeds its length), or, with dropUneven, cut to the
// previous multiple; rank then takes every world-th index starting at its
// own position. Without sharding (world ≤ 1) it returns order itself.
func shard(order []int, rank, world int, dropUneven bool) []int {
	if world <= 1 {
		return order
	}
	m := shardLen(len(order), world, dropUneven)
	out := make([]int, m)
	for k := range out {
		// Position p of the padded order is order[p % n]; without
		// padding p < n already.
		out[k] = order[(rank+k*world)%len(order)]
	}
	return out
}
