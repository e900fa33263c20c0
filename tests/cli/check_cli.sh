#!/usr/bin/env bash
# The programs' command lines, run without a GPU (every case stops before GPU work, or runs the
# CPU rung only on a tiny problem). A bad option exits 2 with one line naming the problem (CLI11's
# "Run with --help for more information." may follow it, as for every option error).
# Usage: check_cli.sh WORKDIR ladder=PATH [p38=PATH] [p74=PATH]
set -uo pipefail
work=$1
shift
declare -A prog=()
for a in "$@"; do prog[${a%%=*}]=${a#*=}; done
[ -n "${prog[ladder]:-}" ] || { echo "usage: $0 WORKDIR ladder=PATH [p38=PATH] [p74=PATH]"; exit 2; }
rm -rf "$work" && mkdir -p "$work" || exit 1

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# reject REGEX PROGRAM ARGS...: exit 2, the first line matches REGEX, no other line but CLI11's hint.
reject() {
  local regex=$1 name=$2
  shift 2
  local out rc
  out=$("${prog[$name]}" "$@" 2>&1)
  rc=$?
  local first rest
  first=$(head -n 1 <<<"$out")
  rest=$(tail -n +2 <<<"$out" | grep -v '^Run with --help for more information\.$')
  if [ $rc -ne 2 ]; then fail "$name $*: exit $rc, expected 2; output: $(head -c 400 <<<"$out")"
  elif ! grep -Eq -- "$regex" <<<"$first"; then fail "$name $*: '$first' does not match '$regex'"
  elif [ -n "$rest" ]; then fail "$name $*: more than one line: $(head -c 400 <<<"$out")"
  else echo "ok: $name $* -> $first"; fi
}

# accept PROGRAM ARGS...: exit 0.
accept() {
  local name=$1
  shift
  local out rc
  out=$("${prog[$name]}" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then fail "$name $*: exit $rc, expected 0; output: $(tail -c 400 <<<"$out")"
  else echo "ok: $name $* -> exit 0"; fi
}

small2d=(--batch 1 --in-channels 1 --out-channels 2 --size 4 -q)
small3d=(--batch 1 --in-channels 1 --out-channels 2 --input-size 2 4 4 -q)
tracks=()
for t in p38 p74; do [ -n "${prog[$t]:-}" ] && tracks+=("$t"); done

# 1. A stage or rung listed twice, by the same id or by id and name.
reject '^error: --stages: stage 03 is listed twice$' ladder --stages 03,03
reject "^error: --stages: stage 00 is listed twice \(as '00' and 'cpu_reference'\)$" ladder --stages 00,cpu_reference
for t in "${tracks[@]}"; do
  reject '^error: --rungs: rung 03 is listed twice$' "$t" --rungs 03,03
  reject "^error: --rungs: rung 00 is listed twice \(as '00' and 'cpu_reference'\)$" "$t" --rungs 00,cpu_reference
done

# 2. A negative (or NaN) --cpu-max-macs.
for p in ladder "${tracks[@]}"; do
  reject '^--cpu-max-macs: must be >= 0, got -1$' "$p" --cpu-max-macs -1
  reject '^--cpu-max-macs: must be >= 0, got nan$' "$p" --cpu-max-macs nan
done

# 3. A negative --seed (CLI11 alone would wrap -1 to 2^64 - 1).
for p in ladder "${tracks[@]}"; do
  reject '^--seed: must be an integer >= 0, got -1$' "$p" --seed -1
  reject '^--seed: must be an integer >= 0, got -5$' "$p" --seed=-5
done

# 5. --dump creates its last folder only, never a missing parent.
reject "^error: --dump: the parent folder $work/no_such_parent of $work/no_such_parent/dump does not exist" \
  ladder --dump "$work/no_such_parent/dump" --stages 00 "${small2d[@]}"
[ -e "$work/no_such_parent" ] && fail "--dump created the missing parent $work/no_such_parent"
: >"$work/a_file"
reject "^error: --dump: $work/a_file exists and is not a folder$" ladder --dump "$work/a_file" --stages 00 "${small2d[@]}"
accept ladder --dump "$work/dump" --stages 00 "${small2d[@]}"
[ -f "$work/dump/x.npy" ] || fail "--dump $work/dump (its parent exists) wrote no x.npy"

# 6. One name for the list everywhere: the ladder takes --rungs, the tracks --stages.
accept ladder --rungs 00 "${small2d[@]}"
reject '^error: --stages: stage 00 is listed twice$' ladder --rungs 00,00
for t in "${tracks[@]}"; do
  accept "$t" --stages 00 "${small3d[@]}"
  accept "$t" --rungs 00 "${small3d[@]}"
  reject '^error: --rungs: rung 01 is listed twice$' "$t" --stages 01,01
done

rm -rf "$work"
if [ $failures -gt 0 ]; then echo "$failures case(s) failed"; exit 1; fi
echo "PASS: every case"
