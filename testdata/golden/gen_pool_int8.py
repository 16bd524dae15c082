#!/usr/bin/env python3
"""Golden data for Kiln's uint8 pooling kernels (kernels/pool_int8.go).

Writes pool_int8.safetensors (run from testdata/golden with /usr/bin/python3).
For each case "<case>" and memory format "<fmt>" ("cf" contiguous, "cl"
channels_last) it stores the quint8 input's integer values ("<case>.<fmt>.x",
U8, logical NCHW order), PyTorch's output integers for that format
("<case>.<fmt>.y", U8, logical NCHW order, same scale and zero point as the
input), and the pooling options ("<case>.<fmt>.params", I64: kernel h, w,
stride h, w, padding h, w, dilation h, w, ceil_mode, zero point). Adaptive
cases take their output size from the shape of ".y" and have kernel 0.
kernels/pool_int8_test.go reads everything it needs from the file.
"""
import torch
import torch.nn.functional as F

from stio import save

# name: (x shape, zero point, value range [lo, hi), options); max pooling
MAX = {
    "max.k3s2p1": ((2, 5, 9, 8), 37, (0, 256), dict(kernel_size=3, stride=2, padding=1)),
    "max.k2": ((1, 3, 6, 7), 200, (0, 256), dict(kernel_size=2)),
    "max.dil2_ceil": ((2, 4, 9, 10), 3, (0, 256), dict(kernel_size=(3, 2), stride=2, padding=1, dilation=2, ceil_mode=True)),
    "max.wide": ((1, 70, 7, 7), 128, (0, 256), dict(kernel_size=3, stride=1, padding=1)),
}

# name: (x shape, zero point, value range, output size); adaptive average.
# Narrow value ranges with even windows put many means on a half, where
# PyTorch's two kernels round differently when the zero point is odd.
ADAPTIVE = {
    "avg.7to1": ((2, 40, 7, 7), 3, (0, 256), (1, 1)),
    "avg.10to3": ((2, 16, 10, 10), 7, (0, 256), (3, 3)),
    "avg.9x6to4x5": ((1, 33, 9, 6), 3, (0, 256), (4, 5)),
    "avg.14to1_narrow": ((2, 12, 14, 14), 3, (30, 32), (1, 1)),
    "avg.17x19to3x2_narrow": ((1, 64, 17, 19), 129, (100, 102), (3, 2)),
    "avg.10to3_narrow": ((2, 16, 10, 10), 7, (7, 9), (3, 3)),
    "avg.56to1": ((1, 8, 56, 56), 100, (0, 256), (1, 1)),
}

FORMATS = {"cf": torch.contiguous_format, "cl": torch.channels_last}


def quint8(shape, zero, lo, hi):
    q = torch.randint(lo, hi, shape, dtype=torch.uint8)
    return torch._make_per_tensor_quantized_tensor(q, 0.05, zero)


def case(out, name, fmt, qx, y, params):
    assert y.q_scale() == qx.q_scale() and y.q_zero_point() == qx.q_zero_point()
    key = name + "." + fmt
    out[key + ".x"] = qx.int_repr().contiguous()
    out[key + ".y"] = y.int_repr().contiguous()
    out[key + ".params"] = torch.tensor(params, dtype=torch.int64)


def pair(v):
    return (v, v) if isinstance(v, int) else v


def main():
    torch.manual_seed(0)
    out = {}
    for name, (shape, zero, (lo, hi), opt) in MAX.items():
        x = quint8(shape, zero, lo, hi)
        k = pair(opt["kernel_size"])
        s = pair(opt.get("stride", k))
        p = pair(opt.get("padding", 0))
        d = pair(opt.get("dilation", 1))
        params = [*k, *s, *p, *d, int(opt.get("ceil_mode", False)), zero]
        for fmt, mf in FORMATS.items():
            qx = x.contiguous(memory_format=mf)
            case(out, name, fmt, qx, F.max_pool2d(qx, **opt), params)
    for name, (shape, zero, (lo, hi), size) in ADAPTIVE.items():
        x = quint8(shape, zero, lo, hi)
        for fmt, mf in FORMATS.items():
            qx = x.contiguous(memory_format=mf)
            case(out, name, fmt, qx, F.adaptive_avg_pool2d(qx, size), [0] * 9 + [zero])
    save("pool_int8.safetensors", out, {"generator": "gen_pool_int8.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
