#!/usr/bin/env python3
"""Golden data for package optim's Adam, AdamW and Adagrad (run from testdata/golden with /usr/bin/python3).

Writes adam.safetensors. Three parameters, p0 [3,7], p1 [7] and p2 [37] (sizes with a vector
tail), are driven by given gradients for STEPS steps, no model in between, through PyTorch's
single-tensor (foreach=False) optimizers:
  init.p<i>                  the initial parameters, shared by every case
  grad.p<i>                  [STEPS, ...] the gradients; p1 has none on steps i % 3 == 2 and p2
                             none on the first 5 steps (its state starts later)
  <case>.p<i>                the parameters after STEPS steps
  <case>.state.<i>.<name>    optimizer.state_dict()["state"][i][name] after STEPS steps
                             (step, exp_avg, exp_avg_sq, max_exp_avg_sq, sum)
"""
import torch

from stio import save

STEPS = 50
SHAPES = [(3, 7), (7,), (37,)]

CASES = {
    "adam_default": (torch.optim.Adam, dict(lr=1e-3)),
    "adam_wd_amsgrad": (torch.optim.Adam, dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2, amsgrad=True)),
    "adam_maximize": (torch.optim.Adam, dict(lr=1e-2, weight_decay=1e-3, maximize=True)),
    "adamw": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=1e-1)),
    "adamw_amsgrad_maximize": (torch.optim.AdamW, dict(lr=5e-3, betas=(0.5, 0.9), amsgrad=True, maximize=True)),
    "adagrad": (torch.optim.Adagrad, dict(lr=5e-2, lr_decay=1e-2, weight_decay=1e-2, initial_accumulator_value=0.1)),
    "adagrad_maximize": (torch.optim.Adagrad, dict(lr=1e-2, eps=1e-6, maximize=True)),
}


def has_grad(i, step):
    return not ((i == 1 and step % 3 == 2) or (i == 2 and step < 5))


def main():
    torch.manual_seed(7)
    init = [torch.randn(s) for s in SHAPES]
    grads = [torch.randn((STEPS,) + s) for s in SHAPES]
    out = {}
    for i in range(len(SHAPES)):
        out[f"init.p{i}"], out[f"grad.p{i}"] = init[i], grads[i]
    for case, (cls, kw) in CASES.items():
        params = [p.clone().requires_grad_() for p in init]
        opt = cls(params, foreach=False, **kw)
        for step in range(STEPS):
            for i, p in enumerate(params):
                p.grad = grads[i][step].clone() if has_grad(i, step) else None
            opt.step()
        for i, p in enumerate(params):
            out[f"{case}.p{i}"] = p.detach().clone()
        for i, st in opt.state_dict()["state"].items():
            for name, v in st.items():
                out[f"{case}.state.{i}.{name}"] = v.detach().clone().reshape(v.shape)
    save("adam.safetensors", out, {"generator": "gen_adam.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
