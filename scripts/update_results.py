#!/usr/bin/env python3
"""Regenerates the README's results block from committed ladder runs.

    python3 scripts/update_results.py            # rewrite README.md between the markers
    python3 scripts/update_results.py --check    # exit 1 if README.md is out of date (CI)
    python3 scripts/update_results.py --print    # print the block, change nothing

Reads every results/*.json (or --results DIR, or $LADDER_RESULTS_DIR): `build/ladder --json`
outputs, one table per file, and optionally scripts/compare_pytorch.py --json outputs, matched to a
ladder run by GPU name and problem, and ladder/floor_sweep.cu outputs (results/floor_sweep_<gpu>.txt)
and the floor kernel's Nsight Compute metrics (profiles/data/floor_streaming_read.txt) for the
footnote. Every number in the block comes from those files; the GPU name comes from the ladder
JSON's "device". Under each table: the run's provenance (or "not recorded" for older files). The block lies between `<!-- results:begin -->` and
`<!-- results:end -->`. Standard library only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "plots"))
import ladder_results as lr  # noqa: E402

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
EMPTY = "(filled from committed ladder runs)"


def cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(lr.REPO_ROOT))
    except ValueError:
        return path.name


def run_table(run: lr.LadderRun) -> list:
    peak, peak_how = run.fp32_peak_tflops()
    rows = lr.stage_rows(run)
    any_cross_run = False
    out = [f"### {run.gpu_name}", ""]
    src = f"`{rel(run.path)}`"
    if run.pytorch:
        m = run.pytorch.meta
        src += (f" and `{rel(run.pytorch.path)}` (PyTorch {m.get('torch', '?')}, CUDA {m.get('cuda', '?')})")
    out += [f"From {src}. Device: {run.device or 'none'}.", "",
            f"Problem: {run.problem_summary()}.", ""]
    out += ["| stage | total ms | conv TFLOP/s | GB/s | × floor | vs previous | vs eager | vs torch.compile | oracle |",
            "|---|--:|--:|--:|--:|--:|--:|--:|:-:|"]
    if run.floor_ms:
        out.append(f"| floor: streaming read of x | {lr.fmt_spread(run.floor_ms, *run.spread('floor_ms'))} | - "
                   f"| {lr.fmt_rate(run.floor_gbps)} | 1.00\u00d7 | - | - | - | - |")
    if run.cub_pool_ms:
        out.append(f"| baseline: CUB segmented sum (pool phase only) "
                   f"| {lr.fmt_spread(run.cub_pool_ms, *run.spread('cub_pool_ms'))} | - "
                   f"| {lr.fmt_rate(run.cub_gbps())} | - | - | - | - | - |")
    if run.pytorch:
        for kind, label in (("eager", "PyTorch eager (TF32 conv, the default)"),
                            ("eager_fp32", "PyTorch eager, TF32 off"), ("compile", "torch.compile")):
            ms = run.pytorch.median(kind)
            if ms is not None:
                out.append(f"| {label} † | {lr.fmt_ms(ms)} | - | - | - | - | - | - | - |")
    notes = []
    for r in rows:
        if not r["ran"]:
            out.append(f"| {cell(r['stage'])} | not run | - | - | - | - | - | - | - |")
            if r["note"]:
                notes.append(f"{r['stage']}: {r['note']}")
            continue
        tf = lr.fmt_rate(r["tflops"])
        if r["tflops"] and r["pct_fp32_peak"]:
            tf += f" ({r['pct_fp32_peak']:.2g}%)"

        def vs(key):
            v = r[key]
            if v is None:
                return "-"
            nonlocal any_cross_run
            if not r[key + "_same_run"]:
                any_cross_run = True
                return lr.fmt_ratio(v) + " †"
            return lr.fmt_ratio(v)

        oracle = r["oracle"] or "-"
        total = lr.fmt_spread(r["total_ms"], r["total_min"], r["total_max"])
        out.append(f"| {cell(r['stage'])} | {total} | {tf} | {lr.fmt_rate(r['gbps'])} "
                   f"| {lr.fmt_ratio(r['x_floor'])} | {lr.fmt_ratio(r['vs_previous'])} | {vs('vs_eager')} "
                   f"| {vs('vs_compile')} | {oracle} |")
    out.append("")
    for n in notes:
        out.append(f"- {cell(n)}")
    if notes:
        out.append("")
    out += [cell(run.provenance_line()), ""]
    foot = ["total ms: median over repetitions (CUDA events, L2 flushed before each), in parentheses the "
            "fastest and slowest repetition where the file records them; a CPU stage is one wall-clock run.",
            "conv TFLOP/s: the convolution's flops over the conv phase; for a fused stage that does the "
            "convolution's arithmetic, the whole pipeline's flops over its total"
            + (f"; in parentheses, the share of the FP32 peak {lr.fmt_rate(peak)} TFLOP/s ({peak_how})."
               if peak else "."),
            "GB/s: the pool phase's bytes (the convT output read once) over the pool phase; for a fused stage "
            "that skips the convolution's arithmetic, the pipeline's must-move bytes (x read once) over its total.",
            "× floor: total over the streaming read of x timed in the same run. vs previous: the previous stage's "
            "total over this one's."]
    if run.pytorch:
        foot.append("vs eager / vs torch.compile: speedups measured by scripts/compare_pytorch.py in its own run; "
                    "† marks numbers from a separate run (PyTorch rows, and ratios of PyTorch's median to this "
                    "table's total for stages that script did not time).")
    else:
        foot.append("vs eager / vs torch.compile: need a scripts/compare_pytorch.py result for this GPU in results/.")
    foot += floor_notes(run)
    out += ["<sub>" + " ".join(foot) + "</sub>", ""]
    return out


def floor_notes(run: lr.LadderRun) -> list:
    """The footnote's sentences on the floor: the DRAM peak and the floor's share of it, what
    floor_sweep reached over as many bytes, and what Nsight Compute measured on the floor kernel."""
    peak, how = run.dram_peak()
    if not peak:
        return ["DRAM peak: not recorded for this GPU (no dram_peak_gbps in the JSON, no "
                "results/floor_sweep_*.txt from this GPU)."]
    notes = [f"DRAM peak (specified): {lr.fmt_rate(peak)} GB/s ({how})"
             + (f"; the floor read x at {100 * run.floor_gbps / peak:.1f}% of it." if run.floor_gbps else ".")]
    sweeps = []
    for flush, what in (("memset", "the ladder's memset flush"), ("read", "a flush that leaves the L2 clean")):
        fs = run.sweep_for_this_size(flush)
        ms, gbps = (fs.num("best_median_ms"), fs.num("best_gbps")) if fs else (None, None)
        if ms and gbps:
            sweeps.append(f"{lr.fmt_ms(ms)} ms ({lr.fmt_rate(gbps)} GB/s, {100 * gbps / peak:.1f}%) after {what}")
    if sweeps:
        fs = run.sweep_for_this_size("memset") or run.sweep_for_this_size("read")
        notes.append(f"ladder/floor_sweep.cu over the same bytes ({fs.path.name}), fastest launch: "
                     + "; ".join(sweeps) + ".")
    ncu = run.ncu_floor
    if ncu and run.x_bytes and abs((ncu.metrics.get("dram__bytes_read.sum") or 0) / run.x_bytes - 1) < 0.01:
        m = ncu.metrics
        parts = []
        if m.get("dram__bytes_read.sum"):
            parts.append(f"dram__bytes_read.sum {m['dram__bytes_read.sum'] / 1e9:.3f} GB")
        if m.get("gpu__time_duration.sum"):
            parts.append(f"gpu__time_duration.sum {lr.fmt_ms(m['gpu__time_duration.sum'] / 1e6)} ms")
        if m.get("dram__bytes_read.sum.per_second"):
            parts.append(f"dram__bytes_read.sum.per_second {lr.fmt_rate(m['dram__bytes_read.sum.per_second'] / 1e9)} GB/s")
        if m.get("dram__throughput.avg.pct_of_peak_sustained_elapsed") is not None:
            parts.append("dram__throughput.avg.pct_of_peak_sustained_elapsed "
                         f"{m['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.1f}%")
        notes.append(f"Nsight Compute on the streaming read of ladder/streaming_read.cuh over the same bytes, in "
                     f"its own run ({rel(ncu.path)}, launch {ncu.config.split(':')[0]}; ncu flushes and "
                     "invalidates the caches before each launch, so no dirty line is written back during it; "
                     "median of the profiled launches): " + ", ".join(parts) + ".")
    return notes


def render(runs) -> str:
    if not runs:
        return EMPTY
    lines = ["<!-- generated by scripts/update_results.py from results/*.json; do not edit by hand -->", ""]
    for run in runs:
        lines += run_table(run)
    return "\n".join(lines).rstrip()


def splice(readme: str, block: str) -> str:
    i, j = readme.find(BEGIN), readme.find(END)
    if i < 0 or j < 0 or j < i:
        raise SystemExit(f"error: README has no '{BEGIN}' ... '{END}' block")
    return readme[: i + len(BEGIN)] + "\n" + block + "\n" + readme[j:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", help="results directory (default: $LADDER_RESULTS_DIR or results/)")
    ap.add_argument("--readme", default=str(lr.REPO_ROOT / "README.md"), help="the README to update")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if the README's block is out of date")
    mode.add_argument("--print", action="store_true", help="print the generated block only")
    args = ap.parse_args(argv)

    runs = lr.load(args.results)
    block = render(runs)
    if args.print:
        print(block)
        return 0
    readme_path = Path(args.readme)
    old = readme_path.read_text()
    new = splice(old, block)
    if args.check:
        if new != old:
            print(f"{readme_path}: the results block is out of date; run: python3 scripts/update_results.py",
                  file=sys.stderr)
            return 1
        print(f"{readme_path}: results block up to date ({len(runs)} ladder run(s))")
        return 0
    if new != old:
        readme_path.write_text(new)
        print(f"{readme_path}: results block rewritten from {len(runs)} ladder run(s)")
    else:
        print(f"{readme_path}: results block already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
