#!/usr/bin/env python3
"""ResNet parity data: torchvision models with seeded random weights, and
what PyTorch computes with them. Run from testdata/parity with Debian's
/usr/bin/python3 (python3-torch, python3-torchvision):

    /usr/bin/python3 gen_resnet.py resnet18   # committed, used by `make test`
    /usr/bin/python3 gen_resnet.py resnet50   # ~100 MB, written by `make parity`

resnet18.safetensors (num_classes=10):
  model.<name>          the full torchvision state dict. Convolution and fc
                        weights are rounded to bfloat16 values and stored as
                        BF16 (halving the committed file; a BF16 entry loads
                        into a float32 parameter exactly); everything else
                        is F32 (num_batches_tracked I64). BN weights, biases
                        and running statistics are randomised so evaluation
                        mode exercises them.
  eval.x, eval.logits   an input batch [4,3,64,64] and the eval-mode logits
  train.x, train.y      three batches [3,8,3,96,96] and labels [3,8]
  train.loss            [3] cross-entropy of each SGD step, before its update
  stats0.<name>         every BN running statistic after the first step
  final.<name>          after the 3 train-mode SGD steps (lr 0.001, momentum
                        0.9, weight decay 1e-4): every BN parameter and running
                        statistic, fc.weight, fc.bias and conv1.weight in full
  sample.<name>         for the other convolution weights after the steps, the
                        flattened tensor's elements 0, 101, 202, …

resnet50.safetensors (num_classes=1000; not committed):
  model.<name>          the full F32 state dict (torchvision's own dtypes)
  eval.x, eval.logits   an input batch [2,3,224,224] and the eval-mode logits
"""
import os
import sys

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
from stio import save  # noqa: E402

SAMPLE_STEP = 101
TRAIN = dict(lr=0.001, momentum=0.9, weight_decay=1e-4)


def randomise_bn(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)


def resnet18(out):
    torch.manual_seed(18)
    model = torchvision.models.resnet18(num_classes=10)
    randomise_bn(model)
    big = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:  # conv and fc weights
                p.copy_(p.bfloat16().float())
                big[name] = True
    for name, v in model.state_dict().items():
        out["model." + name] = v.bfloat16() if big.get(name) else v.clone()

    model.eval()
    x = torch.randn(4, 3, 64, 64)
    with torch.no_grad():
        out["eval.x"], out["eval.logits"] = x, model(x)

    model.train()
    xs = torch.randn(3, 8, 3, 96, 96)
    ys = torch.randint(0, 10, (3, 8))
    opt = torch.optim.SGD(model.parameters(), **TRAIN)
    losses = []
    for step, (x, y) in enumerate(zip(xs, ys)):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        losses.append(loss.item())
        loss.backward()
        opt.step()
        if step == 0:
            for name, v in model.state_dict().items():
                if "running_" in name:
                    out["stats0." + name] = v.clone()
    out["train.x"], out["train.y"] = xs, ys
    out["train.loss"] = torch.tensor(losses)
    for name, v in model.state_dict().items():
        if v.dtype != torch.float32:
            continue
        if ".bn" in name or "downsample.1" in name or name.startswith(("bn1.", "fc.", "conv1.")):
            out["final." + name] = v.clone()
        else:
            out["sample." + name] = v.flatten()[::SAMPLE_STEP].clone()


def resnet50(out):
    torch.manual_seed(50)
    model = torchvision.models.resnet50()
    randomise_bn(model)
    for name, v in model.state_dict().items():
        out["model." + name] = v.clone()
    model.eval()
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        out["eval.x"], out["eval.logits"] = x, model(x)


def main():
    archs = sys.argv[1:] or ["resnet18"]
    for arch in archs:
        build = {"resnet18": resnet18, "resnet50": resnet50}.get(arch)
        if build is None:
            sys.exit(f"gen_resnet.py: unknown architecture {arch!r} (want resnet18 or resnet50)")
        out = {}
        build(out)
        path = arch + ".safetensors"
        save(path, out, metadata={"generator": "testdata/parity/gen_resnet.py", "torch": torch.__version__,
                                  "torchvision": torchvision.__version__, "sample_step": SAMPLE_STEP})
        print(f"wrote {path}: {len(out)} tensors, {os.path.getsize(path) / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
