#!/usr/bin/env python3
"""Golden data for Kiln's int8 layers (autograd/quantized_layer.go) and uint8 pools at
the autograd level, and for the calibration scales of graph/quant.

Writes qlayers.safetensors (run from testdata/golden with /usr/bin/python3). Debian's
PyTorch 1.13 is built without FBGEMM, so neither the 'fbgemm' nor the 'x86' quantized
engine exists; every PyTorch result is stored for each engine it has ('onednn' and
'qnnpack'), under ".y_<engine>_<fmt>" with <fmt> "cf" (contiguous input) or "cl"
(channels_last input), as int_repr() in logical order. The Go tests are
autograd/quantized_layer_golden_test.go and graph/quant/golden_test.go.

  conv.<case>    torch.ops.quantized.conv2d / conv2d_relu: ".x" the quint8 input's
                 int_repr (U8, NCHW), ".x_scale" (F32 [1]) and ".x_zero" (I64 [1]);
                 ".w" the qint8 per-channel weight's int_repr (I8, OIHW, zero points 0)
                 and ".w_scales" (F32 [O]); ".b" the float bias (absent for none);
                 ".params" (I64: stride h, w, padding h, w, dilation h, w, groups,
                 relu); ".out_scale" (F32 [1]), ".out_zero" (I64 [1]) and the quint8
                 results.
  linear.<case>  torch.ops.quantized.linear / linear_relu with the same fields, ".w"
                 [out, in] and ".params" (I64: relu).
  maxpool.<case> F.max_pool2d of a quint8 input: ".x", ".x_scale", ".x_zero",
                 ".params" (I64: kernel h, w, stride h, w, padding h, w, dilation h,
                 w, ceil_mode) and the results (same scale and zero point as x).
  avgpool.<case> F.adaptive_avg_pool2d likewise; the output size is ".y_*"'s shape.
  calib.*        a conv2d(3→4, 3×3, padding 1) with weights ".weight" and ".bias" and
                 calibration batches ".batch0" and ".batch1" (F32); ".in_scale",
                 ".in_zero", ".out_scale", ".out_zero" (F64 [1], I64 [1]) and
                 ".w_scales" (F64 [4]) are IPEX 1.10's ChooseQuantizationParams of the
                 conv's input and output over both batches and its per-channel weight
                 scales, computed here in plain Python, not by PyTorch's observers.

Left out, because PyTorch 1.13 has no static op for them: a convolution with a fused
residual add (conv2d_add arrived later; a conv2d followed by quantized.add rounds
twice, which is not the computation Kiln's fused residual performs) and a float32
output (quantized.linear always requantizes; only linear_dynamic gives float, and it
quantizes its input itself).

All scales are float32 values, so PyTorch's doubles and Kiln's float32 see the same
numbers.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from stio import save

ENGINES = [e for e in ("onednn", "qnnpack") if e in torch.backends.quantized.supported_engines]
FORMATS = {"cf": torch.contiguous_format, "cl": torch.channels_last}


def f32(v):
    return float(np.float32(v))


def qparams_for(y):
    """An output scale and zero point that cover y's range, as a calibration would."""
    lo, hi = min(float(y.min()), 0.0), max(float(y.max()), 0.0)
    s = f32((hi - lo) / 255)
    return s, int(min(255, max(0, round(-lo / s))))


def quint8_input(shape, scale, zero):
    return torch._make_per_tensor_quantized_tensor(torch.randint(0, 256, shape, dtype=torch.uint8), scale, zero)


def qint8_weight(shape):
    w = torch.randn(shape)
    scales = torch.tensor([f32(v) for v in (w.abs().reshape(shape[0], -1).amax(1) / 127).tolist()])
    return torch.quantize_per_channel(w, scales.double(), torch.zeros(shape[0], dtype=torch.int64), 0, torch.qint8), scales


def store_operands(out, key, qx, qw, scales, b, params, out_scale, out_zero):
    out[key + ".x"] = qx.int_repr().contiguous()
    out[key + ".x_scale"] = torch.tensor([qx.q_scale()], dtype=torch.float32)
    out[key + ".x_zero"] = torch.tensor([qx.q_zero_point()], dtype=torch.int64)
    out[key + ".w"] = qw.int_repr().contiguous()
    out[key + ".w_scales"] = scales
    if b is not None:
        out[key + ".b"] = b
    out[key + ".params"] = torch.tensor(params, dtype=torch.int64)
    out[key + ".out_scale"] = torch.tensor([out_scale], dtype=torch.float32)
    out[key + ".out_zero"] = torch.tensor([out_zero], dtype=torch.int64)


def conv_case(out, name, xshape, o, k, stride=1, padding=0, dilation=1, groups=1, bias=True, relu=False):
    qx = quint8_input(xshape, f32(0.01 + 0.03 * torch.rand(()).item()), int(torch.randint(0, 256, ())))
    qw, scales = qint8_weight((o, xshape[1] // groups, k, k))
    b = torch.randn(o) if bias else None
    pair = lambda v: [v, v]
    ref = F.conv2d(qx.dequantize(), qw.dequantize(), b, stride, padding, dilation, groups)
    out_scale, out_zero = qparams_for(F.relu(ref) if relu else ref)
    key = "conv." + name
    store_operands(out, key, qx, qw, scales, b, pair(stride) + pair(padding) + pair(dilation) + [groups, int(relu)],
                   out_scale, out_zero)
    op = torch.ops.quantized.conv2d_relu if relu else torch.ops.quantized.conv2d
    for eng in ENGINES:
        torch.backends.quantized.engine = eng
        packed = torch.ops.quantized.conv2d_prepack(qw, b, pair(stride), pair(padding), pair(dilation), groups)
        for fmt, mf in FORMATS.items():
            y = op(qx.contiguous(memory_format=mf), packed, out_scale, out_zero)
            out[f"{key}.y_{eng}_{fmt}"] = y.int_repr().contiguous()


def linear_case(out, name, xshape, o, bias=True, relu=False):
    qx = quint8_input(xshape, f32(0.01 + 0.03 * torch.rand(()).item()), int(torch.randint(0, 256, ())))
    qw, scales = qint8_weight((o, xshape[-1]))
    b = torch.randn(o) if bias else None
    ref = F.linear(qx.dequantize(), qw.dequantize(), b)
    out_scale, out_zero = qparams_for(F.relu(ref) if relu else ref)
    key = "linear." + name
    store_operands(out, key, qx, qw, scales, b, [int(relu)], out_scale, out_zero)
    op = torch.ops.quantized.linear_relu if relu else torch.ops.quantized.linear
    for eng in ENGINES:
        torch.backends.quantized.engine = eng
        y = op(qx, torch.ops.quantized.linear_prepack(qw, b), out_scale, out_zero)
        out[f"{key}.y_{eng}_cf"] = y.int_repr().contiguous()


def pool_case(out, key, xshape, params, pool):
    qx = quint8_input(xshape, 0.05, int(torch.randint(0, 256, ())))
    out[key + ".x"] = qx.int_repr().contiguous()
    out[key + ".x_scale"] = torch.tensor([qx.q_scale()], dtype=torch.float32)
    out[key + ".x_zero"] = torch.tensor([qx.q_zero_point()], dtype=torch.int64)
    out[key + ".params"] = torch.tensor(params, dtype=torch.int64)
    for eng in ENGINES:
        torch.backends.quantized.engine = eng
        for fmt, mf in FORMATS.items():
            y = pool(qx.contiguous(memory_format=mf))
            assert y.q_scale() == qx.q_scale() and y.q_zero_point() == qx.q_zero_point()
            out[f"{key}.y_{eng}_{fmt}"] = y.int_repr().contiguous()


def choose_qparams(lo, hi):
    """IPEX 1.10's (fbgemm's) ChooseQuantizationParams for affine uint8, in float64."""
    qmin, qmax = 0, 255
    a, b = min(float(lo), 0.0), max(float(hi), 0.0)
    s = (b - a) / (qmax - qmin)
    with np.errstate(over="ignore", divide="ignore"):
        if np.float32(s) == 0 or math.isinf(np.float32(1) / np.float32(s)):
            s = 0.1
    zmin, zmax = qmin - a / s, qmax - b / s
    z = zmin if abs(qmin) + abs(a / s) < abs(qmax) + abs(b / s) else zmax
    z = qmin if z < qmin else qmax if z > qmax else round(z)  # round: half to even
    return s, z


def dyadic(shape, lo, hi, denom):
    """Multiples of 1/denom: the convolution of such values sums exactly in float32
    in any order, so the calibrated ranges cannot depend on the summation order."""
    return torch.randint(lo, hi, shape).float() / denom


def calib(out):
    # Each output channel its own range, so that each has its own scale.
    w = dyadic((4, 3, 3, 3), -16, 17, 32) * torch.tensor([1.0, 0.5, 0.75, 0.25]).view(4, 1, 1, 1)
    b = dyadic((4,), -8, 9, 8)
    batches = [dyadic((2, 3, 6, 5), -20, 51, 16), dyadic((2, 3, 6, 5), -30, 41, 16)]
    ys = []
    for x in batches:
        y64 = F.conv2d(x.double(), w.double(), b.double(), padding=1)
        y32 = F.conv2d(x, w, b, padding=1)
        assert torch.equal(y64, y32.double()), "the dyadic convolution is not exact in float32"
        ys.append(y32)
    in_s, in_z = choose_qparams(min(float(x.min()) for x in batches), max(float(x.max()) for x in batches))
    out_s, out_z = choose_qparams(min(float(y.min()) for y in ys), max(float(y.max()) for y in ys))
    w_scales = [float(v) / 127 for v in w.abs().reshape(4, -1).amax(1).tolist()]
    out["calib.weight"], out["calib.bias"] = w, b
    out["calib.batch0"], out["calib.batch1"] = batches
    out["calib.in_scale"] = torch.tensor([in_s], dtype=torch.float64)
    out["calib.in_zero"] = torch.tensor([in_z], dtype=torch.int64)
    out["calib.out_scale"] = torch.tensor([out_s], dtype=torch.float64)
    out["calib.out_zero"] = torch.tensor([out_z], dtype=torch.int64)
    out["calib.w_scales"] = torch.tensor(w_scales, dtype=torch.float64)


def main():
    torch.manual_seed(0)
    out = {}
    conv_case(out, "k3p1", (2, 6, 9, 8), 8, 3, padding=1)
    conv_case(out, "k3s2_relu", (2, 6, 11, 10), 8, 3, stride=2, padding=1, relu=True)
    conv_case(out, "groups2", (2, 6, 7, 7), 8, 3, padding=1, groups=2)
    conv_case(out, "k1_nobias", (2, 16, 6, 5), 12, 1, bias=False)
    conv_case(out, "c3_relu", (2, 3, 12, 12), 5, 3, stride=2, padding=1, relu=True)
    conv_case(out, "dil2_nobias_relu", (1, 4, 10, 9), 6, 3, padding=2, dilation=2, bias=False, relu=True)
    linear_case(out, "odd", (5, 37), 13)
    linear_case(out, "batched3d_relu", (3, 7, 19), 11, relu=True)
    linear_case(out, "nobias", (4, 33), 9, bias=False)
    linear_case(out, "nobias_relu", (6, 130), 17, bias=False, relu=True)
    pool_case(out, "maxpool.k3s2p1", (2, 5, 9, 8), [3, 3, 2, 2, 1, 1, 1, 1, 0],
              lambda x: F.max_pool2d(x, 3, 2, 1))
    pool_case(out, "maxpool.k2_ceil", (1, 7, 7, 9), [2, 2, 2, 2, 0, 0, 1, 1, 1],
              lambda x: F.max_pool2d(x, 2, ceil_mode=True))
    pool_case(out, "avgpool.7to1", (2, 16, 7, 7), [], lambda x: F.adaptive_avg_pool2d(x, 1))
    pool_case(out, "avgpool.10x9to3x4", (2, 6, 10, 9), [], lambda x: F.adaptive_avg_pool2d(x, (3, 4)))
    calib(out)
    save("qlayers.safetensors", out, {"generator": "gen_qlayers.py", "torch": torch.__version__,
                                      "engines": ",".join(ENGINES)})


if __name__ == "__main__":
    main()
