"""Draws every plot from the committed ladder results, and the chapters' diagrams.

    python3 scripts/plots/make_all.py                      # results/*.json -> docs/img/*.png
    python3 scripts/plots/make_all.py --results DIR --out DIR

For each ladder JSON (results/ladder_<gpu>.json) it writes time_<gpu>.png (time per stage, log
scale, floor line), roofline_<gpu>.png (roofline and bandwidth against the floor) and
phases_<gpu>.png (phase breakdown). It always writes the diagrams of diagrams.py
(diagram_<name>.png, implicit_gemm.png, tf32_fragments.png), which need no data; with no results
it says so and draws only those. LADDER_MMA_PEAK_TFLOPS adds a TF32 mma roof to the roofline
(plot_roofline.py). matplotlib, Agg backend.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from .. import ladder_results as lr
from . import _common as c
from . import diagrams, plot_phases, plot_roofline, plot_time

PLOTS = (("time", plot_time.draw), ("roofline", plot_roofline.draw), ("phases", plot_phases.draw))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", help="results directory (default: $LADDER_RESULTS_DIR or results/)")
    ap.add_argument("--out", default=str(c.OUT_DIR), help="where the PNGs go (default: docs/img/)")
    args = ap.parse_args(argv)
    for path in diagrams.draw_all(args.out):
        print(path)
    runs = lr.load(args.results)
    if not runs:
        print(f"no ladder results in {lr.results_dir(args.results)}: only the diagrams drawn")
        return 0
    for run in runs:
        for prefix, draw in PLOTS:
            print(c.save(draw(run), Path(args.out) / f"{prefix}_{run.tag}.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
