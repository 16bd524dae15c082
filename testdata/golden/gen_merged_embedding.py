#!/usr/bin/env python3
"""Golden data for Kiln's MergedEmbeddingBag (autograd/merged_embedding.go):
DLRM's emb_l, one nn.EmbeddingBag per table, looked up together.

Writes merged_embedding.safetensors (run from testdata/golden with /usr/bin/python3).

Four tables of ROWS rows and D columns ("W.<t>") are read by B multi-hot bags
each: "idx.<t>" holds table t's indices and "offsets.<t>" the B+1 bag
boundaries (include_last_offset=True; Kiln's tests also drop the last one to
check the other layout). Bag sizes run from 0 to 5, so some bags are empty,
and rows repeat within bags. "fixed.idx" [B, 4, L] is the fixed-size layout:
sample b's L rows of table t at [b, t, :].

For each mode ("sum", "mean") and layout ("<mode>" for the offsets,
"fixed_<mode>" for [B, T, L]), every table's nn.EmbeddingBag output
("<case>.out.<t>", [B, D]) and the gradient of its table
("<case>.grad.<t>", dense [ROWS[t], D]) after sum(out * gout.<t>) over all
tables is backpropagated, gout.<t> being random [B, D] weights shared by the
cases.
"""
import torch
import torch.nn as nn

from stio import save

ROWS = [7, 50, 300, 1000]
D = 8
B = 32
L = 3
MODES = ["sum", "mean"]


def main():
    torch.manual_seed(0)
    out = {}
    for t, rows in enumerate(ROWS):
        out[f"W.{t}"] = torch.randn(rows, D)
        sizes = torch.randint(0, 6, (B,))
        sizes[t::4] = 0  # at least eight empty bags per table
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
        # Rows drawn from a few, so that bags repeat them.
        out[f"idx.{t}"] = torch.randint(0, min(rows, 6), (int(offsets[-1]),)) * (rows // 6 + 1) % rows
        out[f"offsets.{t}"] = offsets
        out[f"gout.{t}"] = torch.randn(B, D)
    out["fixed.idx"] = torch.stack([torch.randint(0, rows, (B, L)) for rows in ROWS], dim=1)
    for mode in MODES:
        for case in (mode, "fixed_" + mode):
            loss = 0
            bags = []
            for t, rows in enumerate(ROWS):
                bag = nn.EmbeddingBag(rows, D, mode=mode, include_last_offset=True)
                with torch.no_grad():
                    bag.weight.copy_(out[f"W.{t}"])
                if case == mode:
                    y = bag(out[f"idx.{t}"], out[f"offsets.{t}"])
                else:
                    bag.include_last_offset = False
                    y = bag(out["fixed.idx"][:, t, :])
                out[f"{case}.out.{t}"] = y.detach().clone()
                loss = loss + (y * out[f"gout.{t}"]).sum()
                bags.append(bag)
            loss.backward()
            for t, bag in enumerate(bags):
                out[f"{case}.grad.{t}"] = bag.weight.grad.clone()
    save("merged_embedding.safetensors", out, {"generator": "gen_merged_embedding.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
