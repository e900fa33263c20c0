#!/usr/bin/env bash
# One GPU call that checks the draft on the problems that separated its illegal instruction
# (README, Status: a box not starting 16 bytes into a row of x), then its GPU tests.
# Run from the repository root on an H100 or H200; logs go to $OUT (default ./device-out).
# It works on a scratch copy of the tree with the draft put back into the ladder, so the
# checkout itself is not changed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
T=$(mktemp -d /tmp/ws-diagnose.XXXXXX)
tar --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$T"
mkdir -p "$T/stages/17_warp_specialized"
cp drafts/17_warp_specialized/{warp_specialized.cu,rung.json} "$T/stages/17_warp_specialized/"
cp drafts/17_warp_specialized/lib/*.cuh "$T/stages/lib/"
cp drafts/17_warp_specialized/toolkit/{tma.cuh,tensor_map.hpp} "$T/common/toolkit/"
build() {  # $1: build folder, $2...: extra CMake arguments
  cmake -S "$T" -B "$1" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DLADDER_WERROR=ON "${@:2}" > "$1.cfg.log" 2>&1 &&
    ninja -C "$1" ladder gpu_tests > "$1.build.log" 2>&1 || { echo "build of $1 failed"; tail -20 "$1.build.log"; return 1; }
}
SMALL=(--batch 1 --in-channels 8 --out-channels 128 --size 64 --reps 1 --warmup 0 -q)
row() { "$@" 2>&1 | grep -E '^17 |error' | cut -c1-160 | head -2; }
build "$T/b" || exit 1
{
  echo "== kernel and padding: the box's first column at 0 or 2 mod 4 before the fix"
  for kp in "3 3:2 2" "1 3:0 2" "3 1:0 0" "1 3:0 0" "3 3:0 0" "2 5:1 2" "5 5:1 3" "1 1:0 0"; do
    printf 'kernel %s, padding %s: ' "${kp%%:*}" "${kp##*:}"
    row timeout 60 "$T/b/ladder" --stages 15,17 "${SMALL[@]}" --kernel-size ${kp%%:*} --padding ${kp##*:}; echo
  done
  echo "== compute-sanitizer, kernel 3"
  timeout 120 compute-sanitizer --tool memcheck "$T/b/ladder" --stages 17 "${SMALL[@]}" --kernel-size 3 2>&1 | tail -5
  for f in $(find "$T/b" -name 'warp_specialized.cu.o'); do cuobjdump -sass "$f" > "$OUT/sass.txt"; done
  echo "== the KernelBench problem, stages 14, 15, 17"
  timeout 120 "$T/b/ladder" --stages 14,15,17 --reps 5 2>&1 | tail -14
  echo "== stage 17's GPU tests"
  timeout 200 "$T/b/tests/gpu_tests" --gtest_filter='*17*' 2>&1 | grep -E 'FAILED|PASSED|tests ran' | tail -12
} 2>&1 | tee "$OUT/diagnose.txt"
