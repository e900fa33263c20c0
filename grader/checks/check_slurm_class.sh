#!/usr/bin/env bash
# CI: grader/slurm/grade_class_slurm.sh on a real single-node Slurm, without a GPU. Installs Debian's
# slurm-wlm and munge where missing, writes a slurm.conf for this host (no GRES) under a temp
# folder, starts munged, slurmctld and slurmd (as root: sudo where the runner is not), then grades
# a class of three submissions made from this tree's handout of rung 03 (the reference solution
# copied in, the untouched stub, the student file missing) as an official run with --skip-gpu,
# and checks class.csv (three rows, the reference's full technique points, the stub below it,
# the missing file at 0), the failure path of a task and the Gradescope upload. The daemons stop
# on exit. Usage: grader/checks/check_slurm_class.sh [WORK] (default: a new folder under /tmp;
# LADDER_CUDA_ARCHS, default 75; LADDER_JOBS, default 2). A few minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
archs=${LADDER_CUDA_ARCHS:-75}
jobs=${LADDER_JOBS:-2}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== the gatherer's own tests"
python3 grader/tests/test_gather_class.py

# ---- 1. Slurm and munge -------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null ||
   ! command -v munged >/dev/null; then
  echo "== installing slurm-wlm and munge"
  # Keep the packages' own service scripts from starting daemons without a configuration.
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod 755 "$policy"
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
  [ -z "$policy" ] || $sudo rm -f "$policy"
fi

# ---- 2. a one-node cluster ----------------------------------------------------------------
# Passable by everyone: as root, the grader runs the submission under an unprivileged uid that must reach OUT/work.
tmp=$(mktemp -d /tmp/ladder-slurm-XXXXXX)
chmod 755 "$tmp"
work=${1:-$tmp/class}
host=$(hostname -s)
started=()
cleanup() {
  local rc=$?
  set +e
  [ -z "${SLURM_CONF:-}" ] || scancel --quiet --name=ladder-grade,ladder-gather >/dev/null 2>&1
  for pidfile in "$tmp/slurmd.pid" "$tmp/slurmctld.pid"; do
    [ -f "$pidfile" ] && $sudo kill "$(cat "$pidfile")" 2>/dev/null
  done
  for p in "${started[@]}"; do $sudo kill "$p" 2>/dev/null; done
  sleep 1
  if [ "$rc" -ne 0 ]; then
    for f in "$tmp"/slurmctld.log "$tmp"/slurmd.log; do
      [ -f "$f" ] && { echo "--- last lines of $f"; tail -n 15 "$f"; }
    done
  fi
  echo "the daemons are stopped; files under $tmp"
  exit "$rc"
}
trap cleanup EXIT

if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  echo "== starting munged"
  [ -f /etc/munge/munge.key ] || $sudo mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null ||
    $sudo /usr/sbin/create-munge-key -f
  $sudo chown munge:munge /etc/munge/munge.key && $sudo chmod 400 /etc/munge/munge.key
  $sudo mkdir -p /run/munge /var/log/munge /var/lib/munge
  $sudo chown munge:munge /run/munge /var/log/munge /var/lib/munge
  $sudo chmod 755 /run/munge
  if [ -z "$sudo" ]; then runuser -u munge -- /usr/sbin/munged; else sudo -u munge /usr/sbin/munged; fi
  [ -f /run/munge/munged.pid ] && started+=("$($sudo cat /run/munge/munged.pid)")
  for _ in $(seq 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
  munge -n | unmunge >/dev/null || fail "munged does not answer"
fi

mkdir -p "$tmp/state" "$tmp/spool"
cat > "$tmp/slurm.conf" <<EOF
ClusterName=ladderci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=500 State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf
echo "== starting slurmctld and slurmd ($SLURM_CONF)"
$sudo env SLURM_CONF="$SLURM_CONF" slurmctld -i -f "$SLURM_CONF"
$sudo env SLURM_CONF="$SLURM_CONF" slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  state=$(sinfo -h -N -n "$host" -o '%T' 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 1
done
[ "$state" = idle ] || fail "the node is '${state:-unknown}', not idle, after 60 s: $(sinfo 2>&1 | tail -n 3)"
sinfo

# ---- 3. a class of three from this tree's handout of rung 03 --------------------------------
echo "== a class of three: reference, stub, missing file"
rm -rf "$work"
mkdir -p "$work"
chmod 755 "$work"
python3 scripts/assignment.py handout --rungs 03 --out "$work/handout" >/dev/null
file=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["files"]["03"][0])' "$work/handout/assignment.json")
subs=$work/submissions
mkdir -p "$subs"
cp -r "$work/handout" "$subs/alice-reference" && cp "$file" "$subs/alice-reference/$file"
cp -r "$work/handout" "$subs/bob-stub"
cp -r "$work/handout" "$subs/carol-missing" && rm "$subs/carol-missing/$file"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/secret"

# ---- the script's one-line errors ----------------------------------------------------------
echo "== the script's errors"
expect_error() {  # expect_error PATTERN ARGS...: exit 2, one line matching PATTERN
  local pattern=$1 msg rc=0
  shift
  msg=$("$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$msg" | wc -l)" -eq 1 ] && [[ $msg == *$pattern* ]] ||
    fail "expected exit 2 and one line with '$pattern' from: $*; got $rc: $msg"
  echo "ok: $msg"
}
mkdir -p "$work/empty"
args=(--rungs 03 --out "$work/err-out" --skip-gpu)
mkdir -p "$work/bin" && ln -sf "$(command -v dirname)" "$work/bin/dirname"  # a PATH without sbatch
expect_error "sbatch not found" env PATH="$work/bin" /bin/bash grader/slurm/grade_class_slurm.sh \
  --submissions "$subs" --secret-file "$work/secret" "${args[@]}"
expect_error "no submission in" grader/slurm/grade_class_slurm.sh --submissions "$work/empty" --secret-file "$work/secret" "${args[@]}"
expect_error "secret file" grader/slurm/grade_class_slurm.sh --submissions "$subs" --secret-file "$work/no-secret" "${args[@]}"

# ---- 4. the class, graded by Slurm ---------------------------------------------------------
echo "== grading the class on Slurm (--skip-gpu, rung 03, sm_$archs)"
t0=$SECONDS
grader/slurm/grade_class_slurm.sh --submissions "$subs" --rungs 03 --secret-file "$work/secret" --out "$work/out" \
  --skip-gpu --cpus-per-task "$(( jobs < $(nproc) ? jobs : $(nproc) ))" --jobs "$jobs" --cuda-architectures "$archs" \
  --time 00:20:00 --wait
echo "graded in $((SECONDS - t0)) s"
out=$work/out
for s in alice-reference bob-stub carol-missing; do
  echo "--- $s: report.txt"
  cat "$out/results/$s/report.txt" 2>/dev/null || { tail -n 20 "$out/logs/$s.log" 2>/dev/null; cat "$out/results/$s/results.json"; }
done

echo "== checks"
python3 - "$out" <<'EOF'
import csv, json, os, sys, zipfile
out = sys.argv[1]
def fail(msg):
    sys.exit(f"FAIL: {msg}")
rows = {r["student"]: r for r in csv.DictReader(open(os.path.join(out, "class.csv")))}
if sorted(rows) != ["alice-reference", "bob-stub", "carol-missing"]:
    fail(f"class.csv has students {sorted(rows)}, three expected")
for s, r in rows.items():
    if r["status"] != "graded":
        fail(f"{s}: grading failed: {r['reason']} (see {out}/logs/{s}.log)")
ref, stub, missing = rows["alice-reference"], rows["bob-stub"], rows["carol-missing"]
tech = json.load(open(os.path.join(out, "results", "alice-reference", "results.json")))
most = [t["max_score"] for t in tech["tests"] if t["name"].endswith("technique (machine code) and integrity")]
if not most or float(ref["03 technique"]) != most[0]:
    fail(f"the reference has {ref['03 technique']} technique points, {most} expected")
if float(ref["total"]) != most[0]:  # --skip-gpu: technique is the only part that scores
    fail(f"the reference's total is {ref['total']}, {most[0]} expected with --skip-gpu")
if not float(stub["total"]) < float(ref["total"]):
    fail(f"the stub scores {stub['total']}, not less than the reference's {ref['total']}")
if float(missing["total"]) != 0:
    fail(f"the submission without its file scores {missing['total']}, 0 expected")
if "public" not in ref["skipped"]:
    fail(f"the GPU parts are not reported skipped: {ref['skipped']!r}")
if ref["gradescope_score"] != ref["total"]:  # --reveal: the student's results.json counts every part
    fail(f"results.json counts {ref['gradescope_score']}, the whole total is {ref['total']}")
if "official run" not in tech["output"] or not ref["submission_id"]:
    fail(f"not an official run (the secret): {tech['output'].splitlines()[:1]}, id {ref['submission_id']!r}")
with zipfile.ZipFile(os.path.join(out, "gradescope.zip")) as z:
    names = set(z.namelist())
want = {f"gradescope/{s}/results.json" for s in rows} | {"gradescope/scores.csv"}
if not want <= names:
    fail(f"gradescope.zip lacks {sorted(want - names)}")
scores = list(csv.reader(open(os.path.join(out, "gradescope", "scores.csv"))))
if scores[0] != ["student", "score"] or len(scores) != 4:
    fail(f"gradescope/scores.csv: {scores}")
if "| alice-reference |" not in open(os.path.join(out, "class.md")).read():
    fail("class.md has no row for alice-reference")
print(f"ok: three rows; reference {ref['total']}/{ref['max_total']} (technique {ref['03 technique']}), "
      f"stub {stub['total']}, missing file {missing['total']}; gradescope.zip and scores.csv")
EOF

# ---- a task that fails, and one that never writes: both still in the table --------------------
echo "== a failing task and a lost result still count"
cp "$out/students.tsv" "$out/students.tsv.orig"
printf 'dave-broken\t%s\n' "$work/nowhere" >> "$out/students.tsv"
printf 'erin-lost\t%s\n' "$work/nowhere" >> "$out/students.tsv"
# dave's grading fails (an unknown rung): the task itself, run by Slurm, writes the failure.
sed -i 's/^RUNGS=.*/RUNGS=99/' "$out/class.env"
sbatch --wait --quiet --array=3 --cpus-per-task=1 --output="$out/logs/task-%a.out" \
  grader/slurm/grade_class_slurm.sh --task "$out" || true
grader/slurm/grade_class_slurm.sh --gather "$out"
python3 - "$out" <<'EOF'
import csv, os, sys
rows = {r["student"]: r for r in csv.DictReader(open(os.path.join(sys.argv[1], "class.csv")))}
for s in ("dave-broken", "erin-lost"):
    r = rows.get(s)
    if not r or r["status"] != "failed" or float(r["total"]) != 0 or not r["reason"]:
        sys.exit(f"FAIL: {s} should be a failed grading with 0 points and a reason: {r}")
    print(f"ok: {s}: {r['reason'][:110]}")
if len(rows) != 5 or not os.path.isfile(os.path.join(sys.argv[1], "gradescope", "erin-lost", "results.json")):
    sys.exit("FAIL: the failed gradings are not in the table and the Gradescope upload")
EOF
echo "PASS: grader/slurm/grade_class_slurm.sh graded a class of three on Slurm in $((SECONDS - t0)) s"
