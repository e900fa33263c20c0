"""Regenerates the results block of docs/results.md from committed ladder runs.

    python3 scripts/update_results.py            # rewrite docs/results.md's and the chapters' blocks
    python3 scripts/update_results.py --check    # exit 1 if any of them is out of date (CI)
    python3 scripts/update_results.py --print    # print the blocks, change nothing

Reads every results/*.json (or --results DIR, or $LADDER_RESULTS_DIR): `build/ladder --json`
outputs, one table per file, and optionally scripts/compare.py --problem 42 --json outputs, matched to a
ladder run by GPU name and problem, and ladder/floor_sweep.cu outputs (results/floor_sweep_<gpu>.txt)
and the floor kernel's Nsight Compute metrics (profiles/data/floor_streaming_read.txt) for the
notes. Every number in the block comes from those files; the GPU name comes from the ladder
JSON's "device". Under each table: the run's provenance (or "not recorded" for older files) and a
bullet list that explains the columns. The block lies between `<!-- results:begin -->` and
`<!-- results:end -->` in docs/results.md (or --results-md FILE); prose lines in it are wrapped at
WRAP characters.

It also fills the one `<!-- gain:begin -->` ... `<!-- gain:end -->` block of each chapter
(stages/NN_name/README.md) that has one: the stage's time on the phases it changes against the
previous stage's, from every committed ladder run, and its pool phase alone from every
`ladder --pool-only` run (results/pool_only_*.json), with the GPU and the file. A results file's
stage counts only if its id, name and idea (the `d.idea` line of the stage's source) match the
stage's folder and source: the ladder was renumbered, and a stage can keep its number and name
and change. --check also fails on a stale chapter block.

Numbers in prose. Any measured number outside those blocks, in README.md, stages/*/README.md,
tracks/*/README.md, docs/*.md, profiles/*.md, python/README.md and results/**/README.md (or
--marked FILE...), is wrapped in a marker that names its source (HTML comments: GitHub shows
only the number):

    <!-- num: EXPR fmt=SPEC -->0.0082<!-- /num -->

EXPR: operands and + - * / ( ), separated by spaces. An operand is a number or FILE#PATH, FILE
relative to the repository root (or an alias: ladder, v1, pool, torch, torch_v1 = the committed
H200 ladder, ladder --kernelbench-v1, --pool-only, compare.py --problem 42 and small compare.py --problem 42
runs; see ALIASES), PATH for a .json file keys and list steps, `[N]` or `[key=value]` (the one
element whose key has that value): `v1#stages[id=13].total_ms`,
`torch#per_call.problems[name=kernelbench_v1].timings[kind=model_new].median_us`; for any other
file a regular expression (no spaces: use \s; no `|` inside a table: use `.`) whose group 1, or
whole match, is the number (commas dropped), with `@N` for the Nth match or `@sum` for the sum of
all: `profiles/data/12_pool_before_conv.txt#^gpu__time_duration\.sum\s.\s([\d.]+)@sum`. An operand
with spaces goes in double quotes. A speedup: `v1#stages[id=12].total_ms / v1#stages[id=13].total_ms`.
SPEC: a Python format spec (.2f, ,.0f, .1e), `sigN` (N significant digits, no exponent: 1,500),
or ms / x / rate (the tables' fmt_ms, fmt_ratio without the sign, fmt_rate). --check fails naming
file:line, the text found and the value expected; the normal mode rewrites the text. A marker
that cannot be evaluated is an error in both modes. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from . import ladder_results as lr

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
EMPTY = "(filled from committed ladder runs)"
RESULTS_MD = lr.REPO_ROOT / "docs" / "results.md"  # the page that holds the results block
WRAP = 100  # the width of the block's prose lines (table rows are not wrapped)
# A word that could start a new Markdown block at the head of a line (a list marker, a heading, a
# quote, a table row, HTML, a fence, a thematic break or setext underline): wrap() never begins a
# line with one.
_BLOCK_START = re.compile(r"[-+*>#|=<]|```|~~~|\d{1,9}[.)]$")


def cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def wrap(text: str, first: str = "", rest: str = "", width: int = WRAP) -> list:
    """`text` as lines of at most `width` characters (a longer word stays whole), the first line
    prefixed by `first`, the others by `rest`. A word that Markdown could read as the start of a
    new block (see _BLOCK_START) is never put at the head of a line: the word before it goes along."""
    lines, words = [], []  # words: those of the line being filled
    for word in text.split():
        if words and len(" ".join([(rest if lines else first) + words[0], *words[1:], word])) > width:
            # break before `word`, or else before the last word after the first that may begin a line
            k = next((i for i in range(len(words), 0, -1)
                      if not _BLOCK_START.match(words[i] if i < len(words) else word)), 0)
            if k:
                lines.append(" ".join([(rest if lines else first) + words[0], *words[1:k]]))
                words = words[k:]
        words.append(word)
    lines.append(" ".join([(rest if lines else first) + (words[0] if words else ""), *words[1:]]))
    return lines


def bullet(text: str, label: str | None = None) -> list:
    """One Markdown bullet, wrapped: `- **label**: text`, or `- text` without a label."""
    return wrap(f"**{label}**: {text}" if label else text, "- ", "  ")


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
    p = run.problem or {}
    shape = f"batch {p.get('batch')}, {p.get('in_channels')} \u2192 {p.get('out_channels')} channels, " \
            f"{p.get('in_h')}\u00d7{p.get('in_w')}"
    out = [f"### {run.gpu_name}, {shape}", ""]  # one heading per run: each GPU may have several
    src = f"`{rel(run.path)}`"
    if run.pytorch:
        m = run.pytorch.meta
        src += (f" and `{rel(run.pytorch.path)}` (PyTorch {m.get('torch', '?')}, CUDA {m.get('cuda', '?')})")
    out += [*wrap(f"From {src}. Device: {run.device or 'none'}."), "",
            *wrap(f"Problem: {run.problem_summary()}."), ""]
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
        out += bullet(cell(n))
    if notes:
        out.append("")
    out += [*wrap(cell(run.provenance_line())), ""]
    # The columns, one bullet each (label, text), then the notes on the floor.
    cols = [("total ms", "median over repetitions (CUDA events, L2 flushed before each), in parentheses the "
             "fastest and slowest repetition where the file records them; a CPU stage is one wall-clock run."),
            ("pool ms", "the pool phase's median (- for a stage without one: a fused stage pools inside its "
             "launch); for the CUB row, its segmented sum over the convT output."),
            ("conv TFLOP/s", "the convolution's flops over the conv phase; for a fused stage that does the "
             "convolution's arithmetic, the whole pipeline's flops over its total"
             + (f"; in parentheses, the share of the FP32 peak {lr.fmt_rate(peak)} TFLOP/s ({peak_how})."
                if peak else ".")),
            ("GB/s", "the pool phase's bytes (the convT output read once) over the pool phase; for a fused stage "
             "that skips the convolution's arithmetic, the pipeline's must-move bytes (x read once) over its total."),
            ("× floor", "total over the streaming read of x timed in the same run."),
            ("vs previous", "the previous stage's time over this one's, both on the phases this stage changes, "
             "named in parentheses (pool; conv + pool, where one of the two is a single fused launch; total: the "
             "whole run)" + ("; this file predates the ladder's record of the phases a stage changes, so it "
                             "compares totals." if any(s.changes is None for s in run.ran_stages()) else "."))]
    if run.pytorch:
        cols.append(("vs eager / vs torch.compile", "speedups measured by scripts/compare.py --problem 42 in its own "
                     "run; † marks numbers from a separate run (PyTorch rows, and ratios of PyTorch's median to "
                     "this table's total for stages that script did not time)."))
    else:
        cols.append(("vs eager / vs torch.compile",
                     "need a scripts/compare.py --problem 42 result for this GPU in results/."))
    out += ["The columns:", ""]
    for label, text in cols:
        out += bullet(text, label)
    for note in floor_notes(run):
        out += bullet(note)
    out.append("")
    return out


def floor_notes(run: lr.LadderRun) -> list:
    """The notes' sentences on the floor (one bullet each): the DRAM peak and the floor's share of it, what
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
        notes.append(f"Nsight Compute on the streaming read of harness/streaming_read.cuh over the same bytes, in "
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


def splice(text: str, block: str, path: Path = RESULTS_MD) -> str:
    """`text` (the page at `path`) with its results block replaced by `block`."""
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < 0 or j < i:
        raise SystemExit(f"error: {path} has no '{BEGIN}' ... '{END}' block")
    return text[: i + len(BEGIN)] + "\n" + block + "\n" + text[j:]

# --- numbers in prose: <!-- num: EXPR fmt=SPEC -->TEXT<!-- /num --> -------------------------------

NUM = re.compile(r"<!--\s*num:\s*(?P<spec>.*?)\s*-->(?P<text>.*?)<!--\s*/num\s*-->")
NUM_SRC = re.compile(r"<!--\s*num-src:\s*(?P<defs>.*?)\s*-->")
# The prose files whose markers are checked and rewritten (globs under the repository root).
MARKED = ("README.md", "stages/*/README.md", "stages/*/EXPERIMENTS.md", "tracks/*/README.md", "tracks/*/*.md",
          "docs/*.md", "profiles/*.md", "python/README.md", "results/README.md", "results/**/README.md",
          "drafts/*/README.md")
# Short names for the committed runs the prose quotes most (a marker may also name any file).
ALIASES = {"ladder": "results/ladder_h200.json", "v1": "results/ladder_v1_h200.json",
           "pool": "results/pool_only_h200.json", "torch": "results/pytorch_h200.json",
           "torch_v1": "results/pytorch_small_h200.json", "sass": "results/sass_counts_sm90.txt"}
_OPS = {"+", "-", "*", "/", "(", ")"}
_FMTS = {"ms": lambda v: lr.fmt_ms(v), "x": lambda v: lr.fmt_ratio(v).rstrip("\u00d7"),
         "rate": lambda v: lr.fmt_rate(v)}


class MarkError(Exception):
    pass


def _json_path(data, path: str, ref: str):
    """`stages[id=13].phases[phase=pool].ms`: keys, [N] indexes, [key=value] selectors on lists."""
    for part in re.findall(r"[^.\[\]]+|\[[^\]]*\]", path):
        if part.startswith("["):
            inner = part[1:-1]
            if "=" in inner:
                k, v = inner.split("=", 1)
                hits = [e for e in (data if isinstance(data, list) else [])
                        if isinstance(e, dict) and str(e.get(k)) == v]
                if len(hits) != 1:
                    raise MarkError(f"{ref}: {len(hits)} entries with {k}={v}")
                data = hits[0]
            else:
                try:
                    data = data[int(inner)]
                except (ValueError, IndexError, TypeError, KeyError):
                    raise MarkError(f"{ref}: no element {part}") from None
        else:
            if not isinstance(data, dict) or part not in data:
                raise MarkError(f"{ref}: no key '{part}'")
            data = data[part]
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise MarkError(f"{ref}: not a number ({data!r})")
    return float(data)


def resolve_ref(ref: str, root: Path, aliases: dict, cache: dict) -> float:
    """One operand: FILE#JSON.PATH for a .json file, FILE#REGEX for any other (group 1, or the
    whole match, read as a number; commas dropped). FILE is relative to the repository root, or
    an alias from the file's `<!-- num-src: A=path ... -->` line."""
    name, _, sel = ref.partition("#")
    name = aliases.get(name, name)
    path = root / name
    if path not in cache:
        if not path.is_file():
            raise MarkError(f"{ref}: no file {name}")
        text = path.read_text(errors="replace")
        cache[path] = json.loads(text) if path.suffix == ".json" else text
    data = cache[path]
    if isinstance(data, str):
        which = re.search(r"@(\d+|sum)$", sel)
        if which:
            sel = sel[: which.start()]
        found = list(re.finditer(sel, data, re.M))
        k = 1 if not which or which.group(1) == "sum" else int(which.group(1))
        if len(found) < k or not found:
            raise MarkError(f"{ref}: /{sel}/ matches {name} {len(found)} time(s)")
        vals = []
        for m in (found if which and which.group(1) == "sum" else [found[k - 1]]):
            s = (m.group(1) if m.groups() else m.group(0)).replace(",", "")
            try:
                vals.append(float(s))
            except ValueError:
                raise MarkError(f"{ref}: matched '{s}', not a number") from None
        return sum(vals)
    return _json_path(data, sel, ref)


def tokens(spec: str) -> list:
    """Whitespace-separated words; a word in double quotes may hold spaces (quotes dropped)."""
    return [t[1:-1] if t.startswith('"') else t for t in re.findall(r'"[^"]*"|\S+', spec)]


def eval_expr(expr: str, root: Path, aliases: dict, cache: dict) -> float:
    """Whitespace-separated tokens: operands (FILE#PATH or numbers), + - * / and parentheses."""
    code = []
    for tok in tokens(expr):
        if tok in _OPS:
            code.append(tok)
        elif re.fullmatch(r"\d+(\.\d*)?(e-?\d+)?", tok):
            code.append(tok)
        elif "#" in tok:
            code.append(repr(resolve_ref(tok, root, aliases, cache)))
        else:
            raise MarkError(f"'{tok}' is neither FILE#PATH, a number nor one of + - * / ( )")
    try:
        return float(eval(" ".join(code), {"__builtins__": {}}, {}))  # only numbers and operators
    except ZeroDivisionError:
        raise MarkError(f"{expr}: division by zero") from None
    except SyntaxError:
        raise MarkError(f"{expr}: not an expression") from None


def sig(v: float, n: int) -> str:
    """`v` rounded to n significant digits, without an exponent, thousands separated: 1,500."""
    if v == 0:
        return "0"
    r = float(f"{v:.{n}g}")
    digits = math.floor(math.log10(abs(r))) + 1
    return f"{r:,.{max(0, n - digits)}f}"


def format_mark(spec: str, root: Path, aliases: dict, cache: dict) -> str:
    words = tokens(spec)
    opts = {w.split("=", 1)[0]: w.split("=", 1)[1] for w in words if re.match(r"^(fmt)=", w)}
    expr = " ".join(f'"{w}"' if " " in w else w for w in words if not re.match(r"^(fmt)=", w))
    v = eval_expr(expr, root, aliases, cache)
    f = opts.get("fmt", "ms")
    if f in _FMTS:
        return _FMTS[f](v)
    if re.fullmatch(r"sig\d", f):
        return sig(v, int(f[3:]))
    try:
        return format(v, f)
    except ValueError:
        raise MarkError(f"bad fmt={f}") from None


def marked_files(root: Path) -> list:
    out = []
    for g in MARKED:
        out += [p for p in sorted(root.glob(g)) if p.is_file() and p not in out]
    return out


def update_marks(text: str, root: Path, cache: dict | None = None):
    """(new text, [(line, found, expected, spec)], [(line, error)]): every marker re-rendered."""
    cache = {} if cache is None else cache
    aliases = dict(ALIASES)
    for m in NUM_SRC.finditer(text):
        for d in m.group("defs").split():
            k, _, v = d.partition("=")
            aliases[k] = v
    stale, errors, out, pos = [], [], [], 0
    for m in NUM.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        try:
            want = format_mark(m.group("spec"), root, aliases, cache)
        except MarkError as e:
            errors.append((line, str(e)))
            want = m.group("text")
        if want != m.group("text"):
            stale.append((line, m.group("text"), want, m.group("spec")))
        out += [text[pos:m.start("text")], want]
        pos = m.end("text")
    out.append(text[pos:])
    return "".join(out), stale, errors


def check_marked(paths: list, root: Path, rewrite: bool) -> tuple[int, int, int]:
    """(markers, stale, errors) over `paths`; prints one line per stale marker or error (stderr);
    rewrites stale files when `rewrite`."""
    cache, n, n_stale, n_err = {}, 0, 0, 0
    for path in paths:
        text = path.read_text()
        if "num:" not in text:
            continue
        new, stale, errors = update_marks(text, root, cache)
        n += len(NUM.findall(text))
        shown = rel(path) if rel(path) != path.name or path.parent.resolve() == lr.REPO_ROOT else str(path)
        for line, found, want, spec in stale:
            print(f"{shown}:{line}: found {found!r}, expected {want!r} from `{spec}`"
                  + ("" if rewrite else "; run: python3 scripts/update_results.py"), file=sys.stderr)
        for line, err in errors:
            print(f"{shown}:{line}: error: {err}", file=sys.stderr)
        n_stale += len(stale)
        n_err += len(errors)
        if rewrite and stale and new != text:
            path.write_text(new)
    return n, n_stale, n_err


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", help="results directory (default: $LADDER_RESULTS_DIR or results/)")
    ap.add_argument("--results-md", default=str(RESULTS_MD),
                    help="the page whose results block to update (default: docs/results.md)")
    ap.add_argument("--stages", default=str(lr.REPO_ROOT / "stages"),
                    help="the stage folders whose chapters (NN_name/README.md) have gain blocks")
    ap.add_argument("--root", default=str(lr.REPO_ROOT),
                    help="the folder that FILE in a <!-- num: FILE#PATH --> marker is relative to")
    ap.add_argument("--marked", nargs="*", metavar="FILE",
                    help="the prose files whose <!-- num: --> markers to check or rewrite "
                         "(default: " + ", ".join(MARKED) + " under --root)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if the results block, a chapter's gain block or a marked number "
                           "is out of date")
    mode.add_argument("--print", action="store_true", help="print the generated blocks only")
    args = ap.parse_args(argv)

    runs = lr.load(args.results)
    pools = lr.load_pool_only(args.results)
    results_md = Path(args.results_md)
    if args.print:
        print(render(runs))
    else:
        updates = [(results_md, splice(results_md.read_text(), render(runs), results_md))]
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
    root = Path(args.root)
    marked = [Path(p) for p in args.marked] if args.marked is not None else marked_files(root)
    if args.check:
        for path in stale:
            what = "results block" if path == results_md else "gain block"
            print(f"{path}: the {what} is out of date; run: python3 scripts/update_results.py", file=sys.stderr)
        n, n_stale, n_err = check_marked(marked, root, rewrite=False)
        if stale or n_stale or n_err:
            return 1
        print(f"{results_md} and {len(updates) - 1} chapter gain block(s) up to date "
              f"({len(runs)} ladder run(s), {len(pools)} pool-only run(s)); "
              f"{n} marked number(s) in {len(marked)} prose file(s) match results/")
        return 0
    for path, new in updates:
        if path in stale:
            path.write_text(new)
            print(f"{path}: rewritten from {len(runs)} ladder run(s) and {len(pools)} pool-only run(s)")
    if not stale:
        print(f"{results_md} and {len(updates) - 1} chapter gain block(s) already up to date")
    n, n_stale, n_err = check_marked(marked, root, rewrite=True)
    print(f"{n} marked number(s): {n_stale} rewritten, {n_err} error(s)")
    return 1 if n_err else 0


if __name__ == "__main__":
    sys.exit(main())
