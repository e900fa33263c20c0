#!/usr/bin/env bash
# Re-captures the Nsight Compute profiles of every GPU stage on the KernelBench problem, on the
# GPU this runs on, as text that diffs well: profiles/data/NN_name.txt (one sorted metric table
# per kernel) plus the raw .ncu-rep under $OUT (or profiles/raw/, not committed).
# Usage: scripts/capture_profiles.sh [BUILD_DIR]   (needs ncu on PATH and a GPU)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
raw=${OUT:-profiles/raw}
mkdir -p profiles/data "$raw"
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
          --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats)
# Clocks as the card runs them (the ladder's timings use the same), caches flushed per pass.
controls=(--clock-control none --cache-control all)
# Stages 02-04 share stage 01's convT kernel: profile it once, in stage 01.
declare -A kernels=([01]='regex:.' [02]='regex:pool|logsumexp|divide' [03]='regex:pool|logsumexp|divide'
                    [04]='regex:pool|logsumexp|divide' [05]='regex:.' [06]='regex:.')
for exe in "$build"/stage_0[1-9]_*; do
  name=$(basename "$exe" | sed 's/^stage_//')
  id=${name:0:2}
  [ -n "${kernels[$id]:-}" ] || continue
  echo "profiling $name" >&2
  cmd=("$exe" --reps 1 --warmup 0 --no-cub -q)
  # Skip the ladder's streaming-read floor kernel: it is not the stage's.
  ncu "${sections[@]}" "${controls[@]}" --kernel-name "${kernels[$id]}" --kernel-name-base function \
      -f -o "$raw/$name" "${cmd[@]}" > "$raw/$name.log" 2>&1 || { tail -20 "$raw/$name.log"; exit 1; }
  ncu --import "$raw/$name.ncu-rep" --page raw --csv > "$raw/$name.csv"
  python3 scripts/profile_table.py "$raw/$name.csv" --exclude streaming_read_kernel \
      --header "ncu $(ncu --version | tail -1 | sed 's/.*Version //'); GPU $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); clock control none (as the card runs); cache control all (flushed before each replay pass)" \
      --header "command: ncu ${sections[*]} ${controls[*]} --kernel-name '${kernels[$id]}' ${cmd[*]}" \
      > "profiles/data/$name.txt"
done
echo "profiles written to profiles/data/" >&2
