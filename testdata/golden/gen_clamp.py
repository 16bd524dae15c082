#!/usr/bin/env python3
"""Golden data for Kiln's Clamp (autograd/clamp.go): torch.clamp(x, min, max).

Writes clamp.safetensors (run from testdata/golden with /usr/bin/python3). For each
case "<case>" it stores the input (".x", always contiguous), a random output gradient
(".gout"), PyTorch's output (".out") and the input gradient (".grad_x") after
out.backward(gout), all in the case's dtype. Cases ending in ".cl" feed PyTorch a
channels-last 4-D input and store ".out_strides", the strides of its output. The
inputs put values exactly on the bounds (where clamp's gradient passes, unlike
hardtanh's), outside them, and NaN and ±Inf; "crossed" has min > max, "round" and
"bf16_round" bounds that round to the tensor's dtype. The cases and their bounds are
repeated in autograd/clamp_golden_test.go; keep the two tables in step.
"""
import torch

from stio import save

CL = torch.channels_last

NAN, INF = float("nan"), float("inf")

# case name: (min, max, dtype, kind); kind "basic" draws a (4, 9) input, "cl" a
# channels-last (2, 3, 4, 5) one, "special" uses SPECIAL, "round" ROUND.
CASES = {
    "sym.basic": (-1.0, 1.0, torch.float32, "basic"),
    "sym.special": (-1.0, 1.0, torch.float32, "special"),
    "asym.basic": (-0.5, 1.25, torch.float32, "basic"),
    "asym.cl": (-0.5, 1.25, torch.float32, "cl"),
    "asym.special": (-0.5, 1.25, torch.float32, "special"),
    "crossed.special": (1.0, -1.0, torch.float32, "special"),
    "inf.special": (-INF, INF, torch.float32, "special"),
    "half_open.special": (-INF, 0.5, torch.float32, "special"),
    "round.special": (0.1000000001, 1.00000001, torch.float32, "round"),
    "threshold.basic": (0.0, 1.0, torch.float32, "basic"),
    "bf16.basic": (-0.5, 1.25, torch.bfloat16, "basic"),
    "bf16.cl": (-0.5, 1.25, torch.bfloat16, "cl"),
    "bf16.special": (-1.0, 1.0, torch.bfloat16, "special"),
    "bf16_crossed.special": (1.0, -1.0, torch.bfloat16, "special"),
    "bf16_round.special": (0.3009, 0.3025, torch.bfloat16, "round"),
}

SPECIAL = [NAN, -INF, -100.0, -2.0, -1.0, -0.5, -1e-6, -0.0, 0.0, 1e-6, 0.5, 1.0, 1.25, 2.0, 100.0, INF]

# Values on either side of the rounded bounds of the "round" cases, the bounds as
# given, and their float32 and bfloat16 roundings.
ROUND = [0.1, 0.1000000001, 0.10000001, 0.09999999, 1.0, 1.00000001, 1.0000001, 0.99999994,
         0.298828125, 0.30078125, 0.3009, 0.302734375, 0.3025, 0.3046875]


def make_input(kind, lo, hi):
    if kind == "special":
        return torch.tensor(SPECIAL)
    if kind == "round":
        return torch.tensor(ROUND, dtype=torch.float64)
    shape = (4, 9) if kind == "basic" else (2, 3, 4, 5)
    x = torch.randn(shape) * 1.5
    # Put a few elements exactly on each finite bound.
    flat = x.view(-1)
    flat[0:2] = lo
    flat[5:7] = hi
    return x


def case(out, name, lo, hi, dt, kind):
    cl = kind == "cl"
    x = make_input(kind, lo, hi).to(dt)
    xi = (x.to(memory_format=CL) if cl else x.clone()).requires_grad_()
    y = torch.clamp(xi, lo, hi)
    gout = torch.randn(y.shape).to(dt)
    y.backward(gout.to(memory_format=CL) if cl else gout)
    out.update({name + ".x": x, name + ".gout": gout, name + ".out": y.detach(), name + ".grad_x": xi.grad})
    if cl:
        out[name + ".out_strides"] = torch.tensor(y.stride(), dtype=torch.int64)


def main():
    torch.manual_seed(0)
    out = {}
    for name, (lo, hi, dt, kind) in CASES.items():
        case(out, name, lo, hi, dt, kind)
    save("clamp.safetensors", out, {"generator": "gen_clamp.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
