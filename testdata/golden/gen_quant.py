#!/usr/bin/env python3
"""Golden data for Kiln's INT8 quantization parameters and observers (graph/quant).

Writes quant.safetensors (run from testdata/golden with /usr/bin/python3).

"qp.minmax" [N,2] float32 holds (min, max) pairs; "qp.affine_scale" [N] float64 and
"qp.affine_zp" [N] int64 are torch._choose_qparams_per_tensor(t, False) of a tensor
holding exactly those two values (ATen's quant_utils::ChooseQuantizationParams with
qmin 0, qmax 255: the fbgemm rule IPEX 1.10 uses, plus the cut of scales below
6.1e-5 that PyTorch 1.13 added and IPEX 1.10 does not have). "qp.sym_scale" [N]
float32 is MinMaxObserver(qint8, per_tensor_symmetric, quant_min=-127,
quant_max=127)'s scale, i.e. max(|min|, max)/127 in float32.

"sum.x" [2048] float32 and "sum.total" [1] float32: torch.sum of values with a wide
dynamic range, to pin down ATen's float32 cascade sum that HistogramObserver uses.

For each observer sequence "<seq>", "<seq>.bK" [1000] float32 are the batches, and
"<seq>.minmax", "<seq>.moving", "<seq>.hist" [2] float32 are the ranges that
MinMaxObserver, MovingAverageMinMaxObserver(averaging_constant=0.01) and
HistogramObserver(bins=2048, upsample_rate=128, quint8, per_tensor_affine) arrive at
(for the histogram, _non_linear_param_search's min and max, the range its
calculate_qparams quantizes). "<seq>.hist_state" [2] and "<seq>.histogram" [2048]
are the histogram observer's min_val/max_val and histogram after the last batch.
"""
import torch
from torch.ao.quantization.observer import (HistogramObserver, MinMaxObserver,
                                            MovingAverageMinMaxObserver)

from stio import save

QP_CASES = [
    (-1.0, 1.0), (0.0, 0.0), (1.0, 1.0), (-1.0, -1.0), (1e-40, 2e-40), (-1e-40, 1e-40),
    (0.0, 1e-6), (-1e-6, 1e-6), (0.0, 1e-3), (0.0, 0.015625), (0.0, 0.0156), (3.0, 5.0),
    (-5.0, -3.0), (-1e30, 1e30), (-3e38, 3e38), (0.0, 3.4e38), (-3.4e38, 0.0), (-0.5, 200.0),
    (-200.0, 0.5), (-0.3, 0.7), (-2.5, 7.25), (-1.0, 254.0), (-254.0, 1.0), (0.1, 0.2),
    (-0.2, -0.1), (-6.0, 6.0), (-128.0, 127.0), (-0.001, 1000.0), (-12.345678, 0.001),
    (-1.5, 1.5), (-0.5, 127.5), (-3.0, 1.0),
]


def qparams(out):
    mm = torch.tensor(QP_CASES, dtype=torch.float32)
    scales, zps, sym = [], [], []
    for lo, hi in mm.tolist():
        s, z = torch._choose_qparams_per_tensor(torch.tensor([lo, hi], dtype=torch.float32), False)
        scales.append(s)
        zps.append(z)
        obs = MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric, quant_min=-127, quant_max=127)
        obs(torch.tensor([lo, hi], dtype=torch.float32))
        sym.append(obs.calculate_qparams()[0].item())
    out["qp.minmax"] = mm
    out["qp.affine_scale"] = torch.tensor(scales, dtype=torch.float64)
    out["qp.affine_zp"] = torch.tensor(zps, dtype=torch.int64)
    out["qp.sym_scale"] = torch.tensor(sym, dtype=torch.float32)


def sums(out):
    x = torch.randn(2048) * torch.exp(torch.empty(2048).uniform_(-8, 8))
    out["sum.x"] = x
    out["sum.total"] = torch.sum(x).reshape(1)


def gen_batches(name):
    n = 1000
    if name == "normal_grow":
        return [torch.randn(n), torch.randn(n) * 2, torch.randn(n) * 3 + 0.5]
    if name == "relu":
        return [torch.relu(torch.randn(n)) * 3, torch.relu(torch.randn(n)) * 5, torch.relu(torch.randn(n)) * 2]
    if name == "uniform":
        return [torch.empty(n).uniform_(-10, 10), torch.empty(n).uniform_(-5, 5), torch.empty(n).uniform_(-8, 12)]
    if name == "small":
        # Ranges inside (-1, 1): HistogramObserver's histc gets int(min) == int(max) == 0 and falls back
        # to the batch's own range.
        return [torch.empty(n).uniform_(-0.5, 0.8), torch.empty(n).uniform_(-0.6, 0.7), torch.randn(n) * 0.2]
    if name == "laplace":
        d = torch.distributions.Laplace(0.0, 1.5)
        return [d.sample((n,)), d.sample((n,)), d.sample((n,)) * 4]
    if name == "shifted":
        return [torch.randn(n) + 20, torch.randn(n) * 3 + 18, torch.empty(n).uniform_(15, 30)]
    raise KeyError(name)


SEQS = ["normal_grow", "relu", "uniform", "small", "laplace", "shifted"]


def observers(out):
    for name in SEQS:
        batches = [b.float().contiguous() for b in gen_batches(name)]
        mm, mov, hist = MinMaxObserver(), MovingAverageMinMaxObserver(averaging_constant=0.01), HistogramObserver()
        for k, b in enumerate(batches):
            out["%s.b%d" % (name, k)] = b
            mm(b)
            mov(b)
            hist(b)
        out[name + ".minmax"] = torch.stack([mm.min_val, mm.max_val]).reshape(2)
        out[name + ".moving"] = torch.stack([mov.min_val, mov.max_val]).reshape(2)
        lo, hi = hist._non_linear_param_search()
        out[name + ".hist"] = torch.stack([lo, hi]).reshape(2).float()
        out[name + ".hist_state"] = torch.stack([hist.min_val, hist.max_val]).reshape(2)
        out[name + ".histogram"] = hist.histogram.clone()


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    out = {}
    qparams(out)
    sums(out)
    observers(out)
    save("quant.safetensors", out, {"generator": "gen_quant.py", "torch": torch.__version__})


if __name__ == "__main__":
    main()
