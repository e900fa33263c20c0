#!/usr/bin/env python3
"""Regenerates the README's results block from committed ladder runs.

    python3 scripts/update_results.py            # rewrite README.md's and the chapters' blocks
    python3 scripts/update_results.py --check    # exit 1 if any of them is out of date (CI)
    python3 scripts/update_results.py --print    # print the blocks, change nothing

Reads every results/*.json (or --results DIR, or $LADDER_RESULTS_DIR): `build/ladder --json`
outputs, one table per file, and optionally scripts/compare_pytorch.py --json outputs, matched to a
ladder run by GPU name and problem, and ladder/floor_sweep.cu outputs (results/floor_sweep_<gpu>.txt)
and the floor kernel's Nsight Compute metrics (profiles/data/floor_streaming_read.txt) for the
footnote. Every number in the block comes from those files; the GPU name comes from the ladder
JSON's "device". Under each table: the run's provenance (or "not recorded" for older files). The
block lies between `<!-- results:begin -->` and `<!-- results:end -->`.

It also fills the one `<!-- gain:begin -->` ... `<!-- gain:end -->` block of each chapter
(stages/NN_name/README.md) that has one: the stage's time on the phases it changes against the
previous stage's, from every committed ladder run, and its pool phase alone from every
`ladder --pool-only` run (results/pool_only_*.json), with the GPU and the file. A results file's
stage counts only if its id, name and idea (the `d.idea` line of the stage's source) match the
stage's folder and source: the ladder was renumbered, and a stage can keep its number and name
and change. --check also fails on a stale chapter block. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "plots"))
import ladder_results as lr  # noqa: E402

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
EMPTY = "(filled from committed ladder runs)"


def cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def rel(path: Path) -> str:
    """`path` relative to the repository where it lies inside it, else its name."""
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
    out += ["| stage | total ms | pool ms | conv TFLOP/s | GB/s | × floor | vs previous | vs eager "
            "| vs torch.compile | oracle |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|:-:|"]
    if run.floor_ms:
        out.append(f"| floor: streaming read of x | {lr.fmt_spread(run.floor_ms, *run.spread('floor_ms'))} | - | - "
                   f"| {lr.fmt_rate(run.floor_gbps)} | 1.00\u00d7 | - | - | - | - |")
    if run.cub_pool_ms:
        out.append(f"| baseline: CUB segmented sum (pool phase only) | - "
                   f"| {lr.fmt_spread(run.cub_pool_ms, *run.spread('cub_pool_ms'))} | - "
                   f"| {lr.fmt_rate(run.cub_gbps())} | - | - | - | - | - |")
    if run.pytorch:
        for kind, label in (("eager", "PyTorch eager (TF32 conv, the default)"),
                            ("eager_fp32", "PyTorch eager, TF32 off"), ("compile", "torch.compile")):
            ms = run.pytorch.median(kind)
            if ms is not None:
                out.append(f"| {label} † | {lr.fmt_ms(ms)} | - | - | - | - | - | - | - | - |")
    notes = []
    for r in rows:
        if not r["ran"]:
            out.append(f"| {cell(r['stage'])} | not run | - | - | - | - | - | - | - | - |")
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
        prev = "-" if r["vs_previous"] is None else f"{lr.fmt_ratio(r['vs_previous'])} ({r['vs_previous_on']})"
        out.append(f"| {cell(r['stage'])} | {total} | {lr.fmt_ms(r['pool_ms'])} | {tf} | {lr.fmt_rate(r['gbps'])} "
                   f"| {lr.fmt_ratio(r['x_floor'])} | {prev} | {vs('vs_eager')} "
                   f"| {vs('vs_compile')} | {oracle} |")
    out.append("")
    for n in notes:
        out.append(f"- {cell(n)}")
    if notes:
        out.append("")
    out += [cell(run.provenance_line()), ""]
    foot = ["total ms: median over repetitions (CUDA events, L2 flushed before each), in parentheses the "
            "fastest and slowest repetition where the file records them; a CPU stage is one wall-clock run.",
            "pool ms: the pool phase's median (- for a stage without one: a fused stage pools inside its "
            "launch); for the CUB row, its segmented sum over the convT output.",
            "conv TFLOP/s: the convolution's flops over the conv phase; for a fused stage that does the "
            "convolution's arithmetic, the whole pipeline's flops over its total"
            + (f"; in parentheses, the share of the FP32 peak {lr.fmt_rate(peak)} TFLOP/s ({peak_how})."
               if peak else "."),
            "GB/s: the pool phase's bytes (the convT output read once) over the pool phase; for a fused stage "
            "that skips the convolution's arithmetic, the pipeline's must-move bytes (x read once) over its total.",
            "× floor: total over the streaming read of x timed in the same run.",
            "vs previous: the previous stage's time over this one's, both on the phases this stage changes, named "
            "in parentheses (pool; conv + pool, where one of the two is a single fused launch; total: the whole "
            "run)" + ("; this file predates the ladder's record of the phases a stage changes, so it compares "
                      "totals." if any(s.changes is None for s in run.ran_stages()) else ".")]
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


# --- chapters: the measured gain of each stage ----------------------------------------------------

GAIN_BEGIN, GAIN_END = "<!-- gain:begin -->", "<!-- gain:end -->"
STAGE_FOLDER = re.compile(r"^(\d\d)_(\w+)$")
# A stage's one-line idea in its registration: d.idea = "..." (adjacent literals concatenated).
IDEA = re.compile(r'\bd\.idea\s*=\s*((?:"(?:[^"\\]|\\.)*"\s*)+);')


@dataclass
class Chapter:
    path: Path
    id: str
    name: str
    idea: str | None  # from the stage's source; None where it cannot be read (then not compared)


def chapters(stages_dir: Path) -> list:
    """Every stages/NN_name/README.md, with the stage's id and name (its folder) and its idea."""
    out = []
    for folder in sorted(Path(stages_dir).iterdir() if Path(stages_dir).is_dir() else []):
        m = STAGE_FOLDER.match(folder.name)
        readme = folder / "README.md"
        if not m or not readme.is_file():
            continue
        idea = None
        for src in sorted(folder.glob("*.cu")) + sorted(folder.glob("*.cpp")):
            im = IDEA.search(src.read_text(errors="replace"))
            if im:
                parts = re.findall(r'"((?:[^"\\]|\\.)*)"', im.group(1))
                idea = "".join(parts).replace('\\"', '"').replace("\\\\", "\\")
                break
        out.append(Chapter(readme, m.group(1), m.group(2), idea))
    return out


def other_stage(ch: Chapter, st) -> str | None:
    """Why a results file's stage `st` with the chapter's id is not the chapter's stage (stages were
    renumbered, or a stage kept its number and name but changed its idea); None if it is."""
    if st.name != ch.name:
        return f"{st.id} is {st.name}"
    if ch.idea is not None and st.idea and st.idea != ch.idea:
        return f'{st.id} {st.name} is a different version ("{st.idea}")'
    return None


def gain_text(ratio: float | None) -> str:
    """ "1.09×", or for a ratio below 1 a plain statement that the stage is slower."""
    if ratio is None:
        return "-"
    s = lr.fmt_ratio(ratio)
    if s == lr.fmt_ratio(1.0):
        return s + ": the same to the table's precision"
    return s + (": slower, a negative result" if ratio < 1 else "")


def link(path: Path, chapter: Path) -> str:
    return f"[{path.name}]({Path(os.path.relpath(path, chapter.parent)).as_posix()})"


def gain_block(ch: Chapter, runs: list, pools: list) -> str:
    """The chapter's block: its stage against the previous one, from every committed ladder run
    and `--pool-only` run that has this stage (same id, name and, where readable, idea)."""
    rows, notes, skipped = [], [], []

    def this_stage(run):
        """The run's stage of this chapter, or None (absent, or another stage under its id: noted)."""
        st = next((s for s in run.stages if s.id == ch.id), None)
        why = other_stage(ch, st) if st is not None else ""
        if why:
            skipped.append((run.path, why))
        return None if why else st

    for run in runs:
        st = this_stage(run)
        if st is None:
            continue
        where = f"{run.gpu_name}, {lr.problem_short(run.problem)}"
        if not (st.ran and st.total_ms):
            notes.append(f"Not run on {where} ({link(run.path, ch.path)})" + (f": {st.note}" if st.note else "."))
            continue
        c = run.comparisons()[st.id]
        prev = (c.previous.label, lr.fmt_ms(c.previous_ms)) if c.previous else ("none ran before it", "-")
        rows.append((run.gpu_name, lr.problem_short(run.problem), c.on, lr.fmt_ms(c.this_ms), *prev,
                     gain_text(c.ratio), link(run.path, ch.path)))
    for pr in pools:
        st = this_stage(pr)
        if st is None:
            continue
        if not (st.ran and st.pool_ms):
            continue
        pv = pr.previous_of(st.id)
        ratio = st.speedup_vs_previous if pv else None
        if ratio is None and pv and pv.pool_ms:
            ratio = pv.pool_ms / st.pool_ms
        prev = (pv.label, lr.fmt_ms(pv.pool_ms)) if pv else ("none ran before it", "-")
        rows.append((pr.gpu_name, lr.problem_short(pr.problem), "pool phase alone (`--pool-only`)",
                     lr.fmt_ms(st.pool_ms), *prev, gain_text(ratio), link(pr.path, ch.path)))

    out = ["<!-- generated by scripts/update_results.py from results/*.json; do not edit by hand -->", ""]
    if not rows and not notes:
        line = f"**Measured gain.** Stage {ch.id} has not been measured in the committed runs yet"
        whys = sorted({w for _, w in skipped})
        out.append(line + (f": in the results files, {'; '.join(whys)}." if whys else "."))
        return "\n".join(out)
    out += [f"**Measured gain.** Stage {ch.id} against the stage that ran before it in the same run, on the "
            "phases it changes (ms: medians, a CPU stage's one run; gain: the previous stage's time over this one's):",
            ""]
    if rows:
        out += ["| GPU | problem | on | this stage ms | previous stage | previous ms | gain | from |",
                "|---|---|---|--:|---|--:|---|---|"]
        out += ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows]
        out.append("")
    out += [f"- {n}" for n in notes]
    out += [f"- Not from {link(path, ch.path)}: its {why}." for path, why in skipped]
    return "\n".join(out).rstrip()


def splice_gain(text: str, block: str, path: Path) -> str | None:
    """`text` with its one gain block replaced by `block`; None if it has no block."""
    n, m = text.count(GAIN_BEGIN), text.count(GAIN_END)
    if n == 0 and m == 0:
        return None
    i, j = text.find(GAIN_BEGIN), text.find(GAIN_END)
    if n != 1 or m != 1 or j < i:
        raise SystemExit(f"error: {path}: expected one '{GAIN_BEGIN}' followed by one '{GAIN_END}', "
                         f"found {n} and {m}")
    return text[: i + len(GAIN_BEGIN)] + "\n" + block + "\n" + text[j:]


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
    ap.add_argument("--stages", default=str(lr.REPO_ROOT / "stages"),
                    help="the stage folders whose chapters (NN_name/README.md) have gain blocks")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if the README's or a chapter's block is out of date")
    mode.add_argument("--print", action="store_true", help="print the generated blocks only")
    args = ap.parse_args(argv)

    runs = lr.load(args.results)
    pools = lr.load_pool_only(args.results)
    readme_path = Path(args.readme)
    if args.print:
        print(render(runs))
    else:
        updates = [(readme_path, splice(readme_path.read_text(), render(runs)))]
    for ch in chapters(Path(args.stages)):
        block = gain_block(ch, runs, pools)
        new = splice_gain(ch.path.read_text(), block, ch.path)
        if new is None:
            continue  # a chapter without the markers is left alone
        if args.print:
            print(f"\n==> {ch.path}: gain block <==\n{block}")
        else:
            updates.append((ch.path, new))
    if args.print:
        return 0

    stale = [path for path, new in updates if new != path.read_text()]
    if args.check:
        for path in stale:
            what = "results block" if path == readme_path else "gain block"
            print(f"{path}: the {what} is out of date; run: python3 scripts/update_results.py", file=sys.stderr)
        if stale:
            return 1
        print(f"{readme_path} and {len(updates) - 1} chapter gain block(s) up to date "
              f"({len(runs)} ladder run(s), {len(pools)} pool-only run(s))")
        return 0
    for path, new in updates:
        if path in stale:
            path.write_text(new)
            print(f"{path}: rewritten from {len(runs)} ladder run(s) and {len(pools)} pool-only run(s)")
    if not stale:
        print(f"{readme_path} and {len(updates) - 1} chapter gain block(s) already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
