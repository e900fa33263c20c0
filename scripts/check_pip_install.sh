#!/usr/bin/env bash
# pyproject.toml's promise (CI): `pip install -e .` in a fresh virtual environment makes the
# packages importable and their commands work from another folder, on this repository.
# The environment sees the system's packages (--system-site-packages: numpy, matplotlib) but
# installs nothing else; pip fetches setuptools for the build unless LADDER_PIP_ARGS says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; rm -rf "$repo"/*.egg-info' EXIT
python3 -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q ${LADDER_PIP_ARGS:-} -e "$repo"
cd "$tmp"  # not the repository: the commands must find their packages through the install
bin=$tmp/venv/bin
"$bin/ladder-assignment" --help > /dev/null
"$bin/ladder-update-results" --check
"$bin/ladder-sass-counts" --help > /dev/null
"$bin/ladder-compare" --problem 74 --help | grep -- --forward-rungs >/dev/null  # the one comparison, a problem's options
"$bin/ladder-compare-p38" --help | grep -- --check-samples >/dev/null # an older name: --problem set
"$bin/python" -m grader --help > /dev/null
"$bin/python" - "$repo" <<'PY'
import importlib.util, os, sys
import grader.grade, tooling.results.update_results  # noqa: E401
for name in ("grader", "tooling.checks", "tooling.results.plots", "conv_pool_ladder"):
    spec = importlib.util.find_spec(name)
    assert spec and os.path.realpath(spec.origin).startswith(os.path.realpath(sys.argv[1]) + os.sep), (name, spec)
print("pip install -e .: grader, tooling and conv_pool_ladder import from", sys.argv[1], "and the commands run")
PY
