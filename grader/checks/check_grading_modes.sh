#!/usr/bin/env bash
# Official grading through the command an instructor types, `scripts/assignment.py grade`, in
# every isolation a class meets, on a machine without a GPU (--skip-gpu: the build, technique
# and integrity): as root with bubblewrap, as root without it (--isolation user: setpriv to an
# unprivileged uid, as in a Docker or Gradescope container that refuses namespaces), as an
# ordinary user with bubblewrap, and as an ordinary user without it (official grading must
# refuse with one line; practice grading runs and says it is not isolated). Each mode grades
# rung 03's reference, which must lose no point, and two fixtures, which must lose what their
# `loses:` line says. Needs root (it creates the ordinary user); CI runs it.
# Usage: grader/checks/check_grading_modes.sh [WORK]   (LADDER_CUDA_ARCHS: default 75)
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
[ "$(id -u)" -eq 0 ] || { echo "error: $0 needs root (it grades as root and creates an ordinary user)" >&2; exit 2; }
base=${1:-/tmp/ladder-grading-modes}
archs=${LADDER_CUDA_ARCHS:-75}
rung=03
fixtures="previous_rung cub_device_reduce"  # loses technique; loses integrity (rule 1)
user=ladder-grader-ci
rm -rf "$base" && mkdir -p "$base" && chmod 755 "$base"
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"

# The ordinary user's instructor tree: a copy of the tracked files (the root modes make this
# tree owner-only, as official grading without bwrap does).
mkdir -p "$base/user" && git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$base/user" --one-top-level=repo
chown -R "$user" "$base/user"

# Submissions: the reference (the tree itself) and each fixture applied to its declared files.
make_submissions() {  # $1: instructor tree, $2: folder
  python3 - "$1" "$2" "$rung" $fixtures <<'EOF'
import os, sys
root, out, rung, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
sys.path.insert(0, root)
from grader import handout, selftest
_ship, _stubbed, declared = handout.plan(root, [rung])
for name in names:
    fx = selftest.parse_fixture(os.path.join(root, "grader", "fixtures", rung, name + ".fixture"))
    selftest.apply_fixture(root, fx, declared[rung], os.path.join(out, name))
EOF
}
make_submissions "$repo" "$base/root-submissions"
make_submissions "$base/user/repo" "$base/user/submissions" && chown -R "$user" "$base/user"
printf 'ci-secret-%s\n' "$RANDOM$RANDOM" > "$base/secret" && chmod 600 "$base/secret"
cp "$base/secret" "$base/user/secret" && chown "$user" "$base/user/secret" && chmod 600 "$base/user/secret"

# cuobjdump and nvdisasm may come from root's Python packages (scripts/install_deps.sh): the
# ordinary user gets copies.
mkdir -p "$base/tools"
tool=$(bash -c 'eval "$(sed -n "/^find_cuobjdump() {/,/^}/p" scripts/check_sass.sh)" && find_cuobjdump | head -n 1')
[ -n "$tool" ] || { echo "error: cuobjdump not found (scripts/install_deps.sh installs it)" >&2; exit 2; }
cp "$tool" "$base/tools/" && { cp "$(dirname "$tool")/nvdisasm" "$base/tools/" 2>/dev/null || true; }
chmod -R a+rx "$base/tools"
as_user() {  # runs a command line as the ordinary user, with this PATH (nvcc) and the copied tools
  su "$user" -c "export PATH=$(printf '%q' "$base/tools:$PATH"); cd /tmp && $1"
}
failures=0
check() {  # $1: mode label, $2: submission name, $3: what it must lose, $4: out folder
  python3 - "$@" <<'EOF' || failures=$((failures + 1))
import json, sys
label, name, loses, out = sys.argv[1:5]
with open(f"{out}/instructor.json") as f:
    parts = json.load(f)["parts"]
with open(f"{out}/results.json") as f:
    iso = [l for l in json.load(f)["output"].splitlines() if l.startswith("isolation:")]
lost = [p["name"] for p in parts if not p["skipped"] and p["score"] < p["max_score"]]
ran = [p["name"] for p in parts if not p["skipped"]]
tech = [p for p in parts if p["name"].endswith("technique (machine code) and integrity")]
if loses == "nothing":
    ok = not lost and ran
elif loses == "integrity":
    ok = any("FAIL: integrity" in p["output"] or p["output"].startswith("FAIL") for p in tech) and \
        all(p["score"] < p["max_score"] for p in tech)
else:
    ok = all(p["score"] < p["max_score"] for p in tech)
print(f"[{'PASS' if ok else 'FAIL'}] {label}: {name} (must lose {loses}): lost {', '.join(lost) or 'nothing'}; "
      f"{iso[0] if iso else 'no isolation line'}")
sys.exit(0 if ok else 1)
EOF
}
grade() {  # $1: label, $2: isolation, $3: as (root or user), then the submissions' folder and tree
  local label=$1 isolation=$2 as=$3 subs=$4 tree=$5 secret=$6 work=$7
  for name in reference $fixtures; do
    local sub=$subs/$name loses
    [ "$name" = reference ] && sub=$tree && loses=nothing
    [ "$name" = previous_rung ] && loses=technique
    [ "$name" = cub_device_reduce ] && loses=integrity
    local cmd=(python3 "$tree/scripts/assignment.py" grade --rungs "$rung" --submission "$sub" --secret-file "$secret"
               --skip-gpu --isolation "$isolation" --cuda-architectures "$archs" --jobs "${LADDER_JOBS:-2}"
               --work "$work" --out "$work/out-$name" --reuse-work)
    local t0=$SECONDS
    if [ "$as" = root ]; then "${cmd[@]}" > "$work.$name.log" 2>&1 || true
    else as_user "$(printf '%q ' "${cmd[@]}")" > "$work.$name.log" 2>&1 || true; fi
    if [ ! -f "$work/out-$name/instructor.json" ]; then
      echo "[FAIL] $label: $name: no report ($((SECONDS - t0)) s); the log ends:"; tail -5 "$work.$name.log"
      failures=$((failures + 1)); continue
    fi
    check "$label" "$name" "$loses" "$work/out-$name"
    echo "    ($((SECONDS - t0)) s)"
  done
}

echo "== as an ordinary user ($user)"
grade "user, bwrap" bwrap user "$base/user/submissions" "$base/user/repo" "$base/user/secret" "$base/user/work-bwrap"
out=$(as_user "python3 $base/user/repo/scripts/assignment.py grade --rungs $rung --secret-file $base/user/secret \
  --skip-gpu --isolation none --work $base/user/work-none" 2>&1) && rc=0 || rc=$?
if [ "$rc" = 3 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ $out == *"official grading needs isolation"* ]]; then
  echo "[PASS] user, no isolation, official: refused in one line (exit 3): $out"
else
  echo "[FAIL] user, no isolation, official: exit $rc: $out"; failures=$((failures + 1))
fi
as_user "python3 $base/user/repo/scripts/assignment.py grade --rungs $rung --skip-gpu --isolation none \
  --cuda-architectures $archs --jobs ${LADDER_JOBS:-2} --work $base/user/work-practice" > "$base/user/practice.log" 2>&1 || true
if grep -q "^isolation: NONE" "$base/user/work-practice/report.txt" 2>/dev/null &&
   grep -q "\[PASS\] technique" "$base/user/work-practice/report.txt"; then
  echo "[PASS] user, no isolation, practice: graded, and the report says it was not isolated"
else
  echo "[FAIL] user, no isolation, practice:"; tail -5 "$base/user/practice.log"; failures=$((failures + 1))
fi

echo "== as root"
grade "root, bwrap" bwrap root "$base/root-submissions" "$repo" "$base/secret" "$base/root-bwrap"
grade "root, no bwrap (setpriv)" user root "$base/root-submissions" "$repo" "$base/secret" "$base/root-user"

echo "grading modes: $failures failure(s)"
[ "$failures" -eq 0 ]
