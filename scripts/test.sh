#!/usr/bin/env bash
# Builds with warnings as errors and runs every test. GPU tests skip, visibly, without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DLADDER_WERROR=ON ${LADDER_CMAKE_ARGS:-}
cmake --build build -j "${LADDER_JOBS:-4}"
ctest --test-dir build --output-on-failure
