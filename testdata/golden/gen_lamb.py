#!/usr/bin/env python3
"""Golden data for package optim's Lamb and LARS (run from testdata/golden with /usr/bin/python3).

Writes lamb.safetensors. PyTorch 1.13 has neither optimizer, so this script implements both in
float32 torch from their definitions (IPEX's fused CPU kernels torch_ipex::lamb_fused_step and
torch_ipex::lars_fused_step), operation by operation in the order Kiln's kernels use:

Lamb, per parameter p with gradient g on its t-th step:
  m = m*b1 + (1-b1)*g;  v = v*b2 + (1-b2)*g*g
  u = m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd*p
  trust = |p| / |u| (1 when either is 0; norms in float64);  p = p - lr*trust*u
LARS, per parameter:
  trust = eeta*|p| / (|g| + wd*|p| + eps) (1 when |p| or |g| is 0; float64)
  then torch.optim.SGD's step (weight decay, momentum, dampening, nesterov) with lr*trust.

Four parameters, p0 [3,7], p1 [7], p2 [37] (sizes with a vector tail) and p3 [5], which starts at
zero to exercise the trust ratio's fallback, are driven by given gradients for STEPS steps:
  init.p<i>                  the initial parameters, shared by every case
  grad.p<i>                  [STEPS, ...] the gradients; p1 has none on steps i % 3 == 2 and p2
                             none on the first 5 steps (its state starts later)
  <case>.p<i>                the parameters after STEPS steps
  <case>.state.<i>.<name>    the optimizer state after STEPS steps (step, exp_avg, exp_avg_sq;
                             momentum_buffer)
"""
import math

import torch

from stio import save

STEPS = 50
SHAPES = [(3, 7), (7,), (37,), (5,)]

LAMB_CASES = {
    "lamb_default": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0),
    "lamb_wd": dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2),
}
LARS_CASES = {
    "lars_momentum": dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=5e-4, nesterov=False, eeta=1e-3, eps=0.0),
    "lars_nesterov": dict(lr=0.5, momentum=0.8, dampening=0.0, weight_decay=1e-2, nesterov=True, eeta=2e-2, eps=1e-6),
    "lars_plain": dict(lr=0.05, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, eeta=0.5, eps=1e-3),
    "lars_dampening": dict(lr=0.1, momentum=0.5, dampening=0.3, weight_decay=1e-3, nesterov=False, eeta=1e-2, eps=0.0),
}


def has_grad(i, step):
    return not ((i == 1 and step % 3 == 2) or (i == 2 and step < 5))


def norm64(t):
    return math.sqrt(t.double().pow(2).sum().item())


def lamb_step(p, g, st, lr, betas, eps, weight_decay):
    b1, b2 = betas
    if not st:
        st["step"] = torch.tensor(0.0)
        st["exp_avg"] = torch.zeros_like(p)
        st["exp_avg_sq"] = torch.zeros_like(p)
    st["step"] += 1
    t = st["step"].item()
    m, v = st["exp_avg"], st["exp_avg_sq"]
    m.mul_(b1).add_(g, alpha=1 - b1)
    v.mul_(b2).addcmul_(g, g, value=1 - b2)
    u = m / (1 - b1**t) / ((v / (1 - b2**t)).sqrt() + eps)
    if weight_decay != 0:
        u = u.add(p, alpha=weight_decay)
    pn, un = norm64(p), norm64(u)
    trust = 1.0 if pn == 0 or un == 0 else pn / un
    p.add_(u, alpha=-lr * trust)


def lars_step(p, g, st, lr, momentum, dampening, weight_decay, nesterov, eeta, eps):
    pn, gn = norm64(p), norm64(g)
    trust = 1.0 if not (pn > 0 and gn > 0) else eeta * pn / (gn + weight_decay * pn + eps)
    lr = lr * trust
    d = g.add(p, alpha=weight_decay) if weight_decay != 0 else g.clone()
    if momentum != 0:
        if "momentum_buffer" not in st:
            buf = st["momentum_buffer"] = d.clone()
        else:
            buf = st["momentum_buffer"]
            buf.mul_(momentum).add_(d, alpha=1 - dampening)
        d = d.add(buf, alpha=momentum) if nesterov else buf
    p.add_(d, alpha=-lr)


def main():
    torch.manual_seed(11)
    init = [torch.randn(s) for s in SHAPES]
    init[3].zero_()
    grads = [torch.randn((STEPS,) + s) for s in SHAPES]
    out = {}
    for i in range(len(SHAPES)):
        out[f"init.p{i}"], out[f"grad.p{i}"] = init[i], grads[i]
    cases = [(c, lamb_step, kw) for c, kw in LAMB_CASES.items()] + [(c, lars_step, kw) for c, kw in LARS_CASES.items()]
    with torch.no_grad():
        for case, fn, kw in cases:
            params = [p.clone() for p in init]
            states = [{} for _ in params]
            for step in range(STEPS):
                for i, p in enumerate(params):
                    if has_grad(i, step):
                        fn(p, grads[i][step].clone(), states[i], **kw)
            for i, p in enumerate(params):
                out[f"{case}.p{i}"] = p.clone()
                for name, v in states[i].items():
                    out[f"{case}.state.{i}.{name}"] = v.clone()
    save("lamb.safetensors", out, {"generator": "gen_lamb.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
