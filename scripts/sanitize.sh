#!/usr/bin/env bash
# compute-sanitizer over the GPU stage programs of a build: each tool on each stage, through
# the same driver and the same small problems as CTest's sanitize_<tool>_NN tests
# (scripts/check_program.py, tests/mutants/sanitizer.problems). memcheck checks for leaks too.
#
# Usage: scripts/sanitize.sh [BUILD_DIR] [STAGES] [TOOLS]
#   BUILD_DIR  default build
#   STAGES     comma-separated stage numbers, e.g. 03,05 (default: every GPU stage, i.e. every
#              stages/NN_name folder with a .cu source)
#   TOOLS      comma-separated, default memcheck,racecheck,synccheck,initcheck
# Fails loudly for a stage it cannot handle (no such folder, a CPU stage, no program in the
# build) and, unlike CTest, stops with an error where a check would be skipped (no GPU, no
# usable compute-sanitizer): asking for a sanitizer run that cannot happen is an error here.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
stages=${2:-}
tools=${3:-memcheck,racecheck,synccheck,initcheck}
problems="$root/tests/mutants/sanitizer.problems"

if [ -z "$stages" ]; then
  for dir in "$root"/stages/[0-9][0-9]_*/; do
    compgen -G "$dir*.cu" >/dev/null && stages+="${stages:+,}$(basename "$dir" | cut -c1-2)"
  done
fi

status=0
IFS=, read -ra stage_list <<<"$stages"
IFS=, read -ra tool_list <<<"$tools"
for id in "${stage_list[@]}"; do
  folders=("$root"/stages/"$id"_*/)
  if [ ! -d "${folders[0]}" ] || [ ${#folders[@]} -ne 1 ]; then
    echo "FAIL: stage '$id': no single stages/${id}_* folder"; status=1; continue
  fi
  folder=$(basename "${folders[0]}")
  if ! compgen -G "${folders[0]}*.cu" >/dev/null; then
    echo "FAIL: stage $folder has no .cu source: a CPU stage, nothing for a GPU sanitizer to check"
    status=1; continue
  fi
  program="$build/stage_$folder"
  if [ ! -x "$program" ]; then
    echo "FAIL: stage $folder: no program $program (build it first)"; status=1; continue
  fi
  for tool in "${tool_list[@]}"; do
    out=$(python3 "$root/scripts/check_program.py" --program "$program" --expect accept --tool "$tool" \
          --problems "$problems" --label "$tool on stage $folder" 2>&1)
    rc=$?
    printf '%s\n' "$out" | tail -1
    case $rc in
      0) ;;
      77) echo "FAIL: $tool on stage $folder could not run, so no other check can either; stopping"; exit 1 ;;
      *) printf '%s\n' "$out" | head -n -1 | tail -40; status=1 ;;
    esac
  done
done
exit $status
