#!/usr/bin/env bash
# Runs the students' Colab notebook (notebooks/colab_student.ipynb) headless on a fresh handout, as
# a student would: writes the handout of rungs 03,04 (what students get: docs/assignments.md),
# makes it a git repository, and executes the notebook with nbclient (scripts/run_notebook.py)
# with LADDER_HANDOUT_URL pointing at it, so the notebook clones, installs, builds, runs and
# grades it. Fails on any cell error. Without a GPU the notebook skips its GPU steps and says why;
# with one, every step runs (a stubbed rung fails its checks: the notebook reports that, it is no
# error). Needs requirements.txt installed (nbclient, ipykernel) and what scripts/install_deps.sh
# installs. Usage: grader/checks/check_student_notebook.sh [WORK]   (default: a new folder under /tmp;
# removed after a success unless LADDER_KEEP_WORK=1)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
rungs=${LADDER_ASSIGNMENT_RUNGS:-03,04}
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/ladder-student-notebook.XXXXXX")}
mkdir -p "$work"
work=$(cd "$work" && pwd)
repo="$work/hw-${rungs//,/-}"
start=$SECONDS

echo "== handout of rungs $rungs: $repo"
python3 scripts/assignment.py handout --rungs "$rungs" --out "$repo" --force
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" -c user.name="ladder check" -c user.email="ladder-check@localhost" \
  commit -q -m "Assignment: rungs $rungs"
echo "committed: $(git -C "$repo" log --oneline -1)"

echo "== notebooks/colab_student.ipynb, headless, cloning file://$repo into $work/colab"
rm -rf "$work/colab"
mkdir -p "$work/colab"
status=0
if python3 -c "import nbformat, nbclient, ipykernel" 2>/dev/null; then
  LADDER_HANDOUT_URL="file://$repo" python3 scripts/run_notebook.py notebooks/colab_student.ipynb \
    --cwd "$work/colab" --echo --timeout 1800 --output "$work/colab_student.executed.ipynb" || status=$?
else
  echo "nbclient or ipykernel is not installed (pip install -r requirements.txt): running the code cells as plain Python"
  LADDER_HANDOUT_URL="file://$repo" python3 scripts/run_notebook.py notebooks/colab_student.ipynb \
    --cwd "$work/colab" --plain || status=$?
fi

elapsed=$((SECONDS - start))
if [ "$status" -ne 0 ]; then
  copy="the executed copy: $work/colab_student.executed.ipynb"
  [ -f "$work/colab_student.executed.ipynb" ] || copy="the cells' output is above"
  echo "FAIL: the student notebook stopped at a cell error (after ${elapsed} s); $copy"
  exit 1
fi
echo "the student notebook ran without error in ${elapsed} s"
if [ "${LADDER_KEEP_WORK:-0}" = 1 ] || [ $# -gt 0 ]; then
  echo "kept: $work (the executed notebook: $work/colab_student.executed.ipynb)"
else
  rm -rf "$work"
fi
cd "$root"
