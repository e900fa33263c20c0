#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine with the CUDA toolkit lacks to build the ladder:
# CMake, Ninja (the grader's generator), GoogleTest, CLI11, nlohmann_json and bubblewrap (the
# grader's sandbox). Does nothing for
# packages already present.
set -euo pipefail

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v nvcc >/dev/null || { echo "error: nvcc not found: install the CUDA toolkit (12.0 or newer) first, or put its bin/ on PATH" >&2; exit 1; }
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
[ -f /usr/include/CLI/CLI.hpp ] || need+=(libcli11-dev)
[ -f /usr/include/nlohmann/json.hpp ] || need+=(nlohmann-json3-dev)
command -v bwrap >/dev/null || need+=(bubblewrap)  # the grader's sandbox (grader/sandbox.py)
command -v setpriv >/dev/null || need+=(util-linux)

if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
# cuobjdump (for scripts/check_sass.sh): some CUDA images leave it out; NVIDIA ships it on PyPI.
if ! command -v cuobjdump >/dev/null && [ ! -x /usr/local/cuda/bin/cuobjdump ] &&
   ! python3 -m pip show -q nvidia-cuda-cuobjdump >/dev/null 2>&1; then
  echo "installing cuobjdump and nvdisasm from PyPI"
  python3 -m pip install -q nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
fi
# CMakeLists.txt needs CMake 3.24 or newer; Ubuntu 22.04's package is 3.22. PyPI has current ones.
cmake_version=$(cmake --version | head -1 | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?')
if [ "$(printf '%s\n' 3.24 "$cmake_version" | sort -V | head -1)" != 3.24 ]; then
  echo "CMake $cmake_version is older than 3.24: installing a newer one from PyPI"
  python3 -m pip install -q 'cmake>=3.24'
  hash -r
  cmake --version | head -1
fi
echo "build dependencies present"
