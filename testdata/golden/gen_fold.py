#!/usr/bin/env python3
"""Golden data for Kiln's BatchNorm folding (nn/fold.go).

Writes fold.safetensors (run from testdata/golden with /usr/bin/python3). For each
case "<case>", a layer (Conv2d, Conv3d or Linear) followed by a BatchNorm in eval
mode, it stores the layer's ".w" and ".b" (where it has a bias), the BatchNorm's
".rm", ".rv" and, when affine, ".bn_w", ".bn_b"; an input ".x"; the eval output of
layer then BatchNorm ".out"; and PyTorch's folded parameters from
torch.nn.utils.fusion.fuse_conv_bn_eval / fuse_linear_bn_eval, ".fused_w" and
".fused_b", with the folded layer's output ".fused_out". Running variances include
values far below and above 1 so the eps term and the scale both matter. The case
options are repeated in nn/fold_test.go; keep the tables in step.
"""
import torch
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

from stio import save

# name: (layer kind, in, out, kernel, groups, bias, affine, eps, x shape)
CASES = {
    "conv2d": ("conv2d", 3, 6, 3, 1, True, True, 1e-5, (2, 3, 7, 6)),
    "conv2d_nobias_groups": ("conv2d", 4, 6, 3, 2, False, True, 1e-3, (2, 4, 5, 5)),
    "conv2d_noaffine": ("conv2d", 3, 5, 1, 1, True, False, 1e-5, (3, 3, 4, 4)),
    "conv3d": ("conv3d", 2, 4, 2, 1, False, True, 1e-5, (2, 2, 3, 4, 3)),
    "linear": ("linear", 5, 7, 0, 1, True, True, 1e-5, (4, 5)),
    "linear_nobias": ("linear", 4, 3, 0, 1, False, True, 1e-4, (6, 4)),
}


def build(kind, cin, cout, k, groups, bias, affine, eps):
    if kind == "linear":
        return torch.nn.Linear(cin, cout, bias=bias), torch.nn.BatchNorm1d(cout, eps=eps, affine=affine)
    conv = {"conv2d": torch.nn.Conv2d, "conv3d": torch.nn.Conv3d}[kind]
    bn = {"conv2d": torch.nn.BatchNorm2d, "conv3d": torch.nn.BatchNorm3d}[kind]
    return conv(cin, cout, k, groups=groups, bias=bias), bn(cout, eps=eps, affine=affine)


def fold_case(out, name, spec):
    kind, cin, cout, k, groups, bias, affine, eps, xs = spec
    layer, bn = build(kind, cin, cout, k, groups, bias, affine, eps)
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(cout) * 2)
        # Variances from 1e-6 (eps dominates) to about 50.
        bn.running_var.copy_(torch.exp(torch.empty(cout).uniform_(-14, 4)))
        if affine:
            bn.weight.copy_(torch.randn(cout))
            bn.bias.copy_(torch.randn(cout))
    layer.eval()
    bn.eval()
    fuse = fuse_linear_bn_eval if kind == "linear" else fuse_conv_bn_eval
    fused = fuse(layer, bn)
    x = torch.randn(xs)
    with torch.no_grad():
        y = bn(layer(x))
        fy = fused(x)
    case = {name + ".w": layer.weight, name + ".rm": bn.running_mean, name + ".rv": bn.running_var,
            name + ".x": x, name + ".out": y, name + ".fused_w": fused.weight, name + ".fused_b": fused.bias,
            name + ".fused_out": fy}
    if bias:
        case[name + ".b"] = layer.bias
    if affine:
        case.update({name + ".bn_w": bn.weight, name + ".bn_b": bn.bias})
    out.update(case)


def main():
    torch.manual_seed(0)
    out = {}
    for name, spec in CASES.items():
        fold_case(out, name, spec)
    save("fold.safetensors", out, {"generator": "gen_fold.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
