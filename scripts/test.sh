#!/usr/bin/env bash
# Builds with warnings as errors and runs every test. GPU tests skip, visibly, without a GPU.
# It reuses the README's first build (same folder, generator and options): only what changed
# is rebuilt. A folder configured with another generator keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=(-G Ninja)
[ -f build/CMakeCache.txt ] && generator=()
cmake -S . -B build "${generator[@]}" -DLADDER_WERROR=ON ${LADDER_CMAKE_ARGS:-}
cmake --build build -j "${LADDER_JOBS:-4}"
ctest --test-dir build --output-on-failure
