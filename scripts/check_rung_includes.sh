#!/usr/bin/env bash
# Fails if a file under stages/ includes a file from a stage folder (NN_name/...): stages share
# code only through stages/lib/ ("lib/<file>"), so renaming or renumbering one stage cannot break
# another. Names every offending include. Run by CTest (no_rung_includes_another).
#
# Usage: scripts/check_rung_includes.sh [STAGES_DIR]   (default: the repository's stages/)
set -euo pipefail
stages=${1:-$(cd "$(dirname "$0")/.." && pwd)/stages}
if [ ! -d "$stages" ]; then
  echo "FAIL: no stages folder $stages" >&2
  exit 1
fi
# An include of NN_*/..., also through ../ or a subfolder: "01_x/a.cuh", "../02_y/b.cuh", <03_z/c.h>.
pattern='^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^">]*/)?[0-9][0-9]_[^/">]*/'
scan() {
  find "$1" -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \
       -o -name '*.inl' \) -print0 | sort -z | xargs -0 -r grep -n -H -E "$pattern" || true
}
# First make sure the pattern still catches what it is for, so that this check can fail.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
mkdir -p "$probe/07_probe"
printf '#include "lib/fine.cuh"\n  #  include "../01_a/x.cuh"\n#include <02_b/y.hpp>\n' >"$probe/07_probe/p.cu"
if [ "$(scan "$probe" | wc -l)" != 2 ]; then
  echo "FAIL: the include pattern of $0 no longer flags a known cross-stage include; fix the script" >&2
  exit 1
fi
hits=$(scan "$stages")
if [ -n "$hits" ]; then
  echo "FAIL: these files include another stage's folder; move the shared code to stages/lib/ and" \
       "include it as \"lib/<file>\":"
  echo "$hits"
  exit 1
fi
echo "PASS: no file under $stages includes a stage folder (shared code comes from stages/lib/)"
