#!/usr/bin/env bash
# Tries drafts as stages, in a copy of this tree (the checkout itself is never changed): each
# drafts/NN_name/ goes to stages/NN_name/ (its lib/ headers to stages/lib/), its draft markers
# become the solution markers, and the copy is built with warnings as errors. Then, for each
# draft: its SASS rules (scripts/check_sass.sh on its object), and on a GPU the exact-input run
# against the fp64 oracle and the stage before it, its GPU tests, and one timed ladder run of the
# stages before it and the drafts. Without a GPU only the draft stages are built and SASS-checked.
# A step's log goes to $OUT/NAME.txt as it ends, one line per step to $OUT/steps.txt.
#
# Usage: OUT=DIR bash drafts/try_on_gpu.sh DRAFTS [COMPARE]
#   DRAFTS   comma-separated draft folders (18_three_tf32_warp_specialized) or their numbers (18)
#   COMPARE  comma-separated stages timed with them (default: the highest stage in stages/ below
#            the lowest draft, the one the drafts build on)
#   ARCH (default 90), JOBS (default nproc), KEEP=1 keeps the copy (printed)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
OUT=${OUT:-$root/device-out/drafts}
drafts_arg=${1:?usage: OUT=DIR bash drafts/try_on_gpu.sh DRAFTS [COMPARE]}
ARCH=${ARCH:-90}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT" && : > "$OUT/steps.txt"
failed=0
step() {  # step NAME CMD...: runs CMD in the copy, its output to $OUT/NAME.txt
  local name=$1; shift
  local t0=$SECONDS
  (cd "$copy" && "$@") > "$OUT/$name.txt" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || failed=1
  echo "$name: rc $rc, $((SECONDS - t0)) s" | tee -a "$OUT/steps.txt"
}

# The drafts, by folder; their stage numbers.
folders=() ids=()
for d in ${drafts_arg//,/ }; do
  match=("$root"/drafts/"$d"*/)
  [ -d "${match[0]}" ] || { echo "error: no draft folder drafts/$d*" >&2; exit 2; }
  [ ${#match[@]} -eq 1 ] || { echo "error: drafts/$d* names ${#match[@]} folders" >&2; exit 2; }
  name=$(basename "${match[0]}")
  [[ $name =~ ^[0-9][0-9]_ ]] || { echo "error: drafts/$name: a draft folder is NN_name" >&2; exit 2; }
  [ -e "$root/stages/$name" ] && { echo "error: stages/$name exists: that draft has been promoted" >&2; exit 2; }
  folders+=("$name") ids+=("${name:0:2}")
done
compare=${2:-}
if [ -z "$compare" ]; then  # the highest stage below the lowest draft: the one the drafts build on
  lowest=$(printf '%s\n' "${ids[@]}" | sort | head -1)
  for ((n = 10#$lowest - 1; n >= 0; n--)); do
    id=$(printf '%02d' "$n")
    if compgen -G "$root/stages/${id}_*" > /dev/null; then compare=$id; break; fi
  done
fi

copy=$(mktemp -d "${TMPDIR:-/tmp}/try-drafts.XXXXXX")
[ -n "${KEEP:-}" ] && echo "the copy: $copy" || trap 'rm -rf "$copy"' EXIT
tar -C "$root" --exclude='./build*' --exclude=./.git --exclude=./device-out -cf - . | tar -xf - -C "$copy"
for name in "${folders[@]}"; do
  mkdir -p "$copy/stages/$name"
  cp "$copy/drafts/$name"/*.cu "$copy/drafts/$name/rung.json" "$copy/stages/$name/"
  if [ -d "$copy/drafts/$name/lib" ]; then cp "$copy/drafts/$name/lib"/* "$copy/stages/lib/"; fi
  sed -i 's#// draft solution region: begin#// BEGIN SOLUTION#; s#// draft solution region: end#// END SOLUTION#; s#// draft stub:#// STUB:#' \
    "$copy/stages/$name"/*.cu
done

gpu=
if command -v nvidia-smi >/dev/null && nvidia-smi -L > "$OUT/gpu.txt" 2>&1; then gpu=1
else echo "no GPU (nvidia-smi missing or failing)" > "$OUT/gpu.txt"; fi
{ cat "$OUT/gpu.txt"; echo "drafts: ${folders[*]}; timed with: $compare; arch: $ARCH"; } | tee "$OUT/machine.txt"
build=build-drafts
step configure cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DLADDER_WERROR=ON -DLADDER_LINEINFO=ON
targets=()
for id in "${ids[@]}"; do targets+=("stage_$id"); done
[ -n "$gpu" ] && targets+=(ladder gpu_tests)
step build cmake --build "$build" -j "$JOBS" --target "${targets[@]}"
step sass env LADDER_SASS_STAGES="${ids[*]}" bash scripts/check_sass.sh "$build"
if [ -n "$gpu" ]; then
  ladder_ids=$(printf '%s\n' ${compare//,/ } "${ids[@]}" | sort -u | paste -sd,)
  filter=$(printf '*stage_%s_*:' "${ids[@]}")
  step exact "$build/ladder" --stages "$ladder_ids" --distribution exact --reps 2 --no-cub
  step gpu_tests "$build/tests/gpu_tests" --gtest_filter="${filter%:}"
  step ladder "$build/ladder" --stages "$ladder_ids" --reps 5 --no-cub
else
  echo "no GPU: the drafts were built and SASS-checked only" | tee -a "$OUT/steps.txt"
fi
exit $failed
