#!/usr/bin/env bash
# A single-stage program run with no GPU visible (CUDA_VISIBLE_DEVICES empty) must skip its stage,
# say why and where to go next, and exit 0: it holds no CPU stage to run instead. It must find
# that out before it generates anything: a batch whose inputs would need terabytes of host memory
# still skips at once ("no inputs generated") instead of failing on host memory.
# Usage: check_gpu_only_skip.sh PROGRAM
set -uo pipefail
out=$(CUDA_VISIBLE_DEVICES= "$1" --batch 1 --in-channels 1 --out-channels 2 --size 4 -q 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: exit $rc, not 0"; exit 1; }
grep -q "this program holds GPU stages only" <<<"$out" || { echo "FAIL: no skip line"; exit 1; }
if grep -q "^error:" <<<"$out"; then echo "FAIL: an error line"; exit 1; fi
huge=$(CUDA_VISIBLE_DEVICES= timeout 60 "$1" --batch 200000 2>&1)
rc=$?
printf '%s\n' "$huge" | tail -n 4
[ "$rc" -eq 0 ] || { echo "FAIL: --batch 200000 without a GPU: exit $rc, not 0"; exit 1; }
grep -q "no inputs generated" <<<"$huge" || { echo "FAIL: inputs generated before the GPU was probed"; exit 1; }
echo "PASS: $(basename "$1") skips without a GPU, before generating inputs, and exits 0"
