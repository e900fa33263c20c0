"""The problem-38 track's rungs: time per rung on a log scale, with the memory floor and the compute
floor of the same run as horizontal lines, and each bar labelled with its time and its multiple of
the larger floor.

    python3 scripts/plots/plot_p38.py [--results FILE] [--out FILE]
    # default: results/p38/ladder_h200.json -> docs/img/p38_time_h200.png

Input: the JSON that `build/p38_ladder --json FILE` writes (tracks/p38_spatial_softmax/runner.cu).
"""

from __future__ import annotations

import sys

from . import _common as c


def kind(rung: dict) -> str:
    """_common.KIND_COLORS' key: cpu, split (pool and convolution, then the softmax) or fused."""
    if not rung["gpu"]:
        return "cpu"
    return "fused" if int(rung["id"]) >= 5 else "split"


def draw(results: dict):
    """The figure of a track runner's JSON; SystemExit when no rung ran."""
    rungs = [r for r in results["rungs"] if r.get("ran")]
    if not rungs:
        raise SystemExit("no rung ran in the results: nothing to draw")
    floors = results["floors"]
    top = max(floors["memory_floor_ms"], floors["compute_floor_ms"])
    fig, ax = c.new_figure(max(7.0, 1.0 * len(rungs) + 2.5), 4.8)
    for i, r in enumerate(rungs):
        ax.bar(i, r["ms"], color=c.KIND_COLORS[kind(r)], width=0.6)
        label = f"{r['ms']:.3g} ms" + (f"\n{r['ms'] / top:.1f}x floor" if r["gpu"] and top > 0 else "")
        ax.text(i, r["ms"] * 1.15, label, ha="center", va="bottom", fontsize=8)
    for value, name, style in ((floors["memory_floor_ms"], "memory floor (read x + write the output)", "--"),
                               (floors["compute_floor_ms"], "compute floor (the convolution at the FP32 peak)", ":")):
        if value > 0:
            ax.axhline(value, color="0.3", linestyle=style, linewidth=1)
            ax.text(len(rungs) - 0.5, value * 0.85, f"{name}: {value:.3f} ms", ha="right", va="top", fontsize=8,
                    color="0.3")
    ax.set_yscale("log")
    ax.set_ylim(min(floors["memory_floor_ms"] or 1, min(r["ms"] for r in rungs)) * 0.4,
                max(r["ms"] for r in rungs) * 6)
    ax.set_xticks(range(len(rungs)), [f"{r['id']}\n{r['name']}" for r in rungs], fontsize=8)
    ax.set_ylabel("time per forward (ms, log scale)")
    p = results["problem"]
    ax.set_title(f"Problem 38 track on {results['device'].split(',')[0] or 'no GPU'}: batch {p['batch']}, "
                 f"{p['in_channels']}->{p['out_channels']} channels, output {'x'.join(map(str, p['output_size']))}, "
                 f"median of {results['timing']['reps']}", fontsize=9)
    kinds = ("cpu", "split", "fused")
    fig.legend([c.swatch(c.KIND_COLORS[k]) for k in kinds],
               ["CPU", "GPU: pool and convolution, then the softmax", "GPU: fused"], fontsize=8,
               loc="outside lower center", ncols=3, frameon=False)
    return fig


def main(argv=None) -> int:
    return c.track_cli(draw, "p38", __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    sys.exit(main())
