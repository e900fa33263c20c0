#!/usr/bin/env bash
# The classroom tooling on a machine without a GPU (CI runs this): the Python tests, a handout of
# two reduction rungs built with warnings as errors and checked for leaked solutions, and the
# grader's static half (technique and integrity) on the references, the stubs and the fixtures;
# then, for each track group (two rungs of the problem-38 track, the backward rungs 06-08 of the
# problem-74 track), a handout checked, its stubbed rungs compiled with warnings as errors, and
# the grader's static half on those rungs' references and stubs (and the problem-74 fixtures).
# GPU parts of the grader report themselves as skipped. Usage: grader/checks/check_assignment.sh [WORK]
# (LADDER_ASSIGNMENT_TRACK_RUNGS: space-separated groups, one track each; empty skips the tracks.)
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:-build-assignment}
rungs=${LADDER_ASSIGNMENT_RUNGS:-03,04}
track_groups=${LADDER_ASSIGNMENT_TRACK_RUNGS-p38-03,p38-04 p74-06,p74-07,p74-08}
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
python3 grader/tests/test_assignment.py
python3 grader/tests/test_technique.py
python3 grader/tests/test_integrity_allowlist.py
python3 grader/tests/test_handout_links.py
python3 grader/tests/test_sanitizer_feedback.py

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

[ -n "$track_groups" ] || exit 0
for track_rungs in $track_groups; do
track=${track_rungs%%-*}
echo "== track handout of rungs $track_rungs, its stubbed rungs compiled with warnings as errors"
python3 scripts/assignment.py handout --rungs "$track_rungs" --out "$work/$track-handout" --force
python3 scripts/assignment.py check-handout "$work/$track-handout"
cmake -S "$work/$track-handout" -B "$work/$track-handout-build" -G Ninja -DLADDER_WERROR=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$LADDER_CUDA_ARCHS" ${LADDER_CMAKE_ARGS:-} > "$work/$track-handout-configure.log"
# Only the objects of the students' files and of the chosen rungs' own files (a student file may
# be a shared header, tracks/p74_backward/device/reduce.cuh): the whole track builds in the selftest.
objects=$(python3 - "$work/$track-handout" <<'EOF'
import json, os, sys
from grader import handout, problems, rungs  # the current folder, the root, is on sys.path
root = sys.argv[1]
with open(os.path.join(root, handout.MANIFEST)) as f:
    files = json.load(f)["files"]
with open(os.path.join(root, "grader", "rungs.json")) as f:
    config = json.load(f)
own = handout.track_rungs(root)  # the rung's own file: tracks/TRACK_x/rungs/NN_y/y.cu
print(" ".join(sorted({rungs.object_target(problems.settings(config, r)[0], p) for r, paths in files.items()
                       for p in paths + [own[r]] if p.endswith((".cu", ".cpp"))})))
EOF
)
cmake --build "$work/$track-handout-build" -j "$jobs" --target $objects > "$work/$track-handout-build.log" 2>&1 ||
  { tail -40 "$work/$track-handout-build.log"; echo "FAIL: the track handout's stubs do not compile"; exit 1; }
echo "the track handout's stubs compile: $objects"

echo "== the grader's static half on the track: references and stubs"
python3 scripts/assignment.py selftest --rungs "$track_rungs" --only reference,stub --skip-gpu --jobs "$jobs" \
  --work "$work/selftest" --cuda-architectures "$LADDER_CUDA_ARCHS"
done
