#!/usr/bin/env python3
"""Golden data for nn/metrics: ROC AUC, log loss and accuracy as dlrm reports them.

Writes metrics.safetensors (run from testdata/golden with /usr/bin/python3). sklearn
is not installed here, so the script restates in NumPy what sklearn.metrics computes:
roc_auc_score as _binary_clf_curve (stable descending sort, one ROC point per distinct
score, true and false positives counted up to it), roc_curve's drop_intermediate and
auc's trapezoidal rule; log_loss (<= 1.2) for float64 input with eps = 1e-15; and
dlrm's accuracy, np.round(p) == y with NumPy's round-half-to-even. The AUC is checked
against a brute-force count over all (positive, negative) pairs, ties counting half.

For each case "<case>" it stores ".scores" (float32 probabilities in [0, 1]) and
".labels" (float32 0/1), and the float64 scalars ".auc", ".logloss" and ".accuracy".
The Go test walks every case in the file, so cases can be added here alone.
"""
import numpy as np
import torch

from stio import save

EPS = 1e-15


def binary_clf_curve(y, s):
    order = np.argsort(s, kind="mergesort")[::-1]
    s, y = s[order], y[order]
    distinct = np.where(np.diff(s))[0]
    thresholds = np.r_[distinct, y.size - 1]
    tps = np.cumsum(y, dtype=np.float64)[thresholds]
    fps = 1 + thresholds - tps
    return fps, tps


def roc_auc(y, s):
    fps, tps = binary_clf_curve(y, s)
    if len(fps) > 2:  # drop_intermediate: points on a straight segment add no area
        keep = np.where(np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True])[0]
        fps, tps = fps[keep], tps[keep]
    fps, tps = np.r_[0, fps], np.r_[0, tps]
    return float(np.trapz(tps / tps[-1], fps / fps[-1]))


def pairwise_auc(y, s):
    s = s.astype(np.float64)
    pos, neg = s[y == 1], s[y == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (pos.size * neg.size)


def log_loss(y, p):
    q = np.clip(p.astype(np.float64), EPS, 1 - EPS)
    q = np.stack([1 - q, q], axis=1)
    q /= q.sum(axis=1)[:, None]
    t = np.stack([1 - y, y], axis=1).astype(np.float64)
    return float(np.average(-(t * np.log(q)).sum(axis=1)))


def accuracy(y, p):
    return float(np.mean(np.round(p) == y))


def levels(rng, n, k):
    """n scores drawn from k evenly spaced levels in [0, 1]: many ties."""
    return (rng.integers(0, k, n) / (k - 1)).astype(np.float32)


def bernoulli(rng, p, shift=0.0):
    return (rng.random(p.size) < np.clip(p + shift, 0, 1)).astype(np.float32)


def cases(rng):
    out = {}
    s = levels(rng, 20, 5)
    out["small_5levels"] = (s, bernoulli(rng, s))
    s = levels(rng, 2000, 11)
    out["ties_11levels"] = (s, bernoulli(rng, s))
    s = levels(rng, 5000, 3)
    out["imbalanced_3levels"] = (s, bernoulli(rng, s * 0.1))
    s = rng.random(3000).astype(np.float32)
    out["continuous"] = (s, bernoulli(rng, s))
    s = levels(rng, 1001, 3)  # a third of the scores are exactly 0.5
    out["halves"] = (s, bernoulli(rng, np.full(s.size, 0.5, np.float32)))
    s = levels(rng, 500, 2)  # only 0 and 1: clipping decides the log loss
    out["extremes"] = (s, bernoulli(rng, s * 0.8 + 0.1))
    s = levels(rng, 20000, 1000)
    out["large_1000levels"] = (s, bernoulli(rng, s ** 2))
    s = np.full(64, 0.3, np.float32)
    out["all_tied"] = (s, bernoulli(rng, s))
    return out


def main():
    rng = np.random.default_rng(19)
    out = {}
    for name, (s, y) in cases(rng).items():
        auc = roc_auc(y, s)
        if s.size <= 5000:
            assert abs(auc - pairwise_auc(y, s)) < 1e-12, (name, auc, pairwise_auc(y, s))
        out[name + ".scores"] = torch.from_numpy(s)
        out[name + ".labels"] = torch.from_numpy(y)
        for metric, v in (("auc", auc), ("logloss", log_loss(y, s)), ("accuracy", accuracy(y, s))):
            out[name + "." + metric] = torch.tensor(v, dtype=torch.float64)
        print(f"{name}: n={s.size} pos={int(y.sum())} auc={auc:.15f} "
              f"logloss={out[name + '.logloss'].item():.15f} acc={out[name + '.accuracy'].item()}")
    save("metrics.safetensors", out, {"generator": "gen_metrics.py", "numpy": np.__version__})


if __name__ == "__main__":
    main()
