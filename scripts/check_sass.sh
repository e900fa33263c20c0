#!/usr/bin/env bash
# Checks, without a GPU, that each stage's machine code shows the stage's idea: disassembles
# the stage objects of a build (BUILD/CMakeFiles/stage_NN.dir/**/*.o) with `cuobjdump -sass`
# and asserts, for the stages listed in BUILD/stages.tsv (written by cmake/Stages.cmake),
#   atomics:         global atomics (RED/REDG/ATOM/ATOMG ... ADD) in its pool kernel
#   shared_tree:     barriers (BAR.SYNC), shared-memory loads (LDS) and stores (STS) in its
#                    pool kernel
#   warp_shuffle:    warp shuffles (SHFL) in its pool kernel and in its log-sum-exp epilogue
#   vectorized_loads: 128-bit global loads (LDG.E...128) and warp shuffles in its pool kernel
#   fused_gather:    warp shuffles in its conv+pool kernel and its epilogue
#   shared_memory_tiling: barriers, shared-memory loads and stores in its tiled kernel
#   register_tiling: 128-bit shared-memory loads, and an unrolled inner loop of FFMAs: some 128
#                    consecutive instructions of its tiled kernel are at least 75% FFMA
#   async_copy:      LDGSTS and its copy-group waits, and the same FFMA share
#   tensor_cores, three_tf32: TF32 mma (HMMA.1688.F32.TF32) and LDGSTS in the tiled kernel, and
#                    an inner loop where some 64 consecutive instructions are at least 40% HMMA
#   pool_before_conv: 128-bit loads and warp shuffles in its plane-sum kernel
#   single_launch:   an atomic arrival counter, a fence and 128-bit loads in its one kernel
#   every GPU stage: no local memory (LDL/STL) in any kernel: no spills, no stack arrays, in
#                    the sm_90 code (LADDER_SASS_STRICT_ARCH), where the register budgets are
#                    tuned; other architectures' local memory is printed as NOTE lines.
# A build for several architectures is checked as a whole: each idea must show in the code of
# at least one of them.
# The expectations are keyed by stage name (the folder name without its number), so renumbering
# keeps them. Every GPU stage must have an entry in stage_idea below (an empty one when the
# common check is all): a GPU stage without one fails, so a new stage cannot pass unchecked.
# A stage's pool kernels are the kernels whose names contain "pool", its epilogue kernels
# those whose names contain "logsumexp".
# Prints one PASS/FAIL line per check and exits non-zero if any check fails.
#
# Usage: scripts/check_sass.sh [--check] [BUILD_DIR]   (default: build)
#   --check  only verify that every stage of the list has an entry here (no cuobjdump needed)
# LADDER_SASS_STAGES="03 04" (or 03,04) checks only those stages (the autograder's technique check).
# cuobjdump is looked up as $CUOBJDUMP, on PATH, in $CUDA_HOME/bin and /usr/local/cuda/bin,
# and in Python's site-packages (pip's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels).
# cuobjdump needs nvdisasm beside it or on PATH.
set -euo pipefail

check_only=
if [ "${1:-}" = "--check" ]; then
  check_only=1
  shift
fi
build=${1:-build}
list="$build/stages.tsv"
if [ ! -f "$list" ]; then
  echo "FAIL: no stage list $list: configure the build with CMake first (cmake/Stages.cmake writes it)" >&2
  exit 1
fi

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The opcode is the first word after an optional predicate (@P0, @!PT, ...).
op='^(@!?U?P[0-9T]+[[:space:]]+)?'

# stage_idea ID NAME: the checks of stage NAME's idea (expect calls); returns 3 when NAME has
# no entry here.
stage_idea() {
  local id=$1
  case $2 in
    per_thread_loop) ;;   # the first port: the common check only
    atomics)
      expect "$id" pool "global atomics" "${op}(RED|REDG|ATOM|ATOMG)\\.[A-Z0-9_.]*ADD" ;;
    shared_tree)
      expect "$id" pool "barriers" "${op}BAR\\.SYNC"
      expect "$id" pool "shared-memory loads" "${op}LDS([.[:space:]]|$)"
      expect "$id" pool "shared-memory stores" "${op}STS([.[:space:]]|$)" ;;
    warp_shuffle)
      expect "$id" pool "warp shuffles" "${op}SHFL\\."
      expect "$id" logsumexp "warp shuffles" "${op}SHFL\\." ;;
    vectorized_loads)
      expect "$id" pool "128-bit global loads" "${op}LDG\\.E(\\.[A-Z0-9_]+)*\\.128([.[:space:]]|$)"
      expect "$id" pool "warp shuffles" "${op}SHFL\\." ;;
    fused_gather)
      expect "$id" conv_pool_gather "warp shuffles (the on-chip block sum)" "${op}SHFL\\."
      expect "$id" logsumexp "warp shuffles" "${op}SHFL\\." ;;
    shared_memory_tiling)  # the tiled kernel by name: the general fallback has LDS/BAR as well
      expect "$id" smem_tile "barriers" "${op}BAR\\.SYNC"
      expect "$id" smem_tile "shared-memory loads" "${op}LDS([.[:space:]]|$)"
      expect "$id" smem_tile "shared-memory stores" "${op}STS([.[:space:]]|$)" ;;
    register_tiling)
      expect "$id" register_tile "128-bit shared-memory loads" "${op}LDS(\\.[A-Z0-9_]+)*\\.128([.[:space:]]|$)"
      expect_dense "$id" register_tile "FFMAs" "${op}FFMA([.[:space:]]|$)" 128 75 ;;
    async_copy)  # cp.async is sm_80's: a build with sm_75 code only cannot show it
      if [ -z "$check_only" ] && ! grep -Eq 'arch = sm_(8[0-9]|9[0-9]|[1-9][0-9]{2})' "$tmp/$id.sass"; then
        fail "stage $id: this build has no sm_80 or newer code, and cp.async (LDGSTS) needs sm_80;" \
             "build for one such architecture too, e.g. -DCMAKE_CUDA_ARCHITECTURES=\"75;80\""
      fi
      expect "$id" async_copy "asynchronous global-to-shared copies" "${op}LDGSTS([.[:space:]]|$)"
      expect "$id" async_copy "waits on copy groups" "${op}(LDGDEPBAR|DEPBAR)([.[:space:]]|$)"
      expect_dense "$id" async_copy "FFMAs" "${op}FFMA([.[:space:]]|$)" 128 75 ;;
    tensor_cores | three_tf32)  # TF32 mma is sm_80's: a build with sm_75 code only cannot show it
      if [ -z "$check_only" ] && ! grep -Eq 'arch = sm_(8[0-9]|9[0-9]|[1-9][0-9]{2})' "$tmp/$id.sass"; then
        fail "stage $id: this build has no sm_80 or newer code, and TF32 mma (HMMA) needs sm_80;" \
             "build for one such architecture too, e.g. -DCMAKE_CUDA_ARCHITECTURES=\"75;80\""
      fi
      expect "$id" tensor_cores "TF32 tensor-core mma (HMMA.1688.F32.TF32)" "${op}HMMA\\.1688\\.F32\\.TF32([.[:space:]]|$)"
      expect "$id" tensor_cores "asynchronous global-to-shared copies" "${op}LDGSTS([.[:space:]]|$)"
      expect_dense "$id" tensor_cores "HMMAs" "${op}HMMA\\." 64 40 ;;
    pool_before_conv)
      expect "$id" plane_chunk_sums "128-bit global loads" "${op}LDG\\.E(\\.[A-Z0-9_]+)*\\.128([.[:space:]]|$)"
      expect "$id" plane_chunk_sums "warp shuffles" "${op}SHFL\\." ;;
    single_launch)
      expect "$id" pool_before_conv_fused "an arrival counter (global atomic add)" "${op}(RED|REDG|ATOM|ATOMG)\\.[A-Z0-9_.]*ADD"
      expect "$id" pool_before_conv_fused "a memory fence" "${op}(MEMBAR|FENCE)"
      expect "$id" pool_before_conv_fused "128-bit global loads" "${op}LDG\\.E(\\.[A-Z0-9_]+)*\\.128([.[:space:]]|$)" ;;
    *) return 3 ;;
  esac
}
no_entry() {
  fail "stage $1 $2: no SASS expectation in scripts/check_sass.sh (stage_idea); add an entry," \
       "an empty one if the common check is all"
}

# The stages of this build, from its list (columns: id, folder, name, kind, ...).
ids=() names=() kinds=()
while IFS=$'\t' read -r id _folder name kind _rest; do
  case $id in '' | '#'*) continue ;; esac
  ids+=("$id") names+=("$name") kinds+=("$kind")
done <"$list"
if [ ${#ids[@]} -eq 0 ]; then
  echo "FAIL: $list lists no stages" >&2
  exit 1
fi

if [ -n "$check_only" ]; then
  expect() { :; }
  expect_dense() { :; }
  for i in "${!ids[@]}"; do
    [ "${kinds[$i]}" = gpu ] || continue
    rc=0
    stage_idea "${ids[$i]}" "${names[$i]}" || rc=$?
    if [ "$rc" = 3 ]; then
      no_entry "${ids[$i]}" "${names[$i]}"
    else
      pass "stage ${ids[$i]} ${names[$i]} has a SASS expectation entry"
    fi
  done
  if [ "$failures" -gt 0 ]; then
    echo "check_sass --check: $failures stage(s) without an entry"
    exit 1
  fi
  echo "check_sass --check: every GPU stage has an entry"
  exit 0
fi

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

# Disassembles stage NN into $tmp/NN.sass; returns 1 when the stage has no object with device
# code, 2 when it has no objects at all.
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

# densest SASS_FILE REGEX KERNEL WINDOW: prints "best window" where best is the largest number of
# instructions matching REGEX among WINDOW consecutive (non-NOP) instructions of one kernel whose
# mangled name contains KERNEL (0 0 when there is no such kernel).
densest() {
  SASS_RE="$2" SASS_KERNEL="$3" SASS_WINDOW="$4" awk '
    BEGIN { re = ENVIRON["SASS_RE"]; kernel = ENVIRON["SASS_KERNEL"]; w = ENVIRON["SASS_WINDOW"] + 0
            best = 0; seen = 0 }
    /Function : / { in_kernel = index($NF, kernel) > 0; n = 0; hits = 0; if (in_kernel) seen = 1 }
    in_kernel && /^[[:space:]]+\/\*[0-9a-f]+\*\// {
      line = $0
      sub(/^[[:space:]]+\/\*[0-9a-f]+\*\/[[:space:]]+/, "", line)
      sub(/[[:space:]]*;.*$/, "", line)
      if (line ~ /^(@!?U?P[0-9T]+[[:space:]]+)?NOP/) next
      m = (line ~ re) ? 1 : 0
      hit[n % w] = m; hits += m; n++
      if (n > w) hits -= old
      old = hit[n % w]   # the entry that leaves the window at the next instruction
      if (n >= w && hits > best) best = hits
    }
    END { print best, (seen ? w : 0) }' "$1"
}

# expect_dense ID KERNEL WHAT REGEX WINDOW MIN_PERCENT: some WINDOW consecutive instructions of a
# kernel of stage ID named *KERNEL* are at least MIN_PERCENT matches of REGEX: the unrolled inner
# loop's instruction mix (the FFMA share of a register-tiled loop), read from the code.
expect_dense() {
  local id=$1 kernel=$2 what=$3 re=$4 window=$5 min=$6 best w
  read -r best w < <(densest "$tmp/$id.sass" "$re" "$kernel" "$window")
  if [ "$w" -eq 0 ]; then
    fail "stage $id has no kernel named *$kernel*"
  elif [ $((100 * best)) -ge $((min * w)) ]; then
    pass "stage $id: $what are $((100 * best / w))% (>= $min%) of the densest $w consecutive instructions of its $kernel kernels"
  else
    fail "stage $id: $what are at most $((100 * best / w))% (< $min%) of any $w consecutive instructions of its $kernel kernels"
  fi
}

# Every stage of the list: a GPU stage's kernels use no local memory and show its idea.
strict_arch=${LADDER_SASS_STRICT_ARCH:-sm_90}
only=" ${LADDER_SASS_STAGES:-} "
only=${only//,/ }
for i in "${!ids[@]}"; do
  id=${ids[$i]} name=${names[$i]}
  if [ -n "${LADDER_SASS_STAGES:-}" ] && [[ "$only" != *" $id "* ]]; then continue; fi
  if [ "${kinds[$i]}" != gpu ]; then
    echo "SKIP: stage $id $name is a CPU stage: no GPU machine code to check"
    continue
  fi
  rc=0
  disassemble "$id" || rc=$?
  if [ "$rc" = 2 ]; then
    fail "stage $id $name: no objects under $build/CMakeFiles/stage_$id.dir (not built?)"
    continue
  fi
  if [ "$rc" = 1 ]; then
    fail "stage $id $name: a GPU stage with no device code in its objects (built without sm_XX code?)"
    continue
  fi
  # The register budgets are tuned on sm_90, where the chapters' numbers come from: local memory
  # fails there; other architectures' spills are reported, with their size, as notes.
  archs=$(awk '/^arch = sm_/ { print $3 }' "$tmp/$id.sass" | sort -u | tr '\n' ' ')
  for arch in $archs; do
    awk -v a="$arch" '/^arch = / { keep = ($3 == a) } keep' "$tmp/$id.sass" >"$tmp/$id.$arch.sass"
    spills=$(grep -cE "^[[:space:]]+/\*[0-9a-f]+\*/[[:space:]]+${op#^}(LDL|STL)([.[:space:]]|$)" "$tmp/$id.$arch.sass" || true)
    if [ "$arch" = "$strict_arch" ]; then
      if where=$(first_match "$tmp/$id.$arch.sass" "${op}(LDL|STL)([.[:space:]]|$)" ""); then
        fail "stage $id uses local memory on $arch: $where"
      else
        pass "stage $id kernels use no local memory on $arch (no LDL/STL)"
      fi
    elif [ "$spills" -gt 0 ]; then
      echo "NOTE: stage $id has $spills local-memory instructions (LDL/STL) on $arch, tuned for $strict_arch"
    fi
  done
  if [[ " $archs " != *" $strict_arch "* ]]; then
    echo "NOTE: stage $id: no $strict_arch code in this build, so local memory is reported, not checked"
  fi
  rc=0
  stage_idea "$id" "$name" || rc=$?
  if [ "$rc" = 3 ]; then no_entry "$id" "$name"; fi
done

if [ "$failures" -gt 0 ]; then
  echo "check_sass: $failures check(s) failed"
  exit 1
fi
echo "check_sass: all checks passed"
