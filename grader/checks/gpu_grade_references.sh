#!/usr/bin/env bash
# The instructor's command on a GPU: `scripts/assignment.py grade`, official (a secret made here),
# on this tree's own solutions, one rung per grading, every rung expected at full marks. Gradings
# run in LANES lanes side by side (each lane with a work folder of its own, reused rung after rung,
# so the ladder libraries build once per lane); every program run still holds the GPU alone
# (runs.gpu_turn), so lanes overlap one grading's build with another's GPU runs. Each rung's
# report and log go to $OUT/ref-RUNG.{report.txt,log} (its full results stay in WORK/out-RUNG/) as
# soon as it ends, and one line per rung to $OUT/summary.txt, so a call cut short keeps what
# finished.
# Usage: OUT=DIR bash grader/checks/gpu_grade_references.sh RUNGS [ARCH]
#   RUNGS: comma-separated (05,06,p38-01); ARCH: CUDA architectures (default 90)
#   LANES (default 3), JOBS per lane (default nproc/LANES), ISOLATION (default auto), WORK,
#   GRADE_ARGS (more options of grade, e.g. --skip-gpu for a dry run without a GPU),
#   AS_USER (run by root: grade as this ordinary user instead, created if missing, from a copy of
#   this tree that the user owns; OUT must be a path the user may create)
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ -n "${AS_USER:-}" ] && [ "$(id -u)" = 0 ]; then
  id "$AS_USER" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$AS_USER"
  copy=$(mktemp -d /tmp/gpu-grade-references-tree.XXXXXX) && chmod 755 "$copy"
  tar --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$copy"
  [ -x build-tools/bwrap ] && mkdir -p "$copy/build-tools" && cp build-tools/bwrap "$copy/build-tools/"
  mkdir -p "$OUT" && chown -R "$AS_USER" "$copy" "$OUT"
  exec su "$AS_USER" -c "$(printf 'export PATH=%q OUT=%q LANES=%q JOBS=%q ISOLATION=%q GRADE_ARGS=%q; bash %q/grader/checks/gpu_grade_references.sh %q %q' \
    "$PATH" "$OUT" "${LANES:-3}" "${JOBS:-}" "${ISOLATION:-auto}" "${GRADE_ARGS:-}" "$copy" "$1" "${2:-90}")"
fi
OUT=${OUT:-build-gpu-references}
RUNGS=${1:?usage: OUT=DIR $0 RUNGS [ARCH]}
ARCH=${2:-90}
LANES=${LANES:-3}
JOBS=${JOBS:-$(( $(nproc) / LANES > 0 ? $(nproc) / LANES : 1 ))}
ISOLATION=${ISOLATION:-auto}
WORK=${WORK:-${TMPDIR:-/tmp}/gpu-grade-references-$(id -u)}
mkdir -p "$OUT" "$WORK" && chmod 755 "$WORK"
[ -x build-tools/bwrap ] && [ -z "${LADDER_BWRAP:-}" ] && export LADDER_BWRAP=$PWD/build-tools/bwrap
secret="$WORK/secret" && [ -s "$secret" ] || { printf 'references-%s\n' "$RANDOM$RANDOM$RANDOM" > "$secret"; chmod 600 "$secret"; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1; id
  echo "bwrap: ${LADDER_BWRAP:-$(command -v bwrap)}; lanes: $LANES x $JOBS jobs; isolation: $ISOLATION"
} | tee "$OUT/machine.txt"

grade_lane() {  # $1: lane number; $2...: its rungs, graded one after another
  local lane=$1 r t0 status
  shift
  for r in "$@"; do
    t0=$SECONDS
    python3 scripts/assignment.py grade --rungs "$r" --secret-file "$secret" --isolation "$ISOLATION" \
      --cuda-architectures "$ARCH" --jobs "$JOBS" --work "$WORK/lane-$lane" --reuse-work \
      --out "$WORK/out-$r" ${GRADE_ARGS:-} > "$OUT/ref-$r.log" 2>&1
    status=$?
    cp "$WORK/out-$r/report.txt" "$OUT/ref-$r.report.txt" 2>/dev/null
    python3 - "$WORK/out-$r/instructor.json" "$r" "$status" "$((SECONDS - t0))" <<'EOF' >> "$OUT/summary.txt"
import json, sys
path, rung, status, seconds = sys.argv[1:]
try:
    parts = json.load(open(path))["parts"]
except (OSError, ValueError, KeyError) as e:
    print(f"[FAIL] rung {rung}: no instructor.json (exit {status}: {e}) in {seconds} s", flush=True)
    sys.exit()
ran = [p for p in parts if not p["skipped"]]  # a dry run (--skip-gpu) skips the GPU's parts
got, most = sum(p["score"] for p in ran), sum(p["max_score"] for p in ran)
lost = "; ".join(f"{p['name']} {p['score']:g}/{p['max_score']:g}" for p in ran if p["score"] < p["max_score"])
skipped = f", {len(parts) - len(ran)} part(s) skipped" if len(ran) < len(parts) else ""
print(f"[{'PASS' if got == most else 'FAIL'}] rung {rung}: {got:g} / {most:g}"
      f"{' (lost: ' + lost + ')' if lost else ''}{skipped} in {seconds} s", flush=True)
EOF
    tail -1 "$OUT/summary.txt"
  done
}

IFS=, read -ra all <<< "$RUNGS"
pids=()
for ((lane = 0; lane < LANES; lane++)); do
  mine=()
  for ((i = lane; i < ${#all[@]}; i += LANES)); do mine+=("${all[i]}"); done
  [ ${#mine[@]} -gt 0 ] && { grade_lane "$lane" "${mine[@]}" & pids+=($!); }
done
for p in "${pids[@]}"; do wait "$p"; done
! grep -q '^\[FAIL\]' "$OUT/summary.txt"
