#!/usr/bin/env python3
"""Golden data for Kiln's conversions (autograd/convert.go): Cast between dtypes, To and
Contiguous between memory formats, and Clone.

Writes convert.safetensors (run from testdata/golden with /usr/bin/python3).

  cast.<case>    ".x" the input, ".out" PyTorch's x.to(dtype). Between floating types
                 also ".gout" (a gradient in the output's dtype) and ".grad_x" (the
                 gradient x receives, cast back). Float-to-integer cases keep to values
                 C++ can convert (in range, no NaN): anything else is undefined behaviour
                 in PyTorch, so there is nothing to compare with.
  format.<case>  ".x" the input in logical order, ".out" the result's logical values,
                 ".out_strides" its strides, ".gout" a gradient and ".grad_strides" the
                 strides of the gradient the input receives (values equal gout's).

The cases are repeated in autograd/convert_test.go; keep the two tables in step.
"""
import struct

import torch

from stio import save

CL = torch.channels_last
CL3 = torch.channels_last_3d


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


# float32 values whose rounding to bfloat16 is a tie, just off a tie, a carry into the
# exponent, an overflow to infinity, a subnormal, a signed zero or non-finite.
BF16_EDGES = [f32(0x3F808000), f32(0x3F818000), f32(0x3F808001), f32(0x3F80FFFF), f32(0x3FFF8000),
              f32(0x7F7FFFFF), f32(0xFF7F8000), f32(0x00000001), f32(0x80400000), -0.0, 0.0,
              float("inf"), float("-inf"), float("nan")]

# int64 values around float32's and float64's exact-integer limits, and beyond what
# the narrower integer types hold (the conversions wrap, keeping the low bits).
BIG = [0, 1, -1, 127, 128, 255, 256, -129, 300, 2**24 + 1, 2**31, -(2**31) - 1, 2**40 + 5,
       2**53 + 1, 2**60 + 2**36 + 1, -(2**62) - 3, 2**63 - 1]


def cast_case(out, name, x, dtype, grad):
    xi = x.clone().requires_grad_(grad)
    y = xi.to(dtype)
    out[f"cast.{name}.x"] = x
    out[f"cast.{name}.out"] = y.detach()
    if grad:
        gout = torch.randn(y.shape).to(dtype)
        y.backward(gout)
        out[f"cast.{name}.gout"] = gout
        out[f"cast.{name}.grad_x"] = xi.grad


def format_case(out, name, x, fmt, fn):
    xi = (x.to(memory_format=fmt) if fmt else x.clone()).requires_grad_(x.is_floating_point())
    y = fn(xi)
    out[f"format.{name}.x"] = x
    out[f"format.{name}.out"] = y.detach().contiguous()
    out[f"format.{name}.out_strides"] = torch.tensor(y.stride(), dtype=torch.int64)
    if xi.requires_grad:
        gout = torch.randn(y.shape)
        y.backward(gout)
        out[f"format.{name}.gout"] = gout
        out[f"format.{name}.grad_strides"] = torch.tensor(xi.grad.stride(), dtype=torch.int64)


def main():
    torch.manual_seed(0)
    out = {}
    wide = torch.randn(40) * 100
    cast_case(out, "f32_bf16", torch.cat([wide, torch.tensor(BF16_EDGES)]), torch.bfloat16, True)
    cast_case(out, "bf16_f32", torch.cat([wide, torch.tensor(BF16_EDGES)]).to(torch.bfloat16), torch.float32, True)
    # Truncation toward zero, negative and positive, within each type's range.
    frac = torch.tensor([0.0, -0.0, 0.4, -0.4, 0.99, -0.99, 1.5, -1.5, 2.5, -2.7])
    cast_case(out, "f32_i8", torch.cat([frac, torch.tensor([127.9, -128.9, 100.5, -99.5])]), torch.int8, False)
    cast_case(out, "f32_u8", torch.cat([frac.abs(), torch.tensor([255.9, 128.5, 0.999])]), torch.uint8, False)
    cast_case(out, "f32_i32", torch.cat([frac, torch.tensor([2.0**31 - 128, -(2.0**31), 16777217.0, -1e9 - 0.5])]), torch.int32, False)
    cast_case(out, "f32_i64", torch.cat([frac, torch.tensor([2.0**62, -(2.0**63), 1e15 + 0.5, -3e12])]), torch.int64, False)
    cast_case(out, "bf16_i32", torch.tensor([1.5, -2.75, 3e9, -1e9, 0.0]).to(torch.bfloat16), torch.int32, False)
    big = torch.tensor(BIG, dtype=torch.int64)
    for dt, nm in [(torch.float32, "f32"), (torch.bfloat16, "bf16"), (torch.int32, "i32"), (torch.int8, "i8"),
                   (torch.uint8, "u8")]:
        cast_case(out, "i64_" + nm, big, dt, False)
    small = torch.tensor([0, 1, -1, 127, -128, 100, -56], dtype=torch.int8)
    for dt, nm in [(torch.uint8, "u8"), (torch.int32, "i32"), (torch.int64, "i64"), (torch.float32, "f32")]:
        cast_case(out, "i8_" + nm, small, dt, False)
    cast_case(out, "u8_i8", torch.tensor([0, 1, 127, 128, 200, 255], dtype=torch.uint8), torch.int8, False)
    cast_case(out, "i32_i64", torch.tensor([0, -1, 2**31 - 1, -(2**31)], dtype=torch.int32), torch.int64, False)

    format_case(out, "to_cl", torch.randn(2, 3, 4, 5), None, lambda x: x.to(memory_format=CL))
    format_case(out, "to_cl3d", torch.randn(2, 3, 2, 3, 4), None, lambda x: x.to(memory_format=CL3))
    format_case(out, "contiguous", torch.randn(2, 3, 4, 5), CL, lambda x: x.contiguous())
    format_case(out, "contiguous_3d", torch.randn(2, 3, 2, 3, 4), CL3, lambda x: x.contiguous())
    format_case(out, "clone", torch.randn(3, 4), None, lambda x: x.clone())
    format_case(out, "clone_cl", torch.randn(2, 3, 4, 5), CL, lambda x: x.clone())
    format_case(out, "to_cl_int64", torch.arange(120, dtype=torch.int64).reshape(2, 3, 4, 5), None,
                lambda x: x.to(memory_format=CL))
    # Channels-last with C = 1 or H = W = 1 has the same memory order as contiguous;
    # PyTorch still reports channels-last strides.
    format_case(out, "to_cl_c1", torch.randn(2, 1, 3, 3), None, lambda x: x.to(memory_format=CL))
    format_case(out, "to_cl_hw1", torch.randn(2, 3, 1, 1), None, lambda x: x.to(memory_format=CL))
    save("convert.safetensors", out, {"generator": "gen_convert.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
