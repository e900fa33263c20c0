#!/usr/bin/env bash
# Checks, without a GPU, that each stage's machine code shows the stage's idea: disassembles
# the stage objects of a build (BUILD/CMakeFiles/stage_NN.dir/**/*.o) with `cuobjdump -sass`
# and asserts
#   02 atomics:      global atomics (RED/REDG/ATOM/ATOMG ... ADD) in its pool kernel
#   03 shared_tree:  barriers (BAR.SYNC), shared-memory loads (LDS) and stores (STS) in its
#                    pool kernel
#   04 warp_shuffle: warp shuffles (SHFL) and 128-bit global loads (LDG.E...128) in its pool
#                    kernel, warp shuffles in its log-sum-exp epilogue
#   every stage:     no local memory (LDL/STL) in any kernel: no spills, no stack arrays.
# A stage's pool kernels are the kernels whose names contain "pool", its epilogue kernels
# those whose names contain "logsumexp".
# Prints one PASS/FAIL line per check and exits non-zero if any check fails.
#
# Usage: scripts/check_sass.sh [BUILD_DIR]   (default: build)
# cuobjdump is looked up as $CUOBJDUMP, on PATH, in $CUDA_HOME/bin and /usr/local/cuda/bin,
# and in Python's site-packages (pip's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels).
# cuobjdump needs nvdisasm beside it or on PATH.
set -euo pipefail

build=${1:-build}
if [ ! -d "$build/CMakeFiles" ]; then
  echo "FAIL: $build is not a CMake build directory (no $build/CMakeFiles); build first" >&2
  exit 1
fi

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
# nvdisasm usually sits beside cuobjdump; cuobjdump finds it on PATH.
export PATH="$(dirname "$cuobjdump_bin"):$PATH"
echo "using $cuobjdump_bin"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Disassembles stage NN into $tmp/NN.sass; returns 1 when the stage has no object with device
# code (a CPU stage), 2 when it has no objects at all.
disassemble() {
  local id=$1 out="$tmp/$1.sass" obj found=0
  : >"$out"
  while IFS= read -r obj; do
    found=1
    # Host-only objects make cuobjdump exit non-zero ("does not contain device code").
    "$cuobjdump_bin" -sass "$obj" >>"$out" 2>/dev/null || true
  done < <(find "$build/CMakeFiles/stage_$id.dir" -name '*.o' 2>/dev/null | sort)
  [ "$found" = 1 ] || return 2
  grep -q 'Function :' "$out" || return 1
}

# first_match SASS_FILE REGEX [KERNEL]: prints "instruction  [in kernel]" for the first
# instruction matching REGEX (in a kernel whose mangled name contains KERNEL, if given), or
# nothing. Kernel names are demangled where c++filt exists.
first_match() {
  local hit
  # The regex goes through the environment: awk -v would turn its backslashes into escapes.
  hit=$(SASS_RE="$2" SASS_KERNEL="${3:-}" awk '
    BEGIN { re = ENVIRON["SASS_RE"]; kernel = ENVIRON["SASS_KERNEL"] }
    /Function : / { fn = $NF; in_kernel = index(fn, kernel) > 0 }
    in_kernel && /^[[:space:]]+\/\*[0-9a-f]+\*\// {
      line = $0
      sub(/^[[:space:]]+\/\*[0-9a-f]+\*\/[[:space:]]+/, "", line)
      sub(/[[:space:]]*;.*$/, "", line)
      if (line ~ re) { print line "\t" fn; exit }
    }' "$1")
  [ -n "$hit" ] || return 1
  local insn=${hit%%$'\t'*} fn=${hit#*$'\t'}
  if command -v c++filt >/dev/null; then fn=$(echo "$fn" | c++filt); fi
  echo "$insn  [in $fn]"
}

# expect ID KERNEL WHAT REGEX: stage ID has an instruction matching REGEX in a kernel whose
# name contains KERNEL.
expect() {
  local id=$1 kernel=$2 what=$3 re=$4 where
  if where=$(first_match "$tmp/$id.sass" "$re" "$kernel"); then
    pass "stage $id has $what in its $kernel kernel: $where"
  else
    fail "stage $id has no $what in a kernel named *$kernel* (no instruction matches /$re/)"
  fi
}

# The opcode is the first word after an optional predicate (@P0, @!PT, ...).
op='^(@!?U?P[0-9T]+[[:space:]]+)?'

# Every stage of this build with device code: no local memory.
ids=()
for dir in "$build"/CMakeFiles/stage_[0-9][0-9].dir; do
  [ -d "$dir" ] && ids+=("$(basename "$dir" | cut -c7-8)")
done
if [ ${#ids[@]} -eq 0 ]; then
  echo "FAIL: no stage objects under $build/CMakeFiles (stage_NN.dir); build first" >&2
  exit 1
fi
for id in "${ids[@]}"; do
  rc=0
  disassemble "$id" || rc=$?
  if [ "$rc" = 2 ]; then
    fail "stage $id: no objects under $build/CMakeFiles/stage_$id.dir (not built?)"
    continue
  fi
  [ "$rc" = 1 ] && continue  # a CPU stage
  if where=$(first_match "$tmp/$id.sass" "${op}(LDL|STL)([.[:space:]]|$)" ""); then
    fail "stage $id uses local memory: $where"
  else
    pass "stage $id kernels use no local memory (no LDL/STL)"
  fi
done

# Each stage's idea, in its machine code.
check_stage() {
  local id=$1
  if [ ! -s "$tmp/$id.sass" ] || ! grep -q 'Function :' "$tmp/$id.sass"; then
    fail "stage $id: no SASS to check (stage missing or built without sm_XX code)"
    return 1
  fi
}
if check_stage 02; then
  expect 02 pool "global atomics" "${op}(RED|REDG|ATOM|ATOMG)\\.[A-Z0-9_.]*ADD"
fi
if check_stage 03; then
  expect 03 pool "barriers" "${op}BAR\\.SYNC"
  expect 03 pool "shared-memory loads" "${op}LDS([.[:space:]]|$)"
  expect 03 pool "shared-memory stores" "${op}STS([.[:space:]]|$)"
fi
if check_stage 04; then
  expect 04 pool "warp shuffles" "${op}SHFL\\."
  expect 04 pool "128-bit global loads" "${op}LDG\\.E(\\.[A-Z0-9_]+)*\\.128([.[:space:]]|$)"
  expect 04 logsumexp "warp shuffles" "${op}SHFL\\."
fi

if [ "$failures" -gt 0 ]; then
  echo "check_sass: $failures check(s) failed"
  exit 1
fi
echo "check_sass: all checks passed"
