#!/usr/bin/env python3
"""Golden data for package optim (run from testdata/golden with /usr/bin/python3).

Writes optim.safetensors:
  sgd.init.<name>              initial state_dict of Net (seeded), shared by every SGD case
  sgd.x, sgd.target            the fixed batch: inputs [8,1,6,6] float32, targets [8] int64
  sgd.<case>.loss              [20] cross-entropy loss of each step, taken before its update
  sgd.<case>.final.<name>      state_dict after 20 train-mode SGD steps (parameters and BN
                               running statistics)
  sgd.<case>.momentum.<i>      the final momentum buffer of parameter number i (cases with
                               momentum), as optimizer.state_dict() numbers them
  direct.<case>.*              SGD driven by given gradients, no model: p0 [2,3,4,5] and a
                               second parameter q0 [7], grads gp/gq [steps, ...] (q has no
                               gradient on odd steps), the final p, q and their momentum
                               buffers (mp, mq); Kiln must match bit for bit
  sched.<case>.lr              float64 [steps+1, 2]: get_last_lr() after the scheduler is
                               built and after each step, for an SGD optimizer with two
                               parameter groups (lr 0.1 and 0.05)
"""
import torch
import torch.nn as tnn
import torch.nn.functional as F
from torch.optim import lr_scheduler as sched

from stio import save

STEPS = 20

SGD_CASES = {
    "momentum": dict(lr=0.1, momentum=0.9, weight_decay=1e-4),
    "nesterov": dict(lr=0.1, momentum=0.9, weight_decay=1e-4, nesterov=True),
    "dampening": dict(lr=0.1, momentum=0.9, weight_decay=1e-4, dampening=0.1, maximize=False),
    "plain": dict(lr=0.1, weight_decay=1e-4),
}


def net():
    return tnn.Sequential(
        tnn.Conv2d(1, 4, 3, padding=1),
        tnn.BatchNorm2d(4),
        tnn.ReLU(),
        tnn.MaxPool2d(2),
        tnn.Flatten(),
        tnn.Linear(36, 3),
    )


def sgd_cases(out):
    torch.manual_seed(0)
    model = net()
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 1.5)
        model[1].bias.uniform_(-0.5, 0.5)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(8, 1, 6, 6)
    target = torch.randint(0, 3, (8,))
    out["sgd.x"], out["sgd.target"] = x, target
    for k, v in init.items():
        out["sgd.init." + k] = v

    for case, kw in SGD_CASES.items():
        model.load_state_dict(init)
        model.train()
        opt = torch.optim.SGD(model.parameters(), **kw)
        losses = []
        for _ in range(STEPS):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out[f"sgd.{case}.loss"] = torch.tensor(losses, dtype=torch.float32)
        for k, v in model.state_dict().items():
            out[f"sgd.{case}.final.{k}"] = v.clone()
        for i, st in opt.state_dict()["state"].items():
            if st.get("momentum_buffer") is not None:
                out[f"sgd.{case}.momentum.{i}"] = st["momentum_buffer"].clone()


DIRECT_CASES = {
    "plain": dict(lr=0.1),
    "decay": dict(lr=0.1, weight_decay=1e-2),
    "momentum": dict(lr=0.1, momentum=0.9, weight_decay=1e-4),
    "dampening": dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=1e-3),
    "nesterov": dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
    "maximize": dict(lr=0.02, momentum=0.5, maximize=True, weight_decay=1e-2),
}


def direct_cases(out, steps=6):
    torch.manual_seed(1)
    p0, q0 = torch.randn(2, 3, 4, 5), torch.randn(7)
    gp, gq = torch.randn(steps, 2, 3, 4, 5), torch.randn(steps, 7)
    out["direct.p0"], out["direct.q0"], out["direct.gp"], out["direct.gq"] = p0, q0, gp, gq
    for case, kw in DIRECT_CASES.items():
        p, q = p0.clone().requires_grad_(), q0.clone().requires_grad_()
        opt = torch.optim.SGD([p, q], **kw)
        for i in range(steps):
            p.grad = gp[i].clone()
            q.grad = gq[i].clone() if i % 2 == 0 else None
            opt.step()
        out[f"direct.{case}.p"], out[f"direct.{case}.q"] = p.detach(), q.detach()
        st = opt.state_dict()["state"]
        if st[0].get("momentum_buffer") is not None:
            out[f"direct.{case}.mp"] = st[0]["momentum_buffer"]
            out[f"direct.{case}.mq"] = st[1]["momentum_buffer"]


def sched_case(out, name, make, steps=30):
    params = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
    opt = torch.optim.SGD([{"params": [params[0]]}, {"params": [params[1]], "lr": 0.05}], lr=0.1)
    scheds = make(opt)
    lrs = [[g["lr"] for g in opt.param_groups]]
    for _ in range(steps):
        opt.step()  # no gradients: keeps PyTorch's step-order check quiet
        for s in scheds:
            s.step()
        lrs.append(list(scheds[-1].get_last_lr()))
    out[f"sched.{name}.lr"] = torch.tensor(lrs, dtype=torch.float64)


def sched_cases(out):
    sched_case(out, "step", lambda o: [sched.StepLR(o, step_size=7, gamma=0.5)])
    sched_case(out, "multistep", lambda o: [sched.MultiStepLR(o, milestones=[10, 3, 25, 10], gamma=0.3)])
    sched_case(out, "cosine", lambda o: [sched.CosineAnnealingLR(o, T_max=5, eta_min=0.001)])
    sched_case(out, "cosine10", lambda o: [sched.CosineAnnealingLR(o, T_max=10)], steps=60)
    sched_case(out, "linear", lambda o: [sched.LinearLR(o, start_factor=0.25, total_iters=8)])
    sched_case(out, "linear_decay", lambda o: [sched.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=20)])

    def warmup_cosine(o):
        return [sched.LinearLR(o, start_factor=0.1, total_iters=5), sched.CosineAnnealingLR(o, T_max=12, eta_min=1e-3)]

    sched_case(out, "warmup_cosine", warmup_cosine)


def main():
    out = {}
    sgd_cases(out)
    direct_cases(out)
    sched_cases(out)
    save("optim.safetensors", out, {"generator": "gen_optim.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
