"""Where each stage's time goes: its phases (conv, pool, epilogue, or one fused launch).

    python3 scripts/plots/plot_phases.py [--results DIR] [--out DIR]   # -> docs/img/phases_<gpu>.png

Left: each stage's phases stacked as shares of the sum of its phase medians (each phase's median
is taken on its own, so the medians need not add up to the median total exactly). Right: the
same phase times in ms on a log scale, so that a phase that shrinks by orders of magnitude stays
visible when another phase dominates the total.
"""

from __future__ import annotations

import sys

from .. import ladder_results as lr
from . import _common as c

MARKERS = {"conv": "o", "pool": "s", "epilogue": "^", "fused": "D"}


def draw(run: lr.LadderRun):
    stages = run.ran_stages()
    fig, (ax, bx) = c.new_figure(11.0, 1.4 + 0.45 * max(len(stages), 1), ncols=2)
    seen = set()
    for i, s in enumerate(stages):
        total = sum(s.phases.values())
        left = 0.0
        for ph, ms in s.phases.items():
            share = 100 * ms / total if total else 0
            ax.barh(i, share, left=left, color=c.PHASE_COLORS.get(ph, "0.6"), label=ph if ph not in seen else None)
            seen.add(ph)
            if share >= 12:
                ax.text(left + share / 2, i, f"{ph} {share:.0f}%", ha="center", va="center", fontsize=7,
                        color="white")
            left += share
        ax.text(101, i, f"{lr.fmt_ms(s.total_ms)} ms", va="center", fontsize=8)
    labels = [s.label for s in stages]
    ax.set_yticks(range(len(stages)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 122)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel("share of the stage's time (%); right of each bar: median total")
    ax.set_title(c.title(run, "Phase breakdown"), fontsize=10)
    if seen:
        ax.legend(fontsize=7, loc="lower right", ncol=len(seen))

    seen = set()
    for i, s in enumerate(stages):
        for ph, ms in s.phases.items():
            if ms > 0:
                bx.scatter([ms], [i], marker=MARKERS.get(ph, "o"), s=40, color=c.PHASE_COLORS.get(ph, "0.6"),
                           edgecolor="black", linewidth=0.5, zorder=3, label=ph if ph not in seen else None)
                seen.add(ph)
    if run.floor_ms:
        bx.axvline(run.floor_ms, color=c.FLOOR_COLOR, linestyle="--", linewidth=1,
                   label=f"floor {lr.fmt_ms(run.floor_ms)} ms")
    bx.set_xscale("log")
    bx.set_yticks(range(len(stages)), labels, fontsize=8)
    bx.set_ylim(len(stages) - 0.5, -0.5)
    bx.set_xlabel("phase time (ms, log scale)")
    bx.set_title("Phase times", fontsize=10)
    bx.grid(axis="x", which="major", alpha=0.3)
    if seen:
        bx.legend(fontsize=7, loc="lower left")
    return fig


def main(argv=None) -> int:
    return c.cli(draw, "phases", __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    sys.exit(main())
