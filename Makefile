GO ?= go

.PHONY: all demo test race fuzz bench bench-mpi bench-deps device-bin fmt vet golden parity

all: test

demo:
	$(GO) run ./examples/quickstart

# Every suite runs at the best instruction-set level the CPU has; the
# packages below run again (-short) at each lower level KILN_ISA can select
# here, since a CPU elsewhere takes those paths as its best; the kernel
# suites run once more with -tags noasm, which leaves only the pure-Go
# references. The log starts with the CPU and the levels it covers.
# The generic level (pure Go) is no seen CPU's best path, since every one
# has AVX2: it reruns the packages whose ops and models it computes, but
# not the example programs, whose flags, checkpoints and loops do not
# depend on the level and rerun at avx2; that keeps .ci/run under its
# 10 minutes on two cores.
LEVEL_PKGS = . ./kernels/... ./autograd/... ./amp/... ./nn/... ./optim/... ./graph/... ./examples/...
GENERIC_PKGS = $(filter-out ./examples/...,$(LEVEL_PKGS))

test: vet
	@$(GO) run ./cmd/kiln cpu
	$(GO) test -count=1 ./...
	@set -e; levels=$$($(GO) run ./cmd/kiln cpu --levels); \
	for l in $$(echo $$levels | cut -s -d' ' -f2-); do \
		pkgs="$(LEVEL_PKGS)"; [ $$l != generic ] || pkgs="$(GENERIC_PKGS)"; \
		echo "KILN_ISA=$$l $(GO) test -count=1 -short $$pkgs"; \
		KILN_ISA=$$l $(GO) test -count=1 -short $$pkgs; \
	done
	$(GO) test -count=1 -tags noasm ./kernels/...
	$(MAKE) race
	$(MAKE) fuzz FUZZTIME=1000x

# The MPI backend of dist (cgo, -tags mpi) under Open MPI's mpirun: the
# package's tests at two ranks over shared memory, its MPI tests again over
# TCP on the loopback interface (the others use no MPI), then a rank that
# aborts the job while its Allreduce is blocked, which must end mpirun with
# the abort's code; then examples/resnet50 on two ranks whose rank 1 is
# killed, or stopped, mid-run (the job must end within the watchdog's
# timeout + 5 s) and resumed (to the uninterrupted run's checkpoint);
# and examples/dlrm on two ranks against one process. Installs Open MPI
# with apt-get where it is missing and that is possible; otherwise says
# "test-mpi: skipped: why" and succeeds.
# MPIRUN_FLAGS adds mpirun options (in a container whose ptrace rules
# forbid CMA, shared memory needs --mca btl_vader_single_copy_mechanism
# none).
MPI_DEBS = openmpi-bin libopenmpi-dev pkg-config
MPIRUN_FLAGS ?=
MPIRUN = mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none $(MPIRUN_FLAGS)
.PHONY: test-mpi
test-mpi:
	@set -e; \
	cc=$$(CGO_ENABLED=1 $(GO) env CC); missing=; \
	command -v mpirun >/dev/null 2>&1 || missing="$$missing openmpi-bin"; \
	{ command -v pkg-config >/dev/null 2>&1 && pkg-config --exists ompi; } || missing="$$missing libopenmpi-dev pkg-config"; \
	command -v $$cc >/dev/null 2>&1 || missing="$$missing gcc"; \
	if [ -n "$$missing" ]; then \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		if ! command -v apt-get >/dev/null 2>&1; then \
			echo "test-mpi: skipped: needs$$missing, and there is no apt-get to install them"; exit 0; fi; \
		if [ -n "$$sudo" ] && ! sudo -n true 2>/dev/null; then \
			echo "test-mpi: skipped: needs$$missing, and installing them needs root or sudo"; exit 0; fi; \
		echo "test-mpi: installing $(MPI_DEBS) (missing:$$missing)"; \
		if ! { $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends $(MPI_DEBS) $$(echo "$$missing" | grep -ow gcc || true); }; then \
			echo "test-mpi: skipped: apt-get could not install $(MPI_DEBS)"; exit 0; fi; \
	fi; \
	echo "test-mpi: $$(mpirun --version 2>&1 | head -1), $$(nproc) CPUs"; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; bin=$$tmp/dist-mpi.test; \
	echo "CGO_ENABLED=1 $(GO) test -c -tags mpi -o $$bin ./dist"; \
	CGO_ENABLED=1 $(GO) test -c -tags mpi -o $$bin ./dist; \
	echo "$(MPIRUN) $$bin -test.count=1   # shared memory"; \
	timeout 300 $(MPIRUN) $$bin -test.count=1; \
	echo "$(MPIRUN) --mca btl self,tcp --mca btl_tcp_if_include lo -x KILN_MPI_SHM=0 $$bin -test.count=1 -test.run MPI   # TCP, no shared window"; \
	timeout 300 $(MPIRUN) --mca btl self,tcp --mca btl_tcp_if_include lo -x KILN_MPI_SHM=0 $$bin -test.count=1 -test.run MPI; \
	echo "$(MPIRUN) -x KILN_TEST_MPI_ABORT=1 $$bin -test.run '^TestMPIAbort$$'   # must exit 7"; \
	rc=0; timeout 60 $(MPIRUN) -x KILN_TEST_MPI_ABORT=1 $$bin -test.count=1 -test.run '^TestMPIAbort$$' >$$tmp/abort.log 2>&1 || rc=$$?; \
	if [ $$rc != 7 ] || ! grep -q '^dist: abort: ' $$tmp/abort.log; then \
		cat $$tmp/abort.log; echo "test-mpi: Abort ended mpirun with status $$rc, want 7 and the reason"; exit 1; fi; \
	grep '^dist: abort: ' $$tmp/abort.log; \
	echo "CGO_ENABLED=1 $(GO) build -tags mpi -o $$tmp/resnet50 ./examples/resnet50"; \
	CGO_ENABLED=1 $(GO) build -tags mpi -o $$tmp/resnet50 ./examples/resnet50; \
	echo "examples/resnet50/testdata/mpi_faults.sh   # a killed and a hung rank end the job; resuming gives the uninterrupted run's bytes"; \
	timeout 300 bash examples/resnet50/testdata/mpi_faults.sh $$tmp/resnet50 $(MPIRUN); \
	CGO_ENABLED=1 $(GO) build -tags mpi -o $$tmp/dlrm ./examples/dlrm; \
	echo "examples/dlrm/testdata/mpi_train.sh   # two ranks train DLRM's sparse tables as one process does"; \
	timeout 300 bash examples/dlrm/testdata/mpi_train.sh $$tmp/dlrm $(MPIRUN); \
	echo "test-mpi: ok"

# The concurrency tests under the race detector: training beside
# inference, arenas, autocast, compiled graphs and traces in other goroutines;
# the server's concurrent clients; dist's goroutine ranks, gradient hooks
# and communication threads.
race:
	$(GO) test -race -count=1 -short -run '^TestConcurrentModes$$' .
	$(GO) test -race -count=1 -short -run '^TestArena' ./autograd
	$(GO) test -race -count=1 -short -run '^TestPreparedConvWeightsBF16Concurrent$$' ./kernels
	$(GO) test -race -count=1 -short -run '^TestConcurrentClients$$' ./serve
	$(GO) test -race -count=1 -short ./dist

# Short fuzzing runs of every reader of outside bytes, each of which must
# never panic or hang whatever it is handed: PACKAGE:Target pairs, FUZZTIME
# each (`make fuzz FUZZTIME=10m` for a long hunt). New failing inputs land
# in the package's testdata/fuzz and are kept as seed corpus. Minimizing
# each new interesting input may take a minute by default, which would
# leave a short run hardly any time to fuzz. make test gives each target a
# count of inputs rather than a duration: Go 1.26's fuzz coordinator can
# report "context deadline exceeded" as a failure when a duration ends
# while a worker is busy (golang/go#75804, fixed in Go 1.27), which a
# loaded 2-core CI machine hits.
FUZZ_TARGETS = graph:FuzzDecode graph:FuzzDecodeCompileRun nn:FuzzLoadStateDict \
	internal/safetensors:FuzzDecode internal/npy:FuzzDecode internal/tensorcodec:FuzzDecode \
	autograd:FuzzShapes graph/quant:FuzzReadConf serve:FuzzDecodeJSON
FUZZTIME ?= 10s
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "$(GO) test -run='^$$' -fuzz='^$${t#*:}$$' -fuzztime=$(FUZZTIME) ./$${t%%:*}"; \
		$(GO) test -run='^$$' -fuzz="^$${t#*:}\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s ./$${t%%:*}; \
	done

# Kiln against PyTorch on the same workloads at 1 and 2 threads, one table
# (see BENCHMARKS.md). BENCHFLAGS: -quick (a representative subset),
# -out FILE (also write the table), -json FILE, -filter REGEXP.
BENCHFLAGS ?=
bench:
	$(GO) run ./bench/cmd/kilnbench $(BENCHFLAGS)

# Stripped, gzipped binaries for bench/device.sh, which runs the checks
# that need the lent many-core Xeon (AMX kernels, 16-thread rows) where
# there is no Go toolchain: carry bin/device there (gzipped, the tree and
# the binaries fit the 64 MiB a run may carry).
device-bin:
	mkdir -p bin/device
	$(GO) test -c -ldflags='-s -w' -o bin/device/kernels.test ./kernels
	$(GO) build -ldflags='-s -w' -o bin/device/kilnbench ./bench/cmd/kilnbench
	gzip -f -9 bin/device/kernels.test bin/device/kilnbench

# Data-parallel scaling on MPI (issue 22): bench/cmd/distbench built with
# -tags mpi, alone and on 2 ranks of 1 thread over shared memory and TCP
# loopback (bench/dist.py prints E and the overlap's gain). Needs Open MPI
# (make test-mpi installs it).
bench-mpi:
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	CGO_ENABLED=1 $(GO) build -tags mpi -o $$tmp/distbench ./bench/cmd/distbench && \
	python3 bench/dist.py $$tmp/distbench

# The PyTorch reference: Debian's torch, with OpenBLAS (without it torch
# falls back to the reference BLAS, ~4 GFLOP/s: no fair comparison).
BENCH_DEBS = python3 python3-torch python3-torchvision libopenblas0-pthread
bench-deps:
	@missing=; for p in $(BENCH_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "bench-deps: $(BENCH_DEBS) already installed"; exit 0; fi; \
	sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	echo "bench-deps: installing$$missing"; \
	$$sudo apt-get update && $$sudo apt-get install -y --no-install-recommends $$missing

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1)
	$(GO) vet ./...

# Regenerates the PyTorch reference values under testdata/ (needs Debian's
# python3-torch at /usr/bin/python3); the results are committed.
PYTHON_TORCH ?= /usr/bin/python3
golden:
	cd testdata/golden && for f in gen_*.py; do echo "== $$f"; $(PYTHON_TORCH) $$f || exit 1; done

# ResNet-50 parity with torchvision (~100 MB, not committed): writes
# testdata/parity/resnet50.safetensors and runs the parity tests, which
# `make test` skips while the file is absent. Needs python3-torchvision.
parity:
	cd testdata/parity && $(PYTHON_TORCH) gen_resnet.py resnet50
	$(GO) test -count=1 -run 'MatchesPyTorch' -v ./nn/models
