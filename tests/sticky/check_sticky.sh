#!/usr/bin/env bash
# Runs a ladder program whose first stage loses the CUDA context (tests/sticky/illegal_address.cu)
# and whose second is a real GPU stage. Passes when the ladder exits 1, reports the first stage as
# the cause and the second as not run; skips (77) without a GPU.
set -uo pipefail
program=$1
out=$("$program" --batch 1 --in-channels 2 --out-channels 3 --size 8 --reps 1 --warmup 0 --no-cub -q 2>&1)
rc=$?
if grep -q "skipped: no CUDA device" <<<"$out"; then
  echo "SKIPPED: no CUDA device"; exit 77
fi
echo "$out" | tail -20
fail() { echo "FAIL: $1 (exit $rc)"; exit 1; }
[ $rc -eq 1 ] || fail "the ladder should exit 1 after a sticky error"
grep -q "illegal memory access\|cudaErrorIllegalAddress" <<<"$out" || fail "the error is not named"
grep -Eq "not run: stage 98 illegal_address caused a sticky CUDA error" <<<"$out" ||
  fail "the next GPU stage is not reported as not run because of stage 98"
echo "PASS: the stage that lost the context is named and the next GPU stage was not run"
