#!/usr/bin/env bash
# The classroom tooling on a machine without a GPU (CI runs this): the Python tests, a handout of
# two reduction rungs built with warnings as errors and checked for leaked solutions, and the
# grader's static half (technique and integrity) on the references, the stubs and the fixtures.
# GPU parts of the grader report themselves as skipped. Usage: scripts/check_assignment.sh [WORK]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-build-assignment}
rungs=${LADDER_ASSIGNMENT_RUNGS:-03,04}
jobs=${LADDER_JOBS:-4}
mkdir -p "$work"
# One architecture keeps the handout and the ~20 fixture builds short: the GPU's where there is
# one, else sm_75 (a T4, the oldest course GPU). scripts/test.sh builds every architecture.
if [ -z "${LADDER_CUDA_ARCHS:-}" ]; then
  LADDER_CUDA_ARCHS=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ' || true)
  # "No devices were found" and an old driver's error messages also come on stdout.
  [[ $LADDER_CUDA_ARCHS =~ ^[0-9]+$ ]] || LADDER_CUDA_ARCHS=75
fi
echo "building for CUDA architecture(s) $LADDER_CUDA_ARCHS"

echo "== the tooling's own tests"
python3 scripts/test_assignment.py

echo "== markers"
python3 scripts/assignment.py markers

echo "== handout of rungs $rungs, built with warnings as errors"
python3 scripts/assignment.py handout --rungs "$rungs" --out "$work/handout" --force
python3 scripts/assignment.py check-handout "$work/handout"
cmake -S "$work/handout" -B "$work/handout-build" -DLADDER_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES="$LADDER_CUDA_ARCHS" \
  ${LADDER_CMAKE_ARGS:-} > "$work/handout-configure.log"
cmake --build "$work/handout-build" -j "$jobs" > "$work/handout-build.log" 2>&1 ||
  { tail -40 "$work/handout-build.log"; echo "FAIL: the handout does not build"; exit 1; }
echo "the handout builds"

echo "== the grader's static half: references, stubs, fixtures"
python3 scripts/assignment.py selftest --rungs "02,$rungs" --skip-gpu --jobs "$jobs" --work "$work/selftest" \
  --cuda-architectures "$LADDER_CUDA_ARCHS"
