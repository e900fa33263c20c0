"""The stubs' hints: a code stub stays short, its full hint lives in the rung's chapter.

A code stub (grader/markers.py) calls `ladder_todo("ID", "a short summary")` (common/toolkit/todo.cuh),
or, where the stub runs nothing, carries a comment `// TODO(ID): a short summary`. ID is RUNG.k:
the k-th hint of rung RUNG (09.1; p38-03.1 for a track's rung). The hint itself is an item of the
"## TODO hints" section of RUNG's chapter, stages/NN_name/README.md for a stage and the track's
README.md for a track's rung, that starts with the id in bold: `- **09.1**: ...`. The chapter
ships whenever the stub does: a stub in a stage's folder names that stage, a stub in stages/lib/
one of its region's owners (the earliest rung whose folder a handout of it holds), a stub in a
track names a rung of that track.

Every line of a kernel-bearing file (KERNEL_FILES, and any source of a rung folder) fits in
MAX_LINE characters: a long hint belongs in the chapter, not in the kernel.
"""
import os
import re

from . import handout

MAX_LINE = 120
KERNEL_FILES = (("stages/", "tracks/"), (".cu", ".cuh"))
SECTION = "## TODO hints"
# ladder_todo("09.1", "what"): the id and the short summary, as the handout's stub line holds them.
TODO_CALL = re.compile(r'ladder_todo\(\s*"((?:[^"\\]|\\.)*)"\s*,\s*"((?:[^"\\]|\\.)*)"\s*\)')
TODO_COMMENT = re.compile(r'//\s*TODO\(([^)\s]+)\):\s*(.*?)\s*$')
HINT_ID = re.compile(r"^(?:([a-z][a-z0-9]*)-)?(\d\d)\.([1-9]\d*)$")
HINT_ITEM = re.compile(r"^- \*\*([^*\s]+)\*\*")


RUNG_FOLDER = re.compile(r"^(stages/\d\d_[^/]+|tracks/[^/]+/rungs/\d\d_[^/]+)/[^/]+\.(cpp|hpp)$")


def is_kernel_file(path):
    """Device code under stages/ or tracks/, or any source of a rung's folder (rung 00's C++ too)."""
    return (path.startswith(KERNEL_FILES[0]) and path.endswith(KERNEL_FILES[1])) or bool(RUNG_FOLDER.match(path))


def long_lines(root, files, limit=MAX_LINE):
    """"path:line: N characters" for every line of the kernel-bearing `files` (relative to root)
    longer than `limit`."""
    out = []
    for path in files:
        if not is_kernel_file(path):
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            for number, line in enumerate(f.read().splitlines(), start=1):
                if len(line) > limit:
                    out.append(f"{path}:{number}: {len(line)} characters (at most {limit}: a long hint belongs "
                               "in the chapter's TODO hints)")
    return out


def rung_of(hint_id):
    """The rung of a hint id, NN or TRACK-NN (09.1: 09, p38-03.1: p38-03); None if malformed."""
    m = HINT_ID.match(hint_id)
    return None if not m else (f"{m.group(1)}-{m.group(2)}" if m.group(1) else m.group(2))


def chapter_of(root, hint_id):
    """The chapter holding the hint of `hint_id`, relative to root, or None where no folder of
    its rung (or its track) is there."""
    rung = rung_of(hint_id)
    if rung is None:
        return None
    track, _, number = rung.rpartition("-")
    if track:
        folder = handout.track_folders(root).get(track)
        return folder and f"tracks/{folder}/README.md"
    folder = handout.stage_folders(root).get(number)
    return folder and f"stages/{folder}/README.md"


def hints_in(text):
    """{id: line number} of the hints in a chapter's "## TODO hints" section."""
    out, inside = {}, False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("## "):
            inside = line.rstrip() == SECTION
        elif inside and (m := HINT_ITEM.match(line)):
            out[m.group(1).rstrip(":")] = number
    return out


def stub_ids(region):
    """(id, short summary) of each ladder_todo call and TODO(...) comment in a region's stub lines."""
    out = []
    for line in region.stub:
        out += TODO_CALL.findall(line)
        if (m := TODO_COMMENT.search(line)):
            out.append((m.group(1), m.group(2)))
    return out


def may_name(path, owners, rung):
    """Whether a stub of `path`, in a region of `owners`, may carry a hint of `rung`: one whose
    chapter ships with it (see the module's docstring)."""
    parts = path.split("/")
    if parts[0] == "stages" and len(parts) > 2 and (m := handout.STAGE_DIR.match(parts[1])):
        return rung == m.group(1)
    if parts[:2] == ["stages", "lib"]:
        return rung in owners
    if parts[0] == "tracks" and len(parts) > 2 and (m := handout.TRACK_DIR.match(parts[1])):
        return rung.startswith(m.group(1) + "-")
    return False


def chapters(root):
    """The chapters that may hold hints: every stage's README.md and every track's."""
    out = [f"stages/{f}/README.md" for f in handout.stage_folders(root).values()] + \
        [f"tracks/{f}/README.md" for f in handout.track_folders(root).values()]
    return [c for c in out if os.path.isfile(os.path.join(root, c))]


def problems(root, parsed_files):
    """What is wrong with the stubs' hints, as lines (empty: none): a stub's ladder_todo without
    an id, a malformed id, an id of a rung whose chapter need not ship with the stub, an id two
    stubs share, an id whose hint the chapter lacks, and a hint no stub names.
    parsed_files: (path, markers.Parsed) of the files with markers."""
    out, seen = [], {}
    hints = {}
    for chapter in chapters(root):
        with open(os.path.join(root, chapter), encoding="utf-8") as f:
            hints[chapter] = hints_in(f.read())
    for path, parsed in parsed_files:
        if not path.endswith((".cu", ".cuh", ".cpp", ".hpp")):
            continue
        for region in parsed.regions():
            where = f"{path}:{region.begin_line}"
            text = "\n".join(region.stub)
            if text.count("ladder_todo(") > len(TODO_CALL.findall(text)):
                out.append(f"{where}: a stub's ladder_todo takes the hint id first: ladder_todo(\"NN.k\", \"...\")")
            for hint_id, _ in stub_ids(region):
                rung = rung_of(hint_id)
                if rung is None:
                    out.append(f"{where}: hint id '{hint_id}' is not RUNG.k (09.1, p38-03.1)")
                    continue
                if not may_name(path, region.owners, rung):
                    out.append(f"{where}: hint {hint_id} is in a chapter that need not ship with this file")
                if hint_id in seen:
                    out.append(f"{where}: hint id {hint_id} is used already at {seen[hint_id]}")
                seen[hint_id] = where
                chapter = chapter_of(root, hint_id)
                if hint_id not in hints.get(chapter, {}):
                    out.append(f"{where}: hint {hint_id} is missing from {chapter or f'a chapter of rung {rung}'} "
                               f"(under '{SECTION}', an item starting '- **{hint_id}**')")
    for chapter, found in hints.items():
        out += [f"{chapter}:{line}: hint {hint_id} is named by no stub" for hint_id, line in found.items()
                if hint_id not in seen]
    return out


def todo_line(root, label, hint_id, what):
    """A stub's TODO line as the grader reports it, in the words common/toolkit/todo.cuh prints."""
    chapter = chapter_of(root, hint_id) or f"the chapter of rung {rung_of(hint_id) or hint_id}"
    return f'TODO({label}): {what} [hint {hint_id}: "{SECTION[3:]}" in {chapter}]'
