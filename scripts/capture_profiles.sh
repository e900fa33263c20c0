#!/usr/bin/env bash
# Re-captures the Nsight Compute profiles of every GPU stage on the KernelBench problem, on the
# GPU this runs on, as text that diffs well: profiles/data/NN_name.txt (one sorted metric table
# per kernel) plus the raw .ncu-rep under $OUT (or profiles/raw/, not committed).
# The stages are those of BUILD/stages.tsv (written by cmake/Stages.cmake); a GPU stage without
# an entry ("profile" in its stages/NN_name/rung.json) stops the script before anything is profiled.
# Usage: scripts/capture_profiles.sh [--check] [BUILD_DIR] [STAGES]   (needs ncu on PATH and a GPU,
#   and a build configured with -DLADDER_LINEINFO=ON so the counters map to source lines)
#   --check  only verify that every GPU stage of the list has an entry (no ncu, no GPU needed)
#   STAGES   comma-separated stage numbers to capture (default: every GPU stage of the list)
# A relative BUILD_DIR is taken from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
check_only=
if [ "${1:-}" = "--check" ]; then
  check_only=1
  shift
fi
build=${1:-build}
only=${2:-}
list="$build/stages.tsv"
if [ ! -f "$list" ]; then
  echo "error: no stage list $list: configure the build with CMake first (cmake/Stages.cmake writes it)" >&2
  exit 1
fi

# The kernels to profile and the problem's options: "profile" in each stage's rung.json
# (grader/rung_meta.py). The stages that reuse the naive convT kernel (lib/conv_transpose_gather.cuh)
# leave it out: it is profiled once, with per_thread_loop. The two slowest rungs (the naive gather
# fused, about 0.9 s a launch at the KernelBench size, and one output per thread from shared
# memory, about 0.2 s) would take tens of minutes under the dozens of replay passes a capture
# needs, so their "args" capture them at batch 1: the same kernel and per-block work, 16 times
# fewer blocks. Their per-instruction ratios (FFMA share, sectors per request, bank conflicts,
# stall reasons) do not depend on the batch; totals (bytes, instructions) are per sample. The
# header of the file records the command.
root="$(cd "$(dirname "$0")/.." && pwd)"
profile_entry() {  # profile_entry FOLDER KEY: the value ("" for no args), or status 1 without a filter
  python3 - "$root/stages/$1/rung.json" "$2" <<'PY'
import json, sys
try:
    profile = json.load(open(sys.argv[1], encoding="utf-8")).get("profile", {})
except OSError:
    sys.exit(1)
if sys.argv[2] == "kernel_filter":
    if not profile.get("kernel_filter"):
        sys.exit(1)
    print(profile["kernel_filter"])
else:
    print(" ".join(profile.get("args", [])))
PY
}
kernel_filter() { profile_entry "$1" kernel_filter; }
problem_args() { profile_entry "$1" args; }

folders=() filters=() names=()
missing=0
while IFS=$'\t' read -r id folder name kind _rest; do
  case $id in '' | '#'*) continue ;; esac
  if [ "$kind" != gpu ]; then
    echo "skipping stage $folder: a CPU stage, nothing for Nsight Compute" >&2
    continue
  fi
  if ! filter=$(kernel_filter "$folder"); then
    echo "error: stage $folder has no kernel filter (\"profile\": {\"kernel_filter\": ...} in stages/$folder/rung.json); add one" >&2
    missing=$((missing + 1))
    continue
  fi
  if [ -n "$only" ] && [[ ",$only," != *",$id,"* ]]; then continue; fi
  folders+=("$folder") filters+=("$filter") names+=("$name")
done <"$list"
if [ "$missing" -gt 0 ]; then
  exit 1
fi
if [ ${#folders[@]} -eq 0 ]; then
  echo "error: $list lists no GPU stage" >&2
  exit 1
fi
if [ -n "$check_only" ]; then
  echo "capture_profiles --check: every GPU stage has a kernel filter (${folders[*]})"
  exit 0
fi
for folder in "${folders[@]}"; do
  if [ ! -x "$build/stage_$folder" ]; then
    echo "error: no program $build/stage_$folder: build it first" >&2
    exit 1
  fi
done

raw=${OUT:-profiles/raw}
mkdir -p profiles/data "$raw"
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
          --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats
          --section SourceCounters --import-source yes)
# The metrics the chapters and docs/reading-profiles.md rely on, beyond the sections: DRAM bytes
# moved, the FFMA count (thread instructions), global-load sectors per request, and shared-memory
# bank conflicts.
metrics=dram__bytes_read.sum,dram__bytes_write.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum
metrics+=,smsp__inst_executed.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
metrics+=,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
metrics+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
sections+=(--metrics "$metrics")
# Source-level counters need line information in the binary: a build configured with
# -DLADDER_LINEINFO=ON (the kernels' code is the same; only the debug line table is added).
if ! grep -q '^LADDER_LINEINFO:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "error: $build was not configured with -DLADDER_LINEINFO=ON; profiles map to source lines only with it" >&2
  exit 1
fi
# Clocks as the card runs them (the ladder's timings use the same), caches flushed per pass.
controls=(--clock-control none --cache-control all)
for i in "${!folders[@]}"; do
  name=${folders[$i]} filter=${filters[$i]}
  exe="$build/stage_$name"
  echo "profiling $name" >&2
  read -ra extra <<<"$(problem_args "${folders[$i]}")"
  cmd=("$exe" ${extra[@]+"${extra[@]}"} --reps 1 --warmup 0 --no-cub -q)
  # Skip the ladder's streaming-read floor kernel: it is not the stage's.
  ncu "${sections[@]}" "${controls[@]}" --kernel-name "$filter" --kernel-name-base function \
      -f -o "$raw/$name" "${cmd[@]}" > "$raw/$name.log" 2>&1 || { tail -20 "$raw/$name.log"; exit 1; }
  ncu --import "$raw/$name.ncu-rep" --page raw --csv > "$raw/$name.csv"
  python3 scripts/profile_table.py "$raw/$name.csv" --exclude streaming_read_kernel \
      --header "ncu $(ncu --version | tail -1 | sed 's/.*Version //'); GPU $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); clock control none (as the card runs); cache control all (flushed before each replay pass)" \
      --header "command: ncu ${sections[*]} ${controls[*]} --kernel-name '$filter' ${cmd[*]}" \
      > "profiles/data/$name.txt"
done
echo "profiles written to profiles/data/" >&2
