#!/usr/bin/env bash
# Grades a whole class on a Slurm cluster: one array task per submission, each with its own GPU
# and work folder, then a dependent job that gathers the class table and the Gradescope upload.
#
#   grader/slurm/grade_class_slurm.sh --submissions DIR --rungs 03,04 --secret-file FILE --out OUT
#       [--partition P] [--gres gpu:1] [--time 00:45:00] [--cpus-per-task 4] [--mem 16G]
#       [--sbatch-option OPT]... [--max-parallel N] [--skip-gpu] [--cuda-architectures A]
#       [--jobs N] [--timeout S] [--no-reveal] [--grade-option OPT]... [--wait] [--force]
#   grader/slurm/grade_class_slurm.sh --gather OUT    the gather step alone, here (e.g. after regrading one)
#
# DIR holds one folder per student, named by the student id (letters, digits, . _ - + @), each a
# copy of the handout with the student's files. It writes OUT/students.tsv (array index order),
# OUT/results/<student>/{results.json,report.txt,junit.xml} (the grader's --out),
# OUT/work/<student>/ (the grader's --work), OUT/logs/, then OUT/class.csv, OUT/class.md,
# OUT/gradescope/ and OUT/gradescope.zip (grader/slurm/gather_class.py). A task whose grading fails
# writes a results.json with 0 points and the reason. Each grading is official (the secret),
# with --submission-id <student> (a regrade reproduces the hidden seeds) and, as grading after
# the due date, --reveal (the students' results.json counts and names the hidden parts;
# --no-reveal withholds them). --skip-gpu: the grader's build and static checks only, and no GPU
# requested (unless --gres is given). --grade-option passes any other grader option (e.g.
# --grade-option=--isolation=bwrap). --wait: block until the gather job is done, then print the
# table. Run it from the instructor's tree (the grader is this tree's scripts/assignment.py);
# OUT must be on a file system the compute nodes share, and every user must pass through the
# folders above it: as root, the grader drops the submission to an unprivileged uid.
# Exit status: 0 submitted (or, with --wait, gathered), 1 sbatch failed, 2 a bad argument.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "error: $*" >&2; exit 2; }

# ---- an array task (sbatch runs a copy of this script: the tree comes from OUT/class.env) ----
if [ "${1:-}" = "--task" ]; then
  out=$2
  GRADE_OPTS=()
  # shellcheck disable=SC1091  # TREE RUNGS SECRET SKIP_GPU CUDA_ARCHS GRADE_JOBS TIMEOUT REVEAL GRADE_OPTS
  source "$out/class.env"
  SKIP_GPU=${SKIP_GPU:-0}
  i=${SLURM_ARRAY_TASK_ID:?not an array task}
  line=$(sed -n "$((i + 1))p" "$out/students.tsv")
  student=${line%%$'\t'*}
  submission=${line#*$'\t'}
  [ -n "$student" ] || { echo "error: no student at index $i of $out/students.tsv" >&2; exit 2; }
  res="$out/results/$student"
  log="$out/logs/$student.log"
  mkdir -p "$res" "$out/work/$student"
  rm -f "$res/results.json" "$res/report.txt" "$res/junit.xml" "$res/instructor.json"
  stopped=""
  trap 'stopped="the Slurm task was stopped (time limit, memory or scancel)"' TERM
  echo "task $i: $student ($submission) on $(hostname -s), job ${SLURM_ARRAY_JOB_ID:-?}_$i; log $log"
  jobs=$GRADE_JOBS
  [ -n "$jobs" ] || jobs=${SLURM_CPUS_PER_TASK:-$(nproc)}
  cmd=(python3 "$TREE/scripts/assignment.py" grade --submission "$submission" --rungs "$RUNGS"
       --secret-file "$SECRET" --work "$out/work/$student" --out "$res" --jobs "$jobs")
  [ -z "$CUDA_ARCHS" ] || cmd+=(--cuda-architectures "$CUDA_ARCHS")
  [ "$SKIP_GPU" != 1 ] || cmd+=(--skip-gpu)
  [ -z "$TIMEOUT" ] || cmd+=(--timeout "$TIMEOUT")
  [ "${REVEAL:-1}" != 1 ] || cmd+=(--reveal)
  cmd+=(--submission-id "$student" "${GRADE_OPTS[@]}")
  t0=$SECONDS
  "${cmd[@]}" > "$log" 2>&1 &
  pid=$!
  wait "$pid"; rc=$?
  if [ -n "$stopped" ]; then  # wait returns at the signal: give the grader its moment to end
    kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  fi
  echo "task $i: the grader exited with status $rc after $((SECONDS - t0)) s"
  why=""
  if [ -n "$stopped" ]; then why=$stopped
  elif [ "$rc" -ne 0 ]; then
    why="the grader exited with status $rc: $(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-400)"
  elif ! python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert isinstance(d["score"], (int, float))' \
      "$res/results.json" 2>/dev/null; then
    why="the grader wrote no readable results.json"
  fi
  if [ -n "$why" ]; then
    python3 "$TREE/grader/slurm/gather_class.py" fail "$res" --student "$student" --reason "$why"
    exit 1
  fi
  tail -n +1 "$res/report.txt" | head -n 3
  exit 0
fi

gather_here() {
  local out=$1
  # shellcheck disable=SC1091
  [ -f "$out/class.env" ] && source "$out/class.env"
  python3 "${TREE:-$here/../..}/grader/slurm/gather_class.py" gather "$out"
}

if [ "${1:-}" = "--gather" ]; then
  [ -n "${2:-}" ] || die "--gather needs the output folder"
  gather_here "$(cd "$2" && pwd)"
  exit $?
fi

usage() { sed -n '2,/^# Exit status/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

submissions="" rungs="" secret="" out="" partition="" gres="" gres_set=0 time_limit="00:45:00" cpus=4 mem=""
skip_gpu=0 cuda_archs="" jobs="" wait_mode=0 force=0 max_parallel="" timeout="" extra=() reveal=1 grade_opts=()
while [ $# -gt 0 ]; do
  case $1 in
    --submissions) submissions=${2:-}; shift 2 ;;
    --rungs) rungs=${2:-}; shift 2 ;;
    --secret-file) secret=${2:-}; shift 2 ;;
    --out) out=${2:-}; shift 2 ;;
    --partition) partition=${2:-}; shift 2 ;;
    --gres) gres=${2:-}; gres_set=1; shift 2 ;;
    --time) time_limit=${2:-}; shift 2 ;;
    --cpus-per-task) cpus=${2:-}; shift 2 ;;
    --mem) mem=${2:-}; shift 2 ;;
    --sbatch-option) extra+=("${2:-}"); shift 2 ;;
    --max-parallel) max_parallel=${2:-}; shift 2 ;;
    --skip-gpu) skip_gpu=1; shift ;;
    --cuda-architectures) cuda_archs=${2:-}; shift 2 ;;
    --jobs) jobs=${2:-}; shift 2 ;;
    --timeout) timeout=${2:-}; shift 2 ;;
    --no-reveal) reveal=0; shift ;;
    --grade-option) grade_opts+=("${2:-}"); shift 2 ;;
    --grade-option=*) grade_opts+=("${1#*=}"); shift ;;
    --sbatch-option=*) extra+=("${1#*=}"); shift ;;
    --wait) wait_mode=1; shift ;;
    --force) force=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (--help lists them)" ;;
  esac
done

command -v sbatch >/dev/null || die "sbatch not found on PATH: run this on a Slurm login node (or load its module)"
[ -n "$submissions" ] || die "--submissions DIR is required (one folder per student)"
[ -d "$submissions" ] || die "--submissions $submissions is not a folder"
[ -n "$rungs" ] || die "--rungs is required (e.g. --rungs 03,04): an official run never takes them from a submission"
[[ $rungs =~ ^[A-Za-z0-9-]+(,[A-Za-z0-9-]+)*$ ]] || die "--rungs '$rungs': comma-separated rungs, e.g. 03,04 or p38-03"
[ -n "$secret" ] || die "--secret-file FILE is required (the official secret)"
[ -f "$secret" ] && [ -r "$secret" ] || die "secret file $secret not found or not readable"
[ -s "$secret" ] || die "secret file $secret is empty"
[ -n "$out" ] || die "--out OUT is required"
[[ $cpus =~ ^[1-9][0-9]*$ ]] || die "--cpus-per-task '$cpus' is not a positive number"
[ -z "$jobs" ] || [[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs '$jobs' is not a positive number"
[ -z "$max_parallel" ] || [[ $max_parallel =~ ^[1-9][0-9]*$ ]] || die "--max-parallel '$max_parallel' is not a positive number"
[ -f "$here/../../scripts/assignment.py" ] && [ -f "$here/gather_class.py" ] || die "run the script from the repository's grader/slurm/"

students=()
while IFS= read -r -d '' d; do
  name=$(basename "$d")
  [[ $name =~ ^[A-Za-z0-9][A-Za-z0-9._+@-]*$ ]] ||
    die "submission folder '$name': a student id is letters, digits and . _ - + @ (rename it)"
  students+=("$name")
done < <(find "$submissions" -mindepth 1 -maxdepth 1 -type d ! -name '.*' -print0 | sort -z)
[ ${#students[@]} -gt 0 ] || die "no submission in $submissions: it must hold one folder per student"

mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
submissions=$(cd "$submissions" && pwd)
secret=$(cd "$(dirname "$secret")" && pwd)/$(basename "$secret")
if [ -n "$(ls -A "$out/results" 2>/dev/null)" ] && [ "$force" != 1 ]; then
  die "$out/results already holds gradings: choose a new --out, or --force to replace them"
fi
rm -rf "$out/results" "$out/logs" "$out/gradescope" "$out/gradescope.zip" "$out/class.csv" "$out/class.md"
mkdir -p "$out/results" "$out/work" "$out/logs"
# The submission's uid (the grader, as root, drops it to an unprivileged one) passes through OUT
# to OUT/work; nobody else lists or reads the results, logs and instructor copies.
chmod 711 "$out" "$out/work"
chmod 700 "$out/results" "$out/logs"
if [ "$(id -u)" -eq 0 ]; then
  p=$out
  while [ "$p" != / ]; do
    p=$(dirname "$p")
    [ $(( $(stat -c '%a' "$p") % 2 )) -eq 1 ] ||
      { echo "warning: $p is not o+x: the grader (as root, the submission under another uid) grades in /tmp instead" >&2; break; }
  done
fi

: > "$out/students.tsv"
for s in "${students[@]}"; do printf '%s\t%s\n' "$s" "$submissions/$s" >> "$out/students.tsv"; done
{
  printf 'TREE=%q\n' "$(cd "$here/../.." && pwd)"
  printf 'RUNGS=%q\nSECRET=%q\nSKIP_GPU=%q\nCUDA_ARCHS=%q\nGRADE_JOBS=%q\nTIMEOUT=%q\nREVEAL=%q\n' \
    "$rungs" "$secret" "$skip_gpu" "$cuda_archs" "$jobs" "$timeout" "$reveal"
  printf 'GRADE_OPTS=('; [ ${#grade_opts[@]} -eq 0 ] || printf ' %q' "${grade_opts[@]}"; printf ' )\n'
} > "$out/class.env"
python3 - "$out/class.json" "$rungs" "$skip_gpu" "${#students[@]}" "$reveal" <<'EOF'
import json, sys
json.dump({"rungs": sys.argv[2], "skip_gpu": sys.argv[3] == "1", "students": int(sys.argv[4]),
           "reveal": sys.argv[5] == "1"}, open(sys.argv[1], "w"), indent=2)
EOF

n=${#students[@]}
common=()
[ -z "$partition" ] || common+=(--partition "$partition")
common+=("${extra[@]}")
array=(--job-name=ladder-grade --array="0-$((n - 1))${max_parallel:+%$max_parallel}" --time="$time_limit"
       --cpus-per-task="$cpus" --output="$out/logs/task-%a.out" --parsable)
[ -z "$mem" ] || array+=(--mem="$mem")
if [ "$gres_set" = 1 ]; then
  [ -z "$gres" ] || array+=(--gres="$gres")
elif [ "$skip_gpu" != 1 ]; then
  array+=(--gres=gpu:1)
fi

echo "grading $n submission(s) of $submissions, rungs $rungs$([ "$skip_gpu" = 1 ] && echo ' (--skip-gpu)')"
if ! jobid=$(sbatch "${common[@]}" "${array[@]}" "$here/grade_class_slurm.sh" --task "$out"); then
  echo "error: sbatch refused the array job (its message above)" >&2
  exit 1
fi
jobid=${jobid%%;*}
if ! gather_id=$(sbatch "${common[@]}" --job-name=ladder-gather --dependency="afterany:$jobid" --kill-on-invalid-dep=yes \
    --time=00:10:00 --cpus-per-task=1 --output="$out/logs/gather.out" --parsable \
    "$here/grade_class_slurm.sh" --gather "$out"); then
  echo "error: sbatch refused the gather job; gather by hand once the array is done: $0 --gather $out" >&2
  exit 1
fi
gather_id=${gather_id%%;*}
echo "array job $jobid: $n task(s), one per student (index order: $out/students.tsv)"
echo "gather job $gather_id: runs after the array ends, writes $out/class.csv, class.md, gradescope.zip"
echo "watch:   squeue -j $jobid,$gather_id     (or: sacct -j $jobid, where accounting is on)"
echo "logs:    $out/logs/<student>.log (the grader), $out/logs/task-<index>.out (the task)"
again=()
for a in "${array[@]}"; do
  case $a in --array=*) again+=(--array=K) ;; --parsable) ;; *) again+=("$a") ;; esac
done
echo "regrade the student of index K: sbatch ${common[*]} ${again[*]} $here/grade_class_slurm.sh --task $out"
echo "         then gather again: $0 --gather $out"

[ "$wait_mode" = 1 ] || exit 0
echo "waiting for job $gather_id (after $jobid) ..."
# Until neither job is known to squeue; an unreachable controller is retried, not taken for "done".
while :; do
  if left=$(squeue -h -j "$jobid,$gather_id" -o '%i' 2>&1); then
    [ -n "$left" ] || break
  elif [[ $left == *"Invalid job id"* ]]; then
    break
  fi
  sleep 5
done
if [ ! -f "$out/class.csv" ]; then
  echo "the gather job wrote no class.csv (see $out/logs/gather.out); gathering here"
  gather_here "$out" || exit 1
fi
cat "$out/class.md"
