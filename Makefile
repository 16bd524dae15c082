GO ?= go

.PHONY: all demo test bench fmt vet golden

all: test

demo:
	$(GO) run ./examples/quickstart

# The kernel suites run twice: with the assembly variants the CPU supports,
# and with -tags noasm, which leaves only the pure-Go references.
test: vet
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -tags noasm ./kernels/...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

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
