#!/usr/bin/env python3
"""Golden data for optim.RowWiseAdagrad (run from testdata/golden with /usr/bin/python3).

RWSAdagrad below transcribes the step of dlrm's optim/rwsadagrad.py
(facebookresearch/dlrm, --optimizer rwsadagrad) in plain torch ops: a
parameter with a sparse COO gradient keeps one float32 sum per row
("momentum"), h[r] += mean_j(g[r, j]^2), and steps
w[r] -= clr * g[r] / (sqrt(h[r]) + eps); a dense parameter gets
element-wise Adagrad ("sum").

The model is nn.EmbeddingBag(20, 8, mode="sum", sparse=True) (bags with
repeated indices and an empty bag; rows 14..19 are never looked up) and
nn.Linear(8, 3) on its output; loss (y * c).sum() with a fixed c. Each
case trains STEPS steps.

Writes rwsadagrad.safetensors:
  init.table [20, 8], init.weight [3, 8], init.bias [3]
  <case>.step<k>.grad.indices  int64 [n]: the table's coalesced gradient rows
  <case>.step<k>.grad.values   [n, 8]: their gradient
  <case>.step<k>.grad.weight, <case>.step<k>.grad.bias: the dense gradients
  <case>.table, <case>.weight, <case>.bias: the parameters after STEPS steps
  <case>.state.0.sum [20]      the table's row sums (dlrm's "momentum")
  <case>.state.1.sum [3, 8], <case>.state.2.sum [3]: the dense sums
  <case>.state.<i>.step        float32 scalar step counts
"""
import torch
import torch.nn as nn
from torch.optim import Optimizer

from stio import save

STEPS = 3
ROWS, DIM = 20, 8


class RWSAdagrad(Optimizer):
    """dlrm's RWSAdagrad (optim/rwsadagrad.py)."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= lr_decay:
            raise ValueError("Invalid lr_decay value: {}".format(lr_decay))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        if not 0.0 <= initial_accumulator_value:
            raise ValueError("Invalid initial_accumulator_value value: {}".format(initial_accumulator_value))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))

        self.defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                             initial_accumulator_value=initial_accumulator_value)
        super(RWSAdagrad, self).__init__(params, self.defaults)

        self.momentum_initialized = False

        for group in self.param_groups:
            for p in group['params']:
                self.state[p]['step'] = 0

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue

                if not self.momentum_initialized:
                    if p.grad.data.is_sparse:
                        self.state[p]['momentum'] = torch.full(
                            [p.data.shape[0]],
                            self.defaults["initial_accumulator_value"],
                            dtype=torch.float32,
                        )
                    else:
                        self.state[p]['sum'] = torch.full_like(p.data,
                            self.defaults["initial_accumulator_value"],
                            dtype=torch.float32,
                        )

                grad = p.grad
                state = self.state[p]

                state['step'] += 1

                if group['weight_decay'] != 0:
                    if p.grad.data.is_sparse:
                        raise RuntimeError("weight_decay option is not compatible with sparse gradients")
                    grad = grad.add(p, alpha=group['weight_decay'])

                clr = group['lr'] / (1.0 + (state['step'] - 1.0) * group['lr_decay'])

                if grad.is_sparse:
                    grad = grad.coalesce()  # the update is non-linear so indices must be unique
                    grad_indices = grad._indices()
                    grad_values = grad._values()
                    size = grad.size()

                    def make_sparse(values, row_wise):
                        constructor = grad.new
                        matrix_size = [size[0]] if row_wise else size
                        return constructor(grad_indices, values, matrix_size)

                    if grad_values.numel() > 0:
                        momentum_update = make_sparse(grad_values.pow(2).mean(dim=1), True)
                        state['momentum'].add_(momentum_update)  # update momentum
                        std = state['momentum'].sparse_mask(momentum_update.coalesce())
                        std_values = std._values().sqrt_().add_(group['eps'])
                        p.add_(make_sparse(grad_values / std_values.view(std_values.size()[0], 1), False), alpha=-clr)

                else:
                    state['sum'].addcmul_(grad, grad, value=1.0)
                    std = state['sum'].sqrt().add_(group['eps'])
                    p.addcdiv_(grad, std, value=-clr)

            self.momentum_initialized = True

        return loss


CASES = {
    "default": dict(lr=0.1),
    "decay": dict(lr=0.05, lr_decay=0.01, initial_accumulator_value=0.1, eps=1e-6, weight_decay=0.0),
}


def main():
    torch.manual_seed(0)
    emb = nn.EmbeddingBag(ROWS, DIM, mode="sum", sparse=True)
    lin = nn.Linear(DIM, 3)
    init = {"table": emb.weight.detach().clone(), "weight": lin.weight.detach().clone(), "bias": lin.bias.detach().clone()}
    out = {"init." + k: v for k, v in init.items()}
    batches = []
    for _ in range(STEPS):
        # 6 bags; indices from rows 0..13 only, the first four rows favoured
        # so rows repeat within and across bags; bag 2 is empty.
        idx = torch.where(torch.rand(14) < 0.5, torch.randint(0, 4, (14,)), torch.randint(0, 14, (14,)))
        offsets = torch.tensor([0, 3, 5, 5, 9, 12])
        c = torch.randn(6, 3)
        batches.append((idx, offsets, c))
    for case, kw in CASES.items():
        with torch.no_grad():
            emb.weight.copy_(init["table"])
            lin.weight.copy_(init["weight"])
            lin.bias.copy_(init["bias"])
        params = [emb.weight, lin.weight, lin.bias]
        opt = RWSAdagrad(params, **kw)
        for k, (idx, offsets, c) in enumerate(batches):
            opt.zero_grad(set_to_none=True)
            (lin(emb(idx, offsets)) * c).sum().backward()
            g = emb.weight.grad.coalesce()
            out[f"{case}.step{k}.grad.indices"] = g.indices()[0].clone()
            out[f"{case}.step{k}.grad.values"] = g.values().clone()
            out[f"{case}.step{k}.grad.weight"] = lin.weight.grad.clone()
            out[f"{case}.step{k}.grad.bias"] = lin.bias.grad.clone()
            opt.step()
        out[f"{case}.table"] = emb.weight.detach().clone()
        out[f"{case}.weight"] = lin.weight.detach().clone()
        out[f"{case}.bias"] = lin.bias.detach().clone()
        for i, p in enumerate(params):
            st = opt.state[p]
            out[f"{case}.state.{i}.sum"] = st.get("momentum", st.get("sum")).clone()
            out[f"{case}.state.{i}.step"] = torch.tensor(float(st["step"]), dtype=torch.float32)
    save("rwsadagrad.safetensors", out, {"generator": "gen_rwsadagrad.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
