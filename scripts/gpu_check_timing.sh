#!/usr/bin/env bash
# GPU check of the grader's timing (issue findings 4, 6 and 7): the reference build kept from the
# student's build, the student and the reference timed in separate processes on seeds the grader
# hands over, and a wall-time allowance made of the reference's own overhead. Run on a machine
# with one H100 or H200 (bubblewrap installed, as for official grading), from the repository root:
#
#   OUT=/some/folder bash scripts/gpu_check_timing.sh [all|reference|perf|static]
#
# Logs go to $OUT (default: build-gpu-check/), work folders to ${WORK:-/tmp/gpu-check-timing}.
# The three self-tests run at the same time (each grading waits for the GPU alone while it times):
#   reference  rungs 01 and 03 graded officially: both references must keep full marks, performance
#              included (rung 01 now timed at --kernelbench-v1 --size 128; the allowance is the
#              reference's own uncovered time x 2 + 2% of its event time + 0.01 ms);
#   perf       fixtures that must lose performance: 01/conv_on_side_stream (untimed work on another
#              stream), 03/reference_from_stack (looks for the reference's descriptor in its own
#              process), 03/untimed_work and 03/prepare_precomputed (kept meaningful);
#   static     the .incbin fixtures (03/incbin_reference_*): the build must fail (no GPU needed).
# Expected: every line of $OUT/summary.txt starts with [PASS], and the script exits 0:
#   [PASS] reference 01: full marks          (performance 20/20, ratio about 1)
#   [PASS] reference 03: full marks
#   [PASS] fixture 01/conv_on_side_stream (must lose performance): ... (timing error: the host wall time ...)
#   [PASS] fixture 03/reference_from_stack (must lose performance): ... (timing mismatch: round 1, repetition 1: ... non-finite output(s) ...)
#   [PASS] fixture 03/untimed_work (must lose performance): ... (timing error: ...)
#   [PASS] fixture 03/prepare_precomputed (must lose performance): ... (timing mismatch: ...)
#   [PASS] fixture 03/incbin_reference_library (must lose technique): technique 0 / 10
#   [PASS] fixture 03/incbin_reference_build (must lose technique): technique 0 / 10
# $OUT/reference_results.json holds the references' full feedback: each performance part names
# the rounds, the reference's time and the wall-time numbers ("host wall time beyond the CUDA
# events: X ms (allowed Y ms)"), the evidence that the allowance fits the reference's overhead.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build-gpu-check}
WORK=${WORK:-/tmp/gpu-check-timing}
WHAT=${1:-all}
ARCH=${CUDA_ARCH:-90}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT" "$WORK"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1 || true
git rev-parse HEAD > "$OUT/commit.txt" 2>/dev/null || true
git status --short > "$OUT/git_status.txt" 2>/dev/null || true

# The grader's CPU tests of the timing first (seconds): the protocol with stand-in programs.
python3 scripts/test_assignment.py StageTimingTest > "$OUT/unit_tests.log" 2>&1
echo "unit tests (StageTimingTest): exit $?" | tee "$OUT/unit_tests.status"

selftest() {  # NAME, then selftest's options; its log in $OUT/NAME.log, its exit status in NAME.status
  local name=$1
  shift
  python3 scripts/assignment.py selftest --jobs "$JOBS" --cuda-architectures "$ARCH" --work "$WORK/$name" "$@" \
    > "$OUT/$name.log" 2>&1
  echo $? > "$OUT/$name.status"
  if [ "$name" = reference ] && [ -f "$WORK/$name/grade/out/results.json" ]; then
    cp "$WORK/$name/grade/out/results.json" "$OUT/reference_results.json"
  fi
}

pids=()
if [ "$WHAT" = all ] || [ "$WHAT" = reference ]; then
  selftest reference --rungs 01,03 --only reference &
  pids+=($!)
fi
if [ "$WHAT" = all ] || [ "$WHAT" = perf ]; then
  selftest perf --rungs 01,03 --only fixtures \
    --fixtures '01/conv_on_side_stream,03/reference_from_stack,03/untimed_work,03/prepare_precomputed' &
  pids+=($!)
fi
if [ "$WHAT" = all ] || [ "$WHAT" = static ]; then
  selftest static --rungs 03 --only fixtures --fixtures '03/incbin_reference_*' &
  pids+=($!)
fi
for p in "${pids[@]}"; do wait "$p"; done

grep -h '^\[\(PASS\|FAIL\|SKIP\)\]' "$OUT"/reference.log "$OUT"/perf.log "$OUT"/static.log 2>/dev/null > "$OUT/summary.txt"
cat "$OUT/summary.txt"
# The wall-time numbers of the references' performance parts.
python3 - "$OUT/reference_results.json" <<'EOF' 2>/dev/null | tee "$OUT/reference_performance.txt"
import json, sys
for t in json.load(open(sys.argv[1])).get("tests", []):
    if "performance" in t.get("name", ""):
        print(t["name"], t.get("score"), "/", t.get("max_score"))
        print("  " + t.get("output", "").replace("\n", "\n  "))
EOF
status=0
for s in "$OUT"/*.status; do
  case "$s" in *unit_tests.status) grep -q "exit 0" "$s" || status=1 ;; *) [ "$(cat "$s")" = 0 ] || status=1 ;; esac
done
if grep -q '^\[FAIL\]\|^\[SKIP\]' "$OUT/summary.txt" || [ ! -s "$OUT/summary.txt" ]; then status=1; fi
echo "gpu_check_timing: $([ $status = 0 ] && echo PASS || echo FAIL) (logs in $OUT)"
exit $status
