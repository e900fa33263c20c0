"""Solution and instructor markers: the one source that instructor copies and handouts come from.

In a source file (C++, CUDA, CMake, Markdown), a solution region is

    // BEGIN SOLUTION [OWNER ...]
    // STUB: <a line of the stub>          (zero or more, first in the region)
    <the solution>
    // END SOLUTION

(`#` instead of `//` in CMake; `<!-- BEGIN SOLUTION -->`, `<!-- STUB: ... -->` and
`<!-- END SOLUTION -->` in Markdown). An OWNER is the rung whose idea the code is (several for a
chapter's snippet that quotes more than one rung): NN for a stage of the main ladder, TRACK-NN
for a rung of a second track (p38-03: tracks/p38_spatial_softmax/rungs/03_*/). Optional in a
rung's own folder (stages/NN_name/, tracks/TRACK_name/rungs/NN_name/), required
elsewhere (stages/lib/, a track's shared device/ code). A handout replaces the regions of the
assigned rungs with their stub lines, indented like the BEGIN line, and keeps the solution of
every other region. The instructor's build compiles the solution: the markers are
comments.

An instructor region, `// BEGIN INSTRUCTOR` ... `// END INSTRUCTOR` (same comment forms), is
left out of every handout: tests of the tests, links to the answers.
"""
import re
from dataclasses import dataclass, field

_COMMENT = r"(?://|#|<!--)"
_TAIL = r"\s*(?:-->)?\s*$"
# An owner: NN (a stage) or TRACK-NN (a rung of a track, TRACK the prefix of its folder's name).
OWNER = r"(?:[a-z][a-z0-9]*-)?\d\d"
BEGIN_SOLUTION = re.compile(r"^(\s*)" + _COMMENT + r"\s*BEGIN SOLUTION((?:\s+" + OWNER + r")*)" + _TAIL)
END_SOLUTION = re.compile(r"^\s*" + _COMMENT + r"\s*END SOLUTION" + _TAIL)
STUB = re.compile(r"^\s*" + _COMMENT + r"\s*STUB:\s?(.*?)" + _TAIL)
BEGIN_INSTRUCTOR = re.compile(r"^\s*" + _COMMENT + r"\s*BEGIN INSTRUCTOR" + _TAIL)
END_INSTRUCTOR = re.compile(r"^\s*" + _COMMENT + r"\s*END INSTRUCTOR" + _TAIL)
# A line that starts like a marker but is not one (a typo would otherwise ship a solution).
# (A misspelt `// BEGIN SOLUTON` counts: its solution would otherwise ship as ordinary lines.)
LOOKS_LIKE_MARKER = re.compile(r"^\s*" + _COMMENT + r"\s*((BEGIN|END)\s+[A-Z]{4,}|STUB\b)")


class MarkerError(ValueError):
    """A malformed region: the message names the file and line."""


@dataclass
class Region:
    owners: frozenset          # the rungs, {"NN", "p38-NN", ...}
    begin_line: int            # 1-based line of the BEGIN marker
    indent: str
    stub: list = field(default_factory=list)      # stub lines, without the marker prefix
    solution: list = field(default_factory=list)  # the solution's lines, verbatim


@dataclass
class Parsed:
    """A file as a sequence of parts: str (a line kept as is), Region, or None (an instructor line)."""
    path: str
    parts: list

    def regions(self):
        return [p for p in self.parts if isinstance(p, Region)]


def parse(path, text, default_owner=None):
    """Splits `text` (the file at `path`) into kept lines, solution regions and instructor lines.
    default_owner: the rung of the file's folder, or None outside a rung folder. Raises MarkerError
    for a nested, unterminated or ownerless region, or a stray END/STUB."""
    parts, region, instructor = [], None, None
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        where = f"{path}:{number}"
        if BEGIN_INSTRUCTOR.match(line):
            if region or instructor:
                raise MarkerError(f"{where}: BEGIN INSTRUCTOR inside another region")
            instructor = number
            parts.append(None)
        elif END_INSTRUCTOR.match(line):
            if not instructor:
                raise MarkerError(f"{where}: END INSTRUCTOR without BEGIN INSTRUCTOR")
            instructor = None
            parts.append(None)
        elif instructor:
            if BEGIN_SOLUTION.match(line):
                raise MarkerError(f"{where}: BEGIN SOLUTION inside an instructor region")
            parts.append(None)
        elif (m := BEGIN_SOLUTION.match(line)):
            if region:
                raise MarkerError(f"{where}: BEGIN SOLUTION inside the region opened at line {region.begin_line}")
            owners = frozenset(m.group(2).split()) or (frozenset([default_owner]) if default_owner else None)
            if not owners:
                raise MarkerError(f"{where}: BEGIN SOLUTION outside a rung folder must name its rung "
                                  "(// BEGIN SOLUTION NN, or TRACK-NN in a track)")
            region = Region(owners=owners, begin_line=number, indent=m.group(1))
        elif END_SOLUTION.match(line):
            if not region:
                raise MarkerError(f"{where}: END SOLUTION without BEGIN SOLUTION")
            parts.append(region)
            region = None
        elif (m := STUB.match(line)):
            if not region or region.solution:
                raise MarkerError(f"{where}: a STUB line belongs at the top of a solution region")
            region.stub.append(m.group(1))
        elif LOOKS_LIKE_MARKER.match(line):
            raise MarkerError(f"{where}: malformed marker: {line.strip()}")
        elif region:
            region.solution.append(line)
        else:
            parts.append(line)
    if region:
        raise MarkerError(f"{path}:{region.begin_line}: BEGIN SOLUTION is never closed")
    if instructor:
        raise MarkerError(f"{path}:{instructor}: BEGIN INSTRUCTOR is never closed")
    return Parsed(path, parts)


def render(parsed, stubbed_owners):
    """The handout's text of a parsed file: the regions of `stubbed_owners` become their stubs,
    the other regions their solutions, instructor lines vanish, markers vanish."""
    out = []
    for part in parsed.parts:
        if part is None:
            continue
        if isinstance(part, str):
            out.append(part)
        elif part.owners & set(stubbed_owners):
            if not part.stub:
                raise MarkerError(f"{parsed.path}:{part.begin_line}: the region of rung(s) {' '.join(sorted(part.owners))} "
                                  "has no STUB line: a handout would leave nothing in its place")
            out.extend(part.indent + s + "\n" for s in part.stub)
        else:
            out.extend(part.solution)
    return "".join(out)


def instructor_text(parsed):
    """The instructor's text with every marker line dropped (what the solution reads like)."""
    return render(parsed, stubbed_owners=())
