#!/usr/bin/env bash
# One call on a GPU machine: build for sm_90, run every test, then the ladder on the KernelBench
# problem. Logs go to $OUT (the device tool's folder) or ./device-out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee "$OUT/gpu.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DLADDER_WERROR=ON -DLADDER_RESOURCE_USAGE=ON > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build build-gpu -j 16 > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
grep -E "registers|spill|stack" "$OUT/build.log" > "$OUT/resource-usage.txt" || true
(cd build-gpu && ctest --output-on-failure ${CTEST_ARGS:-}) > "$OUT/ctest.log" 2>&1
grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.log" | tail -30
for cmd in "$@"; do echo "== $cmd"; bash -c "$cmd"; done
