#!/usr/bin/env bash
# Checks, without a GPU, that each rung's machine code shows the rung's idea: the stages of a
# build (BUILD/stages.tsv, written by cmake/Stages.cmake; objects BUILD/CMakeFiles/stage_NN.dir)
# and the built track rungs that have rules. The checks are grader/technique.py's: it reads
# `cuobjdump -sass` per function, finds the loops (backward branches) and asks each rung's
# kernel for its idea in its loops and counts (a barrier inside the tree's loop, not any
# BAR/LDS/STS; three mma per fragment pair for 3xTF32, ...); each rung's metadata lists them,
# one line each ("sass" in stages/NN_name/rung.json, or in a track rung's rungs/NN_name/rung.json). Every GPU stage also may use no local memory (LDL/STL) on sm_90
# (LADDER_SASS_STRICT_ARCH), where the register budgets are tuned, or on sm_90a for a stage built
# for it in place of sm_90 (rung.json "build"; its rules say "needs_sm90a"); other architectures' local
# memory is printed as NOTE lines. A build for several architectures is checked as a whole: each
# idea must show in the code of one of them. Every GPU stage must have a "sass" entry (an empty
# list when the local-memory check is all): a stage without one fails.
# Prints one PASS/FAIL line per check and exits non-zero if any check fails.
#
# Usage: scripts/check_sass.sh [--check] [BUILD_DIR]   (default: build)
#   --check  only verify that every stage of the list has an entry (no cuobjdump needed)
# LADDER_SASS_STAGES="03 04" (or 03,04; p38-03 for a track rung) checks only those (the
# autograder's technique check).
# cuobjdump is looked up as $CUOBJDUMP, on PATH, in $CUDA_HOME/bin and /usr/local/cuda/bin,
# and in Python's site-packages (pip's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels).
# cuobjdump needs nvdisasm beside it or on PATH. grader/integrity.py runs find_cuobjdump below.
set -euo pipefail

# grader/technique.py runs as the module grader.technique from this tree's root, so that this
# tree's grader runs whatever the current folder holds; paths are made absolute before the cd.
root="$(cd "$(dirname "$0")/.." && pwd)"
absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
if ! command -v python3 >/dev/null; then
  echo "FAIL: python3 not found: the SASS checks are grader/technique.py" >&2
  exit 1
fi
if [ "${1:-}" = "--check" ]; then
  build=$(absolute "${2:-build}")
  cd "$root" && exec python3 -B -m grader.technique --check "$build"
fi
build=${1:-build}

find_cuobjdump() {
  local c
  for c in "${CUOBJDUMP:-}" "$(command -v cuobjdump || true)" "${CUDA_HOME:-/nonexistent}/bin/cuobjdump" \
           /usr/local/cuda/bin/cuobjdump; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return; }
  done
  if command -v python3 >/dev/null; then
    python3 - <<'EOF' 2>/dev/null || true
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for root in roots:
    for c in sorted(glob.glob(os.path.join(root, "nvidia", "cu*", "bin", "cuobjdump")), reverse=True):
        if os.access(c, os.X_OK):
            print(c)
            sys.exit(0)
EOF
  fi
}

cuobjdump_bin=$(find_cuobjdump | head -n 1)
if [ -z "$cuobjdump_bin" ]; then
  echo "FAIL: cuobjdump not found (install the CUDA toolkit's cuobjdump and nvdisasm, e.g." \
       "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, or set CUOBJDUMP)" >&2
  exit 1
fi
echo "using $cuobjdump_bin"
cuobjdump_bin=$(absolute "$cuobjdump_bin")
build=$(absolute "$build")
cd "$root" && exec python3 -B -m grader.technique --cuobjdump "$cuobjdump_bin" "$build"
