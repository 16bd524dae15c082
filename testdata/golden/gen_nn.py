#!/usr/bin/env python3
"""Golden data for package nn, and the PyTorch half of the state-dict interop proof.

Writes (run from testdata/golden with /usr/bin/python3):
  nn_torch_state.safetensors  state_dict() of a small trained torch model (Net below),
                              which the Go test loads strictly into the same Kiln model;
  nn.safetensors              "interop.*": the input and eval-mode outputs of that model,
                              and "<case>.*" golden cases for single layers: their state
                              ("<case>.state.<name>"), inputs, outputs, parameter gradients
                              ("<case>.grad.<name>") and buffers after training steps.

Then (--check-kiln, also done by default) it loads nn_kiln_state.safetensors, which the
Go test writes from a seeded Kiln model (go test ./nn -run Interop -update), into Net with
load_state_dict(strict=True) and asserts that torch reproduces the eval outputs Kiln saved
in nn_kiln_io.safetensors.
"""
import argparse
import copy
import os
import sys

import torch
import torch.nn as tnn

from stio import load, save


class Net(tnn.Module):
    """Conv2d+BatchNorm2d+ReLU+MaxPool2d, Flatten, Linear, and an Embedding beside them."""

    def __init__(self):
        super().__init__()
        self.features = tnn.Sequential(tnn.Conv2d(3, 4, 3, padding=1), tnn.BatchNorm2d(4), tnn.ReLU(), tnn.MaxPool2d(2))
        self.flatten = tnn.Flatten()
        self.fc = tnn.Linear(64, 5)
        self.emb = tnn.Embedding(10, 3, padding_idx=0)

    def forward(self, x, idx):
        return self.fc(self.flatten(self.features(x))), self.emb(idx)


def interop(out):
    torch.manual_seed(0)
    net = Net()
    with torch.no_grad():
        bn = net.features[1]
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    idx = torch.tensor([[0, 3, 9], [1, 0, 2]])
    net.train()
    for _ in range(3):  # running statistics and num_batches_tracked become non-trivial
        net(torch.randn(4, 3, 8, 8) * 2 + 0.5, idx)
    assert net.features[1].num_batches_tracked.item() == 3
    save("nn_torch_state.safetensors", net.state_dict())

    x = torch.randn(2, 3, 8, 8)
    net.eval()
    with torch.no_grad():
        y, e = net(x, idx)
    out.update({"interop.x": x, "interop.idx": idx, "interop.out": y, "interop.emb": e})

    # The same model one train-mode step later: output, parameter gradients and the
    # updated buffers.
    tr = copy.deepcopy(net).train()
    y, e = tr(x, idx)
    gy, ge = torch.randn_like(y), torch.randn_like(e)
    torch.autograd.backward([y, e], [gy, ge])
    out.update({"interop.train.out": y.detach(), "interop.train.emb": e.detach(),
                "interop.train.gout": gy, "interop.train.gemb": ge})
    for name, p in tr.named_parameters():
        out["interop.train.grad." + name] = p.grad
    for name, b in tr.named_buffers():
        out["interop.train.after." + name] = b


def case(out, name, module, inputs, steps=1, grads=True):
    """Record module's state, then run it on inputs (a list per step); the last step's
    outputs, parameter gradients (from a random grad_output) and the buffers after it."""
    module.zero_grad(set_to_none=True)
    for k, v in module.state_dict().items():
        out[f"{name}.state.{k}"] = v.clone()
    for s in range(steps):
        ins = inputs[s] if steps > 1 else inputs
        for i, x in enumerate(ins):
            out[f"{name}.in{i}" + (f".step{s}" if steps > 1 else "")] = x
        y = module(*ins)
    out[f"{name}.out"] = y.detach()
    if grads and y.requires_grad:
        gy = torch.randn_like(y)
        out[f"{name}.gout"] = gy
        y.backward(gy)
        for k, p in module.named_parameters():
            out[f"{name}.grad.{k}"] = p.grad
    for k, b in module.named_buffers():
        out[f"{name}.after.{k}"] = b.clone()


def layer_cases(out):
    torch.manual_seed(1)
    # Option plumbing: stride, padding, dilation and groups reach the op.
    case(out, "conv_grouped", tnn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2), [torch.randn(2, 4, 7, 7)])
    case(out, "conv3d", tnn.Conv3d(2, 3, 2, stride=1, padding=1, bias=False), [torch.randn(1, 2, 3, 4, 3)])
    case(out, "linear", tnn.Linear(5, 3), [torch.randn(2, 4, 5)])
    ln = tnn.LayerNorm([3, 4])
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-1, 1)
    case(out, "layernorm", ln, [torch.randn(2, 3, 4)])
    # BatchNorm bookkeeping: momentum, cumulative average (momentum=None), the counter.
    bn = tnn.BatchNorm2d(3)
    case(out, "bn2d_train", bn, [[torch.randn(4, 3, 2, 2) * 3 + 1] for _ in range(3)], steps=3)
    cum = tnn.BatchNorm1d(3, momentum=None)
    case(out, "bn1d_cumulative", cum, [[torch.randn(5, 3, 4) + 2] for _ in range(3)], steps=3)
    bn.eval()
    case(out, "bn2d_eval", bn, [torch.randn(2, 3, 2, 2)])
    notrack = tnn.BatchNorm2d(3, track_running_stats=False).eval()
    case(out, "bn2d_notrack_eval", notrack, [torch.randn(2, 3, 2, 2) * 2])
    case(out, "embedding_pad", tnn.Embedding(6, 3, padding_idx=2), [torch.tensor([[2, 1, 5], [2, 2, 0]])])
    case(out, "embedding_bag_mean", tnn.EmbeddingBag(8, 3), [torch.tensor([1, 2, 4, 5, 4, 3, 2, 7]), torch.tensor([0, 2, 5])])
    case(out, "embedding_bag_sum_weighted", tnn.EmbeddingBag(8, 3, mode="sum"),
         [torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 3]), torch.rand(6)])
    case(out, "avgpool_pad", tnn.AvgPool2d(3, stride=2, padding=1), [torch.randn(1, 2, 5, 5)])
    case(out, "avgpool_nopad", tnn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), [torch.randn(1, 2, 5, 5)])
    case(out, "maxpool_dilated", tnn.MaxPool2d(2, stride=1, padding=1, dilation=2, ceil_mode=True), [torch.randn(1, 2, 5, 5)])
    # Defaults the layers fill in themselves and the options they pass on. A seed of their
    # own keeps the cases above unchanged.
    torch.manual_seed(2)
    case(out, "conv_default", tnn.Conv2d(3, 4, 3), [torch.randn(2, 3, 6, 5)])
    case(out, "conv3d_strided", tnn.Conv3d(4, 2, 3, stride=2, padding=1, groups=2), [torch.randn(1, 4, 5, 4, 5)])
    case(out, "linear_nobias", tnn.Linear(4, 3, bias=False), [torch.randn(5, 4)])
    case(out, "layernorm_noaffine", tnn.LayerNorm([2, 5], eps=1e-2, elementwise_affine=False), [torch.randn(3, 2, 5)])
    case(out, "bn3d_train", tnn.BatchNorm3d(2, eps=1e-3, momentum=0.3),
         [[torch.randn(2, 2, 2, 3, 2) * 2 - 1] for _ in range(2)], steps=2)
    case(out, "bn1d_noaffine", tnn.BatchNorm1d(3, affine=False), [torch.randn(6, 3) + 1])
    case(out, "bn2d_notrack_train", tnn.BatchNorm2d(2, track_running_stats=False), [torch.randn(3, 2, 2, 2)])
    case(out, "embedding_negpad", tnn.Embedding(5, 2, padding_idx=-1), [torch.tensor([4, 0, 4, 2])])
    case(out, "embedding_bag_max", tnn.EmbeddingBag(7, 3, mode="max"), [torch.tensor([1, 2, 6, 0, 3, 3]), torch.tensor([0, 2, 2])])
    case(out, "embedding_bag_2d", tnn.EmbeddingBag(7, 3, mode="sum"), [torch.tensor([[1, 2, 6], [0, 3, 3]])])
    case(out, "maxpool_default", tnn.MaxPool2d(2), [torch.randn(1, 2, 5, 4)])
    case(out, "maxpool_ceil", tnn.MaxPool2d(3, stride=2, ceil_mode=True), [torch.randn(1, 2, 6, 6)])
    case(out, "avgpool_default", tnn.AvgPool2d(2), [torch.randn(1, 2, 5, 4)])
    case(out, "avgpool_ceil", tnn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True), [torch.randn(1, 2, 6, 6)])
    case(out, "ce_loss_smooth", tnn.CrossEntropyLoss(label_smoothing=0.1), [torch.randn(4, 3), torch.tensor([0, 2, 1, 2])])
    case(out, "mse_loss_sum", tnn.MSELoss(reduction="sum"), [torch.randn(3, 2), torch.randn(3, 2)])
    case(out, "bce_loss", tnn.BCEWithLogitsLoss(), [torch.randn(5), torch.rand(5)])


def check_kiln():
    state, io = "nn_kiln_state.safetensors", "nn_kiln_io.safetensors"
    if not (os.path.exists(state) and os.path.exists(io)):
        print(f"gen_nn: {state} not found; write it with `go test ./nn -run Interop -update`")
        return False
    net = Net()
    net.load_state_dict(load(state), strict=True)
    ref = load(io)
    net.eval()
    with torch.no_grad():
        y, e = net(ref["x"], ref["idx"])
    torch.testing.assert_close(y, ref["out"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(e, ref["emb"], rtol=0, atol=0)
    print(f"gen_nn: torch loads {state} strictly and reproduces Kiln's outputs")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check-kiln", action="store_true", help="only check Kiln's state dict against torch")
    args = ap.parse_args()
    if not args.check_kiln:
        out = {}
        interop(out)
        layer_cases(out)
        save("nn.safetensors", out, {"generator": "gen_nn.py", "torch": torch.__version__})
    if not check_kiln() and args.check_kiln:
        sys.exit(1)


if __name__ == "__main__":
    main()
