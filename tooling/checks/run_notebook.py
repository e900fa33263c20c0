"""Executes a notebook headless with nbclient (kernel python3) and fails on the first error.

    python3 scripts/run_notebook.py                                  # notebooks/ladder.ipynb on results/
    python3 scripts/run_notebook.py --results DIR --output /tmp/out.ipynb
    python3 scripts/run_notebook.py --no-rerun notebooks/ladder.ipynb
    python3 scripts/run_notebook.py notebooks/colab_student.ipynb --cwd /tmp/nb --echo

The notebook runs with its own folder as the working directory, or --cwd. --results sets
LADDER_RESULTS_DIR for the kernel; --no-rerun sets LADDER_NOTEBOOK_RERUN=0 (the cell that re-runs
build/ladder on a GPU is then skipped). --echo prints each code cell's text output as it arrives,
with the cell's number and time (long notebooks show their progress in CI logs). The kernel
inherits this process's environment (grader/checks/check_student_notebook.sh passes the handout's URL
that way). The committed notebook is not modified; --output writes the executed copy elsewhere.
Exit 0 on success, 1 on a cell error or timeout.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def echoing_client(base):
    """A NotebookClient subclass that also writes the kernel's stream output and errors to stdout
    as they arrive, and a line per code cell (its number, first line and duration)."""

    class EchoingClient(base):
        def output(self, outs, msg, display_id, cell_index):
            kind, content = msg.get("msg_type"), msg.get("content", {})
            if kind == "stream":
                sys.stdout.write(content.get("text", ""))
            elif kind == "error":
                sys.stdout.write(f"{content.get('ename')}: {content.get('evalue')}\n")
            sys.stdout.flush()
            return super().output(outs, msg, display_id, cell_index)

    started = {}

    def on_start(cell, cell_index, **_):
        if cell.cell_type == "code":
            started[cell_index] = time.monotonic()
            first = next((l for l in cell.source.splitlines() if l.strip()), "")
            print(f"\n----- cell {cell_index}: {first[:90]}", flush=True)

    def on_executed(cell, cell_index, **_):
        if cell_index in started:
            print(f"----- cell {cell_index} done in {time.monotonic() - started[cell_index]:.1f} s", flush=True)

    return EchoingClient, {"on_cell_start": on_start, "on_cell_executed": on_executed}


def run_plain(path: Path, cwd: Path | None) -> int:
    """Executes the notebook's code cells in order in one namespace, in this process; 1 on the
    first exception or on a cell with an IPython magic (which plain Python cannot run)."""
    import json
    import traceback
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    os.chdir(cwd or path.parent)
    namespace = {"__name__": "__main__"}
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        if any(l.lstrip().startswith(("!", "%")) for l in source.splitlines()):
            print(f"{path}: cell {i} uses an IPython magic: run it with Jupyter (without --plain)", file=sys.stderr)
            return 1
        first = next((l for l in source.splitlines() if l.strip()), "")
        print(f"\n----- cell {i}: {first[:90]}", flush=True)
        t0 = time.monotonic()
        try:
            exec(compile(source, f"<cell {i}>", "exec"), namespace)
        except BaseException:  # SystemExit included: a cell that exits is a failed cell
            traceback.print_exc()
            print(f"{path}: FAILED in cell {i}", file=sys.stderr)
            return 1
        print(f"----- cell {i} done in {time.monotonic() - t0:.1f} s", flush=True)
    print(f"{path}: {len(cells)} code cells executed without error (plain Python, no Jupyter kernel)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook", nargs="?", default=str(REPO_ROOT / "notebooks" / "ladder.ipynb"))
    ap.add_argument("--results", help="results directory for the notebook (sets LADDER_RESULTS_DIR)")
    ap.add_argument("--no-rerun", action="store_true", help="skip the cell that re-runs build/ladder")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    ap.add_argument("--output", help="write the executed notebook here")
    ap.add_argument("--cwd", help="working directory of the kernel (default: the notebook's folder)")
    ap.add_argument("--echo", action="store_true", help="print the cells' text output as it arrives")
    ap.add_argument("--plain", action="store_true",
                    help="run the code cells in order as plain Python in this process, without Jupyter (for "
                         "machines without nbclient; the notebook must not use IPython magics)")
    args = ap.parse_args(argv)
    if args.plain:
        unsupported = [f for f, v in (("--output", args.output), ("--results", args.results),
                                      ("--no-rerun", args.no_rerun)) if v]
        if unsupported:
            ap.error(f"--plain cannot honour {', '.join(unsupported)} (it keeps no executed copy and sets no "
                     "environment); --timeout does not apply either")
        return run_plain(Path(args.notebook).resolve(), Path(args.cwd).resolve() if args.cwd else None)

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    if args.results:
        os.environ["LADDER_RESULTS_DIR"] = str(Path(args.results).resolve())
    if args.no_rerun:
        os.environ["LADDER_NOTEBOOK_RERUN"] = "0"
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")

    path = Path(args.notebook).resolve()
    cwd = Path(args.cwd).resolve() if args.cwd else path.parent
    nb = nbformat.read(path, as_version=4)
    client_class, hooks = echoing_client(NotebookClient) if args.echo else (NotebookClient, {})
    client = client_class(nb, timeout=args.timeout, kernel_name="python3",
                          resources={"metadata": {"path": str(cwd)}}, **hooks)
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError) as e:
        if args.echo:  # the cell's output is printed already: only the error itself
            why = f"{e.ename}: {e.evalue}" if isinstance(e, CellExecutionError) else str(e).splitlines()[0]
            print(f"{path}: FAILED: {why}", file=sys.stderr)
        else:
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
