#!/usr/bin/env python3
"""Parity golden data for Kiln's DLRM (nn/models/dlrm.go): a transcription of
facebookresearch/dlrm's DLRM_Net (dlrm_s_pytorch.py: create_mlp, create_emb,
apply_mlp, apply_emb, interact_features, sequential_forward), trained for three
SGD steps.

Writes dlrm.safetensors (run from testdata/golden with /usr/bin/python3).

Four tables of ROWS rows, d = 8, bottom MLP 13-16-8, top MLP (input)-16-1,
bce loss (torch.nn.BCELoss, mean), loss threshold 0, tables
nn.EmbeddingBag(mode="sum", sparse=True). Three batches of B = 32 samples with
multi-hot bags of 0 to 4 rows (some empty), offsets as dlrm passes them (bag
starts, include_last_offset=False):

  "batch.<s>.dense" [B, 13], "batch.<s>.target" [B, 1],
  "batch.<s>.idx.<t>", "batch.<s>.offsets.<t>" for step s = 0, 1, 2.

For each case ("dot", "self" = dot with arch_interaction_itself, "cat"):
  "<case>.init.<name>"   the initial state dict (dlrm's numpy initialisation),
  "<case>.prob"          the probabilities on batch 0 before any step,
  "<case>.loss"          [3] the loss of each SGD step (lr 0.1, torch.optim.SGD
                         over all parameters, sparse table gradients),
  "<case>.final.<name>"  the state dict after the three steps.
"""
import numpy as np
import torch
import torch.nn as nn

from stio import save

ROWS = [7, 50, 300, 1000]
D = 8
BOT = [13, 16, 8]
TOP = [16, 1]
B = 32
STEPS = 3
LR = 0.1


class DLRM_Net(nn.Module):
    """dlrm's DLRM_Net, reduced to what these goldens use (no md/qr
    embeddings, weighted pooling, quantisation or parallelism)."""

    def create_mlp(self, ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(0, ln.size - 1):
            n = ln[i]
            m = ln[i + 1]
            LL = nn.Linear(int(n), int(m), bias=True)
            mean = 0.0
            std_dev = np.sqrt(2 / (m + n))
            W = np.random.normal(mean, std_dev, size=(m, n)).astype(np.float32)
            std_dev = np.sqrt(1 / m)
            bt = np.random.normal(mean, std_dev, size=m).astype(np.float32)
            LL.weight.data = torch.tensor(W, requires_grad=True)
            LL.bias.data = torch.tensor(bt, requires_grad=True)
            layers.append(LL)
            if i == sigmoid_layer:
                layers.append(nn.Sigmoid())
            else:
                layers.append(nn.ReLU())
        return torch.nn.Sequential(*layers)

    def create_emb(self, m, ln):
        emb_l = nn.ModuleList()
        for i in range(0, ln.size):
            n = ln[i]
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=True)
            W = np.random.uniform(
                low=-np.sqrt(1 / n), high=np.sqrt(1 / n), size=(n, m)
            ).astype(np.float32)
            EE.weight.data = torch.tensor(W, requires_grad=True)
            emb_l.append(EE)
        return emb_l

    def __init__(self, m_spa, ln_emb, ln_bot, ln_top, arch_interaction_op,
                 arch_interaction_itself=False, sigmoid_bot=-1, sigmoid_top=-1,
                 loss_threshold=0.0):
        super().__init__()
        self.ndevices = -1
        self.output_d = 0
        self.parallel_model_batch_size = -1
        self.parallel_model_is_not_prepared = True
        self.arch_interaction_op = arch_interaction_op
        self.arch_interaction_itself = arch_interaction_itself
        self.loss_threshold = loss_threshold
        self.emb_l = self.create_emb(m_spa, ln_emb)
        self.bot_l = self.create_mlp(ln_bot, sigmoid_bot)
        self.top_l = self.create_mlp(ln_top, sigmoid_top)

    def apply_mlp(self, x, layers):
        return layers(x)

    def apply_emb(self, lS_o, lS_i, emb_l):
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = lS_o[k]
            E = emb_l[k]
            V = E(sparse_index_group_batch, sparse_offset_group_batch, per_sample_weights=None)
            ly.append(V)
        return ly

    def interact_features(self, x, ly):
        if self.arch_interaction_op == "dot":
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            _, ni, nj = Z.shape
            offset = 1 if self.arch_interaction_itself else 0
            li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            R = torch.cat([x] + [Zflat], dim=1)
        elif self.arch_interaction_op == "cat":
            R = torch.cat([x] + ly, dim=1)
        else:
            raise ValueError(self.arch_interaction_op)
        return R

    def forward(self, dense_x, lS_o, lS_i):
        return self.sequential_forward(dense_x, lS_o, lS_i)

    def sequential_forward(self, dense_x, lS_o, lS_i):
        x = self.apply_mlp(dense_x, self.bot_l)
        ly = self.apply_emb(lS_o, lS_i, self.emb_l)
        z = self.interact_features(x, ly)
        p = self.apply_mlp(z, self.top_l)
        if 0.0 < self.loss_threshold and self.loss_threshold < 1.0:
            z = torch.clamp(p, min=self.loss_threshold, max=(1.0 - self.loss_threshold))
        else:
            z = p
        return z


def top_input(op, itself):
    n = len(ROWS) + 1
    if op == "cat":
        return n * D
    return D + (n * (n + 1) // 2 if itself else n * (n - 1) // 2)


def make_batches(g):
    out, batches = {}, []
    for s in range(STEPS):
        dense = torch.log(torch.randint(0, 100, (B, 13), generator=g).float() + 1)
        target = torch.randint(0, 2, (B, 1), generator=g).float()
        idx, offs = [], []
        for t, rows in enumerate(ROWS):
            sizes = torch.randint(0, 5, (B,), generator=g)
            sizes[(s + t) % 5::5] = 0  # some empty bags in every table
            offsets = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)[:-1]])
            # Draw from a third of each table, so some rows stay untouched.
            i = torch.randint(0, max(1, rows // 3), (int(sizes.sum()),), generator=g)
            idx.append(i)
            offs.append(offsets)
            out[f"batch.{s}.idx.{t}"] = i
            out[f"batch.{s}.offsets.{t}"] = offsets
        out[f"batch.{s}.dense"] = dense
        out[f"batch.{s}.target"] = target
        batches.append((dense, offs, idx, target))
    return out, batches


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    out, batches = make_batches(g)
    for case, op, itself in [("dot", "dot", False), ("self", "dot", True), ("cat", "cat", False)]:
        np.random.seed(1)
        ln_top = np.array([top_input(op, itself)] + TOP)
        net = DLRM_Net(D, np.array(ROWS), np.array(BOT), ln_top, op, itself,
                       sigmoid_bot=-1, sigmoid_top=ln_top.size - 2)
        for k, v in net.state_dict().items():
            out[f"{case}.init.{k}"] = v.clone()
        with torch.no_grad():
            dense, offs, idx, _ = batches[0]
            out[f"{case}.prob"] = net(dense, offs, idx).clone()
        opt = torch.optim.SGD(net.parameters(), lr=LR)
        loss_fn = torch.nn.BCELoss(reduction="mean")
        losses = []
        for dense, offs, idx, target in batches:
            opt.zero_grad()
            loss = loss_fn(net(dense, offs, idx), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out[f"{case}.loss"] = torch.tensor(losses, dtype=torch.float64)
        for k, v in net.state_dict().items():
            out[f"{case}.final.{k}"] = v.clone()
    save("dlrm.safetensors", out, {"generator": "gen_dlrm.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
