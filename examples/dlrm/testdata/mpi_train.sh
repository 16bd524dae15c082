#!/usr/bin/env bash
# Issue 22's DLRM launch check, run by make test-mpi: BIN is examples/dlrm
# built with -tags mpi, MPIRUN the launcher with its flags. Two ranks
# train the planted data (sparse tables, their rows allgathered) as one
# process does at the same global batch: DLRM has no batch norm, so the
# runs differ only in how the gradients' sums are rounded, and the
# held-out AUC agrees to 1e-3. Only rank 0 prints the summary.
set -euo pipefail
BIN=$1; shift
MPIRUN=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
args=(train --data-generation planted --arch-embedding-size 50-50-50-50 --arch-sparse-feature-size 8
	--arch-mlp-bot 13-16-8 --arch-mlp-top 32-1 --loss-function bce --mini-batch-size 64 --data-size 4000
	--test-size 1000 --nepochs 2 --learning-rate 0.1 --print-freq 1000)
"$BIN" "${args[@]}" >"$dir/one.log" 2>&1 || { cat "$dir/one.log"; echo "mpi_train: one process failed"; exit 1; }
"${MPIRUN[@]}" "$BIN" "${args[@]}" --save-model "$dir/two.ckpt" >"$dir/two.log" 2>&1 ||
	{ cat "$dir/two.log"; echo "mpi_train: two ranks failed"; exit 1; }
auc() { grep -o 'best held-out auc [0-9.]*' "$1" | awk '{print $4}'; }
one=$(auc "$dir/one.log"); two=$(auc "$dir/two.log")
[ "$(grep -c '^done after' "$dir/two.log")" = 1 ] || { cat "$dir/two.log"; echo "mpi_train: want one summary, from rank 0"; exit 1; }
[ -s "$dir/two.ckpt" ] || { echo "mpi_train: rank 0 wrote no --save-model"; exit 1; }
awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-3) }' ||
	{ echo "mpi_train: held-out AUC $two on two ranks, $one in one process"; exit 1; }
echo "mpi_train: DLRM on two ranks: held-out AUC $two, one process $one"
