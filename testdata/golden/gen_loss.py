#!/usr/bin/env python3
"""Golden data for Kiln's softmax and loss ops (autograd/softmax.go, loss.go).

Writes loss.safetensors (run from testdata/golden with /usr/bin/python3). For each
case "<case>" it stores the inputs ("<case>.x", and ".target" for losses), a random
output gradient (".gout", 0-d for reduced losses), PyTorch's output (".out") and
the input gradients after out.backward(gout) (".grad_x", and ".grad_t" where the
target is differentiable). Where an input is channels-last, ".out_strides" and
".grad_strides" hold the strides of PyTorch's output and input gradient so the Go
test checks memory formats as well as values. The options of each case are
repeated in autograd/loss_golden_test.go; keep the two tables in step.
"""
import torch
import torch.nn.functional as F

from stio import save

CL = torch.channels_last

# name: (x shape, dim, log, x channels-last, scale of x, shift of x). The shifted
# cases overflow exp in float32 unless the maximum is subtracted; a large scale
# instead makes the softmax nearly one-hot, whose gradient PyTorch computes with
# float32 cancellation, so only log_softmax uses one.
SOFTMAX = {
    "softmax.1d": ((9,), 0, False, False, 1.0, 0.0),
    "softmax.2d_dim1": ((4, 7), 1, False, False, 1.0, 0.0),
    "softmax.2d_dim0": ((5, 3), 0, False, False, 1.0, 0.0),
    "softmax.3d_dimm2": ((2, 5, 6), -2, False, False, 1.0, 0.0),
    "softmax.wide_inner": ((3, 300), 0, False, False, 1.0, 0.0),
    "softmax.large": ((4, 10), 1, False, False, 1.0, 200.0),
    "softmax.cl_dim1": ((2, 4, 3, 5), 1, False, True, 1.0, 0.0),
    "softmax.cl_dim3": ((2, 3, 4, 5), -1, False, True, 1.0, 0.0),
    "logsoftmax.2d_dim1": ((4, 7), 1, True, False, 1.0, 0.0),
    "logsoftmax.3d_dim0": ((3, 4, 5), 0, True, False, 1.0, 0.0),
    "logsoftmax.large": ((4, 10), -1, True, False, 40.0, 0.0),
    "logsoftmax.cl_dim1": ((2, 4, 3, 5), 1, True, True, 1.0, 0.0),
    "logsoftmax.cl_dim2": ((2, 3, 4, 5), 2, True, True, 1.0, 0.0),
}

# name: (logits shape, logits channels-last, logit scale, fraction of targets set to
#        the ignore index, options)
CE = {
    "ce.mean": ((6, 5), False, 1.0, 0.0, {}),
    "ce.sum": ((6, 5), False, 1.0, 0.0, dict(reduction="sum")),
    "ce.none": ((6, 5), False, 1.0, 0.0, dict(reduction="none")),
    "ce.smooth": ((6, 5), False, 1.0, 0.0, dict(label_smoothing=0.2)),
    "ce.smooth_none": ((6, 5), False, 1.0, 0.0, dict(label_smoothing=0.3, reduction="none")),
    "ce.ignore": ((8, 5), False, 1.0, 0.4, dict(ignore_index=-100)),
    "ce.ignore_class_smooth": ((8, 5), False, 1.0, 0.4, dict(ignore_index=1, label_smoothing=0.1)),
    "ce.ignore_smooth_sum": ((8, 5), False, 1.0, 0.4, dict(ignore_index=-100, label_smoothing=0.25, reduction="sum")),
    "ce.ignore_none": ((8, 5), False, 1.0, 0.4, dict(ignore_index=3, reduction="none")),
    "ce.all_ignored": ((3, 4), False, 1.0, 1.0, dict(ignore_index=-1, label_smoothing=0.1)),
    "ce.large": ((5, 10), False, 50.0, 0.0, dict(label_smoothing=0.05)),
    "ce.3d": ((3, 4, 7), False, 1.0, 0.0, {}),
    "ce.spatial_none": ((2, 4, 3, 5), False, 1.0, 0.0, dict(reduction="none")),
    "ce.spatial_cl": ((2, 4, 3, 5), True, 1.0, 0.2, dict(ignore_index=-100, label_smoothing=0.1)),
    "ce.spatial_cl_none": ((2, 3, 4, 2), True, 1.0, 0.0, dict(reduction="none")),
    "ce.unbatched": ((6,), False, 1.0, 0.0, {}),
    "ce.unbatched_none": ((6,), False, 1.0, 0.0, dict(reduction="none", label_smoothing=0.2)),
    "ce.many": ((64, 100), False, 3.0, 0.0, {}),
}

# name: (op, shape, reduction, x scale, x channels-last, target channels-last)
POINTWISE = {
    "bce.mean": ("bce", (4, 6), "mean", 2.0, False, False),
    "bce.sum": ("bce", (4, 6), "sum", 2.0, False, False),
    "bce.none": ("bce", (3, 2, 5), "none", 2.0, False, False),
    "bce.extreme": ("bce", (2, 8), "none", 60.0, False, False),
    "bce.cl_x": ("bce", (2, 3, 4, 5), "none", 2.0, True, False),
    "bce.cl_t": ("bce", (2, 3, 4, 5), "none", 2.0, False, True),
    "bce.cl_mean": ("bce", (2, 3, 4, 5), "mean", 2.0, True, False),
    "bce.empty_mean": ("bce", (0, 3), "mean", 1.0, False, False),
    "mse.mean": ("mse", (4, 6), "mean", 1.0, False, False),
    "mse.sum": ("mse", (4, 6), "sum", 1.0, False, False),
    "mse.none": ("mse", (3, 2, 5), "none", 1.0, False, False),
    "mse.cl_x": ("mse", (2, 3, 4, 5), "none", 1.0, True, False),
    "mse.cl_t": ("mse", (2, 3, 4, 5), "none", 1.0, False, True),
    "mse.cl_sum": ("mse", (2, 3, 4, 5), "sum", 1.0, False, True),
    "mse.empty_sum": ("mse", (2, 0), "sum", 1.0, False, False),
}


def strides(t):
    return torch.tensor(t.stride(), dtype=torch.int64)


def softmax_case(out, name, spec):
    shape, dim, log, cl, scale, shift = spec
    x = torch.randn(shape) * scale + shift
    xi = (x.to(memory_format=CL) if cl else x.clone()).requires_grad_()
    y = (F.log_softmax if log else F.softmax)(xi, dim)
    gout = torch.randn(y.shape)
    y.backward(gout)
    out.update({name + ".x": x, name + ".gout": gout, name + ".out": y.detach(), name + ".grad_x": xi.grad})
    if cl:
        out[name + ".out_strides"] = strides(y)
        out[name + ".grad_strides"] = strides(xi.grad)


def ce_case(out, name, spec):
    shape, cl, scale, ignored, opts = spec
    x = torch.randn(shape) * scale
    C = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    target = torch.randint(0, C, tshape)
    if ignored > 0:
        mask = torch.rand(tshape) < ignored if ignored < 1 else torch.ones(tshape, dtype=torch.bool)
        target[mask] = opts["ignore_index"]
    xi = (x.to(memory_format=CL) if cl else x.clone()).requires_grad_()
    y = F.cross_entropy(xi, target, **opts)
    gout = torch.randn(y.shape)
    y.backward(gout)
    out.update({name + ".x": x, name + ".target": target, name + ".gout": gout, name + ".out": y.detach(),
                name + ".grad_x": xi.grad})
    if cl:
        if y.dim() > 0:
            out[name + ".out_strides"] = strides(y)
        out[name + ".grad_strides"] = strides(xi.grad)


def pointwise_case(out, name, spec):
    op, shape, reduction, scale, x_cl, t_cl = spec
    x = torch.randn(shape) * scale
    t = torch.rand(shape) if op == "bce" else torch.randn(shape)
    xi = (x.to(memory_format=CL) if x_cl else x.clone()).requires_grad_()
    ti = (t.to(memory_format=CL) if t_cl else t.clone()).requires_grad_()
    fn = F.binary_cross_entropy_with_logits if op == "bce" else F.mse_loss
    y = fn(xi, ti, reduction=reduction)
    gout = torch.randn(y.shape)
    y.backward(gout)
    out.update({name + ".x": x, name + ".target": t, name + ".gout": gout, name + ".out": y.detach(),
                name + ".grad_x": xi.grad, name + ".grad_t": ti.grad})
    if (x_cl or t_cl) and y.dim() > 0:
        out[name + ".out_strides"] = strides(y)


def main():
    torch.manual_seed(0)
    out = {}
    for name, spec in SOFTMAX.items():
        softmax_case(out, name, spec)
    for name, spec in CE.items():
        ce_case(out, name, spec)
    for name, spec in POINTWISE.items():
        pointwise_case(out, name, spec)
    save("loss.safetensors", out, {"generator": "gen_loss.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
