#!/usr/bin/python3
"""PyTorch side of Kiln's benchmark (bench/cmd/kilnbench runs it).

Serves the Go driver over stdin/stdout, one JSON value per line: it first
prints a report header (side, threads, versions, BLAS), then for each
workload read from stdin runs it with PyTorch at the thread count given and
prints its result, until stdin ends. The driver sends the same workloads to
Kiln, alternating, so both sides are timed under the same machine load.
The timing method is the one in bench/measure.go:
calls for at least 50 ms of warm-up (and at least the workload's
warmup_calls), whose mean time sets how many calls make a sample (enough
for 2 ms), then RUNS samples; the result is the median per-call time.

The ResNet-50 rows use torchvision's resnet50 with seeded random weights,
channels-last. The peak-memory rows (bound "footprint": ResNet-50's and
DLRM's training) are not timed: this server runs each in a fresh
interpreter (this script with --footprint), which reports its peak RSS, as
the Kiln side does in a fresh kilnbench process. A workload whose prepare
returns (setup, run) has only run timed, each call after an untimed setup.

Threads: the driver sets OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and
MKL_NUM_THREADS to T in the environment (OpenBLAS reads its variable at load
time; torch.set_num_threads alone does not limit it) and this script calls
torch.set_num_threads(T).

  torch_bench.py --info                      # versions and BLAS only
  torch_bench.py --threads T --runs R        # serve workloads
  torch_bench.py --threads T --footprint W   # one footprint workload (JSON), in this process
"""

import argparse
import ctypes
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import warnings

WARM_UP = 50e-3
MIN_SAMPLE = 2e-3
MAX_INNER = 1000


def blas_info():
    """Which BLAS torch's matrix multiply runs on, found from the libraries
    mapped into this process after a matrix multiply (Debian's torch is
    built against the generic libblas.so.3, which the alternatives system
    points at OpenBLAS or at the slow reference BLAS)."""
    import torch

    a = torch.ones(64, 64)
    torch.mm(a, a)
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and re.search(r"blas|mkl_|libmkl", parts[-1], re.I):
                libs.add(parts[-1])
    info = {"blas_libs": " ".join(sorted(libs))}
    for path in sorted(libs):
        try:
            lib = ctypes.CDLL(path)
            get_config = lib.openblas_get_config
        except (OSError, AttributeError):
            continue
        get_config.restype = ctypes.c_char_p
        info["blas"] = get_config().decode()
        try:
            info["blas_threads"] = str(lib.openblas_get_num_threads())
        except AttributeError:
            pass
        return info
    if any("mkl" in p.lower() for p in libs):
        info["blas"] = "MKL"
    elif any("/blas/" in p for p in libs):
        info["blas"] = "reference BLAS (slow: run `make bench-deps` to install libopenblas0-pthread)"
    else:
        info["blas"] = "unknown"
    return info


def torch_info():
    import torch

    info = {"torch": torch.__version__, "python": sys.version.split()[0]}
    m = re.search(r"MKL-DNN v([\d.]+)", torch.__config__.show())
    info["onednn"] = m.group(1) if m and torch.backends.mkldnn.is_available() else "unavailable"
    info["torch_threads"] = str(torch.get_num_threads())
    info["quantized_engine"] = quantized_engine_info()
    try:
        import torchvision

        info["torchvision"] = torchvision.__version__
    except ImportError:
        info["torchvision"] = ""
    info.update(blas_info())
    return info


def measure(run, runs, warm_calls=1, setup=None):
    """MeasureSetup in bench/measure.go: with a setup, each call of run
    follows an untimed call of setup."""
    def timed(calls):
        if setup is None:
            t0 = time.perf_counter()
            for _ in range(calls):
                run()
            return time.perf_counter() - t0
        spent = 0.0
        for _ in range(calls):
            setup()
            t0 = time.perf_counter()
            run()
            spent += time.perf_counter() - t0
        return spent

    t0 = time.perf_counter()
    calls, spent = 0, 0.0
    while calls < max(warm_calls, 1) or time.perf_counter() - t0 < WARM_UP:
        spent += timed(1)
        calls += 1
    per_call = spent / calls
    inner = 1
    if per_call < MIN_SAMPLE:
        inner = int(min(math.ceil(MIN_SAMPLE / max(per_call, 1e-6)), MAX_INNER))
    samples = [timed(inner) / inner for _ in range(runs)]
    return statistics.median(samples), samples, inner


def prepare(w):
    """Returns a function that runs workload w once, mirroring bench/kiln.go;
    for a kind with an untimed part before each call (splitKinds in
    bench/kiln.go), a pair (setup, run) of which run is timed."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(1)

    def fill(*shape):
        return torch.rand(*shape, generator=g) * 2 - 1

    kind, d = w["kind"], w["dims"]
    if kind == "gemm":
        m, n, k = d
        a, b, c = fill(m, k), fill(k, n), torch.empty(m, n)
        return lambda: torch.mm(a, b, out=c)
    if kind == "gemm_bf16":
        # torch.mm has no bf16-in, float32-out form; its bf16 result is the
        # nearest it comes (oneDNN accumulates in float32 either way).
        m, n, k = d
        a, b = fill(m, k).bfloat16(), fill(k, n).bfloat16()
        c = torch.empty(m, n, dtype=torch.bfloat16)
        return lambda: torch.mm(a, b, out=c)
    if kind == "gemm_int8":
        # Kiln's GemmU8S8: uint8 A with the parameters of [-1, 1) (scale
        # 2/255, zero point 128, as quant.ChooseParams gives), int8 weights
        # symmetric per output channel, packed once; C is quint8 with scale
        # 0.1 and zero point 128 on both sides (GemmU8S8ToU8 in Kiln).
        m, n, k = d
        engine = set_quantized_engine()
        a = torch.quantize_per_tensor(fill(m, k), 2 / 255, 128, torch.quint8)
        w = fill(n, k)
        wq = torch.quantize_per_channel(w, w.abs().amax(1) / 127, torch.zeros(n, dtype=torch.long), 0, torch.qint8)
        try:
            packed = torch.ops.quantized.linear_prepack(wq, None)
            torch.ops.quantized.linear(a, packed, 0.1, 128)
        except (RuntimeError, NotImplementedError) as e:
            raise NotAvailable("quantized linear on engine %s: %s" % (engine, first_line(e)))
        return lambda: torch.ops.quantized.linear(a, packed, 0.1, 128)
    if kind.startswith("conv_"):
        N, C, H, W, O, K, s, p = d
        cl = torch.channels_last
        oh, ow = (H + 2 * p - K) // s + 1, (W + 2 * p - K) // s + 1
        weight = fill(O, C, K, K).contiguous(memory_format=cl)
        if kind == "conv_fwd":
            x = fill(N, C, H, W).contiguous(memory_format=cl)
            return lambda: F.conv2d(x, weight, None, s, p)
        dy = fill(N, O, oh, ow).contiguous(memory_format=cl)
        x = fill(N, C, H, W).contiguous(memory_format=cl)
        mask = [True, False, False] if kind == "conv_bwd_data" else [False, True, False]
        return lambda: torch.ops.aten.convolution_backward(
            dy, x, weight, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, mask)
    if kind in ("relu", "gelu", "add"):
        x = fill(d[0])
        if kind == "relu":
            return lambda: torch.relu(x)
        if kind == "gelu":
            return lambda: F.gelu(x)
        y = fill(d[0])
        return lambda: torch.add(x, y)
    if kind in ("relu_into", "gelu_into", "add_into"):
        x, y = fill(d[0]), torch.empty(d[0])
        if kind == "relu_into":
            return lambda: torch.clamp_min(x, 0, out=y)
        if kind == "gelu_into":
            return lambda: torch._C._nn.gelu(x, out=y)
        z = fill(d[0])
        return lambda: torch.add(x, z, out=y)
    if kind == "softmax":
        x = fill(d[0], d[1])
        return lambda: torch.softmax(x, 1)
    if kind == "batchnorm":
        N, C, H, W = d
        cl = torch.channels_last
        x = fill(N, C, H, W).contiguous(memory_format=cl).requires_grad_()
        dy = fill(N, C, H, W).contiguous(memory_format=cl)
        weight, bias = fill(C).requires_grad_(), fill(C).requires_grad_()
        rm, rv = torch.zeros(C), torch.ones(C)

        def run():
            y = F.batch_norm(x, rm, rv, weight, bias, True, 0.1, 1e-5)
            torch.autograd.grad(y, (x, weight, bias), dy)
        return run
    if kind == "layernorm":
        rows, cols = d
        x = fill(rows, cols).requires_grad_()
        dy = fill(rows, cols)
        weight, bias = fill(cols).requires_grad_(), fill(cols).requires_grad_()

        def run():
            y = F.layer_norm(x, (cols,), weight, bias, 1e-5)
            torch.autograd.grad(y, (x, weight, bias), dy)
        return run
    if kind == "sgd":
        p = torch.nn.Parameter(fill(d[0]))
        p.grad = fill(d[0])
        opt = torch.optim.SGD([p], lr=0.01, momentum=0.9)
        return opt.step
    if kind in ("resnet50_infer", "resnet50_infer_frozen", "resnet50_graph", "resnet50_graph_nofuse"):
        n, image = d
        model, x = resnet50_input(n, image)
        model.eval()
        if kind != "resnet50_infer":
            with torch.no_grad():
                model = torch.jit.freeze(torch.jit.trace(model, x))

        def run():
            with torch.no_grad():
                model(x)
        return run
    if kind == "resnet50_train":
        n, image = d
        return resnet50_train_step(n, image)
    if kind == "resnet50_infer_bf16":
        # PyTorch's plain BF16 inference: the model and the images in
        # bfloat16 (without IPEX, oneDNN's BF16 kernels where the CPU has
        # AVX512_BF16, a slow reference elsewhere).
        n, image = d
        model, x = resnet50_input(n, image)
        model = model.eval().bfloat16()
        x = x.bfloat16()

        def run():
            with torch.no_grad():
                model(x)
        return run
    if kind == "resnet50_graph_bf16":
        # BF16 inference with TorchScript as IPEX users write it: trace
        # and freeze under torch.cpu.amp.autocast (the trace records the
        # casts; freezing folds the weights' casts and the batch norms into
        # bfloat16 constants), then run the frozen module under autocast.
        # Without IPEX two settings are needed that importing IPEX makes:
        # the JIT's own autocast pass off (else it casts again inside the
        # traced graph) and no autocast weight cache during the trace (else
        # the cached casts become constants of the trace and its check
        # fails). The JIT setting stays off for the rest of this process;
        # no other row runs TorchScript under autocast. The trace's check
        # re-runs the slow eager BF16 model, so it is skipped.
        n, image = d
        model, x = resnet50_input(n, image)
        model.eval()
        torch._C._jit_set_autocast_mode(False)
        with torch.cpu.amp.autocast(cache_enabled=False), torch.no_grad():
            model = torch.jit.freeze(torch.jit.trace(model, x, check_trace=False))

        def run():
            with torch.cpu.amp.autocast(), torch.no_grad():
                model(x)
        return run
    if kind == "resnet50_train_bf16":
        n, image = d
        return resnet50_train_step(n, image, autocast=True)
    if kind == "resnet50_graph_int8":
        n, image, batches, batch = d
        return resnet50_int8_frozen(n, image, batches, batch)
    if kind in ("dlrm_train", "dlrm_train_fused"):
        return dlrm_train_step(*d)
    if kind == "dlrm_train_bf16":
        return dlrm_train_step(*d, autocast=True)
    if kind in ("dlrm_infer", "dlrm_infer_frozen"):
        model, dense, lS_o, lS_i, _ = dlrm_input(*d)
        model.eval()
        if kind == "dlrm_infer_frozen":
            with torch.no_grad(), warnings.catch_warnings():
                # The interaction's index lists become constants of the
                # trace, as they should (TracerWarning).
                warnings.simplefilter("ignore")
                model = torch.jit.freeze(torch.jit.trace(model, (dense, lS_o, lS_i)))

        def run():
            with torch.no_grad():
                model(dense, lS_o, lS_i)
        return run
    if kind.startswith("dlrm_bag_"):
        return dlrm_bag(kind, d)
    if kind in ("dlrm_interaction", "dlrm_interaction_bf16"):
        return dlrm_interaction(d, torch.bfloat16 if kind.endswith("_bf16") else torch.float32)
    raise ValueError("unknown kind %r" % kind)


def resnet50_input(n, image):
    """torchvision's resnet50 with seeded random weights and a batch of n
    random images, both channels-last, as resNet50Input in bench/kiln.go."""
    import torch
    import torchvision

    cl = torch.channels_last
    torch.manual_seed(1)
    model = torchvision.models.resnet50().to(memory_format=cl)
    x = torch.randn(n, 3, image, image).contiguous(memory_format=cl)
    return model, x


class NotAvailable(Exception):
    """A workload this torch cannot run (no quantized engine for this CPU,
    an op its engine lacks): its row shows n/a with the reason, as
    Result.NA in bench/measure.go reads it."""


def first_line(e):
    return str(e).strip().split("\n")[0]


# The quantized engines for x86 CPUs, best first: x86 (fbgemm or oneDNN
# by shape, from torch 2.0), fbgemm, onednn. Debian's torch is built
# without fbgemm, so onednn is the one it has.
X86_ENGINES = ("x86", "fbgemm", "onednn")


def set_quantized_engine():
    """Selects the best x86 quantized engine this torch supports and
    returns its name; NotAvailable when it has none."""
    import torch

    supported = torch.backends.quantized.supported_engines
    for e in X86_ENGINES:
        if e in supported:
            torch.backends.quantized.engine = e
            return e
    raise NotAvailable("torch has no x86 quantized engine (supported: %s)" % ", ".join(supported))


def quantized_engine_info():
    try:
        return set_quantized_engine()
    except NotAvailable as e:
        return "none: %s" % e


def resnet50_int8_frozen(n, image, batches, batch):
    """ResNet-50 quantized by FX post-training quantization, as
    resNet50GraphInt8 in bench/kiln.go: the evaluation-mode model prepared
    with the engine's default qconfig mapping, calibrated on batches
    batches of batch random channels-last images, converted, then traced
    on the n images and frozen."""
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    engine = set_quantized_engine()
    model, x = resnet50_input(n, image)
    model.eval()
    g = torch.Generator().manual_seed(3)
    calib = [torch.randn(batch, 3, image, image, generator=g).contiguous(memory_format=torch.channels_last)
             for _ in range(batches)]
    try:
        with torch.no_grad():
            prepared = prepare_fx(model, get_default_qconfig_mapping(engine), example_inputs=(calib[0],))
            for c in calib:
                prepared(c)
            q = convert_fx(prepared)
            frozen = torch.jit.freeze(torch.jit.trace(q, x))
            frozen(x)
    except (RuntimeError, NotImplementedError, AttributeError) as e:
        raise NotAvailable("FX int8 ResNet-50 on engine %s: %s: %s" % (engine, type(e).__name__, first_line(e)))

    def run():
        with torch.no_grad():
            frozen(x)
    return run


# The DLRM rows' model around the dims (keep in step with bench/dlrm.go):
# 13 dense features, bottom MLP 13-512-256-d, top MLP 512-256-1.
DLRM_DENSE = 13
DLRM_BOTTOM_HIDDEN = [512, 256]
DLRM_TOP = [512, 256, 1]
DLRM_LR = 0.1


def dlrm_net_class():
    """facebookresearch/dlrm's DLRM_Net (dlrm_s_pytorch.py), transcribed
    for the benchmark's configuration: sum-mode nn.EmbeddingBag tables
    with sparse gradients, Linear+ReLU MLPs whose top ends in Sigmoid, the
    dot interaction without self-interaction, no loss threshold, the
    sequential forward. Initialisation is dlrm's, drawn with torch's
    generator instead of numpy's: Linear weights [m, n] from
    N(0, 2/(m+n)), biases from N(0, 1/m), tables of n rows from
    U(-sqrt(1/n), sqrt(1/n)). Parameter names are DLRM_Net's (emb_l.k.weight,
    bot_l.i.weight, top_l.i.bias), as models.DLRM's are."""
    import torch
    import torch.nn as nn

    class DLRM_Net(nn.Module):
        def create_mlp(self, ln, sigmoid_layer):
            layers = nn.ModuleList()
            for i in range(0, len(ln) - 1):
                n, m = ln[i], ln[i + 1]
                LL = nn.Linear(n, m, bias=True)
                with torch.no_grad():
                    LL.weight.normal_(0.0, math.sqrt(2 / (m + n)))
                    LL.bias.normal_(0.0, math.sqrt(1 / m))
                layers.append(LL)
                if i == sigmoid_layer:
                    layers.append(nn.Sigmoid())
                else:
                    layers.append(nn.ReLU())
            return torch.nn.Sequential(*layers)

        def create_emb(self, m, ln):
            emb_l = nn.ModuleList()
            for n in ln:
                b = math.sqrt(1 / n)
                # dlrm overwrites the default N(0, 1) weight; passing it
                # in skips drawing that first.
                W = torch.empty(n, m).uniform_(-b, b)
                emb_l.append(nn.EmbeddingBag(n, m, mode="sum", sparse=True, _weight=W))
            return emb_l

        def __init__(self, m_spa, ln_emb, ln_bot, ln_top):
            super().__init__()
            self.emb_l = self.create_emb(m_spa, ln_emb)
            self.bot_l = self.create_mlp(ln_bot, -1)
            self.top_l = self.create_mlp(ln_top, len(ln_top) - 2)

        def apply_mlp(self, x, layers):
            return layers(x)

        def apply_emb(self, lS_o, lS_i, emb_l):
            ly = []
            for k, sparse_index_group_batch in enumerate(lS_i):
                sparse_offset_group_batch = lS_o[k]
                E = emb_l[k]
                V = E(sparse_index_group_batch, sparse_offset_group_batch)
                ly.append(V)
            return ly

        def interact_features(self, x, ly):
            return dlrm_interact(x, ly)

        def forward(self, dense_x, lS_o, lS_i):
            x = self.apply_mlp(dense_x, self.bot_l)
            ly = self.apply_emb(lS_o, lS_i, self.emb_l)
            z = self.interact_features(x, ly)
            p = self.apply_mlp(z, self.top_l)
            return p

    return DLRM_Net


def dlrm_interact(x, ly):
    """DLRM_Net.interact_features with arch_interaction_op "dot" and
    arch_interaction_itself False."""
    import torch

    (batch_size, d) = x.shape
    T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
    Z = torch.bmm(T, torch.transpose(T, 1, 2))
    _, ni, nj = Z.shape
    offset = 0  # arch_interaction_itself False
    li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
    lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
    Zflat = Z[:, li, lj]
    R = torch.cat([x] + [Zflat], dim=1)
    return R


def dlrm_bag(kind, d):
    """The bag rows, as dlrmBagForward and dlrmBagBackward in
    bench/dlrm.go: the tables of the DLRM rows' model (bfloat16 for the
    _bf16 kinds) looked up for its batch by DLRM_Net.apply_emb, dlrm's
    loop of nn.EmbeddingBag calls. The forward kind runs under no_grad;
    the backward kind returns (setup, run): setup drops the gradients and
    looks up (sparse gradients); run, timed, is the backward of the bags
    from fixed random gradients (torch.autograd.backward) and the SGD
    step."""
    import torch

    model, _, lS_o, lS_i, _ = dlrm_input(*d)
    emb = model.emb_l
    dtype = torch.float32
    if kind.endswith("_bf16"):
        dtype = torch.bfloat16
        emb = emb.bfloat16()
        try:
            with torch.no_grad():
                emb[0](lS_i[0], lS_o[0])
        except RuntimeError as e:
            raise NotAvailable("nn.EmbeddingBag on bfloat16 tables: %s" % first_line(e))
    if kind.startswith("dlrm_bag_fwd"):
        def run():
            with torch.no_grad():
                model.apply_emb(lS_o, lS_i, emb)
        return run
    n, tables, _, dim = d
    opt = torch.optim.SGD(emb.parameters(), lr=DLRM_LR)
    dy = torch.rand(n, tables * dim, generator=torch.Generator().manual_seed(3)).to(dtype)
    dys = [g.contiguous() for g in torch.split(dy, dim, 1)]
    state = {}

    def setup():
        opt.zero_grad(set_to_none=True)
        state["bags"] = model.apply_emb(lS_o, lS_i, emb)

    def run():
        torch.autograd.backward(state["bags"], dys)
        opt.step()
    return setup, run


def dlrm_interaction(d, dtype):
    """The interaction row, as dlrmInteraction in bench/dlrm.go: forward
    and backward of dlrm_interact on n samples of tables + 1 features of
    size dim, uniform in [0, 1), from a fixed random output gradient."""
    import torch

    n, tables, dim = d
    g = torch.Generator().manual_seed(3)
    feats = [torch.rand(n, dim, generator=g) for _ in range(tables + 1)]
    nf = tables + 1
    dy = torch.rand(n, dim + nf * (nf - 1) // 2, generator=g).to(dtype)
    feats = [f.to(dtype).requires_grad_() for f in feats]

    def run():
        for f in feats:
            f.grad = None
        dlrm_interact(feats[0], feats[1:]).backward(dy)
    return run


def dlrm_input(n, tables, rows, d):
    """The DLRM rows' model (dims batch n, tables tables of rows rows,
    feature size d) with seeded weights, and one batch in dlrm's random
    data form: dense features [n, 13] uniform in [0, 1), lS_o [tables, n]
    bag starts, lS_i [tables, n] one index per table per sample uniform in
    the rows, labels [n, 1] of 0 and 1; as newDLRMBatch in bench/dlrm.go."""
    import torch

    torch.manual_seed(1)
    nf = tables + 1
    ln_bot = [DLRM_DENSE] + DLRM_BOTTOM_HIDDEN + [d]
    ln_top = [d + nf * (nf - 1) // 2] + DLRM_TOP
    model = dlrm_net_class()(d, [rows] * tables, ln_bot, ln_top)
    g = torch.Generator().manual_seed(2)
    dense = torch.rand(n, DLRM_DENSE, generator=g)
    lS_i = torch.randint(0, rows, (tables, n), generator=g)
    lS_o = torch.arange(n).repeat(tables, 1)
    labels = torch.randint(0, 2, (n, 1), generator=g).float()
    return model, dense, lS_o, lS_i, labels


def dlrm_train_step(n, tables, rows, d, autocast=False):
    """One training step on the fixed batch, as dlrmTrainStep in
    bench/dlrm.go and dlrm_s_pytorch.py's loop: drop the gradients
    (set_to_none, as Kiln's ZeroGrad), forward, BCELoss (mean), backward,
    SGD with lr 0.1 (sparse table gradients). With autocast the forward runs
    under torch.cpu.amp.autocast (the MLPs and the interaction's bmm in
    bfloat16; the tables stay float32, 1.13's CPU EmbeddingBag having no
    bfloat16) and the loss in float32, as Kiln's BCELoss under autocast."""
    import torch

    model, dense, lS_o, lS_i, labels = dlrm_input(n, tables, rows, d)
    model.train()
    loss_fn = torch.nn.BCELoss(reduction="mean")
    opt = torch.optim.SGD(model.parameters(), lr=DLRM_LR)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.cpu.amp.autocast(enabled=autocast):
            p = model(dense, lS_o, lS_i)
        loss = loss_fn(p.float(), labels)
        loss.backward()
        opt.step()
    return step


def resnet50_train_step(n, image, autocast=False):
    """One training step on a fixed batch, as resNet50TrainStep in
    bench/kiln.go: drop the gradients (Kiln's ZeroGrad drops them, so
    set_to_none=True, the default only from torch 2.0), train-mode forward,
    cross-entropy, backward, SGD with momentum 0.9 and weight decay 1e-4."""
    import torch
    import torch.nn.functional as F

    model, x = resnet50_input(n, image)
    model.train()
    y = torch.randint(0, 1000, (n,), generator=torch.Generator().manual_seed(2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.cpu.amp.autocast(enabled=autocast):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step


def proc_status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                value, unit = line.split()[1:3]
                assert unit == "kB", line
                return int(value) * 1024
    raise ValueError("no %s in /proc/self/status" % field)


def footprint(w):
    """Runs footprint workload w in this (fresh) process: its resident
    memory after the imports, before building anything, and its peak
    (ru_maxrss) after the training steps."""
    import resource

    r = {"name": w["name"]}
    kind, d = w["kind"], w["dims"]
    if kind == "resnet50_train_mem":
        import torchvision  # noqa: F401 (imported before the start figure)

        make = resnet50_train_step
    elif kind == "dlrm_train_mem":
        make = dlrm_train_step
    else:
        raise ValueError("%r is not a footprint kind" % kind)
    *dims, steps = d
    start = proc_status_bytes("VmRSS") if sys.platform.startswith("linux") else 0
    step = make(*dims)
    for _ in range(steps):
        step()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r["peak_rss_bytes"] = peak if sys.platform == "darwin" else peak * 1024  # KiB on Linux
    r["start_rss_bytes"] = start
    return r


def run_fresh(w, threads):
    """Runs footprint workload w in a fresh interpreter (this script with
    --footprint), with this process's environment and thread count."""
    cmd = [sys.executable, os.path.abspath(__file__), "--threads", str(threads), "--footprint", json.dumps(w)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, check=False)
    if p.returncode != 0:
        raise RuntimeError("fresh process exited with %d" % p.returncode)
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


def run_one(w, runs, threads):
    r = {"name": w["name"]}
    try:
        if w.get("bound") == "footprint":
            return run_fresh(w, threads)
        run, setup = prepare(w), None
        if isinstance(run, tuple):
            setup, run = run
        r["median_s"], r["samples_s"], r["inner"] = measure(run, w.get("runs") or runs, w.get("warmup_calls", 1), setup)
    except NotAvailable as e:
        r = {"name": w["name"], "error": "n/a: %s" % e}
    except Exception as e:  # report it and go on with the next workload
        r = {"name": w["name"], "error": "%s: %s" % (type(e).__name__, e)}
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--info", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--footprint", metavar="WORKLOAD_JSON")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    if args.footprint:
        w = json.loads(args.footprint)
        try:
            r = footprint(w)
        except Exception as e:  # the server reports it as the row's error
            r = {"name": w["name"], "error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(r), flush=True)
        return
    header = {"side": "pytorch", "threads": args.threads, "info": torch_info(), "results": []}
    print(json.dumps(header), flush=True)
    if args.info:
        return
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(run_one(json.loads(line), args.runs, args.threads)), flush=True)


if __name__ == "__main__":
    main()
