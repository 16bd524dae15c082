#!/usr/bin/env python3
"""Golden data for Kiln's elementwise ops and activations (autograd/elementwise.go, activation.go).

Writes activation.safetensors (run from testdata/golden with /usr/bin/python3). For each
case "<case>" it stores the input (".x", always contiguous), a random output gradient
(".gout"), PyTorch's output (".out") and the input gradient (".grad_x") after
out.backward(gout). Cases ending in ".cl" feed PyTorch a channels-last 4-D input and
store ".out_strides", the strides of its output, so the Go test checks that the result
stays channels-last (".gout" is stored contiguous; the values are the logical ones).
Cases ending in ".special" feed a fixed vector of kinks, signed
zeros, tiny, huge, infinite and NaN values; the Go test compares those exactly for
non-finite results. The ops and their parameters are repeated in
autograd/activation_golden_test.go; keep the two tables in step.

Dropout is not here: its mask comes from a different generator, so it is tested
statistically in Go.
"""
import torch
import torch.nn.functional as F

from stio import save

CL = torch.channels_last

# op name: function of x
OPS = {
    "neg": torch.neg,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "pow2_5": lambda x: torch.pow(x, 2.5),
    "pow3": lambda x: torch.pow(x, 3.0),
    "pow2": lambda x: torch.pow(x, 2.0),
    "powm1_5": lambda x: torch.pow(x, -1.5),
    "pow0_5": lambda x: torch.pow(x, 0.5),
    "powm0_5": lambda x: torch.pow(x, -0.5),
    "powm1": lambda x: torch.pow(x, -1.0),
    "powm2": lambda x: torch.pow(x, -2.0),
    "pow1": lambda x: torch.pow(x, 1.0),
    "pow0": lambda x: torch.pow(x, 0.0),
    "add_scalar": lambda x: torch.add(x, 1.5),
    "mul_scalar": lambda x: torch.mul(x, -0.75),
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "hardtanh": lambda x: F.hardtanh(x, -1.0, 1.0),
    "hardtanh_asym": lambda x: F.hardtanh(x, -0.5, 2.0),
    "silu": F.silu,
    "elu": lambda x: F.elu(x, 1.0),
    "elu_a03": lambda x: F.elu(x, 0.3),
    "gelu": lambda x: F.gelu(x, approximate="none"),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}

# Inputs in each op's domain: "pos" for logs, roots and fractional powers.
POSITIVE = {"log", "sqrt", "pow2_5", "powm1_5", "pow0_5", "powm0_5", "powm1", "powm2"}
# Ops whose interesting range is wide (saturation, tails).
WIDE = {"exp", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "elu", "elu_a03"}

SPECIAL = [float("nan"), float("-inf"), -100.0, -20.0, -2.0, -1.0, -0.5, -1e-6, -0.0, 0.0, 1e-6,
           0.5, 1.0, 2.0, 20.0, 100.0, float("inf")]


def make_input(op, shape):
    if op in POSITIVE:
        return torch.rand(shape) * 3 + 0.05
    if op in WIDE:
        return torch.randn(shape) * 3
    return torch.randn(shape) * 1.5


def case(out, name, fn, x, cl):
    xi = (x.to(memory_format=CL) if cl else x.clone()).requires_grad_()
    y = fn(xi)
    gout = torch.randn(y.shape)
    # A channels-last output gets its gradient channels-last, as it does from
    # the channels-last layers after it. PyTorch then runs the vectorised
    # kernels of the contiguous cases; with mixed layouts it falls back to
    # scalar code, which rounds some functions differently (std::tanh does not
    # saturate early as SLEEF's tanhf does).
    y.backward(gout.to(memory_format=CL) if cl else gout)
    out.update({name + ".x": x, name + ".gout": gout, name + ".out": y.detach(), name + ".grad_x": xi.grad})
    if cl:
        out[name + ".out_strides"] = torch.tensor(y.stride(), dtype=torch.int64)


def main():
    torch.manual_seed(0)
    out = {}
    for op, fn in OPS.items():
        case(out, op + ".basic", fn, make_input(op, (4, 9)), False)
        case(out, op + ".cl", fn, make_input(op, (2, 3, 4, 5)), True)
        case(out, op + ".special", fn, torch.tensor(SPECIAL), False)
    save("activation.safetensors", out, {"generator": "gen_activation.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
