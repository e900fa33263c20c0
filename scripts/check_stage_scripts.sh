#!/usr/bin/env bash
# Checks, without a GPU, that the scripts which take the stages from a build's list
# (BUILD/stages.tsv, written by cmake/Stages.cmake) can handle every stage in it, and that they
# still fail, naming the stage, on one they cannot: so a new stage folder that a script does not
# know fails CTest (scripts_handle_every_stage) instead of being skipped. Also checks that the
# Python build (python/conv_pool_ladder/_build.py) finds the same stages as CMake.
#
# Usage: scripts/check_stage_scripts.sh BUILD_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: scripts/check_stage_scripts.sh BUILD_DIR}
if [ ! -f "$build/stages.tsv" ]; then
  echo "FAIL: no stage list $build/stages.tsv: configure the build with CMake first"
  exit 1
fi
build=$(cd "$build" && pwd)
list="$build/stages.tsv"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 1. Every stage of the build: each script has what it needs for it.
for cmd in "scripts/check_sass.sh --check" "scripts/capture_profiles.sh --check" "scripts/sanitize.sh --check"; do
  if out=$(bash "$root"/$cmd "$build" 2>&1); then
    echo "PASS: $cmd: $(printf '%s\n' "$out" | tail -1)"
  else
    fail "$cmd $build:"
    printf '%s\n' "$out" | grep -v '^PASS' | sed 's/^/    /'
  fi
done

# 2. The Python build finds the same stages, with the same sources and kinds, as CMake.
if ! command -v python3 >/dev/null; then
  fail "python3 not found: cannot compare the Python build's stages with $list"
elif out=$(cd "$root/python" && LADDER_CMAKE="${LADDER_CMAKE:-cmake}" python3 - "$list" 2>&1 <<'EOF'
import sys
from pathlib import Path
from conv_pool_ladder import _build

built = _build.read_stage_list(Path(sys.argv[1]))
found = _build.stage_folders()
key = lambda s: (s.id, s.folder, s.name, s.kind, tuple(p.name for p in s.sources), s.definitions)
if [key(s) for s in built] != [key(s) for s in found]:
    sys.exit(f"the build lists {[key(s) for s in built]}\nbut _build.stage_folders() finds {[key(s) for s in found]}"
             "\n(reconfigure the build if stages/ changed since)")
print(f"{len(found)} stages: " + ", ".join(s.folder for s in found))
EOF
); then
  echo "PASS: python/conv_pool_ladder/_build.py finds the stages of $list: $out"
else
  fail "python/conv_pool_ladder/_build.py and $list disagree:"
  printf '%s\n' "$out" | sed 's/^/    /'
fi

# 3. A stage no script knows: each must fail and name it (a build directory with the list
#    plus one made-up GPU stage; no programs, no objects).
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
mkdir -p "$fake/CMakeFiles"
cp "$list" "$fake/stages.tsv"
printf '99\t99_unknown_rung\tunknown_rung\tgpu\tunknown_rung.cu\tLADDER_STAGE_ID="99"\n' >>"$fake/stages.tsv"
for cmd in "scripts/check_sass.sh --check" "scripts/capture_profiles.sh --check" "scripts/sanitize.sh --check"; do
  if out=$(bash "$root"/$cmd "$fake" 2>&1); then
    fail "$cmd accepted a list with a stage it has no entry or program for (99_unknown_rung)"
  elif ! printf '%s\n' "$out" | grep -q 'unknown_rung'; then
    fail "$cmd failed on 99_unknown_rung without naming it: $(printf '%s\n' "$out" | tail -1)"
  else
    echo "PASS: $cmd fails on a stage it cannot handle: $(printf '%s\n' "$out" | grep -m1 unknown_rung)"
  fi
done

if [ "$failures" -gt 0 ]; then
  echo "check_stage_scripts: $failures check(s) failed"
  exit 1
fi
echo "check_stage_scripts: every script handles every stage of $list"
