#!/usr/bin/env bash
# The instructor's path on a GPU, as root (issue: grading as root and in containers): which
# isolation official grading picks on this machine, then self-tests run side by side (each in its
# own work folder; every program run holds the GPU alone): the references of RUNGS graded
# officially (full marks expected), and the fixtures of the grader's findings (each must lose what
# its `loses:` line says). Logs and the self-tests' tables go to $OUT.
# Usage: OUT=DIR bash scripts/gpu_check_grading.sh RUNGS [FIXTURES] [ARCH]
#   RUNGS: e.g. 01,03 (references); FIXTURES: selftest --fixtures globs (default: none)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build-gpu-check}
RUNGS=${1:?usage: $0 RUNGS [FIXTURES] [ARCH]}
FIXTURES=${2:-}
ARCH=${3:-90}
WORK=${WORK:-/tmp/gpu-check-grading}
mkdir -p "$OUT" "$WORK" && chmod 755 "$WORK"
[ -x build-tools/bwrap ] && [ -z "${LADDER_BWRAP:-}" ] && export LADDER_BWRAP=$PWD/build-tools/bwrap
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; id; echo "bwrap: ${LADDER_BWRAP:-$(command -v bwrap)}"
  python3 -c "from grader import sandbox; print('bwrap works:', sandbox.bwrap_works()); print('official isolation:', sandbox.choose('auto', True))"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
pids=()
python3 scripts/assignment.py selftest --rungs "$RUNGS" --only reference --jobs "$(nproc)" --cuda-architectures "$ARCH" \
  --work "$WORK/reference" > "$OUT/reference.log" 2>&1 & pids+=($!)
if [ -n "$FIXTURES" ]; then
  rungs=$(printf '%s\n' "${FIXTURES//,/$'\n'}" | cut -d/ -f1 | sort -u | paste -sd,)
  python3 scripts/assignment.py selftest --rungs "$rungs" --only fixtures --fixtures "$FIXTURES" --jobs "$(nproc)" \
    --cuda-architectures "$ARCH" --work "$WORK/fixtures" > "$OUT/fixtures.log" 2>&1 & pids+=($!)
fi
for p in "${pids[@]}"; do wait "$p"; done
cp "$WORK/reference/selftest.txt" "$OUT/reference_selftest.txt" 2>/dev/null
cp "$WORK/fixtures/selftest.txt" "$OUT/fixtures_selftest.txt" 2>/dev/null
cp "$WORK/reference/grade/out/results.json" "$OUT/reference_results.json" 2>/dev/null
cp "$WORK/reference/grade/out/report.txt" "$OUT/reference_report.txt" 2>/dev/null
cat "$OUT"/*_selftest.txt
