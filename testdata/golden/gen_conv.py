#!/usr/bin/env python3
"""Golden data for Kiln's convolution and pooling ops (autograd/conv.go, pool.go).

Writes conv.safetensors (run from testdata/golden with /usr/bin/python3). For each
case "<case>" it stores the inputs ("<case>.x", ".w", ".b"), a random output
gradient (".gout"), PyTorch's output (".out") and the gradients of every input
(".grad_x", ".grad_w", ".grad_b") after out.backward(gout). Where the input is
channels-last, ".out_strides" holds the strides of PyTorch's output so the Go test
checks the memory format as well as the values. The options of each case are
repeated in autograd/conv_golden_test.go; keep the two tables in step.
"""
import torch
import torch.nn.functional as F

from stio import save

CL = torch.channels_last
CL3 = torch.channels_last_3d

# name: (x shape, w shape, bias, dict of conv options, x channels-last, w channels-last)
CONV2D = {
    "c2d.basic": ((2, 3, 7, 6), (4, 3, 3, 3), True, {}, False, False),
    "c2d.stride2_pad1": ((2, 3, 9, 8), (5, 3, 3, 3), True, dict(stride=2, padding=1), False, False),
    "c2d.dil2": ((2, 2, 9, 10), (3, 2, 3, 2), True, dict(stride=(1, 2), padding=(1, 2), dilation=2), False, False),
    "c2d.groups2": ((2, 4, 6, 7), (6, 2, 3, 3), False, dict(padding=1, groups=2), False, False),
    "c2d.depthwise": ((2, 4, 8, 8), (4, 1, 3, 3), True, dict(padding=1, groups=4), False, False),
    "c2d.pointwise": ((2, 8, 5, 5), (6, 8, 1, 1), True, {}, False, False),
    "c2d.wide": ((2, 24, 8, 8), (8, 24, 5, 5), True, dict(padding=2), False, False),
    "c2d.cl": ((2, 6, 9, 9), (8, 3, 3, 3), True, dict(stride=2, padding=1, groups=2), True, True),
    "c2d.cl_x": ((2, 3, 7, 7), (4, 3, 3, 3), True, dict(padding=2, dilation=2), True, False),
    "c2d.cl_w": ((2, 3, 6, 7), (5, 3, 2, 3), False, dict(stride=(2, 1)), False, True),
    "c2d.cl_depthwise": ((2, 5, 7, 6), (10, 1, 3, 3), True, dict(padding=1, groups=5, stride=2), True, True),
    "c2d.unbatched": ((3, 6, 6), (4, 3, 3, 3), True, dict(padding=1), False, False),
}

CONV3D = {
    "c3d.basic": ((2, 3, 5, 6, 5), (4, 3, 3, 3, 2), True, dict(stride=(1, 2, 1), padding=1), False, False),
    "c3d.groups_dil": ((1, 4, 6, 6, 6), (4, 2, 2, 3, 2), False, dict(groups=2, dilation=2, padding=(1, 2, 1)), False, False),
    "c3d.cl": ((2, 2, 4, 5, 4), (3, 2, 2, 2, 2), True, dict(stride=2, padding=1), True, True),
}

# name: (x shape, op, options, x channels-last)
POOL = {
    "maxpool.k2": ((2, 3, 6, 8), "max", dict(kernel_size=2)),
    "maxpool.k3s2p1": ((2, 3, 9, 8), "max", dict(kernel_size=3, stride=2, padding=1)),
    "maxpool.ceil": ((2, 2, 7, 8), "max", dict(kernel_size=(3, 2), stride=2, padding=1, ceil_mode=True)),
    "maxpool.dil": ((1, 3, 9, 9), "max", dict(kernel_size=3, stride=(2, 1), padding=1, dilation=2)),
    "maxpool.cl": ((2, 4, 7, 7), "max_cl", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    "avgpool.include": ((2, 3, 7, 8), "avg", dict(kernel_size=3, stride=2, padding=1, count_include_pad=True)),
    "avgpool.exclude": ((2, 3, 7, 8), "avg", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    "avgpool.ceil_include": ((2, 2, 7, 6), "avg", dict(kernel_size=(3, 2), stride=2, padding=1, ceil_mode=True, count_include_pad=True)),
    "avgpool.ceil_exclude": ((2, 2, 7, 6), "avg", dict(kernel_size=(3, 2), stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    "avgpool.cl": ((2, 4, 6, 7), "avg_cl", dict(kernel_size=2, stride=2, padding=1, ceil_mode=True, count_include_pad=True)),
    "adaptive.down": ((2, 3, 9, 7), "adaptive", dict(output_size=(4, 3))),
    "adaptive.up": ((1, 2, 3, 5), "adaptive", dict(output_size=(5, 7))),
    "adaptive.global": ((2, 3, 5, 5), "adaptive", dict(output_size=1)),
    "adaptive.cl": ((2, 4, 7, 9), "adaptive_cl", dict(output_size=(3, 4))),
}


def conv_case(out, name, fn, fmt, spec):
    xs, ws, has_b, opts, x_cl, w_cl = spec
    x = torch.randn(xs)
    w = torch.randn(ws) * 0.5
    b = torch.randn(ws[0]) if has_b else None
    xi = (x.to(memory_format=fmt) if x_cl else x.clone()).requires_grad_()
    wi = (w.to(memory_format=fmt) if w_cl else w.clone()).requires_grad_()
    bi = b.clone().requires_grad_() if has_b else None
    y = fn(xi, wi, bi, **opts)
    gout = torch.randn(y.shape)
    y.backward(gout)
    out.update({name + ".x": x, name + ".w": w, name + ".gout": gout, name + ".out": y.detach(),
                name + ".grad_x": xi.grad, name + ".grad_w": wi.grad})
    if has_b:
        out.update({name + ".b": b, name + ".grad_b": bi.grad})
    if (x_cl or w_cl) and fmt == CL:
        out[name + ".out_strides"] = torch.tensor(y.stride(), dtype=torch.int64)


def pool_case(out, name, spec):
    xs, op, opts = spec
    x = torch.randn(xs)
    cl = op.endswith("_cl")
    xi = (x.to(memory_format=CL) if cl else x.clone()).requires_grad_()
    fn = {"max": F.max_pool2d, "avg": F.avg_pool2d, "adaptive": F.adaptive_avg_pool2d}[op.removesuffix("_cl")]
    y = fn(xi, **opts)
    gout = torch.randn(y.shape)
    y.backward(gout)
    out.update({name + ".x": x, name + ".gout": gout, name + ".out": y.detach(), name + ".grad_x": xi.grad})
    if cl:
        out[name + ".out_strides"] = torch.tensor(y.stride(), dtype=torch.int64)


def main():
    torch.manual_seed(0)
    out = {}
    for name, spec in CONV2D.items():
        conv_case(out, name, F.conv2d, CL, spec)
    for name, spec in CONV3D.items():
        conv_case(out, name, F.conv3d, CL3, spec)
    for name, spec in POOL.items():
        pool_case(out, name, spec)
    save("conv.safetensors", out, {"generator": "gen_conv.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
