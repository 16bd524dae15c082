#!/usr/bin/env python3
"""Golden data for Kiln's quantization ops (autograd/quant.go): Quantize, Dequantize,
QuantizePerChannel, DequantizePerChannel, FakeQuantize and FakeQuantizePerChannel.

Writes quant_ops.safetensors (run from testdata/golden with /usr/bin/python3). Every
case is self-describing, so the Go test (autograd/quant_golden_test.go) walks the
cases without a table of its own:

  tensor.<case>   torch.quantize_per_tensor: ".x" the float32 input, ".scale" (float32,
                  one element), ".zero" (int64, one element), ".q" the .int_repr() (uint8
                  for quint8, int8 for qint8, which says the dtype) and ".deq" its
                  .dequantize().
  channel.<case>  torch.quantize_per_channel with zero points 0: ".x", ".scales" (float32,
                  one per index along the axis), ".axis" (int64), ".q" and ".deq".
  fake.<case>     torch.fake_quantize_per_tensor_affine with quant_min/quant_max the range
                  of ".dtype_of" (an empty tensor of uint8 or int8): ".x", ".scale",
                  ".zero", ".out", ".gout" a gradient and ".grad_x" the one x receives.
  fakepc.<case>   torch.fake_quantize_per_channel_affine likewise, with ".scales" and
                  ".axis" and zero points 0.

Every scale is a float32 (PyTorch takes a double and narrows it). The inputs avoid NaN
and ±Inf and values whose x/scale passes 2^31: PyTorch converts those to integers with
undefined behaviour (its x86 build gives the bottom of the range for NaN and +Inf),
where Kiln gives the zero point to NaN and clamps ±Inf.
"""
import torch

from stio import save

RANGES = {torch.quint8: (0, 255), torch.qint8: (-128, 127)}
STORE = {torch.quint8: torch.uint8, torch.qint8: torch.int8}


def f32(v):
    return float(torch.tensor(v, dtype=torch.float32))


def inputs(scale, zero, qdtype, n):
    """Values at and near the rounding ties of the grid (x·(1/scale) = k + 1/2, both
    signs, ties to even and odd k), both ends of the range and beyond them, and random
    values across and past the range."""
    lo, hi = RANGES[qdtype]
    ks = torch.arange(-6, 7, dtype=torch.float32)
    ties = torch.cat([(ks + 0.5) * scale, (ks - 0.5) * scale])
    ends = torch.tensor([lo - zero - 0.5, lo - zero - 0.49, lo - zero - 0.51, hi - zero + 0.5,
                         hi - zero + 0.49, hi - zero + 0.51, lo - zero - 1000, hi - zero + 1000],
                        dtype=torch.float32) * scale
    span = (hi - lo) * scale
    rand = (torch.rand(n) - 0.5) * 1.4 * span + (((lo + hi) / 2) - zero) * scale
    return torch.cat([ties, ends, rand, torch.tensor([0.0, -0.0, 1e-30, -1e-30])])


def tensor_case(out, name, scale, zero, qdtype, n=64):
    scale = f32(scale)
    x = inputs(scale, zero, qdtype, n)
    q = torch.quantize_per_tensor(x, scale, zero, qdtype)
    out[f"tensor.{name}.x"] = x
    out[f"tensor.{name}.scale"] = torch.tensor([scale], dtype=torch.float32)
    out[f"tensor.{name}.zero"] = torch.tensor([zero], dtype=torch.int64)
    out[f"tensor.{name}.q"] = q.int_repr()
    out[f"tensor.{name}.deq"] = q.dequantize()


def channel_x(shape, scales, axis):
    """Random values spanning a little past each channel's int8 range, with ties."""
    view = [1] * len(shape)
    view[axis] = -1
    s = scales.view(view)
    x = (torch.rand(shape) - 0.5) * 300 * s
    ties = (torch.randint(-130, 130, shape).float() + 0.5) * s
    return torch.where(torch.rand(shape) < 0.3, ties, x).float()


def channel_case(out, name, shape, axis, qdtype=torch.qint8):
    scales = torch.tensor([f32(v) for v in (torch.rand(shape[axis]) * 0.1 + 0.001).tolist()], dtype=torch.float32)
    x = channel_x(shape, scales, axis)
    q = torch.quantize_per_channel(x, scales.double(), torch.zeros(shape[axis], dtype=torch.int64), axis, qdtype)
    out[f"channel.{name}.x"] = x
    out[f"channel.{name}.scales"] = scales
    out[f"channel.{name}.axis"] = torch.tensor([axis], dtype=torch.int64)
    out[f"channel.{name}.q"] = q.int_repr()
    out[f"channel.{name}.deq"] = q.dequantize()


def fake_case(out, name, scale, zero, qdtype, n=64):
    scale = f32(scale)
    lo, hi = RANGES[qdtype]
    x = inputs(scale, zero, qdtype, n).requires_grad_(True)
    y = torch.fake_quantize_per_tensor_affine(x, scale, zero, lo, hi)
    gout = torch.randn(y.shape)
    y.backward(gout)
    out[f"fake.{name}.x"] = x.detach()
    out[f"fake.{name}.scale"] = torch.tensor([scale], dtype=torch.float32)
    out[f"fake.{name}.zero"] = torch.tensor([zero], dtype=torch.int64)
    out[f"fake.{name}.dtype_of"] = torch.empty(0, dtype=STORE[qdtype])
    out[f"fake.{name}.out"] = y.detach()
    out[f"fake.{name}.gout"] = gout
    out[f"fake.{name}.grad_x"] = x.grad


def fakepc_case(out, name, shape, axis, qdtype=torch.qint8):
    lo, hi = RANGES[qdtype]
    scales = torch.tensor([f32(v) for v in (torch.rand(shape[axis]) * 0.1 + 0.001).tolist()], dtype=torch.float32)
    x = channel_x(shape, scales, axis)
    if qdtype == torch.quint8:
        x = x + 127 * scales.view([-1 if d == axis else 1 for d in range(len(shape))])
    x.requires_grad_(True)
    y = torch.fake_quantize_per_channel_affine(x, scales, torch.zeros(shape[axis], dtype=torch.int32), axis, lo, hi)
    gout = torch.randn(y.shape)
    y.backward(gout)
    out[f"fakepc.{name}.x"] = x.detach()
    out[f"fakepc.{name}.scales"] = scales
    out[f"fakepc.{name}.axis"] = torch.tensor([axis], dtype=torch.int64)
    out[f"fakepc.{name}.dtype_of"] = torch.empty(0, dtype=STORE[qdtype])
    out[f"fakepc.{name}.out"] = y.detach()
    out[f"fakepc.{name}.gout"] = gout
    out[f"fakepc.{name}.grad_x"] = x.grad


def main():
    torch.manual_seed(0)
    out = {}
    # Scales exact in binary (the product is exact, ties are true ties), and ones
    # whose reciprocal rounds; zero points at both ends of each range and between.
    for name, scale, zero, qd in [
        ("u8_unit_z0", 1.0, 0, torch.quint8), ("u8_unit_z128", 1.0, 128, torch.quint8),
        ("u8_pow2_z3", 0.0078125, 3, torch.quint8), ("u8_tenth_z255", 0.1, 255, torch.quint8),
        ("u8_odd_z37", 0.0123, 37, torch.quint8), ("u8_big_z100", 3.7, 100, torch.quint8),
        ("s8_unit_z0", 1.0, 0, torch.qint8), ("s8_pow2_zm5", 0.25, -5, torch.qint8),
        ("s8_tenth_z127", 0.1, 127, torch.qint8), ("s8_odd_zm128", 0.0123, -128, torch.qint8),
        ("s8_tiny_z0", 1e-6, 0, torch.qint8), ("s8_third_z10", 1 / 3, 10, torch.qint8),
    ]:
        tensor_case(out, name, scale, zero, qd)
        fake_case(out, name, scale, zero, qd)
    channel_case(out, "linear_axis0", (6, 10), 0)
    channel_case(out, "conv_axis0", (4, 3, 3, 3), 0)
    channel_case(out, "conv_axis1", (2, 5, 3, 3), 1)
    channel_case(out, "u8_axis0", (3, 7), 0, torch.quint8)
    fakepc_case(out, "linear_axis0", (6, 10), 0)
    fakepc_case(out, "conv_axis0", (4, 3, 3, 3), 0)
    fakepc_case(out, "conv_axis1", (2, 5, 3, 3), 1)
    fakepc_case(out, "u8_axis0", (3, 7), 0, torch.quint8)
    save("quant_ops.safetensors", out, {"generator": "gen_quant_ops.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
