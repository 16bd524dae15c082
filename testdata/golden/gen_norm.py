#!/usr/bin/env python3
"""Golden data for Kiln's normalisation and embedding ops (autograd/norm.go, embedding.go).

Writes norm.safetensors (run from testdata/golden with /usr/bin/python3). For each
case "<case>" it stores the inputs, a random output gradient (".gout"), PyTorch's
output (".out") and the gradients of every differentiable input after
out.backward(gout):

  batch norm  ".x", ".w", ".b" (affine cases), ".rm", ".rv" (running statistics
              before the call, where given), ".grad_x", ".grad_w", ".grad_b", and
              ".rm_out", ".rv_out": the running statistics after the one forward.
  layer norm  ".x", ".w", ".b" (where given) and their gradients.
  embedding   ".idx", ".w", ".grad_w"; bags add ".offsets" (1-D input) and
              ".psw", ".grad_psw" (per-sample weights).

Where PyTorch's output is channels-last, or the input was (layer norm gives a
contiguous result), ".out_strides" holds the strides of PyTorch's output. The options
of each case are repeated in autograd/norm_golden_test.go; keep the tables in step.
"""
import torch
import torch.nn.functional as F

from stio import save

CL = torch.channels_last
CL3 = torch.channels_last_3d

# name: (x shape, memory format, training, running stats, affine, momentum, eps, x scale, x shift)
BATCH_NORM = {
    "bn2d.cl": ((4, 3, 5, 5), CL, True, True, True, 0.1, 1e-5, 1.0, 0.0),
    "bn2d.basic": ((3, 4, 4, 5), None, True, True, True, 0.3, 1e-3, 1.0, 0.0),
    "bn1d.2d": ((8, 5), None, True, True, True, 0.1, 1e-5, 2.0, 5.0),
    "bn1d.3d": ((4, 3, 7), None, True, True, True, 0.1, 1e-5, 1.0, 0.0),
    "bn3d": ((2, 3, 3, 4, 3), None, True, True, True, 0.1, 1e-5, 1.0, 0.0),
    "bn3d.cl": ((2, 3, 2, 3, 4), CL3, True, True, True, 0.2, 1e-5, 1.0, -1.0),
    "bn2d.eval": ((3, 4, 3, 5), None, False, True, True, 0.1, 1e-5, 1.0, 0.0),
    "bn2d.eval_cl": ((2, 5, 3, 4), CL, False, True, True, 0.1, 1e-5, 1.0, 0.0),
    "bn1d.eval": ((4, 3, 6), None, False, True, False, 0.1, 1e-5, 1.0, 0.0),
    "bn2d.noaffine": ((3, 4, 3, 3), None, True, False, False, 0.1, 1e-5, 1.0, 0.0),
    "bn2d.noaffine_cl": ((3, 4, 3, 3), CL, True, True, False, 0.1, 1e-5, 1.0, 0.0),
}

# name: (x shape, normalized shape, weight, bias, eps, channels-last x, x scale, x shift)
# For "ln.offset" (mean 3, deviation 0.1) PyTorch's float32 moments lose about 1e-5 of
# the result, which Kiln's float64 statistics do not, so that case's reference values
# are PyTorch's computed in float64 from the same float32 inputs.
F64_REFERENCE = {"ln.offset"}
LAYER_NORM = {
    "ln.last1": ((4, 6, 8), (8,), True, True, 1e-5, False, 1.0, 0.0),
    "ln.last2": ((3, 4, 5), (4, 5), True, True, 1e-5, False, 1.0, 0.0),
    "ln.noaffine": ((5, 7), (7,), False, False, 1e-5, False, 1.0, 0.0),
    "ln.weight_only": ((2, 3, 6), (6,), True, False, 1e-3, False, 1.0, 0.0),
    "ln.offset": ((6, 16), (16,), True, True, 1e-5, False, 0.1, 3.0),
    "ln.cl": ((2, 3, 4, 5), (4, 5), True, True, 1e-5, True, 1.0, 0.0),
}

# name: (num, dim, indices, padding_idx)
EMBEDDING = {
    "emb.basic": (10, 4, [[1, 3, 3, 9, 0], [3, 7, 1, 1, 3]], None),
    "emb.pad": (8, 3, [[2, 5, 2, 0], [1, 2, 5, 5], [7, 0, 2, 2]], 2),
    "emb.pad_neg": (6, 5, [5, 1, 5, 0, 3, 1], -1),
}

# name: (num, dim, input, offsets or None, mode, per-sample weights)
BAGS = {
    "bag.sum_psw": (10, 4, [1, 3, 3, 9, 0, 2, 3, 7, 1], [0, 3, 3, 7], "sum", True),
    "bag.sum_2d": (7, 3, [[0, 2, 2, 6], [1, 1, 5, 0], [3, 4, 6, 2]], None, "sum", False),
    "bag.sum_psw_2d": (7, 3, [[0, 2, 2], [6, 1, 1], [5, 0, 3]], None, "sum", True),
    "bag.mean": (8, 4, [1, 5, 2, 2, 7, 0], [0, 2, 2, 6], "mean", False),
    "bag.mean_2d": (6, 3, [[0, 5, 5], [2, 1, 4]], None, "mean", False),
    "bag.max": (9, 5, [4, 4, 1, 8, 0, 3, 3, 6], [0, 3, 3, 5], "max", False),
    "bag.max_2d": (6, 4, [[0, 5, 5, 2], [3, 1, 4, 4], [2, 2, 2, 2]], None, "max", False),
}


def fmt_of(t, fmt):
    return t.to(memory_format=fmt) if fmt is not None else t.clone()


def batch_norm_case(out, name, spec):
    xs, fmt, training, running, affine, momentum, eps, scale, shift = spec
    c = xs[1]
    x = torch.randn(xs) * scale + shift
    xi = fmt_of(x, fmt).requires_grad_()
    case = {name + ".x": x}
    w = b = rm = rv = None
    if affine:
        w, b = torch.randn(c), torch.randn(c)
        case.update({name + ".w": w, name + ".b": b})
        w, b = w.clone().requires_grad_(), b.clone().requires_grad_()
    if running:
        rm, rv = torch.randn(c), torch.rand(c) + 0.5
        case.update({name + ".rm": rm, name + ".rv": rv})
        rm, rv = rm.clone(), rv.clone()
    y = F.batch_norm(xi, rm, rv, w, b, training=training, momentum=momentum, eps=eps)
    gout = torch.randn(y.shape)
    y.backward(gout)
    case.update({name + ".gout": gout, name + ".out": y.detach(), name + ".grad_x": xi.grad})
    if affine:
        case.update({name + ".grad_w": w.grad, name + ".grad_b": b.grad})
    if running:
        case.update({name + ".rm_out": rm, name + ".rv_out": rv})
    if fmt is not None:
        case[name + ".out_strides"] = torch.tensor(y.stride(), dtype=torch.int64)
    out.update(case)


def layer_norm_case(out, name, spec):
    xs, ns, has_w, has_b, eps, cl, scale, shift = spec
    x = torch.randn(xs) * scale + shift
    xi = fmt_of(x, CL if cl else None).requires_grad_()
    case = {name + ".x": x}
    w = b = None
    if has_w:
        w = torch.randn(ns)
        case[name + ".w"] = w
        w = w.clone().requires_grad_()
    if has_b:
        b = torch.randn(ns)
        case[name + ".b"] = b
        b = b.clone().requires_grad_()
    if name in F64_REFERENCE:
        xi, w, b = (t.detach().double().requires_grad_() if t is not None else None for t in (xi, w, b))
    y = F.layer_norm(xi, ns, w, b, eps)
    gout = torch.randn(y.shape)
    y.backward(gout.to(y.dtype))
    case.update({name + ".gout": gout, name + ".out": y.detach().float(), name + ".grad_x": xi.grad.float()})
    if has_w:
        case[name + ".grad_w"] = w.grad.float()
    if has_b:
        case[name + ".grad_b"] = b.grad.float()
    if cl:
        case[name + ".out_strides"] = torch.tensor(y.stride(), dtype=torch.int64)
    out.update(case)


def embedding_case(out, name, spec):
    num, dim, idx, pad = spec
    idx = torch.tensor(idx, dtype=torch.int64)
    w = torch.randn(num, dim)
    wi = w.clone().requires_grad_()
    y = F.embedding(idx, wi, padding_idx=pad)
    gout = torch.randn(y.shape)
    y.backward(gout)
    out.update({name + ".idx": idx, name + ".w": w, name + ".gout": gout, name + ".out": y.detach(),
                name + ".grad_w": wi.grad})


def bag_case(out, name, spec):
    num, dim, inp, offsets, mode, has_psw = spec
    inp = torch.tensor(inp, dtype=torch.int64)
    w = torch.randn(num, dim)
    wi = w.clone().requires_grad_()
    case = {name + ".idx": inp, name + ".w": w}
    if offsets is not None:
        offsets = torch.tensor(offsets, dtype=torch.int64)
        case[name + ".offsets"] = offsets
    psw = None
    if has_psw:
        psw = torch.randn(inp.shape)
        case[name + ".psw"] = psw
        psw = psw.clone().requires_grad_()
    y = F.embedding_bag(inp, wi, offsets, mode=mode, per_sample_weights=psw)
    gout = torch.randn(y.shape)
    y.backward(gout)
    case.update({name + ".gout": gout, name + ".out": y.detach(), name + ".grad_w": wi.grad})
    if has_psw:
        case[name + ".grad_psw"] = psw.grad
    out.update(case)


def main():
    torch.manual_seed(0)
    out = {}
    for name, spec in BATCH_NORM.items():
        batch_norm_case(out, name, spec)
    for name, spec in LAYER_NORM.items():
        layer_norm_case(out, name, spec)
    for name, spec in EMBEDDING.items():
        embedding_case(out, name, spec)
    for name, spec in BAGS.items():
        bag_case(out, name, spec)
    save("norm.safetensors", out, {"generator": "gen_norm.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
