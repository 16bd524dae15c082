#!/usr/bin/env python3
"""Golden data for Kiln's broadcasting arithmetic (autograd/elementwise.go).

Writes arith.safetensors (run from testdata/golden with /usr/bin/python3). For each
case "<op>.<case>" it stores the operands (".a", ".b"), a random output gradient
(".gout"), PyTorch's result (".out") and both operand gradients (".grad_a",
".grad_b"). Where an operand is channels-last, ".out_strides" holds the strides of
PyTorch's result so the Go test checks the memory format too. The cases are
repeated in autograd/arith_golden_test.go; keep the two tables in step.
"""
import torch

from stio import save

CL = torch.channels_last

# name: (a shape, b shape, a channels-last, b channels-last)
CASES = {
    "same": ((3, 4), (3, 4), False, False),
    "row": ((3, 4), (4,), False, False),
    "outer": ((4, 1), (1, 5), False, False),
    "scalar": ((2, 3), (), False, False),
    "rank3": ((2, 1, 4), (3, 1), False, False),
    "cl_bias": ((2, 3, 4, 5), (1, 3, 1, 1), True, False),
    "cl_cl": ((2, 3, 3, 2), (2, 3, 3, 2), True, True),
    "cl_contig": ((2, 3, 3, 2), (2, 3, 3, 2), True, False),
    "contig_cl": ((2, 3, 3, 2), (2, 3, 3, 2), False, True),
}

OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}


def main():
    torch.manual_seed(0)
    out = {}
    for op, fn in OPS.items():
        for case, (sa, sb, acl, bcl) in CASES.items():
            name = op + "." + case
            a = torch.randn(sa)
            b = torch.randn(sb)
            if op == "div":
                b = b.sign() * (b.abs() + 0.5)  # keep the divisor away from 0
            ai = (a.to(memory_format=CL) if acl else a.clone()).requires_grad_()
            bi = (b.to(memory_format=CL) if bcl else b.clone()).requires_grad_()
            y = fn(ai, bi)
            gout = torch.randn(y.shape)
            y.backward(gout)
            out.update({name + ".a": a, name + ".b": b, name + ".gout": gout, name + ".out": y.detach(),
                        name + ".grad_a": ai.grad, name + ".grad_b": bi.grad})
            if acl or bcl:
                out[name + ".out_strides"] = torch.tensor(y.stride(), dtype=torch.int64)
    save("arith.safetensors", out, {"generator": "gen_arith.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
