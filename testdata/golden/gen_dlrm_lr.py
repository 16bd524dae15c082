#!/usr/bin/env python3
"""Golden data for optim.DLRMLRPolicy (run from testdata/golden with /usr/bin/python3).

LRPolicyScheduler below is dlrm_s_pytorch.py's class (facebookresearch/dlrm)
transcribed verbatim, with one change: dlrm's get_lr reads self.last_lr in
its "freeze" branch before any branch has set it (a decay that starts after
a step with no warm-up), which raises AttributeError in dlrm; here it reads
the base learning rates then, as optim.DLRMLRPolicy does.

Writes dlrm_lr.safetensors:
  dlrm_lr.<case>.config   int64 [3]: num_warmup_steps, decay_start_step,
                          num_decay_steps
  dlrm_lr.<case>.lr       float64 [STEPS+1, 2]: the groups' learning rates
                          after the scheduler is built and after each
                          optimizer.step(); scheduler.step(), for an SGD
                          optimizer with two groups of one parameter each
                          (lr 0.1, and 2e-5, which reaches the 1e-7 floor)
"""
import sys

import torch
from torch.optim.lr_scheduler import _LRScheduler

from stio import save

STEPS = 40


class LRPolicyScheduler(_LRScheduler):
    def __init__(self, optimizer, num_warmup_steps, decay_start_step, num_decay_steps):
        self.num_warmup_steps = num_warmup_steps
        self.decay_start_step = decay_start_step
        self.decay_end_step = decay_start_step + num_decay_steps
        self.num_decay_steps = num_decay_steps

        if self.decay_start_step < self.num_warmup_steps:
            sys.exit("Learning rate warmup must finish before the decay starts")

        super(LRPolicyScheduler, self).__init__(optimizer)

    def get_lr(self):
        step_count = self._step_count
        if step_count < self.num_warmup_steps:
            # warmup
            scale = 1.0 - (self.num_warmup_steps - step_count) / self.num_warmup_steps
            lr = [base_lr * scale for base_lr in self.base_lrs]
            self.last_lr = lr
        elif self.decay_start_step <= step_count and step_count < self.decay_end_step:
            # decay
            decayed_steps = step_count - self.decay_start_step
            scale = ((self.num_decay_steps - decayed_steps) / self.num_decay_steps) ** 2
            min_lr = 0.0000001
            lr = [max(min_lr, base_lr * scale) for base_lr in self.base_lrs]
            self.last_lr = lr
        else:
            if self.num_decay_steps > 0:
                # freeze at last, either because we're after decay
                # or because we're between warmup and decay
                lr = getattr(self, "last_lr", self.base_lrs)  # dlrm: self.last_lr
            else:
                # do not adjust
                lr = self.base_lrs
        return lr


CASES = {
    "warmup": (10, 10, 0),
    "decay": (0, 5, 30),
    "both": (8, 8, 20),
    "none": (0, 0, 0),
    "gap": (6, 15, 12),
    "late_decay": (0, 12, 9),
    "warmup1": (1, 3, 4),
}


def main():
    out = {}
    for case, (warmup, start, decay) in CASES.items():
        params = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
        opt = torch.optim.SGD([{"params": [params[0]]}, {"params": [params[1]], "lr": 2e-5}], lr=0.1)
        s = LRPolicyScheduler(opt, warmup, start, decay)
        lrs = [[g["lr"] for g in opt.param_groups]]
        for _ in range(STEPS):
            opt.step()  # no gradients: keeps PyTorch's step-order check quiet
            s.step()
            lrs.append([g["lr"] for g in opt.param_groups])
        out[f"dlrm_lr.{case}.config"] = torch.tensor([warmup, start, decay], dtype=torch.int64)
        out[f"dlrm_lr.{case}.lr"] = torch.tensor(lrs, dtype=torch.float64)
    save("dlrm_lr.safetensors", out, {"generator": "gen_dlrm_lr.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
