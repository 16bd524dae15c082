#!/usr/bin/env bash
# Issue 22's fault test, run by make test-mpi: BIN is examples/resnet50
# built with -tags mpi, MPIRUN the launcher with its flags.
#  1. Two ranks train without interruption and write full.ckpt.
#  2. The same run with a checkpoint every 2 steps; rank 1 is killed (or
#     stopped) once the first checkpoint exists: mpirun must exit non-zero
#     within the watchdog timeout + 5 s, with a message.
#  3. Relaunched with --resume, it must end with full.ckpt's bytes.
#  4. A single process resumes the two ranks' checkpoint and finishes.
set -euo pipefail
BIN=$1; shift
MPIRUN=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
train=(train --data synthetic --arch resnet18 --image-size 32 --batch-size 8 --train-size 320 --val-size 8
	--epochs 1 --steps 30 --workers 0 --quiet --seed 3)
timeout=5

"${MPIRUN[@]}" "$BIN" "${train[@]}" --checkpoint "$dir/full.ckpt" >"$dir/full.log" 2>&1 ||
	{ cat "$dir/full.log"; echo "mpi_faults: the uninterrupted run failed"; exit 1; }

# fault SIGNAL: a run checkpointing every 2 steps whose rank 1 gets SIGNAL
# once the first checkpoint exists must end non-zero within the
# watchdog's timeout + 5 s, printing what matches WANT.
fault() {
	local sig=$1 want=$2
	rm -f "$dir/part.ckpt"
	"${MPIRUN[@]}" "$BIN" "${train[@]}" --checkpoint "$dir/part.ckpt" --checkpoint-every 2 \
		--dist-timeout ${timeout}s >"$dir/part.log" 2>&1 &
	local launcher=$!
	for _ in $(seq 600); do [ -e "$dir/part.ckpt" ] && break; sleep 0.05; done
	[ -e "$dir/part.ckpt" ] || { cat "$dir/part.log"; echo "mpi_faults: no checkpoint appeared"; exit 1; }
	local victim= p
	for p in /proc/[0-9]*; do
		if { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 &&
			{ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q "^$BIN "; then
			victim=${p#/proc/}
		fi
	done
	[ -n "$victim" ] || { echo "mpi_faults: rank 1 not found"; kill $launcher; exit 1; }
	local start rc=0 took
	start=$(date +%s.%N)
	kill -"$sig" "$victim"
	wait $launcher || rc=$?
	took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	kill -9 "$victim" 2>/dev/null || true
	echo "mpi_faults: rank 1 (pid $victim) got SIG$sig: mpirun exited $rc after ${took}s, saying:"
	grep -E "$want" "$dir/part.log" | head -2 | sed 's/^/    /'
	if [ $rc = 0 ] || awk -v t="$took" -v m=$((timeout + 5)) 'BEGIN { exit !(t > m) }' || ! grep -qE "$want" "$dir/part.log"; then
		cat "$dir/part.log"; echo "mpi_faults: want a non-zero exit within $((timeout + 5))s saying $want"; exit 1
	fi
}
# A dead rank: Open MPI's launcher notices and ends the job.
fault KILL 'exited on signal 9'
# A hung rank (stopped): the others' watchdog aborts the job, naming the
# collective that did not finish.
fault STOP '^dist: abort: .*did not finish within'

"${MPIRUN[@]}" "$BIN" "${train[@]}" --resume "$dir/part.ckpt" --checkpoint "$dir/part.ckpt" >"$dir/resume.log" 2>&1 ||
	{ cat "$dir/resume.log"; echo "mpi_faults: the resumed run failed"; exit 1; }
grep -m1 resuming "$dir/resume.log"
cmp "$dir/full.ckpt" "$dir/part.ckpt" ||
	{ echo "mpi_faults: the resumed run's checkpoint differs from the uninterrupted run's"; exit 1; }
echo "mpi_faults: the resumed run ends with the uninterrupted run's checkpoint, byte for byte"

"$BIN" "${train[@]}" --steps 36 --resume "$dir/part.ckpt" --checkpoint "$dir/one.ckpt" >"$dir/one.log" 2>&1 ||
	{ cat "$dir/one.log"; echo "mpi_faults: one process could not resume the two ranks' checkpoint"; exit 1; }
grep -q "held-out" "$dir/one.log" || { cat "$dir/one.log"; echo "mpi_faults: one process did not train on"; exit 1; }
echo "mpi_faults: one process resumed the two ranks' checkpoint and trained on: $(grep -m1 resuming "$dir/one.log")"
