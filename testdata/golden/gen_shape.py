#!/usr/bin/env python3
"""Golden data for Kiln's reductions, matrix products and shape ops
(autograd/reduce.go, linear.go, shape.go).

Writes shape.safetensors (run from testdata/golden with /usr/bin/python3). Every
case "<case>" applies one op to inputs "<case>.x0", "<case>.x1", ... (stored in
logical row-major order; the Go test puts them in the memory format the table
below names). The op gives outputs "<case>.out0", "<case>.out1", ... (several for
split); "<case>.gout<i>" is a random gradient for each output, and
"<case>.grad<j>" is the gradient of input j after
torch.autograd.backward(outputs, gouts). Where a case is marked, "<case>.out<i>_strides"
holds the strides of PyTorch's output so the Go test checks the memory format:
for split chunks (strided views in PyTorch) the strides of chunk.clone(), the dense
tensor PyTorch makes of them. The case table is repeated in
autograd/shape_golden_test.go; keep the two in step.
"""
import torch
import torch.nn.functional as F

from stio import save

C = None
CL = torch.channels_last
CL3 = torch.channels_last_3d

# name: (input shapes, input memory formats, op, check output strides)
CASES = {
    # Reductions. PyTorch 1.13 returns contiguous results, channels-last input or not.
    "sum.all": ([(3, 4, 5)], [C], lambda x: x.sum(), False),
    "sum.dim1": ([(3, 4, 5)], [C], lambda x: x.sum(1), False),
    "sum.neg_keep": ([(2, 3, 4, 5)], [C], lambda x: x.sum((-1, -3), keepdim=True), True),
    "sum.cl_hw_keep": ([(2, 3, 4, 5)], [CL], lambda x: x.sum((2, 3), keepdim=True), True),
    "sum.cl_n": ([(2, 3, 4, 5)], [CL], lambda x: x.sum(0), True),
    "sum.cl_c_keep": ([(2, 3, 4, 5)], [CL], lambda x: x.sum(1, keepdim=True), True),
    "sum.big": ([(12000,)], [C], lambda x: x.sum(), False),
    "mean.all": ([(4, 6)], [C], lambda x: x.mean(), False),
    "mean.d02": ([(4, 5, 6)], [C], lambda x: x.mean((0, 2)), True),
    "mean.cl_hw": ([(2, 3, 4, 5)], [CL], lambda x: x.mean((2, 3)), True),
    "mean.cl_hw_keep": ([(2, 3, 4, 5)], [CL], lambda x: x.mean((-1, -2), keepdim=True), True),
    "mean.cl3d_dhw_keep": ([(2, 3, 2, 3, 4)], [CL3], lambda x: x.mean((2, 3, 4), keepdim=True), True),
    # Matrix products.
    "mm.dot": ([(5,), (5,)], [C, C], torch.matmul, False),
    "mm.mm": ([(3, 4), (4, 5)], [C, C], torch.matmul, True),
    "mm.vec_mat": ([(4,), (4, 5)], [C, C], torch.matmul, False),
    "mm.mat_vec": ([(3, 4), (4,)], [C, C], torch.matmul, False),
    "mm.batched_mat": ([(2, 3, 4), (4, 5)], [C, C], torch.matmul, False),
    "mm.mat_batched": ([(3, 4), (2, 4, 5)], [C, C], torch.matmul, False),
    "mm.bcast": ([(2, 1, 3, 4), (3, 4, 5)], [C, C], torch.matmul, False),
    "mm.bcast_both": ([(1, 3, 2, 4), (2, 1, 4, 3)], [C, C], torch.matmul, False),
    "mm.vec_batched": ([(4,), (2, 4, 5)], [C, C], torch.matmul, False),
    "mm.batched_vec": ([(2, 3, 4), (4,)], [C, C], torch.matmul, False),
    "mm.cl": ([(2, 3, 4, 5), (5, 6)], [CL, C], torch.matmul, True),
    "mm.cl_both": ([(2, 3, 4, 5), (2, 3, 5, 2)], [CL, CL], torch.matmul, True),
    "bmm": ([(3, 2, 4), (3, 4, 5)], [C, C], torch.bmm, False),
    "linear.2d": ([(5, 7), (4, 7), (4,)], [C, C, C], F.linear, False),
    "linear.3d_nobias": ([(2, 3, 7), (4, 7)], [C, C], F.linear, False),
    "linear.1d": ([(7,), (3, 7), (3,)], [C, C, C], F.linear, False),
    "linear.cl": ([(2, 3, 4, 5), (6, 5), (6,)], [CL, C, C], F.linear, True),
    "linear.wide": ([(8, 300), (16, 300), (16,)], [C, C, C], F.linear, False),
    # Shape ops.
    "reshape.basic": ([(2, 3, 4)], [C], lambda x: x.reshape(4, -1), True),
    "reshape.cl": ([(2, 3, 4, 5)], [CL], lambda x: x.reshape(2, -1), True),
    "reshape.cl_same": ([(2, 3, 4, 5)], [CL], lambda x: x.reshape(2, 3, 4, 5), True),
    "view.basic": ([(3, 4)], [C], lambda x: x.view(2, 2, 3), True),
    "flatten.basic": ([(2, 3, 4, 5)], [C], lambda x: x.flatten(1), True),
    "flatten.cl": ([(2, 3, 4, 5)], [CL], lambda x: x.flatten(1), True),
    "flatten.mid": ([(2, 3, 4, 5)], [C], lambda x: x.flatten(1, 2), True),
    "flatten.0d": ([()], [C], lambda x: x.flatten(), True),
    "transpose.basic": ([(2, 3, 4)], [C], lambda x: x.transpose(0, 2), False),
    "transpose.cl": ([(2, 3, 4, 5)], [CL], lambda x: x.transpose(1, 3), False),
    "permute.basic": ([(2, 3, 4)], [C], lambda x: x.permute(2, 0, 1), False),
    "permute.to_cl": ([(2, 4, 5, 3)], [C], lambda x: x.permute(0, 3, 1, 2), True),
    "permute.cl_to_nhwc": ([(2, 3, 4, 5)], [CL], lambda x: x.permute(0, 2, 3, 1), True),
    "cat.d0": ([(2, 3), (1, 3), (4, 3)], [C, C, C], lambda *xs: torch.cat(xs, 0), True),
    "cat.neg": ([(2, 3, 1), (2, 3, 4)], [C, C], lambda *xs: torch.cat(xs, -1), True),
    "cat.cl": ([(2, 3, 4, 5), (2, 2, 4, 5)], [CL, CL], lambda *xs: torch.cat(xs, 1), True),
    "cat.cl_d2": ([(2, 3, 4, 5), (2, 3, 2, 5)], [CL, CL], lambda *xs: torch.cat(xs, 2), True),
    "cat.mixed": ([(2, 3, 4, 5), (2, 3, 4, 5)], [CL, C], lambda *xs: torch.cat(xs, 1), True),
    "split.d1": ([(2, 5, 3)], [C], lambda x: torch.split(x, 2, 1), True),
    "split.d0": ([(5, 3)], [C], lambda x: torch.split(x, 2, 0), True),
    "split.cl": ([(2, 6, 3, 4)], [CL], lambda x: torch.split(x, 4, 1), True),
    "split.cl_n": ([(3, 2, 2, 2)], [CL], lambda x: torch.split(x, 2, 0), True),
    "splitsizes.last": ([(2, 3, 7)], [C], lambda x: torch.split(x, [2, 0, 5], -1), True),
    "splitsizes.cl": ([(2, 3, 4, 5)], [CL], lambda x: torch.split(x, [1, 3], 2), True),
}


def run_case(out, name, shapes, formats, fn, strides):
    xs = [torch.randn(s) for s in shapes]
    ins = [(x.to(memory_format=f) if f is not None else x.clone()).requires_grad_() for x, f in zip(xs, formats)]
    ys = fn(*ins)
    ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
    gouts = [torch.randn(y.shape) for y in ys]
    torch.autograd.backward(ys, gouts)
    for j, (x, xi) in enumerate(zip(xs, ins)):
        out[f"{name}.x{j}"] = x
        out[f"{name}.grad{j}"] = xi.grad
    for i, (y, g) in enumerate(zip(ys, gouts)):
        out[f"{name}.out{i}"] = y.detach()
        out[f"{name}.gout{i}"] = g
        if strides and y.dim() > 0:
            out[f"{name}.out{i}_strides"] = torch.tensor(y.detach().clone().stride(), dtype=torch.int64)


def main():
    torch.manual_seed(0)
    out = {}
    for name, (shapes, formats, fn, strides) in CASES.items():
        run_case(out, name, shapes, formats, fn, strides)
    save("shape.safetensors", out, {"generator": "gen_shape.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
