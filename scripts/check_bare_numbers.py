#!/usr/bin/env python3
"""Flags measured numbers in prose that stand outside a `<!-- num: -->` marker (CI).

    python3 scripts/check_bare_numbers.py              # the course's prose files; exit 1 on a finding
    python3 scripts/check_bare_numbers.py FILE...      # these files only

A finding is a number with a unit of time, rate or share right after it: ms, µs/us, ns, GB/s,
TB/s, GFLOP/s, TFLOP/s, % , or a ratio written `1.75x` / `1.75×` (or `×1.75`); `16x16` or
`3 × 3` (a shape or product) is not a ratio. Skipped: fenced code blocks, inline code spans,
HTML comments, the text inside `<!-- num: ... -->TEXT<!-- /num -->` markers (checked by
scripts/update_results.py --check), generated blocks (`<!-- NAME:begin -->` ... `<!-- NAME:end -->`:
results, gain, estimates), link targets and URLs.

Each finding prints as `path:line: NUMBER+UNIT: excerpt`. Either wrap the number in a marker
that names its committed source (see tooling/results/update_results.py), rewrite the sentence
without it, or, for a constant, a target or a threshold that no run measured, add a line to the
allow-list (scripts/bare_numbers_allow.txt): `PATH:REGEX  # why`, PATH a glob relative to the
repository root, REGEX a Python regular expression whose match on the line covers the finding.
Every allow-list line needs its reason. Standard library only.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ALLOW = REPO / "scripts" / "bare_numbers_allow.txt"
# The prose that quotes measured numbers (globs under the repository root).
# The same pages as update_results.py's markers (MARKED there), and the grader's student pages.
PROSE = ("README.md", "docs/*.md", "stages/*/README.md", "stages/*/EXPERIMENTS.md", "profiles/*.md",
         "tracks/**/*.md", "python/README.md", "results/README.md", "results/**/README.md", "grader/*.md",
         "drafts/*/README.md")

NUMBER = r"(?<![\w.,/-])\d+(?:,\d{3})*(?:\.\d+)?"
UNIT = r"(?:ms|µs|μs|us|ns|[GT]B/s|[GTP]FLOP/s|TFLOPS|%)"
# A number and its unit (an optional space between, plain, no-break or thin).
WITH_UNIT = re.compile(rf"{NUMBER}[ \u00a0\u2009\u202f]?{UNIT}(?![\w/])")
# A ratio: 1.75x or 1.75× (1.75 × with a space only before punctuation or the line's end, since
# `8 × R`, `64 × N` are products), not followed by another number, which would make it a shape or a
# product (16x16, 3 × 3); or ×1.75 / x2 with no number before it.
RATIO_AFTER = re.compile(rf"{NUMBER}(?:[xX×](?![\w×])(?![ \u00a0\u2009\u202f]*[\d(\x00])"
                         rf"|[ \u00a0\u2009\u202f]×(?=[ \u00a0\u2009\u202f]*(?:[,.;:)|]|$)))")
RATIO_BEFORE = re.compile(r"(?<![\w.)×\x00])(?:×|x)\d+(?:\.\d+)?(?![\w.×])")
# Not a quantity: a stage or rung number before a unit in a column heading ("stage 10 ms").
NOT_A_QUANTITY = re.compile(r"(?:stage|rung|stages|rungs)[ \u00a0]$", re.I)

# Regions that are not prose, each replaced by NUL characters (newlines kept, so line numbers and
# columns hold; a NUL stands for a value, so `512 × <!-- num: ... -->` stays a product).
GENERATED = re.compile(r"<!--\s*([\w-]+):begin\s*-->.*?<!--\s*\1:end\s*-->", re.S)
NUM_MARK = re.compile(r"<!--\s*num:.*?-->.*?<!--\s*/num\s*-->", re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
FENCE = re.compile(r"^[ \t>]*(`{3,}|~{3,})")
# An inline code span: a run of backticks, then anything up to the same run (no blank line inside).
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)
LINK_TARGET = re.compile(r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)|^\s*\[[^\]]+\]:\s*\S+.*$|<https?://[^>]*>|https?://\S+", re.M)
HTML_ATTR = re.compile(r"<(?:img|a|div|span|td|th|table|p)\b[^>]*>", re.I)


@dataclass
class Entry:
    path: str  # a glob
    regex: re.Pattern
    why: str
    where: str  # allow-list file:line
    used: int = 0


@dataclass
class Finding:
    path: str
    line: int
    text: str
    excerpt: str


def blank(m: re.Match) -> str:
    return re.sub(r"[^\n]", "\x00", m.group(0))


def mask(text: str) -> str:
    """`text` with every region that is not checked prose blanked out (same length, same lines)."""
    text = GENERATED.sub(blank, text)
    text = NUM_MARK.sub(blank, text)
    text = COMMENT.sub(blank, text)
    lines, fence = text.split("\n"), None
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            lines[i] = "\x00" * len(line)
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line[m.end():].strip():
                fence = None
            lines[i] = "\x00" * len(line)
    text = "\n".join(lines)
    text = CODE_SPAN.sub(blank, text)
    text = LINK_TARGET.sub(blank, text)
    return HTML_ATTR.sub(blank, text)


def scan(text: str) -> list:
    """[(line number, start column, end column, found text)] of the bare numbers in `text`."""
    out = []
    for n, line in enumerate(mask(text).split("\n"), 1):
        spans = []
        for rx in (WITH_UNIT, RATIO_AFTER, RATIO_BEFORE):
            for m in rx.finditer(line):
                if NOT_A_QUANTITY.search(line[: m.start()]):
                    continue
                if not any(a <= m.start() < b or m.start() <= a < m.end() for a, b, _ in spans):
                    spans.append((m.start(), m.end(), m.group(0)))
        out += [(n, a, b, t) for a, b, t in sorted(spans)]
    return out


def load_allow(path: Path) -> list:
    entries = []
    if not path.is_file():
        return entries
    for k, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        body, _, why = re.split(r"(\s+#\s)", line, maxsplit=1) if re.search(r"\s+#\s", line) else (line, "", "")
        where = f"{path.name}:{k}"
        if not why.strip():
            raise SystemExit(f"error: {where}: no reason given (`PATH:REGEX  # why`)")
        glob, colon, rx = body.partition(":")
        if not colon or not rx:
            raise SystemExit(f"error: {where}: expected `PATH:REGEX  # why`")
        try:
            entries.append(Entry(glob, re.compile(rx), why.strip(), where))
        except re.error as e:
            raise SystemExit(f"error: {where}: bad regular expression: {e}") from None
    return entries


def allowed(entries: list, rel: str, line: str, start: int, end: int) -> bool:
    for e in entries:
        if fnmatch.fnmatch(rel, e.path) and any(m.start() <= start and end <= m.end()
                                                 for m in e.regex.finditer(line)):
            e.used += 1
            return True
    return False


def excerpt(line: str, start: int, end: int, width: int = 50) -> str:
    a, b = max(0, start - width), min(len(line), end + width)
    return ("…" if a else "") + line[a:b].strip() + ("…" if b < len(line) else "")


def check(paths: list, root: Path, entries: list) -> list:
    findings = []
    for path in paths:
        try:
            rel = str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            rel = str(path)
        text = path.read_text(errors="replace")
        lines = text.split("\n")
        for n, a, b, found in scan(text):
            if not allowed(entries, rel, lines[n - 1], a, b):
                findings.append(Finding(rel, n, found.strip(), excerpt(lines[n - 1], a, b)))
    return findings


def prose_files(root: Path) -> list:
    out = []
    for g in PROSE:
        out += [p for p in sorted(root.glob(g)) if p.is_file() and p not in out]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="files to check (default: " + ", ".join(PROSE) + ")")
    ap.add_argument("--root", default=str(REPO), help="the repository root (paths are shown relative to it)")
    ap.add_argument("--allow", default=str(ALLOW), help="the allow-list (default: scripts/bare_numbers_allow.txt)")
    ap.add_argument("--unused", action="store_true", help="also list allow-list lines that matched nothing")
    args = ap.parse_args(argv)
    root = Path(args.root)
    entries = load_allow(Path(args.allow))
    paths = [Path(f) for f in args.files] if args.files else prose_files(root)
    findings = check(paths, root, entries)
    for f in findings:
        print(f"{f.path}:{f.line}: {f.text}: {f.excerpt}")
    if args.unused:
        for e in entries:
            if not e.used:
                print(f"{e.where}: unused: {e.path}:{e.regex.pattern}", file=sys.stderr)
    if findings:
        print(f"{len(findings)} bare number(s) with a unit outside <!-- num: --> markers; mark them "
              f"(tooling/results/update_results.py), rewrite them or allow-list them with a reason "
              f"({Path(args.allow).name})", file=sys.stderr)
        return 1
    print(f"no bare numbers with a unit in {len(paths)} prose file(s) "
          f"({sum(e.used for e in entries)} allow-listed by {len(entries)} line(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
