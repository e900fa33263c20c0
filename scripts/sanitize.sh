#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over GPU stages on a small problem with awkward sizes
# (odd planes, stride, padding, output_padding, groups). Usage: scripts/sanitize.sh BUILD_DIR STAGES
set -uo pipefail
build=${1:-build}
stages=${2:-01,02,03,04}
args=(--stages "$stages" --batch 2 --in-channels 4 --out-channels 6 --size 23 19 --stride 2 1
      --padding 1 0 --output-padding 1 0 --groups 2 --reps 1 --warmup 0 --no-cub -q)
status=0
for tool in memcheck racecheck; do
  out=$(compute-sanitizer --tool "$tool" --error-exitcode 3 "$build/ladder" "${args[@]}" 2>&1)
  rc=$?
  summary=$(printf '%s\n' "$out" | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | tail -1)
  echo "$tool ($stages): rc=$rc ${summary:-no summary line}"
  [ $rc -eq 0 ] || { status=1; printf '%s\n' "$out" | tail -40; }
done
exit $status
