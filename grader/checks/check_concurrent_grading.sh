#!/usr/bin/env bash
# Concurrent gradings cannot cost each other points (GPU needed): on one GPU, rung 03's reference
# is graded officially while a fixture that misbehaves is graded beside it, once beside
# 03/memory_hog (every run holds all but 256 MiB of the GPU's free memory for 1 s) and once
# beside 03/spinning_kernel (every run keeps every SM busy for 0.5 s). The reference must keep
# every point, performance included; the neighbours must keep their correctness points (they are
# correct, only rude). Usage: grader/checks/check_concurrent_grading.sh OUT [CUDA_ARCHS]  (default 90;
# NEIGHBOURS: a subset of "memory_hog spinning_kernel")
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: $0 OUT [CUDA_ARCHS]}
archs=${2:-90}
jobs=${LADDER_JOBS:-$(nproc)}
mkdir -p "$out" && chmod 755 "$out"
secret="$out/secret" && printf 'concurrent-%s\n' "$RANDOM$RANDOM" > "$secret" && chmod 600 "$secret"
python3 - "$out" <<'EOF'
import os, sys
sys.path.insert(0, os.getcwd())
from grader import handout, selftest
_ship, _stubbed, declared = handout.plan(os.getcwd(), ["03"])
for name in ("memory_hog", "spinning_kernel"):
    fx = selftest.parse_fixture(f"grader/fixtures/03/{name}.neighbour")
    selftest.apply_fixture(os.getcwd(), fx, declared["03"], os.path.join(sys.argv[1], name))
EOF
grade() {  # $1: label, $2: submission; writes $out/$1/
  python3 scripts/assignment.py grade --rungs 03 --submission "$2" --secret-file "$secret" \
    --cuda-architectures "$archs" --jobs "$jobs" --work "$out/work-$1" --out "$out/$1" > "$out/$1.log" 2>&1
}
score() {  # $1: label, $2: parts (a regex): "score / max" of those parts in instructor.json
  python3 - "$out/$1/instructor.json" "$2" <<'EOF'
import json, re, sys
parts = [p for p in json.load(open(sys.argv[1]))["parts"] if re.search(sys.argv[2], p["name"])]
print(f"{sum(p['score'] for p in parts):g} / {sum(p['max_score'] for p in parts):g}")
EOF
}
failures=0
for neighbour in ${NEIGHBOURS:-memory_hog spinning_kernel}; do
  t0=$SECONDS
  grade "beside-$neighbour" "$out/$neighbour" &
  pid=$!
  sleep 20  # the neighbour's build is ahead: its runs start first
  grade "reference-beside-$neighbour" "$PWD"
  wait $pid
  ref=$(score "reference-beside-$neighbour" '.') neigh=$(score "beside-$neighbour" 'public|hidden')
  verdict=PASS
  python3 - "$ref" <<'EOF' || verdict=FAIL
import sys
got, most = (float(x) for x in sys.argv[1].split(" / "))
sys.exit(0 if got == most else 1)
EOF
  [[ $neigh == "60 / 60" ]] || verdict=FAIL
  [ "$verdict" = PASS ] || failures=$((failures + 1))
  echo "[$verdict] reference of 03 graded beside $neighbour: $ref (the neighbour's correctness: $neigh) in $((SECONDS - t0)) s"
done
echo "concurrent gradings: $failures failure(s)"
[ "$failures" -eq 0 ]
