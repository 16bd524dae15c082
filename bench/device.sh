#!/bin/sh
# The checks that wait for the lent many-core Xeon (the `device` tool; no
# Go toolchain there): issues 17 and 18 (AMX kernels against their
# references), 21 (serving, several instances against one), 23 (16-thread
# rows against PyTorch, Kiln's scaling, dispatch cost). Build here first:
#
#	make device-bin        # stripped, gzipped binaries in bin/device (gitignored)
#
# then run on the device, carrying bin/device, from the repository root:
#
#	sh bench/device.sh     # results under $OUT
#
# Each part has its own time limit so the whole stays under 11 minutes of
# the 15 a task gets; a part that times out leaves its partial output.
set -u
OUT=${OUT:-$(mktemp -d)}
T=$(nproc)
B=$(mktemp -d)
for f in kernels.test kilnbench; do
	gunzip -c bin/device/$f.gz >"$B/$f" && chmod +x "$B/$f" || exit 1
done
lscpu >"$OUT/lscpu.txt"
grep -E 'Model name|Flags' "$OUT/lscpu.txt" | cut -c1-200
python3 -c 'import torch; print("torch", torch.__version__, torch.backends.mkldnn.is_available())' 2>&1

# Every kernel against its reference at the levels only this CPU has
# (amx: the tests no session CPU could run) and the one below it; the
# lower levels run the same code as on the AMD sessions' CPUs.
# The test binary runs in its package's folder, where its testdata paths
# resolve.
for l in amx avx512bf16; do
	(cd kernels && KILN_ISA=$l timeout 150 $B/kernels.test -test.count=1) >"$OUT/kernels-$l.txt" 2>&1
	echo "kernels KILN_ISA=$l rc=$? $(tail -1 "$OUT/kernels-$l.txt")"
done
# The AMX kernel alone, then GemmBF16 on tiles with the work around the
# kernel (overhead: a no-op kernel), at one thread and all; three samples,
# as the kernel's speed moved between calls there.
(cd kernels && timeout 40 $B/kernels.test -test.run '^$' -test.bench AMXStrip -test.benchtime 1000x -test.count 3) 2>&1 | grep Benchmark
for t in 1 $T; do
	(cd kernels && KILN_NUM_THREADS=$t timeout 40 $B/kernels.test -test.run '^$' -test.bench 'GemmBF16AMX/(1024|2048)' \
		-test.benchtime 5x -test.count 3) 2>&1 | grep Benchmark
done

# The cost of a Parallel call per chunk on the whole machine.
KILN_NUM_THREADS=$T timeout 60 $B/kernels.test -test.run '^$' -test.bench ParallelDispatch \
	-test.benchtime 20000x >"$OUT/dispatch.txt" 2>&1
grep Benchmark "$OUT/dispatch.txt"

# Issue 23's rows at 1 and all threads, Kiln against PyTorch, with Kiln's
# scaling table; then the serving rows (issue 21).
timeout 300 $B/kilnbench -python python3 -threads "1,$T" -runs 3 \
	-filter 'resnet50 train step bs8 |resnet50 frozen graph infer bs16 |^gemm 2048×2048×2048$|^gemm bf16 ' \
	-json "$OUT/scaling.json" -out "$OUT/scaling.md" >"$OUT/scaling.log" 2>&1
echo "kilnbench scaling rc=$?"
# The train step again with Go returning no freed pages (README, ResNet-50):
# page faults serialise on the kernel's mm lock, more so at 16 threads.
GODEBUG=madvdontneed=0 timeout 120 $B/kilnbench -python python3 -threads "$T" -runs 3 \
	-filter 'resnet50 train step bs8 ' -out "$OUT/train-madvfree.md" >"$OUT/train-madvfree.log" 2>&1
echo "kilnbench train GODEBUG=madvdontneed=0 rc=$?"
timeout 120 $B/kilnbench -python python3 -threads "$T" -runs 3 -filter 'serve|instances' \
	-json "$OUT/serve.json" -out "$OUT/serve.md" >"$OUT/serve.log" 2>&1
echo "kilnbench serve rc=$?"
cat "$OUT/scaling.md" "$OUT/train-madvfree.md" "$OUT/serve.md" 2>/dev/null | grep -E '^\|' | head -40
