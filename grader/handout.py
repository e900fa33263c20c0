"""Writes a student's repository for chosen rungs (scripts/assignment.py handout) and checks that
no solution reached it (scripts/assignment.py check-handout).

What ships is an allow-list (SHIP): the build, common/, ladder/, the public tests, the grader's
public half, the chapters and docs without the answers, and the stage folders up to the last
chosen rung. Solutions of the chosen rungs become stubs (grader/markers.py); instructor regions,
hidden tests, the secret seed, the grader's fixtures and the mutants never ship.

A second track (tracks/TRACK_name/, its rungs in rungs/NN_name.cu) is handed out by rungs named
TRACK-NN (p38-03). Such a handout ships the whole track folder (its registry lists every rung)
and, of the main ladder, only the stages the build needs (TRACK_HANDOUT_STAGES); stage
handouts leave tracks/ out. One handout holds one ladder: stage rungs or one track's rungs.
"""
import datetime
import fnmatch
import json
import os
import re
import shutil
import subprocess

import markers
import track

# Paths (fnmatch globs, relative to the repository root) that a handout may contain. stages/ is
# handled apart: the chosen rungs' folders, the earlier ones, and the lib files they include.
SHIP = [
    ".gitignore", "CMakeLists.txt",
    "cmake/CheckDriver.cmake", "cmake/CudaArchitectures.cmake", "cmake/GitStamp.cmake",
    "cmake/Sanitize.cmake", "cmake/Stages.cmake", "cmake/WriteIfChanged.cmake",
    "common/*.cpp", "common/*.hpp", "ladder/*.cpp", "ladder/*.hpp", "ladder/*.cu", "ladder/*.cuh",
    "tests/CMakeLists.txt", "tests/*.cpp", "tests/*.hpp", "tests/sticky/*",
    "tests/mutants/sanitizer.problems",
    "scripts/assignment.py", "scripts/check_program.py", "scripts/check_rung_includes.sh",
    "scripts/check_sass.sh", "scripts/install_deps.sh", "scripts/sanitize.sh", "scripts/test.sh",
    "grader/*.py", "grader/CMakeLists.txt", "grader/*.cu", "grader/*.cuh", "grader/rungs.json",
    "grader/public.problems", "grader/practice.problems",
    "docs/problem.md", "docs/measuring.md", "docs/mistakes.md", "docs/reading-profiles.md", "docs/img/*",
    "docs/students.md", "notebooks/colab_student.ipynb",
]
# Never in a handout, whatever SHIP says (a second line of defence, checked on the result).
FORBIDDEN = ["grader/hidden*", "grader/fixtures*", "*.mutant", "*secret*", "docs/answers.md", "docs/teaching.md",
             "cmake/Mutants.cmake", "cmake/MutantApply.cmake", "results/*", "profiles/*"]
STAGE_DIR = re.compile(r"^(\d\d)_([A-Za-z0-9_]+)$")
TRACK_DIR = re.compile(r"^([a-z][a-z0-9]*)_[A-Za-z0-9_]+$")          # tracks/p38_spatial_softmax: track p38
TRACK_RUNG_FILE = re.compile(r"^(\d\d)_([A-Za-z0-9_]+)\.(?:cu|cpp)$")  # its rungs/03_block_tree.cu: p38-03
RUNG_ID = re.compile(r"^(?:([a-z][a-z0-9]*)-)?(\d\d)$")               # 03 (a stage) or p38-03 (a track's rung)
# The stages a track handout ships, complete: the build needs stage 00 (the CPU tests link it) and
# a GPU stage (the sticky-error test runs the last stage).
TRACK_HANDOUT_STAGES = "01"
# A track may build on another ("needs" in grader/rungs.json): its folder ships, stubbed.
INCLUDE = re.compile(r'^\s*#\s*include\s+"(?:lib/)?([A-Za-z0-9_.]+)"', re.M)
README_TEMPLATE = "grader/student_README.md"
TRACK_README_TEMPLATE = "grader/student_README_track.md"
MANIFEST = "assignment.json"
# A solution line shorter than this (without spaces) is too common to call a leak (`}`, `return v;`).
MIN_LEAK_CHARS = 20


class HandoutError(RuntimeError):
    """A handout cannot be written or failed its check; the message says why."""


def repo_files(root):
    """The repository's files, relative to root: `git ls-files` where root is a git work tree,
    else every file outside build folders (a handout or a copy without .git)."""
    if os.path.isdir(os.path.join(root, ".git")):
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], check=True, capture_output=True).stdout
        return sorted(f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(root, f)))
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (d.startswith("build") or d in (".git", "__pycache__"))]
        for name in filenames:
            files.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return sorted(files)


def stage_folders(root):
    """{id: folder name} of the stage folders under root/stages."""
    out = {}
    for name in sorted(os.listdir(os.path.join(root, "stages"))):
        m = STAGE_DIR.match(name)
        if m and os.path.isdir(os.path.join(root, "stages", name)):
            out[m.group(1)] = name
    return out


def track_folders(root):
    """{track: folder name} of the tracks under root/tracks (a folder TRACK_name with rungs/)."""
    base, out = os.path.join(root, "tracks"), {}
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else ():
        m = TRACK_DIR.match(name)
        if m and os.path.isdir(os.path.join(base, name, "rungs")):
            out[m.group(1)] = name
    return out


def track_rungs(root):
    """{"TRACK-NN": path of the rung's file} for every rung file of every track under root."""
    out = {}
    for tid, folder in track_folders(root).items():
        for name in sorted(os.listdir(os.path.join(root, "tracks", folder, "rungs"))):
            if (m := TRACK_RUNG_FILE.match(name)):
                out[f"{tid}-{m.group(1)}"] = f"tracks/{folder}/rungs/{name}"
    return out


def is_track_rung(rung):
    return "-" in rung


def rung_name(root, rung):
    """The rung's name without its number: shared_tree (stage 03), block_tree (p38-03)."""
    if is_track_rung(rung):
        return TRACK_RUNG_FILE.match(os.path.basename(track_rungs(root)[rung])).group(2)
    return stage_folders(root)[rung].split("_", 1)[1]


def default_owner(path):
    """The rung a file's regions belong to by default: its stage folder's number, a track rung's
    TRACK-NN for its rung file (tracks/p38_x/rungs/03_y.cu: p38-03), else None."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == "stages" and (m := STAGE_DIR.match(parts[1])):
        return m.group(1)
    if len(parts) == 4 and parts[0] == "tracks" and parts[2] == "rungs" and (t := TRACK_DIR.match(parts[1])) \
            and (m := TRACK_RUNG_FILE.match(parts[3])):
        return f"{t.group(1)}-{m.group(1)}"
    return None


def parse_file(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return markers.parse(path, f.read(), default_owner(path))


def is_text(path):
    return not path.startswith("docs/img/")


def has_markers(path):
    """Whether markers in `path` are live: everywhere but the grader's own code and Python
    files, whose text describes the markers."""
    return is_text(path) and not path.startswith("grader/") and not path.endswith(".py")


def lib_closure(root, sources):
    """The stages/lib files that `sources` (paths relative to root) include, transitively."""
    todo, seen = list(sources), set()
    while todo:
        with open(os.path.join(root, todo.pop()), encoding="utf-8") as f:
            text = f.read()
        for name in INCLUDE.findall(text):
            lib = f"stages/lib/{name}"
            if lib not in seen and os.path.isfile(os.path.join(root, lib)):
                seen.add(lib)
                todo.append(lib)
    return sorted(seen)


def owners_in(root, paths):
    """{path: set of rungs owning a solution region in it} for the parsed files among paths."""
    out = {}
    for path in paths:
        if path.endswith((".cu", ".cuh", ".cpp", ".hpp", ".md")) and path.startswith(("stages/", "tracks/")):
            owners = set().union(*(r.owners for r in parse_file(root, path).regions()))
            if owners:
                out[path] = owners
    return out


def plan(root, rungs, stub_needed=False):
    """What a handout of `rungs` holds: (files to ship, the rungs whose regions are stubbed,
    {rung: the files it declares}). Raises HandoutError for an unknown rung, one without regions,
    or stage rungs and track rungs (or two tracks' rungs) in one handout."""
    folders = stage_folders(root)
    stage_ids = [r for r in rungs if not is_track_rung(r)]
    track_ids = [r for r in rungs if is_track_rung(r)]
    tracks = sorted({r.split("-")[0] for r in track_ids})
    if stage_ids and track_ids or len(tracks) > 1:
        raise HandoutError("one handout holds one ladder: hand out the stages' rungs (03,04) and each track's "
                           f"rungs (p38-03,p38-04) apart, got {','.join(rungs)}")
    for r in stage_ids:
        if r not in folders:
            raise HandoutError(f"no rung {r}: the rungs are {', '.join(folders)}")
    known = track_rungs(root)
    for r in track_ids:
        if r not in known:
            mine = [k for k in known if k.startswith(r.split("-")[0] + "-")]
            raise HandoutError(f"no rung {r}: " + (f"the track's rungs are {', '.join(mine)}" if mine else
                               f"no track {r.split('-')[0]} (tracks: {', '.join(track_folders(root)) or 'none'})"))
    last = max(stage_ids) if stage_ids else TRACK_HANDOUT_STAGES
    files = repo_files(root)
    shipped_stage_files = [f for f in files if f.split("/")[0] == "stages" and len(f.split("/")) == 3
                           and f.split("/")[1] in {folders[i] for i in folders if i <= last}]
    sources = [f for f in shipped_stage_files if f.endswith((".cu", ".cpp"))]
    libs = lib_closure(root, sources) + ["stages/lib/README.md"]
    track_files = [f for t in tracks + needed_tracks(root, tracks) for f in files
                   if f.startswith(f"tracks/{track_folders(root)[t]}/")]
    if tracks:  # the track's public problem lists (track.track_settings)
        with open(os.path.join(root, "grader", "rungs.json"), encoding="utf-8") as f:
            config = json.load(f)
        track_files += [track.track_settings(config, t)[k] for t in tracks if t in config.get("tracks", {})
                        for k in ("public", "practice")]
    ship = [f for f in files if any(fnmatch.fnmatch(f, g) for g in SHIP)] + shipped_stage_files + libs + track_files
    ship = sorted(set(f for f in ship if not forbidden(f)))
    owners = owners_in(root, ship)
    stubbed = set(rungs)
    if stub_needed and stage_ids:  # the earlier rungs whose code the chosen rungs' sources reach through lib/
        chosen_sources = [f for f in sources if default_owner(f) in stage_ids]
        for lib in lib_closure(root, chosen_sources):
            stubbed |= {o for o in owners.get(lib, ()) if o <= last}
    for r in sorted(stubbed):
        if not any(r in o for o in owners.values()):
            where = known[r] if is_track_rung(r) else folders[r]
            raise HandoutError(f"rung {r} ({where}) has no solution regions (// BEGIN SOLUTION): "
                               "there is nothing to hand out")
    declared = {r: sorted(p for p, o in owners.items() if r in o and not p.endswith(".md")) for r in sorted(stubbed)}
    return ship, sorted(stubbed), declared


def needed_tracks(root, tracks):
    """The tracks that `tracks` build on (their "needs" in grader/rungs.json: p74's host library
    links p38's, and the build makes a track's library from all its rung files), less `tracks`.
    A handout ships their folders with every solution region stubbed (dependency_owners): their
    code builds, their answers stay out, and none of their rungs is assigned or graded."""
    with open(os.path.join(root, "grader", "rungs.json"), encoding="utf-8") as f:
        listed = json.load(f).get("tracks", {})
    folders = track_folders(root)
    return sorted({d for t in tracks for d in listed.get(t, {}).get("needs", []) if d in folders} - set(tracks))


def dependency_owners(root, rungs, ship):
    """The owners of the solution regions in the shipped files of the tracks the chosen rungs'
    track needs (needed_tracks): stubbed in the handout, though not assigned."""
    tracks = sorted({r.split("-")[0] for r in rungs if is_track_rung(r)})
    prefixes = tuple(f"tracks/{track_folders(root)[d]}/" for d in needed_tracks(root, tracks))
    return set().union(*owners_in(root, [p for p in ship if prefixes and p.startswith(prefixes)]).values())


def forbidden(path):
    return any(fnmatch.fnmatch(path, g) for g in FORBIDDEN)


def commit_of(root):
    try:
        return subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_handout(root, rungs, out, stub_needed=False, force=False, public_seed=None):
    """Writes the handout of `rungs` to `out` and checks it (check_handout). Returns the manifest."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise HandoutError(f"{out} is a file, not a folder")
    if os.path.exists(out) and os.listdir(out) and not force:
        raise HandoutError(f"{out} exists and is not empty: choose a new folder or pass --force")
    ship, stubbed, declared = plan(root, rungs, stub_needed)
    if os.path.exists(out):
        shutil.rmtree(out)
    with open(os.path.join(root, "grader", "rungs.json"), encoding="utf-8") as f:
        config = json.load(f)
    render_stubbed = set(stubbed) | dependency_owners(root, rungs, ship)
    for path in ship:
        dst = os.path.join(out, path)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not has_markers(path):
            shutil.copy2(os.path.join(root, path), dst)
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        try:
            text = markers.render(markers.parse(path, text, default_owner(path)), render_stubbed)
        except markers.MarkerError as e:
            raise HandoutError(str(e)) from None
        with open(dst, "w", encoding="utf-8") as f:
            f.write(text)
        shutil.copymode(os.path.join(root, path), dst)
    manifest = {
        "format": 1,
        "rungs": stubbed,
        "chosen": sorted(rungs),
        "files": declared,
        "public_seed": int(public_seed if public_seed is not None else config["public_seed"]),
        "source_commit": commit_of(root),
        "generated": datetime.date.today().isoformat(),
    }
    with open(os.path.join(out, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    write_readme(root, out, manifest)
    leaks = check_handout(root, out)
    if leaks:
        raise HandoutError("the handout leaks solutions:\n  " + "\n  ".join(leaks))
    return manifest


def write_readme(root, out, manifest):
    if is_track_rung(manifest["rungs"][0]):
        return write_track_readme(root, out, manifest)
    folders = stage_folders(root)
    with open(os.path.join(root, README_TEMPLATE), encoding="utf-8") as f:
        text = f.read()
    rows = "\n".join(f"| {r} | `stages/{folders[r]}/` | " + ", ".join(f"`{p}`" for p in manifest["files"][r]) + " |"
                     for r in manifest["rungs"])
    text = text.replace("{{RUNGS}}", ", ".join(manifest["rungs"])).replace("{{RUNG_TABLE}}", rows)
    text = text.replace("{{FIRST_RUNG}}", manifest["rungs"][0]).replace(
        "{{FIRST_FOLDER}}", folders[manifest["rungs"][0]])
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(text)


def write_track_readme(root, out, manifest):
    """The students' README of a track handout (TRACK_README_TEMPLATE): rung table, the loop with
    the track's program, grading; the track's words come from its "readme" entry in rungs.json."""
    rungs = manifest["rungs"]
    name = rungs[0].split("-")[0]
    folder = f"tracks/{track_folders(root)[name]}"
    with open(os.path.join(root, TRACK_README_TEMPLATE), encoding="utf-8") as f:
        text = f.read()
    rows = "\n".join(f"| {r} | `{track_rungs(root)[r]}` | " + ", ".join(f"`{p}`" for p in manifest["files"][r]) + " |"
                     for r in rungs)
    numbers = ",".join(r.split("-")[1] for r in rungs)
    with open(os.path.join(root, "grader", "rungs.json"), encoding="utf-8") as f:
        t, _ = track.settings(json.load(f), rungs[0])
    about = t.get("readme", {})
    for key, value in {"{{RUNGS}}": ", ".join(rungs), "{{RUNG_TABLE}}": rows, "{{TRACK}}": name,
                       "{{TRACK_FOLDER}}": folder, "{{RUNG_NUMBERS}}": numbers, "{{FIRST_RUNG}}": rungs[0],
                       "{{TRACK_TITLE}}": about.get("title", f"the {name} track"),
                       "{{TRACK_COMPUTES}}": about.get("computes", "the track's problem"),
                       "{{PROGRAM}}": t["program"], "{{RUNG_TESTS}}": f"{name}_rung_tests",
                       "{{TRY_ARGS}}": about.get("try", ""), "{{OPTIONS}}": about.get("options", "`--help` names them"),
                       "{{CHECKED}}": about.get("checked", ""),
                       "{{PUBLIC}}": t["public"], "{{PRACTICE}}": t["practice"]}.items():
        text = text.replace(key, value)
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(text)


def forms(line):
    """The forms a line is compared in: stripped, and its code without a trailing // comment."""
    s = line.strip()
    return {s, re.sub(r"\s*//.*$", "", s)} - {""}


def solution_lines(root, owners, shipped=None):
    """{stripped line: where} for the lines of `owners`' solution regions long enough to count,
    less the lines that ship by design: those a region of a rung handed out complete also holds
    (a chapter quoting the rung before it) and those of the shared code outside every region
    (common/, ladder/, stages/lib/: index arithmetic, bounds checks; for a track's rungs, that
    track's code outside rungs/ too, and that of the tracks it needs, not its chapters, and the code outside regions of its rungs numbered below
    the region's rung, which ships complete and predates it: a grid-stride loop of rung 02 is no
    leak of rung 05). A line of a rung folder, or of a later rung's file, outside every region
    still counts: an unmarked copy of a solution in a later rung leaks it. A region of another
    rung is "handed out complete" only where its file ships (shipped: the handout's files,
    default what plan() ships for `owners`) and its rung is not stubbed as a needed track's: rung
    04's warp loop in stages/lib/ protects no identical line of a track's handout, which leaves
    stages/lib/ out."""
    if shipped is None:
        shipped = set(plan(root, sorted(owners))[0])
    also_stubbed = dependency_owners(root, owners, shipped)
    candidates, given, earlier = {}, set(), []  # earlier: (track, number, lines outside regions)
    shared = ["common/", "ladder/", "stages/lib/"]
    folders = track_folders(root)
    mine = sorted({o.split("-")[0] for o in owners if is_track_rung(o)})
    shared += [f"tracks/{folders[t]}/" for t in mine + needed_tracks(root, mine) if t in folders]
    for path in repo_files(root):
        if not path.endswith((".cu", ".cuh", ".cpp", ".hpp", ".md")) or path.startswith("grader/"):
            continue
        parsed = parse_file(root, path)
        outside = set().union(*(forms(p) for p in parsed.parts if isinstance(p, str)))
        if path.startswith(tuple(shared)) and default_owner(path) is None and not (
                path.startswith("tracks/") and path.endswith(".md")):  # shared code: given as it stands
            given.update(outside)  # (a track's chapter is prose: a solution it quotes unmarked leaks)
        if path.startswith("tracks/") and is_track_rung(default_owner(path) or ""):
            earlier.append((*default_owner(path).split("-"), outside))
        if not path.startswith(("stages/", "tracks/")):
            continue
        for region in parsed.regions():
            if not region.owners & owners:
                if path in shipped and not region.owners & also_stubbed:
                    for line in region.solution:
                        given.update(forms(line))
                continue
            first = {}  # track: the region's lowest rung number in it
            for o in region.owners:
                if is_track_rung(o):
                    t, n = o.split("-")
                    first[t] = min(first.get(t, n), n)
            for k, line in enumerate(region.solution):
                for form in forms(line):
                    if len(re.sub(r"\s", "", form)) >= MIN_LEAK_CHARS:
                        candidates.setdefault(form, []).append(
                            (f"{path}:{region.begin_line + len(region.stub) + 1 + k}", first))

    def predates(form, first):  # the line ships, outside regions, in an earlier rung of the region's track
        return any(t in first and n < first[t] and form in lines for t, n, lines in earlier)

    return {form: uses[0][0] for form, uses in candidates.items()
            if form not in given and not all(predates(form, first) for _, first in uses)}


def check_handout(root, handout):
    """Checks the handout at `handout` against the instructor's tree at `root`: no forbidden file,
    no marker, no solution line of a stubbed rung anywhere. Returns the problems found (empty: clean)."""
    if not os.path.isfile(os.path.join(handout, MANIFEST)):
        raise HandoutError(f"{handout} has no {MANIFEST}: not a handout written by scripts/assignment.py")
    with open(os.path.join(handout, MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    secrets = solution_lines(root, set(manifest["rungs"]), set(repo_files(handout)))
    problems = []
    for path in repo_files(handout):
        if forbidden(path):
            problems.append(f"{path}: instructor-only file")
            continue
        if not is_text(path):
            continue
        try:
            with open(os.path.join(handout, path), encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            s = line.strip()
            if has_markers(path) and (markers.BEGIN_SOLUTION.match(line) or markers.END_SOLUTION.match(line)):
                problems.append(f"{path}:{number}: a solution marker")
            for form in forms(line):
                if form in secrets:
                    problems.append(f"{path}:{number}: solution line (from {secrets[form]}): {s[:80]}")
                    break
    return problems
