#!/usr/bin/env python3
"""Executes a notebook headless with nbclient (kernel python3) and fails on the first error.

    python3 scripts/run_notebook.py                                  # notebooks/ladder.ipynb on results/
    python3 scripts/run_notebook.py --results DIR --output /tmp/out.ipynb
    python3 scripts/run_notebook.py --no-rerun notebooks/ladder.ipynb

The notebook runs with its own folder as the working directory. --results sets
LADDER_RESULTS_DIR for the kernel; --no-rerun sets LADDER_NOTEBOOK_RERUN=0 (the cell that re-runs
build/ladder on a GPU is then skipped). The committed notebook is not modified; --output writes the
executed copy elsewhere. Exit 0 on success, 1 on a cell error or timeout.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook", nargs="?", default=str(REPO_ROOT / "notebooks" / "ladder.ipynb"))
    ap.add_argument("--results", help="results directory for the notebook (sets LADDER_RESULTS_DIR)")
    ap.add_argument("--no-rerun", action="store_true", help="skip the cell that re-runs build/ladder")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    ap.add_argument("--output", help="write the executed notebook here")
    args = ap.parse_args(argv)

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    if args.results:
        os.environ["LADDER_RESULTS_DIR"] = str(Path(args.results).resolve())
    if args.no_rerun:
        os.environ["LADDER_NOTEBOOK_RERUN"] = "0"
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")

    path = Path(args.notebook).resolve()
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError) as e:
        print(f"{path}: FAILED\n{e}", file=sys.stderr)
        return 1
    finally:
        if args.output:
            nbformat.write(nb, args.output)
    cells = sum(1 for c in nb.cells if c.cell_type == "code")
    print(f"{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}: "
          f"{cells} code cells executed without error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
