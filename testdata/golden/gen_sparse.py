#!/usr/bin/env python3
"""Golden data for sparse embedding gradients and the sparse SGD and Adagrad
steps (run from testdata/golden with /usr/bin/python3).

Two tables train for STEPS steps from gradients given by the caller:
  W [13, 19] read twice per step by F.embedding(..., sparse=True): indices
             a.idx [steps, 6] and b.idx [steps, 4] (with repeats), output
             gradients a.dy [steps, 6, 19] and b.dy [steps, 4, 19], each
             lookup its own backward call, so gradients accumulate; the
             *_single cases read W only with a.idx. (PyTorch adds two
             uncoalesced sparse gradients with a merge meant for sorted
             ones, which reorders the sums of repeated rows, so only the
             single-lookup cases can match bit for bit.)
  V [9, 5]   read once per step by F.embedding_bag(mode="mean",
             sparse=True): bag.idx [steps, 7] split at bag.offsets [4]
             (bag 1 is empty), output gradient bag.dy [steps, 4, 5]
Writes sparse.safetensors:
  W0, V0, a.*, b.*, bag.*          the inputs above
  grad.W.indices, grad.W.values    W's coalesced gradient after step 0's a
                                   lookup; grad.V.* that of step 0's bag
  <case>.W, <case>.V               the tables after STEPS steps
  <case>.state.W, <case>.state.V   momentum_buffer (densified) or sum
"""
import torch
import torch.nn.functional as F

from stio import save

STEPS = 50

CASES = {
    "sgd": ("SGD", dict(lr=0.1)),
    "sgd_maximize": ("SGD", dict(lr=0.05, maximize=True)),
    "sgd_momentum": ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1)),
    "sgd_nesterov": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    "adagrad": ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
    "adagrad_maximize": ("Adagrad", dict(lr=0.05, eps=1e-6, maximize=True)),
    "sgd_single": ("SGD", dict(lr=0.1)),
    "adagrad_single": ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
}


def main():
    torch.manual_seed(0)
    out = {
        "W0": torch.randn(13, 19),
        "V0": torch.randn(9, 5),
        # Half the indices come from the first four rows, so rows repeat
        # within and across lookups.
        "a.idx": torch.where(torch.rand(STEPS, 6) < 0.5, torch.randint(0, 4, (STEPS, 6)), torch.randint(0, 13, (STEPS, 6))),
        "b.idx": torch.randint(0, 6, (STEPS, 4)),
        "a.dy": torch.randn(STEPS, 6, 19),
        "b.dy": torch.randn(STEPS, 4, 19),
        "bag.idx": torch.randint(0, 9, (STEPS, 7)),
        "bag.offsets": torch.tensor([0, 2, 2, 5]),
        "bag.dy": torch.randn(STEPS, 4, 5),
    }

    def backward(w, v, s, lookups):
        for k in lookups:
            F.embedding(out[k + ".idx"][s], w, sparse=True).backward(out[k + ".dy"][s])
        F.embedding_bag(out["bag.idx"][s], v, out["bag.offsets"], mode="mean", sparse=True).backward(out["bag.dy"][s])

    for case, (name, kw) in CASES.items():
        w = out["W0"].clone().requires_grad_()
        v = out["V0"].clone().requires_grad_()
        opt = getattr(torch.optim, name)([w, v], **kw)
        lookups = ("a",) if case.endswith("_single") else ("a", "b")
        for s in range(STEPS):
            opt.zero_grad(set_to_none=True)
            backward(w, v, s, lookups)
            if s == 0 and case == "sgd_single":
                for n, t in (("W", w), ("V", v)):
                    g = t.grad.coalesce()
                    out[f"grad.{n}.indices"] = g.indices()[0].clone()
                    out[f"grad.{n}.values"] = g.values().clone()
            opt.step()
        out[case + ".W"], out[case + ".V"] = w.detach().clone(), v.detach().clone()
        for n, t in (("W", w), ("V", v)):
            st = opt.state[t]
            buf = st.get("momentum_buffer", st.get("sum"))
            if buf is not None:
                out[f"{case}.state.{n}"] = buf.to_dense() if buf.is_sparse else buf.clone()
    save("sparse.safetensors", out, {"generator": "gen_sparse.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
