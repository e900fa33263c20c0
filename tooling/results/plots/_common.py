"""Shared pieces of the plot scripts: colours, saving, and the command line of each script."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import ladder_results as lr

OUT_DIR = lr.REPO_ROOT / "docs" / "img"
PHASE_COLORS = {"conv": "#4c72b0", "pool": "#dd8452", "epilogue": "#55a868", "fused": "#8172b3"}
KIND_COLORS = {"cpu": "#937860", "split": "#4c72b0", "fused": "#8172b3"}
FLOOR_COLOR = "#c44e52"


def stage_kind(s: lr.Stage) -> str:
    return "cpu" if not s.gpu else ("fused" if s.fused else "split")


def new_figure(width=8.0, height=4.5, ncols=1, width_ratios=None):
    """A figure without pyplot's global state (works under Agg and inline in a notebook);
    width_ratios: the columns' relative widths."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    axes = fig.subplots(1, ncols, width_ratios=width_ratios)
    return fig, axes


def swatch(color):
    """A legend handle: a filled square of `color`."""
    from matplotlib.patches import Rectangle

    return Rectangle((0, 0), 1, 1, color=color)


def save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # No "Software" entry: the PNG's bytes depend only on the drawing, not on the matplotlib version string.
    fig.savefig(path, format="png", metadata={"Software": None})
    return path


def title(run: lr.LadderRun, what: str) -> str:
    return f"{what}: {run.gpu_name}"


def cli(draw, prefix: str, description: str, argv=None) -> int:
    """The command line shared by the plot scripts: one PNG per ladder run in the results dir."""
    import matplotlib

    matplotlib.use("Agg")
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--results", help="results directory (default: $LADDER_RESULTS_DIR or results/)")
    ap.add_argument("--out", default=str(OUT_DIR), help="where the PNGs go (default: docs/img/)")
    args = ap.parse_args(argv)
    runs = lr.load(args.results)
    if not runs:
        print(f"no ladder results in {lr.results_dir(args.results)}: nothing to draw")
        return 0
    for run in runs:
        print(save(draw(run), Path(args.out) / f"{prefix}_{run.tag}.png"))
    return 0


def track_cli(draw, track: str, description: str, argv=None) -> int:
    """The command line of a track's plot (plot_p38.py, plot_p74.py): --results FILE (default
    results/<track>/ladder_h200.json, the track runner's JSON) -> --out FILE (default
    docs/img/<track>_time_h200.png), draw(results) giving the figure. Exit 2 when the JSON
    cannot be read."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--results", type=Path, default=lr.REPO_ROOT / "results" / track / "ladder_h200.json")
    ap.add_argument("--out", type=Path, default=OUT_DIR / f"{track}_time_h200.png")
    args = ap.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"error: cannot read {args.results}: {e}", file=sys.stderr)
        return 2
    print(f"wrote {save(draw(results), args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit("this module is imported by the plot scripts; run make_all.py")
