#!/usr/bin/env python3
"""Golden data for the DataLoader's Rank/WorldSize sharding (datasets/distributed.go).

Writes distributed_sampler.json beside this script (run it from anywhere with
/usr/bin/python3; PyTorch 1.13). For every case, and every rank of the case's
world, it records the example indices that
torch.utils.data.distributed.DistributedSampler(shuffle=False, drop_last=drop)
gives that rank, and the batches of a torch.utils.data.DataLoader over the same
sampler with the case's batch_size and drop_last. Kiln's Shuffle cannot
reproduce torch.randperm bit for bit, so the shuffled case is checked by
structural tests in datasets/distributed_test.go instead.
"""
import json
import os

import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

# (n, world, drop: DistributedSampler's drop_last, batch, drop_last: DataLoader's)
CASES = [
    (10, 3, False, 2, False),
    (10, 3, True, 2, False),
    (10, 4, False, 2, False),
    (10, 4, True, 2, True),
    (3, 4, False, 1, False),
    (3, 4, True, 1, False),
    (9, 3, False, 2, False),
    (9, 3, True, 2, True),
    (1, 4, False, 1, False),  # padding longer than the data set: repeat it
    (2, 7, False, 3, False),
    (2, 7, True, 3, False),
    (0, 3, False, 2, False),
    (0, 3, True, 2, False),
    (17, 5, False, 3, True),
    (17, 5, True, 3, False),
    (12, 1, False, 5, False),
    (12, 1, True, 5, True),
    (11, 2, False, 4, True),
]


def main():
    cases = []
    for n, world, drop, batch, drop_last in CASES:
        data = list(range(n))
        ranks = []
        for rank in range(world):
            s = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False, drop_last=drop)
            s.set_epoch(3)  # no effect without shuffle
            loader = DataLoader(data, batch_size=batch, sampler=s, drop_last=drop_last)
            ranks.append({
                "indices": list(s),
                "batches": [b.tolist() for b in loader],
                "len": len(loader),
            })
        cases.append({"n": n, "world": world, "drop": drop, "batch": batch, "drop_last": drop_last, "ranks": ranks})
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_sampler.json")
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
