"""Achieved throughput against a roofline, and achieved bandwidth against the measured floor.

    python3 scripts/plots/plot_roofline.py [--results DIR] [--out DIR]  # -> docs/img/roofline_<gpu>.png

Left: the roofline. x = arithmetic intensity (flop per byte that must move) from the JSON's "cost"
fields; y = achieved TFLOP/s. The sloped roof is the bandwidth of the streaming read of x measured
in the same run (floor_gbps); the flat roof is the FP32 FMA peak, SMs x 128 lanes x boost clock x 2
(ladder_results.BOOST_CLOCK_GHZ; LADDER_PEAK_TFLOPS overrides it). Points: each stage's conv and
pool phases, and fused stages that do the convolution's arithmetic.
Right: GB/s of the memory-bound work (pool phases, the CUB baseline, fused stages that skip the
convolution's arithmetic) against the floor's GB/s, and the specified DRAM peak where known
(LadderRun.dram_peak: the JSON's dram_peak_gbps, else a results/floor_sweep_*.txt of this GPU).
Points and bars follow the JSON's computes_conv: a stage that skips the convolution's arithmetic
is never placed on the roofline as if it had done it.

Tensor-core stages (the JSON's "tensor_cores": true, stages 10 and 11) are not FP32 SIMT work:
the FMA roof is not their ceiling. By default they are left off the roofline, named in a note
under it. With LADDER_MMA_PEAK_TFLOPS set (a TF32 mma.sync peak in TFLOP/s, e.g. the figure the
mma_peak program prints on that GPU), they are drawn with open markers against a second, labelled
flat roof at that value; nothing else changes. No TF32 peak is built in: it is the caller's
measurement, and the label says where it came from.
"""

from __future__ import annotations

import os
import sys

from .. import ladder_results as lr
from . import _common as c

MARKERS = {"conv": "o", "pool": "s", "fused": "D"}
MMA_COLOR = "#8c564b"


def mma_peak_tflops() -> float | None:
    """The TF32 mma roof from LADDER_MMA_PEAK_TFLOPS (a positive number), else None."""
    v = lr._num(os.environ.get("LADDER_MMA_PEAK_TFLOPS"))
    return v if v and v > 0 else None


def roofline_points(run: lr.LadderRun, mma_peak: float | None = None):
    """[(stage, phase, intensity flop/B, TFLOP/s)] for the left panel; tensor-core stages only
    where a TF32 mma roof is given (mma_peak)."""
    pts = []
    for s in run.ran_stages():
        # computes_conv false: its phases are not the convolution nor the pool of its output
        # (stage 12 pools x, then contracts the sums), so the costs below are not theirs.
        if not s.gpu or s.computes_conv is False or (s.tensor_cores and not mma_peak):
            continue
        for ph in ("conv", "pool"):
            f, b, ms = run.cost(ph, "flops"), run.cost(ph, "bytes"), s.ms(ph)
            if f and b and ms:
                pts.append((s, ph, f / b, f / ms / 1e9))
        tf = run.fused_tflops(s)
        f, b = run.cost("fused", "flops"), run.cost("fused", "bytes")
        if tf and f and b:
            pts.append((s, "fused", f / b, tf))
    return pts


def bandwidth_bars(run: lr.LadderRun):
    """[(label, GB/s, colour)] for the right panel."""
    bars = []
    if run.floor_gbps:
        bars.append(("floor: stream-read x", run.floor_gbps, c.FLOOR_COLOR))
    if run.cub_gbps():
        bars.append(("CUB segmented sum (pool)", run.cub_gbps(), "0.5"))
    for s in run.ran_stages():
        if not s.gpu:
            continue
        if run.pool_gbps(s):
            bars.append((f"{s.id} pool phase", run.pool_gbps(s), c.PHASE_COLORS["pool"]))
        elif run.fused_kind(s) == "memory" and run.fused_gbps(s):
            bars.append((f"{s.id} fused (x read once)", run.fused_gbps(s), c.PHASE_COLORS["fused"]))
    return bars


def draw(run: lr.LadderRun):
    import numpy as np

    fig, (ax, bx) = c.new_figure(12.5, 4.8, ncols=2)
    peak, peak_how = run.fp32_peak_tflops()
    mma_peak = mma_peak_tflops()
    bw = run.floor_gbps
    pts = roofline_points(run, mma_peak)
    ai = np.logspace(-2, 4, 200)
    if bw:
        roof = bw * ai / 1e3  # GB/s x flop/B = GFLOP/s -> TFLOP/s
        if peak:
            roof = np.minimum(roof, peak)
        ax.plot(ai, roof, color="0.2", linewidth=1.5,
                label=f"roof: {lr.fmt_rate(bw)} GB/s (streaming read of x, same run)")
    if peak:
        ax.axhline(peak, color="0.2", linewidth=0.8, linestyle=":",
                   label=f"FP32 peak {lr.fmt_rate(peak)} TFLOP/s\n({peak_how})")
    if mma_peak and any(s.tensor_cores for s, *_ in pts):
        if bw:  # the bandwidth slope on from the FP32 roof up to the mma roof: the tensor cores' roof
            slope = bw * ai / 1e3
            above = slope >= (peak or 0)
            ax.plot(ai[above], np.minimum(slope[above], mma_peak), color=MMA_COLOR, linewidth=1.0, linestyle="--")
        ax.axhline(mma_peak, color=MMA_COLOR, linewidth=1.0, linestyle="-.",
                   label=f"TF32 mma peak {lr.fmt_rate(mma_peak)} TFLOP/s\n(LADDER_MMA_PEAK_TFLOPS; open markers)")
    ids = sorted({s.id for s, *_ in pts})
    cmap = __import__("matplotlib").colormaps["tab10" if len(ids) <= 10 else "tab20"]
    color = {sid: cmap(i % cmap.N) for i, sid in enumerate(ids)}
    for s, ph, x, y in pts:
        if s.tensor_cores:  # open marker: measured against the TF32 mma roof
            ax.scatter([x], [y], marker=MARKERS[ph], s=42, facecolor="white", edgecolor=color[s.id],
                       linewidth=1.5, zorder=3, label=f"{s.id} {ph} (tensor cores)")
            continue
        ax.scatter([x], [y], marker=MARKERS[ph], s=42, color=color[s.id], edgecolor="black", linewidth=0.5,
                   zorder=3, label=f"{s.id} {ph}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ys = [y for *_, y in pts] + ([peak] if peak else []) + (
        [mma_peak] if mma_peak and any(s.tensor_cores for s, *_ in pts) else [])
    if ys:
        ax.set_ylim(min(ys) / 10, max(ys) * 30)
    ax.set_xlim(ai[0], ai[-1])
    ax.set_xlabel("arithmetic intensity (flop per byte that must move)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(c.title(run, "Roofline") + ("" if peak else " (FP32 peak unknown)"), fontsize=10)
    # Beside the axes, not on them: the points cover the whole area under the roofs.
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(which="major", alpha=0.3)
    skipped = [s.id for s in run.ran_stages()
               if s.gpu and (s.computes_conv is False or run.fused_kind(s) == "memory")]
    notes = []
    if skipped:
        notes.append("not placed: stage " + ", ".join(skipped)
                     + " (skips the convolution's arithmetic; see the right panel)")
    on_tc = [s.id for s in run.ran_stages() if s.gpu and s.tensor_cores]
    if on_tc and not mma_peak:
        notes.append("not placed: stage " + ", ".join(on_tc) + " (tensor cores: the FP32 roof is not their "
                     "ceiling;\nset LADDER_MMA_PEAK_TFLOPS to draw them against a TF32 mma roof)")
    if notes:
        ax.set_xlabel(ax.get_xlabel() + "\n" + "\n".join(notes), fontsize=8)

    bars = bandwidth_bars(run)
    if bars:
        labels, vals, cols = zip(*bars)
        y = range(len(bars))
        bx.barh(list(y), vals, color=cols, height=0.6)
        for yi, v in zip(y, vals):
            txt = f"{lr.fmt_rate(v)} GB/s" + (f" ({100 * v / bw:.0f}% of floor)" if bw else "")
            bx.annotate(txt, (v, yi), textcoords="offset points", xytext=(3, 0), va="center", fontsize=7.5)
        bx.set_yticks(list(y), labels, fontsize=8)
        bx.set_ylim(max(len(bars), 5) - 0.5, -0.5)
        dram, _ = run.dram_peak()
        bx.set_xlim(0, max(list(vals) + ([dram] if dram else [])) * 1.45)
        if bw:
            bx.axvline(bw, color=c.FLOOR_COLOR, linestyle="--", linewidth=1, label="floor (same run)")
        if dram:
            bx.axvline(dram, color="0.3", linestyle=":", linewidth=1.2,
                       label=f"DRAM peak (specified) {lr.fmt_rate(dram)} GB/s")
        bx.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    bx.set_xlabel("GB/s (bytes that must move / time)")
    bx.set_title("Memory-bound work against the floor", fontsize=10)
    return fig


def main(argv=None) -> int:
    return c.cli(draw, "roofline", __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    sys.exit(main())
