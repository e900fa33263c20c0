"""The problem-74 track's rungs in two panels: the forward rungs' times, and the backward rungs'
phases (reduce: grad_multiplier and grad_bias; weight: grad_weight; input: grad_x) side by side,
on log scales, with each pass's memory and compute floors of the same run as horizontal lines.
Each bar is labelled with its time, and each rung's total with its multiple of the larger floor.

    python3 scripts/plots/plot_p74.py [--results FILE] [--out FILE]
    # default: results/p74/ladder_h200.json -> docs/img/p74_time_h200.png

Input: the JSON that `build/p74_ladder --json FILE` writes (tracks/p74_backward/runner_report.cpp).
Needs no GPU.
"""

from __future__ import annotations

import sys

from . import _common as c

# the backward's phases; their colours differ from _common.KIND_COLORS', which the forward panel uses
PHASES = (("reduce", "reduce: grad_multiplier, grad_bias", "#55a868"),
          ("weight", "weight: grad_weight", "#c44e52"),
          ("input", "input: grad_x", "#dd8452"))


def ran(results: dict, direction: str) -> list[dict]:
    return [r for r in results["rungs"] if r.get("ran") and r.get("direction") == direction and "ms" in r]


def floor_lines(ax, floors: dict) -> tuple[list, list]:
    """The two floors as horizontal lines; returns legend handles and names carrying their values
    (labels on the lines would sit on the bars of the fastest rungs)."""
    handles, names = [], []
    for key, name, style in (("memory_floor_ms", "memory floor", "--"),
                             ("compute_floor_ms", "compute floor (FP32 FMA peak)", ":")):
        value = floors.get(key, 0)
        if value > 0:
            handles.append(ax.axhline(value, color="0.3", linestyle=style, linewidth=1))
            names.append(f"{name}: {value:.3f} ms")
    return handles, names


def ms_text(ms: float) -> str:
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def label(r: dict, top: float) -> str:
    text = ms_text(r["ms"])
    if r.get("gpu") and top > 0:
        text += f"\n{r['ms'] / top:.1f}x floor"
    return text


def draw_forward(ax, results: dict) -> None:
    rungs = ran(results, "forward")
    floors = results["floors"]["forward"]
    top = max(floors["memory_floor_ms"], floors["compute_floor_ms"])
    for i, r in enumerate(rungs):
        kind = "cpu" if not r["gpu"] else "fused" if "fused" in r.get("phase_ms", {}) else "split"
        ax.bar(i, r["ms"], color=c.KIND_COLORS[kind], width=0.6)
        ax.text(i, r["ms"] * 1.15, label(r, top), ha="center", va="bottom", fontsize=7)
    lines, line_names = floor_lines(ax, floors)
    ax.set_xticks(range(len(rungs)), [f"{r['id']}\n{r['name']}" for r in rungs], fontsize=7)
    low = min([floors["memory_floor_ms"] or 1, floors["compute_floor_ms"] or 1] + [r["ms"] for r in rungs])
    ax.set_ylim(low * 0.3, max(r["ms"] for r in rungs) * 60)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log scale)")
    ax.set_title("forward: out, argmax and y at the argmax", fontsize=9)
    handles = [c.swatch(c.KIND_COLORS[k]) for k in ("split", "fused")]
    ax.legend(handles + lines, ["conv, chain, pool: separate kernels", "one fused kernel"] + line_names, fontsize=7,
              loc="upper right", frameon=False)


def draw_backward(ax, results: dict) -> None:
    rungs = ran(results, "backward")
    floors = results["floors"]["backward"]
    top = max(floors["memory_floor_ms"], floors["compute_floor_ms"])
    width = 0.26
    for i, r in enumerate(rungs):
        phases = r.get("phase_ms") or {}
        if not phases:  # the CPU rung: one wall-clock time, no phases
            ax.bar(i, r["ms"], color=c.KIND_COLORS["cpu"], width=0.6)
        for j, (key, _, color) in enumerate(PHASES):
            if key in phases:
                x = i + (j - 1) * width
                ax.bar(x, phases[key], color=color, width=width)
                ax.text(x, phases[key] * 1.1, f"{phases[key]:.3g}", ha="center", va="bottom", fontsize=6, rotation=90)
        ax.text(i, r["ms"] * 6, f"total\n{label(r, top)}" + ("" if r.get("deterministic") else "\nnot deterministic"),
                ha="center", va="bottom", fontsize=7)
    lines, line_names = floor_lines(ax, floors)
    ax.set_xticks(range(len(rungs)), [f"{r['id']}\n{r['name']}" for r in rungs], fontsize=7)
    every = [v for r in rungs for v in (r.get("phase_ms") or {"": r["ms"]}).values() if v > 0]
    low = min([floors["memory_floor_ms"] or 1, floors["compute_floor_ms"] or 1] + every)
    ax.set_ylim(low * 0.3, max(r["ms"] for r in rungs) * 200)
    ax.set_yscale("log")
    ax.set_title("backward: the four gradients from the saved state, by phase", fontsize=9)
    handles = [c.swatch(color) for _, _, color in PHASES]
    names = [n for _, n, _ in PHASES]
    if any(not r["gpu"] for r in rungs):
        handles.append(c.swatch(c.KIND_COLORS["cpu"]))
        names.append("CPU, whole pass")
    ax.legend(handles + lines, names + line_names, fontsize=7, loc="upper right", frameon=False)


def draw(results: dict):
    """The two-panel figure of a track runner's JSON; SystemExit when no forward or no backward rung ran."""
    if not ran(results, "forward") or not ran(results, "backward"):
        raise SystemExit("the results lack a forward or a backward rung that ran: nothing to draw")
    forward, backward = ran(results, "forward"), ran(results, "backward")
    fig, (left, right) = c.new_figure(4.0 + 1.1 * (len(forward) + len(backward)), 5.2, ncols=2,
                                      width_ratios=[len(forward), len(backward)])
    draw_forward(left, results)
    draw_backward(right, results)
    p = results["problem"]
    fig.suptitle(f"Problem 74 track on {results['device'].split(',')[0] or 'no GPU'}: batch {p['batch']}, "
                 f"{p['in_channels']}->{p['out_channels']} channels, conv output "
                 f"{'x'.join(map(str, p['conv_size']))}, pooled {'x'.join(map(str, p['output_size']))}, "
                 f"median of {results['timing']['reps']} (commit {results['provenance']['git_commit']}; "
                 f"backward from rung {results.get('saved_from', '?')}'s saved state)", fontsize=9)
    return fig


def main(argv=None) -> int:
    return c.track_cli(draw, "p74", __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    sys.exit(main())
