#!/usr/bin/env python3
"""make bench-mpi: data-parallel scaling of Kiln's DataParallel on MPI.

Runs bench/cmd/distbench (built with -tags mpi, path in argv[1]) alone and
on two ranks of one thread each, over shared memory and over TCP on the
loopback interface, interleaved, REPS times each, and prints the median
step times and the scaling efficiency
    E = throughput(2 ranks x 1 thread) / (2 x throughput(1 rank x 1 thread)),
then the step time with overlap on and off at >= 4 buckets.
"""
import json
import os
import statistics
import subprocess
import sys

BIN = sys.argv[1]
REPS = int(os.environ.get("REPS", "3"))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--bind-to", "none",
          "-x", "KILN_NUM_THREADS=1"] + os.environ.get("MPIRUN_FLAGS", "").split()
# TCP: Open MPI's TCP transport for everything, and no shared window for
# the large float32 Allreduce (KILN_MPI_SHM=0), which would bypass it.
TCP = ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", "-x", "KILN_MPI_SHM=0"]
ENV = dict(os.environ, KILN_NUM_THREADS="1")


def run(ranks, transport, args):
    cmd = [BIN] + args
    if ranks == 2:
        cmd = MPIRUN + (TCP if transport == "tcp" else []) + cmd
    out = subprocess.run(cmd, env=ENV, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(configs, args):
    """configs: (name, ranks, transport, extra args); interleaved reps."""
    res = {name: [] for name, *_ in configs}
    for _ in range(REPS):
        for name, ranks, transport, extra in configs:
            res[name].append(run(ranks, transport, args + extra))
    return {name: {k: statistics.median(r[k] for r in rs) for k in ("step_ms", "sync_ms", "compute_ms", "samples_per_s")}
            | {"buckets": rs[0]["buckets"]} for name, rs in res.items()}


def scaling(label, args):
    m = measure([("1 rank", 1, "", []), ("2 ranks, shared memory", 2, "shm", []), ("2 ranks, TCP loopback", 2, "tcp", [])], args)
    one = m["1 rank"]["samples_per_s"]
    print(f"\n{label} ({' '.join(args)}), medians of {REPS}:\n")
    print("| world | step ms | compute ms | Sync wait ms | samples/s | E |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, r in m.items():
        e = "" if name == "1 rank" else f"{r['samples_per_s'] / (2 * one):.2f}"
        print(f"| {name} | {r['step_ms']:.1f} | {r['compute_ms']:.1f} | {r['sync_ms']:.1f} | {r['samples_per_s']:.0f} | {e} |")


def overlap(label, args):
    m = measure([("overlap on", 2, "shm", []), ("overlap off", 2, "shm", ["-no-overlap"]),
                 ("overlap on, TCP", 2, "tcp", []), ("overlap off, TCP", 2, "tcp", ["-no-overlap"])], args)
    print(f"\n{label} ({' '.join(args)}), {m['overlap on']['buckets']} buckets, medians of {REPS}:\n")
    print("| transport | step ms, overlap on | step ms, overlap off | on ÷ off |")
    print("|---|--:|--:|--:|")
    for t, on, off in (("shared memory", "overlap on", "overlap off"), ("TCP loopback", "overlap on, TCP", "overlap off, TCP")):
        print(f"| {t} | {m[on]['step_ms']:.1f} | {m[off]['step_ms']:.1f} | {m[on]['step_ms'] / m[off]['step_ms']:.2f} |")


if __name__ == "__main__":
    for batch in ("16", "64"):
        scaling("ResNet-18 training, 32×32 images", ["-model", "resnet18", "-batch", batch, "-image", "32", "-steps", "12"])
    overlap("ResNet-18 training, 32×32 images", ["-model", "resnet18", "-batch", "16", "-image", "32", "-steps", "12", "-bucket-mb", "10"])
    scaling("DLRM training (26 sparse tables of 100 000 rows, d 64)", ["-model", "dlrm", "-batch", "2048", "-steps", "10"])
