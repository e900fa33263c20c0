"""Draws the chapters' explanatory diagrams (no data needed): docs/img/diagram_<name>.png, and
docs/img/implicit_gemm.png and docs/img/tf32_fragments.png (FILE_NAMES).

    python3 scripts/plots/diagrams.py                 # every diagram -> docs/img/
    python3 scripts/plots/diagrams.py --out DIR       # somewhere else
    python3 scripts/plots/diagrams.py --only tree_sequential

Each diagram is computed from the same rules as the code it illustrates (the gather form's exact
division, stage 03's sequential addressing, stage 04's shuffle offsets, the input tile with its
halo that stage 07 introduces, in stage 08's geometry with its row pitch of 20 floats, and
tap_span and plan_tap of stages/lib/tap_window.cuh, stage 12's; stage 10's tile, warp tiling,
mma.m16n8k8 .tf32 fragment layouts and channel slots of tensor_cores.cu; stage 15's K-major
core matrices and the LBO and SBO of its wgmma descriptors, wgmma.cu), drawn small enough to read.
Deterministic:
no randomness, no dates; matplotlib, Agg backend.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from . import _common as c

TAP_COLORS = ("#4c72b0", "#dd8452", "#55a868")  # tap k = 0, 1, 2
PLANE_COLORS = ("#c6d7ee", "#f6d5bf", "#cfe8cf")  # planes 0, 1, 2
ACTIVE = "#4c72b0"
IDLE = "#e3e3e3"
HOT = "#c44e52"


def new_canvas(width: float, height: float, xlim, ylim):
    """A figure with one axes in data units, no frame: the diagrams place everything by hand."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    ax = fig.add_axes((0.01, 0.01, 0.98, 0.98))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def box(ax, x, y, w=1.0, h=1.0, fc="white", ec="0.35", lw=0.8, text=None, fs=8, tc="black", **kw):
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), w, h, facecolor=fc, edgecolor=ec, linewidth=lw, **kw))
    if text is not None:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fs, color=tc)


def arrow(ax, x0, y0, x1, y1, color="0.2", lw=1.0, rad=0.0, style="-|>", alpha=1.0):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                arrowprops={"arrowstyle": style, "color": color, "lw": lw, "alpha": alpha,
                            "shrinkA": 1, "shrinkB": 1, "connectionstyle": f"arc3,rad={rad}"})


# --- (a) stage 00/01: scatter and gather forms of a transposed convolution ------------------------

def gather_taps(o: int, n_in: int, k: int, stride: int) -> list[tuple[int, int]]:
    """(tap, input) pairs output o reads: i = (o - tap)/stride when exact and 0 <= i < n_in
    (padding 0, dilation 1: the gather form of docs/problem.md)."""
    out = []
    for tap in range(k):
        num = o - tap
        if num >= 0 and num % stride == 0 and num // stride < n_in:
            out.append((tap, num // stride))
    return out


def draw_gather_scatter():
    n_in, k, s = 5, 3, 2
    n_out = (n_in - 1) * s + k  # 11
    fig, ax = new_canvas(13.0, 4.9, (-0.8, 41.5), (-3.6, 12.4))

    def rows(x0, y_in, y_out, title):
        ax.text(x0 + n_out / 2, y_in + 2.3, title, ha="center", fontsize=10, weight="bold")
        off = (n_out - n_in * 2) / 2  # centre the inputs (drawn two cells wide) over the outputs
        for i in range(n_in):
            box(ax, x0 + off + 2 * i, y_in, 2, 1, fc="#eeeeee", text=f"x[{i}]", fs=8)
        for o in range(n_out):
            box(ax, x0 + o, y_out, 1, 1, fc="white", text=f"{o}", fs=7)
        ax.text(x0 - 0.3, y_in + 0.5, "input", ha="right", va="center", fontsize=8)
        ax.text(x0 - 0.3, y_out + 0.5, "output", ha="right", va="center", fontsize=8)
        return lambda i: x0 + off + 2 * i + 1, lambda o: x0 + o + 0.5

    # Scatter: input i adds w[tap]*x[i] into output i*stride + tap.
    xi, xo = rows(0.5, 8, 3, "scatter: one input adds into k outputs")
    for i in range(n_in):
        for tap in range(k):
            hot = i == 2
            arrow(ax, xi(i), 8, xo(i * s + tap), 4, color=TAP_COLORS[tap] if hot else "0.8",
                  lw=1.8 if hot else 0.7, style="-|>" if hot else "-")
    ax.text(6.0, 1.4, "x[2] adds into outputs 4, 5, 6 (taps 0, 1, 2);\n"
            "neighbouring inputs add into the same outputs:\nfrom many threads that needs atomics",
            ha="center", va="top", fontsize=8)

    # Gather: output o reads x[(o - tap)/stride] when the division is exact.
    xi, xo = rows(14.5, 8, 3, "gather: one output reads the inputs that map onto it")
    for o in range(n_out):
        for tap, i in gather_taps(o, n_in, k, s):
            hot = o in (4, 5)
            arrow(ax, xi(i), 8, xo(o), 4, color=TAP_COLORS[tap] if hot else "0.85",
                  lw=1.8 if hot else 0.7, style="-|>" if hot else "-")
    ax.text(20.0, 1.4, "out[4]: tap 0 reads x[(4-0)/2] = x[2], tap 2 reads x[1];\n"
            "tap 1: (4-1)/2 is not exact, no term.  out[5]: only tap 1, x[2].\n"
            "Each output is written by one thread: no atomics",
            ha="center", va="top", fontsize=8)
    for tap in range(k):
        box(ax, 14.5 + 3.6 * tap, -3.2, 0.8, 0.8, fc=TAP_COLORS[tap])
        ax.text(14.5 + 3.6 * tap + 1.0, -2.8, f"tap k = {tap}", va="center", fontsize=8)
    ax.text(1.0, -2.8, f"stride {s}, kernel {k}, padding 0: {n_in} inputs -> "
            f"(5 - 1)*2 + 3 = {n_out} outputs", va="center", fontsize=8)

    # 2D: how many input terms each output of a 4x4 input reads (rows x columns of taps).
    n2 = 4
    m2 = (n2 - 1) * s + k  # 9
    x0, y0, cell = 30.5, 0.2, 1.0
    ax.text(x0 + m2 * cell / 2, y0 + m2 * cell + 0.3, "2-D, 4x4 input -> 9x9 output:\ninput terms each output reads",
            ha="center", va="bottom", fontsize=10, weight="bold")
    shade = {1: "#f2f2f2", 2: "#c6d7ee", 4: "#7fa3d1"}
    for oh in range(m2):
        for ow in range(m2):
            count = len(gather_taps(oh, n2, k, s)) * len(gather_taps(ow, n2, k, s))
            box(ax, x0 + ow * cell, y0 + (m2 - 1 - oh) * cell, cell, cell, fc=shade.get(count, "white"),
                text=str(count), fs=8)
    ax.text(x0 + m2 * cell / 2, -0.2, "inside: even row and column 2x2 = 4 terms, one odd 2, both odd 1.\n"
            "Four classes of outputs by (oh mod 2, ow mod 2), each a\nsmaller stride-1 convolution "
            "(sub-pixel decomposition)", ha="center", va="top", fontsize=8)
    return fig


# --- pool mappings of stages 01, 02, 03 ------------------------------------------------------------

def draw_pool_mapping():
    plane, planes = 12, 3
    fig, ax = new_canvas(12.5, 5.9, (-9.6, 51.5), (-4.0, 21.0))
    note_x = 37.0

    def memory(y, label):
        ax.text(-9.4, y + 0.5, label, ha="left", va="center", fontsize=9, weight="bold")
        for p in range(planes):
            for j in range(plane):
                box(ax, p * plane + j, y, 1, 1, fc=PLANE_COLORS[p], lw=0.5)
            ax.text(p * plane + plane / 2, y + 1.25, f"plane {p}", ha="center", fontsize=7.5, color="0.3")

    def sums(p, y, ec="0.35", lw=0.8):
        sx = p * plane + plane / 2 - 1.2
        box(ax, sx, y, 2.4, 1.1, fc=PLANE_COLORS[p], ec=ec, lw=lw, text=f"sums[{p}]", fs=7)
        return sx + 1.2

    # Stage 01: thread p walks plane p; a warp's load j touches one element of every plane.
    y = 18.5
    memory(y, "01  per_thread_loop")
    for p in range(planes):
        box(ax, p * plane + 4, y, 1, 1, fc=HOT, lw=0.5)
        ax.text(p * plane + 0.2, y - 1.0, f"lane {p}: j = 0, 1, ...", ha="left", fontsize=7)
        arrow(ax, p * plane + 0.3, y - 1.6, p * plane + plane - 0.3, y - 1.6, color="0.3", lw=0.8)
    ax.text(note_x, y + 0.4, "one thread per plane, summing in a register.\n"
            "Red: one load instruction of the warp (j = 4):\n32 addresses a plane apart, 32 sectors; a lane\n"
            "uses 4 bytes of its sector now, the L1 keeps\nthe rest for its next 7 loads. 2048 threads in all",
            va="center", fontsize=7.5)

    # Stage 02: one thread per element, every one an atomicAdd on its plane's sum.
    y = 11.0
    memory(y, "02  atomics")
    for p in range(planes):
        cx = sums(p, y - 5.0, ec=HOT, lw=1.5)
        for j in range(plane):
            arrow(ax, p * plane + j + 0.5, y, cx, y - 3.9, color=HOT, lw=0.6, alpha=0.8)
    ax.text(note_x, y - 1.8, "one thread per element: a warp reads\n32 neighbours (coalesced), then every\n"
            "thread of a plane updates the same\naddress, and the L2 applies those\nupdates one after another",
            va="center", fontsize=7.5)

    # Stage 03: a block per chunk reduces on chip, then one atomic per block.
    y = 2.0
    chunk = 4
    memory(y, "03  shared_tree")
    for p in range(planes):
        cx = sums(p, y - 5.3)
        for ch in range(plane // chunk):
            bx = p * plane + ch * chunk
            ax.plot([bx + 0.1, bx + chunk - 0.1], [y - 0.25, y - 0.25], color="0.3", lw=1.2)
            box(ax, bx + chunk / 2 - 0.4, y - 1.9, 0.8, 0.8, fc="white", ec="0.3", text="+", fs=7)
            arrow(ax, bx + chunk / 2, y - 1.9, cx, y - 4.2, color="0.3", lw=0.9)
    ax.text(note_x, y - 1.6, "one block per chunk of a plane (stages 03, 04:\n2048 elements, stage 05: 16,384): a tree\n"
            "on chip, then one atomic per block", va="center", fontsize=7.5)
    return fig


# --- (b) stage 03: tree with sequential addressing -------------------------------------------------

def draw_tree_sequential():
    n = 16  # stands for kBlock = 256
    fig, ax = new_canvas(13.0, 6.4, (-4.5, 54.0), (-4.2, 22.8))

    def level_rows(x0, steps, title):
        ax.text(x0 + n / 2, 22.0, title, ha="center", fontsize=10, weight="bold")
        for li, (label, active, pairs) in enumerate(steps):
            y = 18 - li * 4.4
            for t in range(n):
                box(ax, x0 + t, y, 1, 1, fc=ACTIVE if t in active else IDLE, ec="0.4", lw=0.5,
                    text=str(t), fs=6.5, tc="white" if t in active else "0.35")
            ax.text(x0 - 0.4, y + 0.5, label, ha="right", va="center", fontsize=7.5)
            for dst, src in pairs:  # sh[dst] += sh[src]: its own value (grey) and the partner's
                arrow(ax, x0 + dst + 0.5, y + 1.0 + 3.4, x0 + dst + 0.5, y + 1.0, color="0.6", lw=0.6)
                arrow(ax, x0 + src + 0.5, y + 1.0 + 3.4, x0 + dst + 0.5, y + 1.0, color=ACTIVE, lw=0.8)
            if li:
                ax.plot([x0 - 0.2, x0 + n + 0.2], [y + 2.7, y + 2.7], color=HOT, lw=0.9, ls="--")

    # Sequential addressing: at level s thread t < s adds sh[t + s] (stage 03's loop).
    steps = [("sh[t]", set(range(n)), [])]  # after the first add during load
    s = n // 2
    while s:
        steps.append((f"s = {s}", set(range(s)), [(t, t + s) for t in range(s)]))
        s //= 2
    level_rows(0.0, steps, "sequential addressing (stage 03)")
    ax.text(n + 0.6, 18 - 4.4 + 2.7, "__syncthreads()", color=HOT, fontsize=7.5, va="center")
    ax.text(n / 2, -0.8, "level s: threads 0 .. s-1 add sh[t + s]. Active threads are contiguous,\n"
            "so whole warps go idle together, and a warp reads 32 consecutive words:\n"
            "one per bank. 16 slots drawn for the 256 of a block: 8 levels there.",
            ha="center", va="top", fontsize=8)

    # Interleaved addressing (Harris's #1), for contrast: t % (2s) == 0 adds sh[t + s].
    steps = [("sh[t]", set(range(n)), [])]  # after the first add during load
    s = 1
    while s < n:
        act = {t for t in range(n) if t % (2 * s) == 0}
        steps.append((f"s = {s}", act, [(t, t + s) for t in sorted(act)]))
        s *= 2
    level_rows(30.0, steps, "interleaved addressing (Harris #1)")
    ax.text(30 + n / 2, -0.8, "level s: threads with t % 2s == 0 add sh[t + s]. The active threads\n"
            "are spread out, so every warp keeps a few active lanes (divergence)\n"
            "until the last levels, and the % costs instructions.",
            ha="center", va="top", fontsize=8)
    box(ax, 23.0, 20.3, 0.8, 0.8, fc=ACTIVE)
    ax.text(24.1, 20.7, "adds", va="center", fontsize=7.5)
    box(ax, 23.0, 19.1, 0.8, 0.8, fc=IDLE)
    ax.text(24.1, 19.5, "idle", va="center", fontsize=7.5)
    return fig


# --- (c) stage 04: shuffle reductions ---------------------------------------------------------------

def draw_warp_shuffle():
    fig, ax = new_canvas(13.0, 6.6, (-3.5, 51.5), (-6.6, 21.5))
    lanes = 32
    r = 0.36
    from matplotlib.patches import Circle

    def dot(x, y, on):
        ax.add_patch(Circle((x, y), r, facecolor=ACTIVE if on else "white", edgecolor=ACTIVE if on else "0.6",
                            linewidth=0.8))

    # __shfl_down_sync: lane l adds the value of lane l + offset. Only lanes < offset feed lane 0.
    ax.text(16, 20.6, "warp_sum: v += __shfl_down_sync(full mask, v, offset)", ha="center", fontsize=10,
            weight="bold")
    offsets = [16, 8, 4, 2, 1]
    ys = [18 - 3.4 * i for i in range(len(offsets) + 1)]
    for lane in range(lanes):
        dot(lane, ys[0], True)
        if lane % 4 == 0:
            ax.text(lane, ys[0] + 0.75, str(lane), ha="center", fontsize=6.5, color="0.3")
    for step, off in enumerate(offsets):
        y0, y1 = ys[step], ys[step + 1]
        for lane in range(lanes):
            dot(lane, y1, lane < off)
            if lane < off:  # v (its own, grey) + the value of lane + offset
                arrow(ax, lane, y0 - r, lane, y1 + r, color="0.6", lw=0.5)
                arrow(ax, lane + off, y0 - r, lane, y1 + r, color=ACTIVE, lw=0.6)
        ax.text(-0.9, (y0 + y1) / 2, f"offset {off}", ha="right", va="center", fontsize=7.5)
    ax.text(0, ys[-1] - 1.0, "lane 0: the warp's sum", ha="left", va="top", fontsize=8, color=ACTIVE)
    ax.text(16, -2.5, "5 steps, registers only: no shared memory, no barrier. All 32 lanes execute every\n"
            "shuffle (hollow: lanes whose results nobody reads). Then lane 0 of each warp writes one\n"
            "shared slot, one __syncthreads(), warp 0 shuffles the 8 slots, one atomicAdd per block.",
            ha="center", va="top", fontsize=8)

    # __shfl_xor_sync butterfly, drawn for 8 lanes: every lane ends with the total.
    x0 = 38.0
    n8 = 8
    ax.text(x0 + 4.5, 20.6, "butterfly: __shfl_xor_sync(mask, v, offset)", ha="center", fontsize=10,
            weight="bold")
    xo = [4, 2, 1]
    ys = [18 - 4.6 * i for i in range(len(xo) + 1)]
    for lane in range(n8):
        dot(x0 + 1.3 * lane, ys[0], True)
        ax.text(x0 + 1.3 * lane, ys[0] + 0.75, str(lane), ha="center", fontsize=6.5, color="0.3")
    for step, off in enumerate(xo):
        for lane in range(n8):
            dot(x0 + 1.3 * lane, ys[step + 1], True)
            arrow(ax, x0 + 1.3 * lane, ys[step] - r, x0 + 1.3 * lane, ys[step + 1] + r, color="0.6", lw=0.5)
            arrow(ax, x0 + 1.3 * (lane ^ off), ys[step] - r, x0 + 1.3 * lane, ys[step + 1] + r, color=ACTIVE,
                  lw=0.6)
        ax.text(x0 - 0.9, (ys[step] + ys[step + 1]) / 2, f"xor {off}", ha="right", va="center", fontsize=7.5)
    ax.text(x0 + 4.5, -2.5, "lane l combines with lane l ^ offset:\nevery lane ends with the result.\n"
            "Drawn for 8 lanes; a warp uses\noffsets 16, 8, 4, 2, 1 (lse_merge\nin the epilogue, "
            "warp_allreduce_sum)", ha="center", va="top", fontsize=8)
    return fig


# --- (d) stages 07-08: the input patch with its halo (07), in stage 08's geometry, and its banks ----

KPITCH = 20  # register_tiling.cu (stage 08) and async_copy.cu (09): kPitch = kTileCols + kMaxKernelW - 1


def quarter_warp_banks(pitch: int, rows: int = 8) -> list[list[int]]:
    """Banks read by rows r = 0..rows-1 of one column group when each reads a float4 at r*pitch."""
    return [[(r * pitch + b) % 32 for b in range(4)] for r in range(rows)]


def draw_tile_banks():
    fig, ax = new_canvas(13.0, 7.0, (-2.5, 60.5), (-6.5, 26.0))
    tile, kw = 16, 3
    patch_rows = tile + kw - 1  # 18 for kernel_h 3, dilation 1
    cell = 1.1
    x0, y0 = 0.0, 1.5

    def cxy(row, col):
        return x0 + col * cell, y0 + (patch_rows - 1 - row) * cell

    ax.text(x0 + KPITCH * cell / 2, 23.7, "shared x patch of one input channel: 18 rows x pitch 20",
            ha="center", fontsize=10, weight="bold")
    for row in range(patch_rows):
        for col in range(KPITCH):
            if col >= tile + kw - 1:
                fc = "#eeeeee"   # loaded, never used by a 3-wide kernel
            elif row >= tile or col >= tile:
                fc = "#f6d5bf"   # halo
            else:
                fc = "#c6d7ee"   # aligned with the 16x16 output tile
            x, y = cxy(row, col)
            box(ax, x, y, cell, cell, fc=fc, ec="0.6", lw=0.3)
    # Lane 0 (row 0, columns 0-7) and lane 16 (row 0, columns 8-15): their row windows.
    from matplotlib.patches import Rectangle

    # Lane l: patch row l % 16 (plus kh for the kernel's rows), columns 8*(l / 16) .. +11.
    for lane, color in ((0, HOT), (17, "#8172b3")):
        row, t = lane % tile, lane // tile
        x, y = cxy(row, 8 * t)
        ax.add_patch(Rectangle((x, y), 12 * cell, cell, fill=False, edgecolor=color, linewidth=2.0))
        for px in range(8):
            xx, yy = cxy(row, 8 * t + px)
            ax.plot(xx + cell / 2, yy + cell / 2, "o", ms=2.5, color=color)
    ax.text(x0 + KPITCH * cell / 2, y0 + patch_rows * cell + 0.4,
            "red: lane 0's row window (3 float4), purple: lane 17's; dots: their 8 output pixels",
            ha="center", fontsize=7.5)
    legend = (("#c6d7ee", "16x16: one cell per output pixel of the tile"),
              ("#f6d5bf", "halo: the k-1 = 2 extra rows and columns its taps reach"),
              ("#eeeeee", "pitch padding: copied, read into the\nlast window, unused at kernel width 3"))
    for i, (fc, label) in enumerate(legend):
        box(ax, x0 + 0.2, -1.6 - 1.6 * i, 0.9, 0.9, fc=fc, ec="0.5")
        ax.text(x0 + 1.4, -1.15 - 1.6 * i, label, va="center", fontsize=7.5)
    ax.text(26.5, -1.2, "Output pixel (r, c) of the tile reads patch rows r .. r+2 and columns c .. c+2. Lane l "
            "owns row l % 16,\ncolumns 8(l / 16) .. +7 for 8 channels; a quarter warp (8 lanes) is 8 rows of one "
            "column group.", va="top", fontsize=7.5)

    # Banks: a quarter warp (lanes 0-7 = rows 0-7 of one column group) each reads a float4.
    def banks(bx, pitch, title):
        rows = quarter_warp_banks(pitch)
        bw = 0.95
        ax.text(bx + 16 * bw, 23.7, title, ha="center", fontsize=10, weight="bold")
        hits = [0] * 32
        for r, bs in enumerate(rows):
            y = 20.5 - r * 1.25
            ax.text(bx - 0.4, y + 0.45, f"row {r}", ha="right", va="center", fontsize=7)
            for b in range(32):
                on = b in bs
                box(ax, bx + b * bw, y, bw, 0.9, fc=TAP_COLORS[0] if on else "white", ec="0.75", lw=0.3)
            for b in bs:
                hits[b] += 1
        for b in range(32):
            if b % 4 == 0:
                ax.text(bx + b * bw + bw / 2, 21.7, str(b), ha="center", fontsize=6.5, color="0.3")
            box(ax, bx + b * bw, 9.4, bw, 0.9, fc=HOT if hits[b] > 1 else "#dddddd", ec="0.75", lw=0.3,
                text=str(hits[b]), fs=6.5, tc="white" if hits[b] > 1 else "black")
        ax.text(bx - 0.4, 9.85, "reads\nper bank", ha="right", va="center", fontsize=7)
        return max(hits)

    worst20 = banks(26.5, KPITCH, "pitch 20 (stage 08): banks of one LDS.128")
    ax.text(26.5 + 16 * 0.95, 8.6, f"row r starts at bank 20r mod 32 = 0, 20, 8, 28, 16, 4, 24, 12:\n"
            f"eight disjoint groups of 4, at most {worst20} read per bank, one pass",
            ha="center", va="top", fontsize=8)
    # The contrast, drawn below: an even number of 4-bank groups (24 floats) repeats after 4 rows.
    rows24 = quarter_warp_banks(24)
    hits24 = [0] * 32
    for bs in rows24:
        for b in bs:
            hits24[b] += 1
    bx, bw = 26.5, 0.95
    ax.text(bx + 16 * bw, 3.9, "pitch 24, for contrast: rows start at 0, 24, 16, 8, 0, ...", ha="center",
            fontsize=9, weight="bold")
    for b in range(32):
        box(ax, bx + b * bw, 2.2, bw, 0.9, fc=HOT if hits24[b] > 1 else "#dddddd", ec="0.75", lw=0.3,
            text=str(hits24[b]), fs=6.5, tc="white" if hits24[b] > 1 else "black")
    ax.text(bx - 0.4, 2.65, "reads\nper bank", ha="right", va="center", fontsize=7)
    ax.text(bx + 16 * bw, 1.4, f"{max(hits24)} reads on 16 banks, none on the others: a {max(hits24)}-way "
            "bank conflict,\nthe quarter warp takes two passes", ha="center", va="top", fontsize=8)
    return fig


# --- (e) stage 12: which input elements each tap of a padded kernel sees ---------------------------

def tap_span(n_in: int, n_out: int, stride: int, padding: int, dilation: int, k: int) -> tuple[int, int]:
    """The input rows [lo, hi) whose tap k lands in the output (tap_span in stages/lib/tap_window.cuh)."""
    def ceil_div(a, b):
        return (a + b - 1) // b if a >= 0 else -((-a) // b)

    lo = max(0, ceil_div(padding - k * dilation, stride))
    hi = min(n_in, ceil_div(n_out + padding - k * dilation, stride))
    return (lo, hi) if hi > lo else (0, 0)


def plan_tap(rows, cols, h, w):
    """(mode, rects) as plan_tap in stages/lib/tap_window.cuh; rects are (r0, r1, c0, c1)."""
    if rows[1] == rows[0] or cols[1] == cols[0]:
        return "Zero", []
    if rows == (0, h) and cols == (0, w):
        return "Whole", []
    window = (rows[1] - rows[0]) * (cols[1] - cols[0])
    if window <= h * w - window:
        return "Direct", [(rows[0], rows[1], cols[0], cols[1])]
    return "Frame", [(0, rows[0], 0, w), (rows[1], h, 0, w), (rows[0], rows[1], 0, cols[0]),
                     (rows[0], rows[1], cols[1], w)]


def draw_border_frame():
    h = w = 8
    k, stride, padding, dilation = 3, 1, 1, 1
    h_out = (h - 1) * stride - 2 * padding + dilation * (k - 1) + 1  # = h
    fig, ax = new_canvas(13.0, 6.6, (-1.5, 66.5), (-4.0, 30.0))
    cell = 0.72
    keep, drop, strip, corner = "#c6d7ee", "#f4b6b8", "#dd8452", "#55a868"

    def plane(x0, y0, color_of, label=None, cs=cell):
        for r in range(h):
            for c_ in range(w):
                box(ax, x0 + c_ * cs, y0 + (h - 1 - r) * cs, cs, cs, fc=color_of(r, c_), ec="0.55", lw=0.3)
        if label:
            ax.text(x0 + w * cs / 2, y0 - 0.45, label, ha="center", va="top", fontsize=7.5)

    # Left: the 3x3 taps, kept window in blue, border rows/columns the tap never reads in red.
    ax.text(10.5, 28.8, f"kernel {k}, stride {stride}, padding {padding} ({h}x{w} input, Hout = {h_out}):\n"
            "what each tap (kh, kw) reads", ha="center", fontsize=10, weight="bold")
    for i, (fc, label) in enumerate(((keep, "rows(kh) x cols(kw): summed into R"),
                                     (drop, "never reaches the output for this tap"))):
        box(ax, 0.0, 26.3 - 1.1 * i, 0.7, 0.7, fc=fc, ec="0.55")
        ax.text(0.9, 26.65 - 1.1 * i, label, va="center", fontsize=7.5)
    for kh in range(k):
        rows = tap_span(h, h_out, stride, padding, dilation, kh)
        for kw in range(k):
            cols = tap_span(w, h_out, stride, padding, dilation, kw)
            mode, _ = plan_tap(rows, cols, h, w)
            x0, y0 = kw * 7.3, 18.0 - kh * 8.6

            def col(r, c_, rows=rows, cols=cols):
                return keep if rows[0] <= r < rows[1] and cols[0] <= c_ < cols[1] else drop
            plane(x0, y0, col, f"({kh}, {kw}): {mode}")

    # Right, top: inclusion-exclusion for tap (0, 0).
    rows = tap_span(h, h_out, stride, padding, dilation, 0)
    cols = tap_span(w, h_out, stride, padding, dilation, 0)
    _, rects = plan_tap(rows, cols, h, w)
    cs = 0.62
    xs = [24.0 + i * 8.4 for i in range(5)]
    y_top, y_bot = 17.5, 3.5
    ax.text(44.0, 28.8, "tap (0, 0): R from the plane sum S", ha="center", fontsize=10, weight="bold")
    ax.text(44.0, 27.2, "inclusion-exclusion (docs/problem.md)", ha="center", fontsize=8.5)
    pics = [
        (lambda r, c_: keep, "S: the plane"),
        (lambda r, c_: strip if r < rows[0] else "white", "top strip (row 0)"),
        (lambda r, c_: strip if c_ < cols[0] else "white", "left strip (column 0)"),
        (lambda r, c_: corner if r < rows[0] and c_ < cols[0] else "white", "the corner,\nremoved twice"),
        (lambda r, c_: keep if r >= rows[0] and c_ >= cols[0] else "white", "R"),
    ]
    for i, (f, label) in enumerate(pics):
        plane(xs[i], y_top, f, label, cs)
    for i, sym in enumerate(["-", "-", "+", "="]):
        ax.text(xs[i] + w * cs + 0.95, y_top + h * cs / 2, sym, ha="center", va="center", fontsize=16)

    # Right, bottom: the kernel's cut: top and bottom strips over full rows, left and right
    # strips over the rows in between: disjoint rectangles, R = S - their sum.
    ax.text(44.0, 13.2, "the kernel's cut (plan_tap, Frame): disjoint strips, R = S - sum of frame",
            ha="center", fontsize=8.5)
    names = ("top strip: rows [0, lo),\nall columns", "bottom strip: rows [hi, H),\nall columns",
             "left strip: rows [lo, hi),\ncolumns [0, lo)", "right strip: rows [lo, hi),\ncolumns [hi, W)")
    shown = [(rc, n) for rc, n in zip(rects, names) if rc[1] > rc[0] and rc[3] > rc[2]]
    pics = [(lambda r, c_: keep, "S")]
    for (r0, r1, c0, c1), name in shown:
        pics.append((lambda r, c_, r0=r0, r1=r1, c0=c0, c1=c1: strip if r0 <= r < r1 and c0 <= c_ < c1
                     else "white", name))
    pics.append((lambda r, c_: keep if r >= rows[0] and c_ >= cols[0] else "white", "R"))
    syms = ["-"] + ["-"] * (len(shown) - 1) + ["="]
    xs2 = [24.0 + i * 8.4 for i in range(len(pics))]
    for i, (f, label) in enumerate(pics):
        plane(xs2[i], y_bot, f, label, cs)
    for i, sym in enumerate(syms):
        ax.text(xs2[i] + w * cs + 0.95, y_bot + h * cs / 2, sym, ha="center", va="center", fontsize=16)
    ax.text(44.0, -1.4, "every border element counted once; the plane's last block re-reads the strips, "
            "just after the stream\npassed over them. Without padding every tap is Whole: R = S, nothing is re-read.",
            ha="center", va="top", fontsize=8)
    return fig


# --- (f) stage 10: the convolution of a tile as an implicit GEMM on mma.sync m16n8k8 ----------------

# tensor_cores.cu (stage 10): a block is a 16x16 output tile (M = 256) by 128 output channels (N);
# warp (wm, wn) = (warp % 4, warp / 4) owns 4 m16 tiles (tile rows 4wm .. 4wm+3) by 8 n8 tiles.
TC_TILE, TC_CO, TC_WARPS_M, TC_WARPS_N, TC_CHUNK = 16, 128, 4, 2, 8
WM_COLORS = ("#c6d7ee", "#f6d5bf", "#cfe8cf", "#e4d4ec")  # wm = 0 .. 3
WN_COLORS = ("#dcdcdc", "#f3e7b8")  # wn = 0, 1


def tc_patch_pixel(r: int, c: int, kh: int, kw: int, k: int = 3) -> tuple[int, int]:
    """The patch pixel that output pixel (r, c) of the tile reads under tap (kh, kw) (stride 1,
    dilation 1, kernel k x k): row r + k-1-kh, column c + k-1-kw (the patch starts k-1 before)."""
    return r + k - 1 - kh, c + k - 1 - kw


def tc_warp_of(m_tile: int, n_tile: int) -> int:
    """The warp that owns mma tile (m16 tile m_tile, n8 tile n_tile) of a block."""
    wm = m_tile // (TC_TILE // TC_WARPS_M)
    wn = n_tile // (TC_CO // TC_WARPS_N // 8)
    return wm + TC_WARPS_M * wn


def draw_implicit_gemm():
    k = 3
    taps = [(kh, kw) for kh in range(k) for kw in range(k)]
    rows_p, pitch = TC_TILE + k - 1, TC_TILE + 5 - 1  # 18 rows; pitch 20 (kernels up to 5 wide)
    fig, ax = new_canvas(13.0, 8.2, (-1.0, 55.5), (-5.6, 30.0))
    pr, pc = 5, 3  # the output pixel followed through the figure
    tap = (0, 0)
    hot_row, hot_col = tc_patch_pixel(pr, pc, *tap, k)

    # Left, top: the input patch of one chunk (8 channels), with its halo.
    cell, x0, y0 = 0.55, 0.0, 17.6
    ax.text(x0 + pitch * cell / 2, 28.9, "x patch of one step: 18 x 20 pixels,\n8 channels (one chunk) per pixel",
            ha="center", fontsize=9, weight="bold")
    for d in (2, 1):  # the other channels, behind
        box(ax, x0 + 0.25 * d, y0 + 0.25 * d, pitch * cell, rows_p * cell, fc="white", ec="0.6", lw=0.5)
    for row in range(rows_p):
        for col in range(pitch):
            fc = "#eeeeee" if col >= TC_TILE + k - 1 else ("#f6d5bf" if row >= TC_TILE or col >= TC_TILE
                                                          else "#c6d7ee")
            box(ax, x0 + col * cell, y0 + (rows_p - 1 - row) * cell, cell, cell, fc=fc, ec="0.6", lw=0.3)
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x0 + pc * cell, y0 + (rows_p - pr - k) * cell), k * cell, k * cell, fill=False,
                           edgecolor=HOT, linewidth=1.6))
    hx, hy = x0 + (hot_col + 0.5) * cell, y0 + (rows_p - 0.5 - hot_row) * cell
    box(ax, x0 + hot_col * cell, y0 + (rows_p - 1 - hot_row) * cell, cell, cell, fc=HOT, ec=HOT)
    ax.text(x0, y0 - 0.5, f"red: the 3x3 window of output pixel ({pr}, {pc}); filled: tap {tap}\n"
            f"reads pixel (r + 2 - kh, c + 2 - kw) = ({hot_row}, {hot_col}). Orange: halo;\n"
            "grey: pitch padding (kernels up to 5 wide)", va="top", fontsize=7.5)

    # Left, bottom: the output tile; row r is one m16 tile, coloured by the warp row wm.
    x1, y1 = 1.0, 2.0
    ax.text(x1 + TC_TILE * cell / 2, y1 + TC_TILE * cell + 0.5, "output tile 16 x 16: M = 256 rows",
            ha="center", fontsize=9, weight="bold")
    for r in range(TC_TILE):
        for c_ in range(TC_TILE):
            box(ax, x1 + c_ * cell, y1 + (TC_TILE - 1 - r) * cell, cell, cell,
                fc=HOT if (r, c_) == (pr, pc) else WM_COLORS[r // 4], ec="0.6", lw=0.3)
        if r % 4 == 0:
            ax.text(x1 + TC_TILE * cell + 0.3, y1 + (TC_TILE - 2 - r) * cell, f"wm {r // 4}", va="center",
                    fontsize=7)
    ax.text(x1 - 1.0, y1 - 0.4, "pixel (r, c) is GEMM row m = 16r + c;\nrow r of the tile is m16 tile r",
            va="top", fontsize=7.5)

    # Right: A (M x K) . B (K x N) = D (M x N), one cell per mma operand tile.
    ax_x, d_x, y_d = 19.0, 30.0, 0.0  # A's left edge, D's left edge, D's bottom
    m_tiles, n_tiles = TC_TILE, TC_CO // 8  # 16 m16 tiles, 16 n8 tiles
    b_y = y_d + m_tiles + 1.0
    # A: rows = m16 tiles, columns = the step's 9 taps, each a k8 slice of 8 channels.
    for mt in range(m_tiles):
        for j, _ in enumerate(taps):
            box(ax, ax_x + j, y_d + m_tiles - 1 - mt, 1, 1, fc=WM_COLORS[mt // 4], ec="0.55", lw=0.4)
    for j, (kh, kw) in enumerate(taps):
        ax.text(ax_x + j + 0.5, y_d + m_tiles + 0.15, f"{kh}{kw}", ha="center", va="bottom", fontsize=6.5)
    ax.text(ax_x + 4.5, y_d + m_tiles + 1.0, "tap (kh kw)", ha="center", va="bottom", fontsize=7)
    ax.text(ax_x + 4.5, b_y + 6.2, "A (M x K): x,\ngathered from the patch", ha="center", fontsize=9,
            weight="bold")
    ax.text(ax_x + 4.5, b_y + 3.0, "K per step = 9 taps x 8\nchannels; the steps walk\nthe Cin / 8 chunks:\n"
            "K = 9 Cin in all", ha="center", fontsize=7.5)
    hot_a = (ax_x + taps.index(tap), y_d + m_tiles - 1 - pr)
    box(ax, *hot_a, 1, 1, fc=HOT, ec=HOT)
    arrow(ax, hx, hy, hot_a[0] + 0.3, hot_a[1] + 0.7, color=HOT, lw=1.2, rad=-0.25)
    arrow(ax, x1 + (pc + 0.5) * cell, y1 + (TC_TILE - 0.5 - pr) * cell, hot_a[0] + 0.3, hot_a[1] + 0.3,
          color=HOT, lw=1.2, rad=0.2)
    for i in range(1, TC_WARPS_M):
        ax.plot([ax_x, ax_x + 9], [y_d + m_tiles - 4 * i] * 2, color="0.2", lw=1.2)
    ax.text(ax_x + 4.5, y_d - 0.5, f"red: A[m = {16 * pr + pc}, k = (tap {tap}, 8 channels)]\n"
            f"in m16 tile {pr} (row g = {pc}): one 8-slot pixel", ha="center", va="top", fontsize=7.5)

    # B: rows = taps (k8 slices), columns = n8 tiles of output channels.
    for j, _ in enumerate(taps):
        for nt in range(n_tiles):
            box(ax, d_x + nt, b_y + len(taps) - 1 - j, 1, 1, fc=WN_COLORS[nt // 8], ec="0.55", lw=0.4)
    ax.add_patch(Rectangle((d_x, b_y + len(taps) - 1 - taps.index(tap)), 8, 1, fill=False, edgecolor=HOT,
                           linewidth=1.6))
    ax.plot([d_x + 8] * 2, [b_y, b_y + len(taps)], color="0.2", lw=1.2)
    ax.text(d_x + 8, b_y + len(taps) + 0.4, "B (K x N): weights [tap][co][8 channels],\nTF32-rounded once per run",
            ha="center", va="bottom", fontsize=9, weight="bold")
    for wn in range(TC_WARPS_N):
        ax.text(d_x + 8 * wn + 4, b_y - 0.45, f"wn {wn}: channels {64 * wn} .. {64 * wn + 63}", ha="center",
                va="center", fontsize=7)

    # D: accumulators, warp tiles of 4 m16 x 8 n8.
    for mt in range(m_tiles):
        for nt in range(n_tiles):
            w = tc_warp_of(mt, nt)
            box(ax, d_x + nt, y_d + m_tiles - 1 - mt, 1, 1, fc=WM_COLORS[w % TC_WARPS_M], ec="0.7", lw=0.3)
    for wm in range(TC_WARPS_M):
        for wn in range(TC_WARPS_N):
            wx, wy = d_x + 8 * wn, y_d + m_tiles - 4 * (wm + 1)
            ax.add_patch(Rectangle((wx, wy), 8, 4, fill=False, edgecolor="0.15", linewidth=1.3))
            ax.text(wx + 4, wy + 2, f"warp {wm + TC_WARPS_M * wn}\n(wm {wm}, wn {wn})", ha="center", va="center",
                    fontsize=7, bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.75, "pad": 1})
    ax.add_patch(Rectangle((d_x, y_d + m_tiles - 1 - pr), 8, 1, fill=False, edgecolor=HOT, linewidth=1.6))

    # Pool: D summed over M, per channel, never stored.
    py = y_d - 2.6
    for nt in range(n_tiles):
        box(ax, d_x + nt, py, 1, 0.8, fc=WN_COLORS[nt // 8], ec="0.55", lw=0.4)
    ax.text(d_x + 8, py + 0.4, "128 channel sums of the tile", ha="center", va="center", fontsize=7)
    arrow(ax, d_x + 8, y_d - 0.05, d_x + 8, py + 0.85, color="0.2", lw=1.2)
    ax.text(d_x + 8.3, y_d - 0.9, "sum over M", ha="left", va="center", fontsize=7)
    ax.text(d_x + 8, py - 0.5, "D stays in registers and is never stored: each thread adds\nits in-range rows, "
            "shuffles add the 8 row groups g of a warp,\nthen the 4 M-warps are added in shared memory",
            ha="center", va="top", fontsize=7.5)
    ax.text(d_x + 16.6, y_d + m_tiles / 2 + 2.5, "D = A B (M x N)\nFP32 accumulators", ha="left",
            fontsize=9, weight="bold")
    ax.text(d_x + 16.6, y_d + m_tiles / 2 + 1.6,
            "one cell = one m16 x n8\nmma tile (4 registers\nper thread)\n\n"
            "warp (wm, wn) =\n(warp % 4, warp / 4):\n4 m16 tiles (tile rows\n4wm .. 4wm+3) x 8 n8\n"
            "tiles (64 channels):\n32 mma.sync m16n8k8 per\nk-step (one tap), 128\naccumulators per thread", ha="left", va="top",
            fontsize=7.5)
    return fig


# --- (g) stage 10: the fragments of mma.m16n8k8 with .tf32 operands, and the channel slots ----------

def a_fragment(row: int, col: int) -> tuple[int, int]:
    """(lane, register) holding A[row][col] of a 16x8 TF32 A tile: a0 (g, t), a1 (g+8, t),
    a2 (g, t+4), a3 (g+8, t+4) with g = lane / 4, t = lane % 4 (PTX ISA, m16n8k8 .tf32)."""
    return 4 * (row % 8) + col % 4, int(row >= 8) + 2 * int(col >= 4)


def b_fragment(k: int, n: int) -> tuple[int, int]:
    """(lane, register) holding B[k][n] of an 8x8 TF32 B tile: b0 (t, g), b1 (t+4, g)."""
    return 4 * n + k % 4, int(k >= 4)


def d_fragment(row: int, col: int) -> tuple[int, int]:
    """(lane, register) holding D[row][col] of a 16x8 FP32 tile: d0 (g, 2t), d1 (g, 2t+1),
    d2 (g+8, 2t), d3 (g+8, 2t+1)."""
    return 4 * (row % 8) + col // 2, col % 2 + 2 * int(row >= 8)


def channel_slot(cl: int) -> int:
    """The shared-memory slot of channel cl (0..7) of a pixel: channels t and t+4 side by side
    (channel_slot in tensor_cores.cu)."""
    return 2 * (cl % 4) + cl // 4


REG_COLORS = ("#c6d7ee", "#f6d5bf", "#cfe8cf", "#e4d4ec")


def draw_tf32_fragments():
    fig, ax = new_canvas(13.0, 5.6, (-2.6, 55.0), (-3.4, 21.2))
    cw, ch = 1.9, 1.0
    lane_hot = 13  # g = 3, t = 1: outlined in every operand
    g_hot, t_hot = lane_hot // 4, lane_hot % 4

    def grid(x0, top, rows, cols, frag, prefix, title):
        ax.text(x0 + cols * cw / 2, top + 1.3, title, ha="center", fontsize=9.5, weight="bold")
        for c_ in range(cols):
            ax.text(x0 + (c_ + 0.5) * cw, top + 0.25, str(c_), ha="center", va="bottom", fontsize=7, color="0.3")
        for r in range(rows):
            ax.text(x0 - 0.25, top - (r + 0.5) * ch, str(r), ha="right", va="center", fontsize=7, color="0.3")
            for c_ in range(cols):
                lane, reg = frag(r, c_)
                hot = lane == lane_hot
                box(ax, x0 + c_ * cw, top - (r + 1) * ch, cw, ch, fc=REG_COLORS[reg], ec=HOT if hot else "0.6",
                    lw=1.6 if hot else 0.3, text=f"L{lane} {prefix}{reg}", fs=6.5)

    top = 17.5
    grid(0.0, top, 16, 8, a_fragment, "a", "A 16 x 8 (row = m, column = k)")
    grid(19.0, top, 8, 8, lambda k, n: b_fragment(k, n), "b", "B 8 x 8 (row = k, column = n)")
    grid(38.5, top, 16, 8, d_fragment, "d", "C / D 16 x 8 (row = m, column = n)")
    ax.text(-2.4, top + 2.6, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: each cell names the lane L "
            "and the register that holds it; g = lane / 4, t = lane % 4", fontsize=8.5, va="bottom")
    ax.text(19.0 + 4 * cw, top - 8 * ch - 0.6,
            "a0 (g, t)    a1 (g+8, t)    a2 (g, t+4)    a3 (g+8, t+4)\n"
            "b0 (t, g)    b1 (t+4, g)\n"
            "d0 (g, 2t)   d1 (g, 2t+1)   d2 (g+8, 2t)   d3 (g+8, 2t+1)\n"
            f"red outline: lane {lane_hot} (g = {g_hot}, t = {t_hot})", ha="center", va="top", fontsize=7.5,
            family="monospace")

    # The channel slots of one pixel: channels t and t+4 side by side.
    sx, sy, sw = 19.0, 0.9, 1.9
    ax.text(sx + 4 * sw, sy + 2.0, "a pixel's 8 channel slots in shared memory\n(the x patch; the weights alike)",
            ha="center", fontsize=9, weight="bold")
    order = sorted(range(8), key=channel_slot)  # the channel in each slot: 0 4 1 5 2 6 3 7
    for slot, cl in enumerate(order):
        t = slot // 2
        box(ax, sx + slot * sw, sy, sw, 1.0, fc=REG_COLORS[0] if slot % 2 == 0 else REG_COLORS[2],
            ec=HOT if t == t_hot else "0.5", lw=1.6 if t == t_hot else 0.5, text=f"ch {cl}", fs=7.5)
        ax.text(sx + (slot + 0.5) * sw, sy + 1.15, f"slot {slot}", ha="center", va="bottom", fontsize=6.5,
                color="0.3")
    for t in range(4):
        xm = sx + (2 * t + 1) * sw
        ax.plot([sx + 2 * t * sw + 0.15, sx + (2 * t + 2) * sw - 0.15], [sy - 0.3] * 2, color="0.3", lw=1.0)
        ax.text(xm, sy - 0.5, f"t = {t}", ha="center", va="top", fontsize=7.5, color=HOT if t == t_hot else "black")
    ax.text(sx + 4 * sw, sy - 1.6,
            "lane (g, t) reads slots 2t, 2t+1 = channels t and t+4 with one 8-byte load:\n"
            "at pixel g of the m16 tile's row it is (a0, a2) = (A[g][t], A[g][t+4]); 8 pixels on, (a1, a3);\n"
            "in the weights of output channel g, (b0, b1) = (B[t][g], B[t+4][g]). A warp's 32 loads\n"
            "are 64 consecutive words: no bank conflict.",
            ha="center", va="top", fontsize=7.5)
    return fig


# --- (h) stage 15: wgmma's core matrices, and the LBO and SBO of its two descriptors ----------------

WG_CO = 128             # kWgCo: the block's output channels, N of m64n128k8
WG_K_PITCH = 68         # kKPitch: columns of a K-major x row (64 output columns + up to 4 of halo)
CORE_ROW_BYTES = 16     # a core matrix: 8 rows of 16 bytes = 8 x 4 TF32, 128 contiguous bytes
CORE_SBO = 8 * CORE_ROW_BYTES  # 128: the next 8 rows (pixels of A, output channels of B)


def wg_b_offset(k: int, n: int) -> int:
    """Byte offset of B[k][n] (input channel k of the step's 8, output channel n) from the start of
    one tap's weights, laid out [k-half][128 co][4 ci] as tf32_weight_kmajor writes them."""
    return ((k // 4 * WG_CO + n) * 4 + k % 4) * 4


def wg_a_offset(m: int, k: int, rows: int, row: int, col: int) -> int:
    """Byte offset of A[m][k] in the K-major x slot [k-half][rows][kKPitch columns][4 ci]: pixel
    col + m of patch row `row`, channel k (the transpose's `kd + ((khalf * rows + r) * kKPitch + c) * 4`)."""
    return ((k // 4 * rows + row) * WG_K_PITCH + col + m) * 16 + k % 4 * 4


def wg_desc_offset(mn: int, k: int, lbo: int, sbo: int) -> int:
    """What the tensor cores read for element (m or n, k) of a descriptor without swizzle, from its
    start: (mn / 8) SBO + (mn mod 8) 16 + (k / 4) LBO + (k mod 4) 4 (PTX ISA, K-major core matrices)."""
    return mn // 8 * sbo + mn % 8 * CORE_ROW_BYTES + k // 4 * lbo + k % 4 * 4


def draw_wgmma_core_matrices():
    rows = 4 + (3 - 1)                       # patch rows of a 4-row tile under a 3 x 3 kernel
    b_lbo, a_lbo = WG_CO * CORE_ROW_BYTES, rows * WG_K_PITCH * CORE_ROW_BYTES   # 2,048 and 6,528
    wg, r, kh, kw = 0, 0, 1, 1               # the A tile drawn: warpgroup 0, m64 row 0, tap (1, 1)
    a_row, a_col = 2 * wg + r + 2 - kh, 2 - kw
    a_start = (a_row * WG_K_PITCH + a_col) * CORE_ROW_BYTES
    # The layouts the kernel writes are what its descriptors describe, element by element.
    assert all(wg_b_offset(k, n) == wg_desc_offset(n, k, b_lbo, CORE_SBO) for k in range(8) for n in range(WG_CO))
    assert all(wg_a_offset(m, k, rows, a_row, a_col) == a_start + wg_desc_offset(m, k, a_lbo, CORE_SBO)
               for k in range(8) for m in range(64))

    fig, ax = new_canvas(13.0, 6.5, (-5.0, 59.0), (-17.0, 14.6))
    cm_w, cm_h = 2.2, 2.2                    # a core matrix of B drawn 8 n wide, 4 k tall
    bx, by = 0.0, 4.6                        # B: lower left corner of k-half 1
    k_colors = (PLANE_COLORS[0], PLANE_COLORS[1])

    # B of one tap: 2 k-halves x 16 core matrices along N.
    ax.text(-4.8, 13.9, "B of one tap (one k-step, 8 input channels): K = 8 x N = 128", fontsize=10,
            weight="bold", va="center")
    ax.text(-4.8, 12.9, "weight slot [tap][k-half][128 co][4 ci]; tap (kh, kw) starts at slot + (3 kh + kw) x "
            "4,096 B; each box: one core matrix, its byte offset from the descriptor's start", fontsize=8,
            va="center")
    for kh_ in range(2):
        y = by + (1 - kh_) * cm_h
        ax.text(bx - 0.3, y + cm_h / 2, f"k {4 * kh_}..{4 * kh_ + 3}\n(k-half {kh_})", ha="right", va="center",
                fontsize=7.5)
        for j in range(WG_CO // 8):
            x = bx + j * cm_w
            box(ax, x, y, cm_w, cm_h, fc=k_colors[kh_], ec="0.35", lw=0.8)
            for q in range(1, 8):    # the 8 output channels of the core matrix
                ax.plot([x + q * cm_w / 8] * 2, [y, y + cm_h], color="white", lw=0.5)
            for q in range(1, 4):    # its 4 input channels
                ax.plot([x, x + cm_w], [y + q * cm_h / 4] * 2, color="white", lw=0.5)
            ax.text(x + cm_w / 2, y + cm_h / 2, f"+{wg_b_offset(4 * kh_, 8 * j):,}", ha="center", va="center",
                    fontsize=6.5, bbox={"boxstyle": "square,pad=0.1", "fc": k_colors[kh_], "ec": "none"})
            if kh_ == 0:
                ax.text(x + cm_w / 2, y + cm_h + 0.2, f"n {8 * j}", ha="center", va="bottom", fontsize=6.5,
                        color="0.3")
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((bx, by + cm_h), cm_w, cm_h, fill=False, edgecolor=HOT, linewidth=1.8, zorder=5))
    # SBO along N (above), LBO along K (right).
    ya = by + 2 * cm_h + 1.3
    arrow(ax, bx + 0.5 * cm_w, ya, bx + 1.5 * cm_w, ya, color=HOT, lw=1.8)
    ax.text(bx + 1.65 * cm_w, ya, f"SBO = 8 x 16 = {CORE_SBO} B: the next core matrix along N, 8 output channels on",
            va="center", fontsize=8, color=HOT)
    xa = bx + 16 * cm_w + 0.6
    arrow(ax, xa, by + 1.5 * cm_h, xa, by + 0.5 * cm_h, color=ACTIVE, lw=1.8)
    ax.text(xa + 0.5, by + cm_h, f"LBO = 128 x 16\n= {b_lbo:,} B: the next\ncore matrix along K,\n"
            "input channels 4..7", va="center", fontsize=8, color=ACTIVE)

    # One core matrix, enlarged: 128 contiguous bytes, a row of 16 B per output channel.
    zx, zy, zc = 45.6, 4.2, 1.5
    ax.text(zx + 4 * zc, 12.2, "the red box enlarged: one core\nmatrix, 128 contiguous bytes", ha="center",
            va="center", fontsize=9, weight="bold")
    for n in range(8):
        for k in range(4):
            box(ax, zx + n * zc, zy + (3 - k) * zc, zc, zc, fc=k_colors[0], ec="0.35", lw=0.5,
                text=f"+{wg_b_offset(k, n)}", fs=6.5)
        ax.text(zx + (n + 0.5) * zc, zy + 4 * zc + 0.15, f"n {n}", ha="center", va="bottom", fontsize=6.5,
                color="0.3")
    for k in range(4):
        ax.text(zx - 0.2, zy + (3.5 - k) * zc, f"k {k}", ha="right", va="center", fontsize=6.5, color="0.3")
    ax.text(zx + 4 * zc, zy - 0.3, "a column: one output channel's 4 input\nchannels, 16 B, a core-matrix row "
            "(K-major)", ha="center", va="top", fontsize=7.5)

    # A of one m64 row and tap: 8 core matrices of 8 consecutive pixels, in the K-major x slot.
    ax.text(-4.8, 1.6, f"A of warpgroup {wg}, m64 row {r}, tap ({kh}, {kw}): M = 64 pixels x K = 8", fontsize=10,
            weight="bold", va="center")
    ax.text(-4.8, 0.6, f"K-major x slot [k-half][{rows} patch rows][{WG_K_PITCH} columns][4 ci] (3 x 3 kernel); "
            f"the tile starts at patch row 2 wg + r + 2 - kh = {a_row}, column 2 - kw = {a_col}: "
            f"slot + ({a_row} x {WG_K_PITCH} + {a_col}) x 16 = {a_start:,} B", fontsize=8, va="center")
    pc = 0.55                                # one pixel's 4 channels (16 B)
    px0 = 0.0
    plane_y = (-1.9, -10.7)                  # top of each k-half's plane
    for kh_ in range(2):
        top = plane_y[kh_]
        ax.text(px0 - 0.3, top - rows * pc / 2, f"k-half {kh_}\n(k {4 * kh_}..{4 * kh_ + 3})", ha="right",
                va="center", fontsize=7.5)
        for row in range(rows):
            for col in range(WG_K_PITCH):
                m = col - a_col
                inside = row == a_row and 0 <= m < 64
                fc = (TAP_COLORS[0] if m // 8 % 2 == 0 else "#8172b3") if inside else k_colors[kh_]
                box(ax, px0 + col * pc, top - (row + 1) * pc, pc, pc, fc=fc, ec="white", lw=0.3)
        for col in range(0, WG_K_PITCH, 8):
            ax.text(px0 + (col + 0.5) * pc, top + 0.15, str(col), ha="center", va="bottom", fontsize=6, color="0.3")
        for row in range(rows):
            ax.text(px0 + WG_K_PITCH * pc + 0.2, top - (row + 0.5) * pc, f"row {row}", va="center", fontsize=6,
                    color="0.3")
        for q in range(8):                   # the 8 core matrices along M and their offsets
            x = px0 + (a_col + 8 * q + 4) * pc
            ax.text(x, top - rows * pc - 0.2, f"+{wg_desc_offset(8 * q, 4 * kh_, a_lbo, CORE_SBO):,}",
                    ha="center", va="top", fontsize=6.5)
    ya = plane_y[0] - rows * pc - 1.3
    arrow(ax, px0 + (a_col + 4) * pc, ya, px0 + (a_col + 12) * pc, ya, color=HOT, lw=1.8)
    ax.text(px0 + (a_col + 12.6) * pc, ya, f"SBO = {CORE_SBO} B: the next core matrix along M, 8 pixels on",
            va="center", fontsize=8, color=HOT)
    arrow(ax, px0 + (a_col + 0.5) * pc, plane_y[0] - (a_row + 1) * pc, px0 + (a_col + 0.5) * pc,
          plane_y[1] - a_row * pc + 0.05, color=ACTIVE, lw=1.8)
    ax.text(px0 + (a_col + 1.4) * pc, ya - 1.6, f"LBO = {rows} x {WG_K_PITCH} x 16 = {a_lbo:,} B: the same pixels' "
            "channels 4..7, one k-half (a whole plane) further", va="center", fontsize=8, color=ACTIVE)
    ax.text(42.2, -2.6, "A cell: one pixel's 4 channels of a\nk-half, 16 B. A blue or purple run:\none core "
            "matrix, 8 consecutive pixels\nx 4 channels = 128 contiguous bytes.\nNumbers under a plane: "
            "offsets from\nthe descriptor's start.\n\nAnother tap moves only the start:\n68 x 16 B per patch "
            "row, 16 B per\ncolumn; LBO and SBO stay.", va="top", fontsize=7.5)
    return fig


DIAGRAMS = {
    "gather_scatter": draw_gather_scatter,
    "pool_mapping": draw_pool_mapping,
    "tree_sequential": draw_tree_sequential,
    "warp_shuffle": draw_warp_shuffle,
    "tile_banks": draw_tile_banks,
    "border_frame": draw_border_frame,
    "implicit_gemm": draw_implicit_gemm,
    "tf32_fragments": draw_tf32_fragments,
    "wgmma_core_matrices": draw_wgmma_core_matrices,
}
# File names that differ from diagram_<name>.png: the chapters of stages 10 and 11 link these.
FILE_NAMES = {"implicit_gemm": "implicit_gemm.png", "tf32_fragments": "tf32_fragments.png"}


def draw_all(out_dir, only=None) -> list[Path]:
    """Writes diagram_<name>.png (or its FILE_NAMES entry) for every diagram, or those named in
    `only`, into out_dir."""
    written = []
    for name, draw in DIAGRAMS.items():
        if only and name not in only:
            continue
        written.append(c.save(draw(), Path(out_dir) / FILE_NAMES.get(name, f"diagram_{name}.png")))
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(c.OUT_DIR), help="where the PNGs go (default: docs/img/)")
    ap.add_argument("--only", nargs="+", choices=sorted(DIAGRAMS), help="draw only these diagrams")
    args = ap.parse_args(argv)
    for path in draw_all(args.out, args.only):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
