#!/usr/bin/env bash
# The ladder must build with CUDA 12.0 as well as 13.x (Colab's T4 driver runs CUDA 12.x only).
# No CUDA 12 nvcc can be installed from PyPI, so this checks what can be checked without one,
# against CUDA 12.0's runtime headers (PyPI's nvidia-cuda-runtime-cu12 12.0 wheel):
#   1. every host source of common/, harness/ and ladder/ (.cpp) compiles against them;
#   2. every CUDA runtime name (cuda[A-Z]...) used anywhere in the C++/CUDA sources is declared
#      in them: a function, type or enum that CUDA 13 added fails here, naming the file.
# Device code (.cu kernels) is compiled by CI with the installed nvcc only.
# Usage: scripts/check_cuda12_api.sh [HEADERS_DIR]   (default: fetched into build-cuda12/)
set -euo pipefail
cd "$(dirname "$0")/.."

inc=${1:-}
if [ -z "$inc" ]; then
  dir=build-cuda12
  inc=$dir/nvidia/cuda_runtime/include
  if [ ! -f "$inc/cuda_runtime_api.h" ]; then
    echo "fetching CUDA 12.0's runtime headers (nvidia-cuda-runtime-cu12==12.0.*) into $dir/"
    mkdir -p "$dir"
    python3 -m pip download -q --no-deps -d "$dir" "nvidia-cuda-runtime-cu12==12.0.*"
    python3 -m zipfile -e "$dir"/nvidia_cuda_runtime_cu12-12.0.*.whl "$dir"
  fi
fi
[ -f "$inc/cuda_runtime_api.h" ] || { echo "FAIL: no cuda_runtime_api.h in $inc" >&2; exit 1; }
grep -q 'CUDART_VERSION  *12000' "$inc/cuda_runtime_api.h" ||
  echo "note: $inc is not CUDA 12.0's (CUDART_VERSION $(grep -o 'CUDART_VERSION  *[0-9]*' "$inc/cuda_runtime_api.h" | awk '{print $2}'))"

failures=0
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
echo '#pragma once' >"$gen/ladder_git_stamp.hpp"
echo '#define LADDER_BUILD_GIT_COMMIT "check"' >>"$gen/ladder_git_stamp.hpp"
echo '#define LADDER_BUILD_GIT_DIRTY "0"' >>"$gen/ladder_git_stamp.hpp"

echo "== 1. host sources against CUDA 12.0's headers"
for f in $(git ls-files 'common/*/*.cpp' 'harness/*.cpp' 'ladder/*.cpp'); do
  if g++ -std=c++17 -fsyntax-only -fopenmp -isystem "$inc" -Icommon/toolkit -Icommon/model -Iharness -Iladder -I"$gen" "$f" 2>"$gen/err"; then
    echo "PASS: $f"
  else
    echo "FAIL: $f does not compile against CUDA 12.0's headers:"; head -5 "$gen/err"
    failures=$((failures + 1))
  fi
done

echo "== 2. CUDA runtime names used in the sources, declared in CUDA 12.0"
# A name used only inside `#if CUDART_VERSION >= N` (N > 12000, up to its #else or #endif) is
# allowed: CUDA 12.0 compiles the other branch. unguarded_names prints the names outside them.
unguarded_names() {
  git ls-files -z -- '*.cpp' '*.hpp' '*.cu' '*.cuh' ':!drafts/' "$@" | xargs -0 python3 -c '
import re, sys
names = set()
for path in sys.argv[1:]:
    depth, skip = [], False  # a stack of (guarded, in its #if branch)
    for line in open(path, encoding="utf-8", errors="replace"):
        s = line.strip()
        m = re.match(r"#\s*if\s+CUDART_VERSION\s*>=\s*(\d+)", s)
        if m:
            depth.append([int(m.group(1)) > 12000, True])
        elif re.match(r"#\s*if", s):
            depth.append([False, True])
        elif re.match(r"#\s*el", s) and depth:
            depth[-1][1] = False
        elif re.match(r"#\s*endif", s) and depth:
            depth.pop()
        elif not any(g and branch for g, branch in depth):
            names.update(re.findall(r"\bcuda[A-Z][A-Za-z0-9_]*", line))
print("\n".join(sorted(names)))
'
}
# drafts/ is left out: nothing there is built (drafts/README.md), and a draft meets this check before it returns
declared="$gen/declared"
cat "$inc"/*.h | grep -o '\bcuda[A-Z][A-Za-z0-9_]*' | sort -u >"$declared"
used=$(unguarded_names)  # once: the loop and the count below read it
while IFS= read -r name; do
  [ -n "$name" ] || continue
  if ! grep -qx "$name" "$declared"; then
    where=$(git grep -l -w "$name" -- '*.cpp' '*.hpp' '*.cu' '*.cuh' ':!drafts/' | head -3 | tr '\n' ' ')
    echo "FAIL: $name (used in $where) is not in CUDA 12.0's runtime headers"
    failures=$((failures + 1))
  fi
done <<<"$used"
checked=$(grep -c . <<<"$used" || true)
if [ "$checked" -eq 0 ]; then  # not a git checkout, or no sources: nothing was checked, which is no pass
  echo "FAIL: no CUDA runtime name found in the tracked sources (is this a git checkout?)"
  failures=$((failures + 1))
fi
echo "checked $checked names"

if [ "$failures" -gt 0 ]; then
  echo "check_cuda12_api: $failures failure(s)"
  exit 1
fi
echo "check_cuda12_api: the host code and every runtime name fit CUDA 12.0"
