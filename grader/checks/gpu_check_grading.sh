#!/usr/bin/env bash
# The fixtures of the grader's findings on a GPU (each must lose what its `loses:` line says):
# which isolation official grading picks on this machine, then the self-test's official gradings
# of the fixtures. The references are graded through the instructor's own command by
# grader/checks/gpu_grade_references.sh. Logs and the self-test's table go to $OUT.
# Usage: OUT=DIR bash grader/checks/gpu_check_grading.sh FIXTURES [ARCH]
#   FIXTURES: selftest --fixtures globs, e.g. '03/*,01/conv_on_side_stream'
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-build-gpu-check}
FIXTURES=${1:?usage: OUT=DIR $0 FIXTURES [ARCH]}
ARCH=${2:-90}
WORK=${WORK:-/tmp/gpu-check-grading}
mkdir -p "$OUT" "$WORK" && chmod 755 "$WORK"
[ -x build-tools/bwrap ] && [ -z "${LADDER_BWRAP:-}" ] && export LADDER_BWRAP=$PWD/build-tools/bwrap
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; id; echo "bwrap: ${LADDER_BWRAP:-$(command -v bwrap)}"
  python3 -c "from grader import sandbox; print('bwrap works:', sandbox.bwrap_works()); print('official isolation:', sandbox.choose('auto', True))"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
rungs=$(printf '%s\n' "${FIXTURES//,/$'\n'}" | cut -d/ -f1 | sort -u | paste -sd,)
python3 scripts/assignment.py selftest --rungs "$rungs" --only fixtures --fixtures "$FIXTURES" --jobs "$(nproc)" \
  --cuda-architectures "$ARCH" --work "$WORK/fixtures" > "$OUT/fixtures.log" 2>&1
status=$?
cp "$WORK/fixtures/selftest.txt" "$OUT/fixtures_selftest.txt" 2>/dev/null
cat "$OUT/fixtures_selftest.txt" 2>/dev/null
exit $status
