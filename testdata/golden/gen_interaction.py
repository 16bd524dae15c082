#!/usr/bin/env python3
"""Golden data for Kiln's DLRM ops: the dot interaction (autograd/interaction.go)
and BCELoss (autograd/loss.go).

Writes interaction.safetensors (run from testdata/golden with /usr/bin/python3).

For each interaction case "<case>" it stores the bottom MLP output ("<case>.x",
[B, d]), the T embedding outputs stacked ("<case>.ly", [T, B, d]), a random output
gradient (".gout"), the interaction as facebookresearch/dlrm's interact_features
computes it with arch_interaction_op="dot" (".out"), and the gradients after
out.backward(gout) (".grad_x", ".grad_ly", stacked like ".ly").

For each BCELoss case it stores the probabilities (".p"), the targets
(".target"), a random output gradient (".gout", 0-d for reduced losses),
nn.BCELoss's output (".out") and the gradients (".grad_p", and ".grad_t" where
the target is differentiable). The edge cases put probabilities at and next to
0 and 1: p = 0, 1e-45 (a float32 subnormal whose log is below -100), 1 and
1 - 2^-24 hit the -100 clamp of the log or the 1e-12 floor of the gradient's
denominator. Their target gradients are infinite at p = 0 and 1, so the target
does not require one there.

The options of each case are repeated in autograd/interaction_test.go and
autograd/bce_test.go; keep the tables in step.
"""
import torch
import torch.nn as nn

from stio import save

# name: (B, d, T, arch_interaction_itself)
INTERACTION = {
    "dot.b5_d8_t4": (5, 8, 4, False),
    "dotself.b5_d8_t4": (5, 8, 4, True),
    "dot.b2_d3_t1": (2, 3, 1, False),
    "dotself.b3_d5_t2": (3, 5, 2, True),
    "dot.b4_d16_t26": (4, 16, 26, False),
    "dotself.b4_d16_t26": (4, 16, 26, True),
}

# name: (shape, reduction, edge probabilities)
BCE = {
    "bceloss.mean": ((4, 6), "mean", False),
    "bceloss.sum": ((4, 6), "sum", False),
    "bceloss.none": ((3, 2, 5), "none", False),
    "bceloss.edge_none": ((2, 8), "none", True),
    "bceloss.edge_sum": ((2, 8), "sum", True),
    "bceloss.edge_mean": ((2, 8), "mean", True),
    "bceloss.empty_mean": ((0, 3), "mean", False),
}

# The edge cases' two rows of probabilities and targets; None is a random target.
EDGE_P = [0.0, 1e-45, 1e-40, 1e-20, 1e-7, 0.5, 1.0 - 2.0 ** -24, 1.0]
EDGE_T = [[None, 1.0, 1.0, 0.0, 1.0, None, 0.0, None],
          [1.0, 0.0, 0.0, 1.0, 0.0, None, 1.0, 0.0]]


def interact_features(x, ly, interaction_itself):
    """dlrm_s_pytorch.py's DLRM_Net.interact_features, arch_interaction_op="dot"."""
    (batch_size, d) = x.shape
    T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
    Z = torch.bmm(T, torch.transpose(T, 1, 2))
    _, ni, nj = Z.shape
    offset = 1 if interaction_itself else 0
    li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
    lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
    Zflat = Z[:, li, lj]
    return torch.cat([x] + [Zflat], dim=1)


def interaction_case(out, name, spec):
    B, d, T, itself = spec
    x = torch.randn(B, d).requires_grad_()
    ly = [torch.randn(B, d).requires_grad_() for _ in range(T)]
    R = interact_features(x, ly, itself)
    gout = torch.randn(R.shape)
    (R * gout).sum().backward()
    out.update({name + ".x": x.detach(), name + ".ly": torch.stack([t.detach() for t in ly]),
                name + ".gout": gout, name + ".out": R.detach(), name + ".grad_x": x.grad,
                name + ".grad_ly": torch.stack([t.grad for t in ly])})


def bce_case(out, name, spec):
    shape, reduction, edge = spec
    if edge:
        p = torch.tensor([EDGE_P] * len(EDGE_T), dtype=torch.float32)
        t = torch.tensor([[torch.rand(()).item() if v is None else v for v in row] for row in EDGE_T])
        assert p.shape == t.shape == shape
    else:
        p = torch.rand(shape) * 0.96 + 0.02
        t = torch.rand(shape)
    pi = p.clone().requires_grad_()
    ti = t.clone().requires_grad_(not edge)
    y = nn.BCELoss(reduction=reduction)(pi, ti)
    gout = torch.randn(y.shape)
    y.backward(gout)
    out.update({name + ".p": p, name + ".target": t, name + ".gout": gout, name + ".out": y.detach(),
                name + ".grad_p": pi.grad})
    if not edge:
        out[name + ".grad_t"] = ti.grad


def main():
    torch.manual_seed(0)
    out = {}
    for name, spec in INTERACTION.items():
        interaction_case(out, name, spec)
    for name, spec in BCE.items():
        bce_case(out, name, spec)
    save("interaction.safetensors", out, {"generator": "gen_interaction.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
