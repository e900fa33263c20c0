#!/usr/bin/env bash
# compute-sanitizer over the GPU stage programs of a build: each tool on each stage, through
# the same driver and the same small problems as CTest's sanitize_<tool>_NN tests
# (scripts/check_program.py, tests/mutants/sanitizer.problems). memcheck checks for leaks too.
#
# Usage: scripts/sanitize.sh [--check] [BUILD_DIR] [STAGES] [TOOLS]
#   --check    only verify that each requested stage is a GPU stage of the build's list with a
#              program in the build (no GPU, no compute-sanitizer needed)
#   BUILD_DIR  default build
#   STAGES     comma-separated stage numbers, e.g. 03,05 (default: every GPU stage of
#              BUILD/stages.tsv, the list cmake/Stages.cmake writes)
#   TOOLS      comma-separated, default memcheck,racecheck,synccheck,initcheck
# Fails loudly for a stage it cannot handle (not in the list, a CPU stage, no program in the
# build) and, unlike CTest, stops with an error where a check would be skipped (no GPU, no
# usable compute-sanitizer): asking for a sanitizer run that cannot happen is an error here.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check_only=
if [ "${1:-}" = "--check" ]; then
  check_only=1
  shift
fi
build=${1:-build}
stages=${2:-}
tools=${3:-memcheck,racecheck,synccheck,initcheck}
problems="$root/tests/mutants/sanitizer.problems"
list="$build/stages.tsv"
if [ ! -f "$list" ]; then
  echo "FAIL: no stage list $list: configure the build with CMake first (cmake/Stages.cmake writes it)"
  exit 1
fi

declare -A folder_of kind_of
all_gpu=
while IFS=$'\t' read -r id folder _name kind _rest; do
  case $id in '' | '#'*) continue ;; esac
  folder_of[$id]=$folder
  kind_of[$id]=$kind
  [ "$kind" = gpu ] && all_gpu+="${all_gpu:+,}$id"
done <"$list"
stages=${stages:-$all_gpu}
if [ -z "$stages" ]; then
  echo "FAIL: $list lists no GPU stage"
  exit 1
fi

status=0
programs=()
IFS=, read -ra stage_list <<<"$stages"
IFS=, read -ra tool_list <<<"$tools"
for id in "${stage_list[@]}"; do
  folder=${folder_of[$id]:-}
  if [ -z "$folder" ]; then
    echo "FAIL: stage '$id' is not in $list (stages: ${!folder_of[*]})"; status=1; continue
  fi
  if [ "${kind_of[$id]}" != gpu ]; then
    echo "FAIL: stage $folder is a CPU stage (no .cu source): nothing for a GPU sanitizer to check"
    status=1; continue
  fi
  program="$build/stage_$folder"
  if [ ! -x "$program" ]; then
    echo "FAIL: stage $folder: no program $program (build it first)"; status=1; continue
  fi
  programs+=("$folder")
done
if [ -n "$check_only" ]; then
  [ $status -eq 0 ] && echo "sanitize --check: every requested stage can be sanitized (${programs[*]})"
  exit $status
fi

for folder in "${programs[@]}"; do
  program="$build/stage_$folder"
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
