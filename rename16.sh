#!/bin/sh
# rename16.sh: re-applies issue 16 part 6's kernels argument-convention changes
# to the callers in a tree (run from the repository root; idempotent: each
# pattern matches only the old form). Then: gofmt -l . ; go build ./... ; go vet ./...
#
#  1. BatchNormStats/BatchNormForward/BatchNormReLUForward/BatchNormBackward take
#     *BatchNormShape (was BatchNormShape by value).
#  2. Softmax/LogSoftmax/SoftmaxBackward/LogSoftmaxBackward take *SoftmaxShape
#     (was SoftmaxShape by value).
#  3. AvgPool2d(s, countIncludePad, x, y) -> AvgPool2d(s, x, countIncludePad, y);
#     AvgPool2dBackward(s, countIncludePad, dy, dx) -> AvgPool2dBackward(s, dy, countIncludePad, dx).
#
# A call site the patterns miss (another variable name than s, a function
# value) fails to compile with "cannot use s (variable of struct type ...)"
# or "cannot use ... (bool) as []float32": add the & or swap the arguments by hand.
set -e
files=$(grep -rlE --include='*.go' 'kernels\.(BatchNorm|Softmax|LogSoftmax|AvgPool2d)|forward\(s, x|\bf\(s, ' . | grep -v '^\./kernels/' || true)
[ -n "$files" ] || exit 0
sed -i -E \
  -e 's/kernels\.(BatchNormStats|BatchNormForward|BatchNormReLUForward|BatchNormBackward|Softmax|LogSoftmax|SoftmaxBackward|LogSoftmaxBackward)\(s, /kernels.\1(\&s, /g' \
  -e 's/kernels\.AvgPool2d(Backward)?\((&?[A-Za-z_]+), ((opt\.)?[Cc]ount[A-Za-z]*|include), ([A-Za-z_]+), /kernels.AvgPool2d\1(\2, \5, \3, /g' \
  $files
# Function values: autograd/norm.go's forward := kernels.BatchNorm[ReLU]Forward and
# graph/ops_compile.go's softmax f := kernels.[Log]Softmax.
for f in autograd/norm.go graph/ops_compile.go; do
  [ -f "$f" ] || continue
  sed -i -E -e 's/\bforward\(s, (xd|xf), mean/forward(\&s, \1, mean/' -e 's/\bf\(s, (read\(\)|xf), /f(\&s, \1, /' "$f"
done
