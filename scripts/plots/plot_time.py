#!/usr/bin/env python3
"""Time per stage on a log scale, with the streaming read of x (the floor) as a horizontal line.

    python3 scripts/plots/plot_time.py [--results DIR] [--out DIR]   # -> docs/img/time_<gpu>.png
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as c  # noqa: E402
import ladder_results as lr  # noqa: E402


def draw(run: lr.LadderRun):
    fig, ax = c.new_figure(8.0, 4.6)
    stages = run.stages
    xs = range(len(stages))
    ran = [s for s in stages if s.ran and s.total_ms]
    for i, s in zip(xs, stages):
        if not (s.ran and s.total_ms):
            ax.text(i, 0.5, "not run", transform=ax.get_xaxis_transform(),
                    ha="center", va="center", fontsize=8, color="0.4", rotation=90)
            continue
        ax.bar(i, s.total_ms, color=c.KIND_COLORS[c.stage_kind(s)], width=0.7)
        label = lr.fmt_ms(s.total_ms) + " ms"
        mult = run.multiple_of_floor(s) if s.gpu else None
        if mult:
            label += "\n" + lr.fmt_ratio(mult)
        ax.annotate(label, (i, s.total_ms), textcoords="offset points", xytext=(0, 3), ha="center",
                    va="bottom", fontsize=7.5)
    if run.floor_ms:
        ax.axhline(run.floor_ms, color=c.FLOOR_COLOR, linestyle="--", linewidth=1.2)
        ax.annotate(f"floor: streaming read of x, {lr.fmt_ms(run.floor_ms)} ms", (0.0, run.floor_ms),
                    xycoords=("axes fraction", "data"), textcoords="offset points", xytext=(4, 3),
                    fontsize=8, color=c.FLOOR_COLOR,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
    ax.set_yscale("log")
    ax.set_xlim(-0.6, len(stages) - 0.4)
    values = [s.total_ms for s in ran] + ([run.floor_ms] if run.floor_ms else [])
    if values:
        ax.set_ylim(min(values) / 4, max(values) * 8)
    ax.set_xticks(list(xs), [s.label.replace(" ", "\n", 1) for s in stages], fontsize=8)
    ax.set_ylabel("time per forward (ms, log scale)")
    ax.set_title(c.title(run, "Time per stage") + "  (bar labels: ms and multiple of the floor)", fontsize=10)
    from matplotlib.patches import Patch

    kinds = sorted({c.stage_kind(s) for s in ran})
    names = {"cpu": "CPU (one wall-clock run)", "split": "GPU, separate phases", "fused": "GPU, one fused launch"}
    if kinds:
        ax.legend(handles=[Patch(color=c.KIND_COLORS[k], label=names[k]) for k in kinds], fontsize=8,
                  loc="upper right")
    ax.grid(axis="y", which="major", alpha=0.3)
    return fig


def main(argv=None) -> int:
    return c.cli(draw, "time", __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    sys.exit(main())
