"""Time per stage on a log scale: the total, and beside it the pool phase (stages that have one),
with the streaming read of x (the floor) as a horizontal line.

    python3 scripts/plots/plot_time.py [--results DIR] [--out DIR]   # -> docs/img/time_<gpu>.png

The reduction stages share stage 01's convolution, so their totals hardly differ; what each
changes is the pool phase, drawn as the narrower bar. A fused stage has no pool phase of its own (it pools inside its
launch): only its total is drawn.
"""

from __future__ import annotations

import sys

from .. import ladder_results as lr
from . import _common as c

TOTAL_W, POOL_W = 0.46, 0.26  # bar widths; the pair fills 0.72 of a stage's slot


def draw(run: lr.LadderRun):
    stages = run.stages
    fig, ax = c.new_figure(max(8.0, 0.95 * len(stages) + 2.0), 4.8)
    ran = [s for s in stages if s.ran and s.total_ms]
    pool_x = -TOTAL_W / 2 + (TOTAL_W + POOL_W) / 2  # centre of the pool bar, relative to the slot
    total_x = pool_x - (TOTAL_W + POOL_W) / 2
    any_pool = False
    for i, s in enumerate(stages):
        if not (s.ran and s.total_ms):
            ax.text(i, 0.5, "not run", transform=ax.get_xaxis_transform(),
                    ha="center", va="center", fontsize=8, color="0.4", rotation=90)
            continue
        pool = s.ms("pool")
        x_total = i + total_x if pool else i  # a stage without a pool phase: its total, centred
        ax.bar(x_total, s.total_ms, color=c.KIND_COLORS[c.stage_kind(s)], width=TOTAL_W)
        label = lr.fmt_ms(s.total_ms)
        mult = run.multiple_of_floor(s) if s.gpu else None
        if mult:
            label += "\n" + lr.fmt_ratio(mult)
        ax.annotate(label, (x_total, s.total_ms), textcoords="offset points", xytext=(0, 2), ha="center",
                    va="bottom", fontsize=7)
        if pool:
            any_pool = True
            ax.bar(i + pool_x, pool, color=c.PHASE_COLORS["pool"], width=POOL_W, hatch="///",
                   edgecolor="white", linewidth=0)
            ax.annotate(lr.fmt_ms(pool), (i + pool_x, pool), textcoords="offset points", xytext=(1, 2),
                        ha="center", va="bottom", fontsize=6.5, rotation=90, color="#8a4a1c")
    if run.floor_ms:
        ax.axhline(run.floor_ms, color=c.FLOOR_COLOR, linestyle="--", linewidth=1.2)
        ax.annotate(f"floor: streaming read of x, {lr.fmt_ms(run.floor_ms)} ms", (0.0, run.floor_ms),
                    xycoords=("axes fraction", "data"), textcoords="offset points", xytext=(4, -10),
                    fontsize=8, color=c.FLOOR_COLOR,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
    ax.set_yscale("log")
    ax.set_xlim(-0.6, len(stages) - 0.4)
    values = ([s.total_ms for s in ran] + [s.ms("pool") for s in ran if s.ms("pool")]
              + ([run.floor_ms] if run.floor_ms else []))
    if values:
        ax.set_ylim(min(values) / 6, max(values) * 12)
    ax.set_xticks(range(len(stages)), [s.label.replace(" ", "\n", 1) for s in stages], fontsize=7.5)
    ax.set_ylabel("ms per forward (log scale)")
    ax.set_title(c.title(run, "Time per stage") + "  (labels: ms; under the total, the multiple of the floor)",
                 fontsize=10)
    from matplotlib.patches import Patch

    kinds = [k for k in ("cpu", "split", "fused") if any(c.stage_kind(s) == k for s in ran)]
    names = {"cpu": "total, CPU (one wall-clock run)", "split": "total, GPU, separate phases",
             "fused": "total, GPU, one fused launch"}
    handles = [Patch(color=c.KIND_COLORS[k], label=names[k]) for k in kinds]
    if any_pool:
        handles.append(Patch(facecolor=c.PHASE_COLORS["pool"], hatch="///", edgecolor="white",
                             label="pool phase of that run"))
    if handles:
        ax.legend(handles=handles, fontsize=7.5, loc="upper right", ncols=2 if len(handles) > 2 else 1)
    ax.grid(axis="y", which="major", alpha=0.3)
    return fig


def main(argv=None) -> int:
    return c.cli(draw, "time", __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    sys.exit(main())
