"""Writes a student's repository for chosen rungs (scripts/assignment.py handout) and checks that
no solution reached it (scripts/assignment.py check-handout).

What ships is an allow-list (SHIP): the build, common/, ladder/, the public tests, the grader's
public half, the chapters and docs without the answers, the stage folders up to the last
chosen rung, and the committed Nsight Compute captures of those stages (profiles/NN_name.md,
profiles/data/NN_name.txt, with profiles/README.md and the floor's capture), which the chapters'
*Profile it* sections read. Solutions of the chosen rungs become stubs (grader/markers.py); instructor regions,
hidden tests, the secret seed, the grader's fixtures and the mutants never ship.

A second track (tracks/TRACK_name/, each rung a folder rungs/NN_name/ holding its source and
rung.json, as a stage's folder does) is handed out by rungs named
TRACK-NN (p38-03). Such a handout ships the whole track folder (its registry lists every rung)
and, of the main ladder, only the stages the build needs (TRACK_HANDOUT_STAGES); stage
handouts leave tracks/ out. One handout holds one ladder: stage rungs or one track's rungs.
"""
import datetime
import fnmatch
import json
import os
import posixpath
import re
import shutil
import subprocess
import textwrap
import urllib.parse

from . import integrity, markers, problems

# Paths (fnmatch globs, relative to the repository root) that a handout may contain. stages/ is
# handled apart: the chosen rungs' folders, the earlier ones, and the lib files they include.
SHIP = [
    ".gitignore", "CMakeLists.txt", "LICENSE",
    "cmake/CheckDriver.cmake", "cmake/CudaArchitectures.cmake", "cmake/GitStamp.cmake",
    "cmake/Sanitize.cmake", "cmake/Stages.cmake", "cmake/WriteIfChanged.cmake",
    "common/*.cpp", "common/*.hpp", "common/*.cuh", "harness/*.cpp", "harness/*.hpp", "harness/*.cu",
    "harness/*.cuh", "ladder/*.cpp", "ladder/*.hpp", "ladder/*.cu", "ladder/*.cuh",
    "tests/CMakeLists.txt", "tests/*.cpp", "tests/*.hpp", "tests/sticky/*",
    "tests/mutants/sanitizer.problems",
    "scripts/assignment.py", "scripts/check_program.py", "scripts/check_rung_includes.sh",
    "scripts/check_sass.sh", "scripts/install_deps.sh", "scripts/sanitize.sh", "scripts/test.sh",
    "grader/*.py", "grader/*.c", "grader/CMakeLists.txt", "grader/*.cu", "grader/*.cuh", "grader/rungs.json",
    "tooling/__init__.py", "tooling/checks/__init__.py", "tooling/checks/check_program.py",
    "tooling/checks/compare_common.py", "tooling/checks/sass.py",  # the grader's imports (problem lists;
    # the output-size formula; the SASS model of the technique check)
    "grader/public.problems", "grader/practice.problems",
    "docs/problem.md", "docs/measuring.md", "docs/mistakes.md", "docs/reading-profiles.md", "docs/img/*",
    "docs/students.md", "notebooks/colab_student.ipynb",
]
# The instructor's own files: never in a handout, and never linked from one, even with --repo-url.
INSTRUCTOR_ONLY = ["grader/hidden*", "grader/fixtures*", "grader/tests/*", "grader/checks/*", "grader/slurm/*",
                   "*.mutant", "*secret*", "docs/answers.md", "docs/teaching.md",
                   "tracks/*/answers.md",
                   "cmake/Mutants.cmake", "cmake/MutantApply.cmake"]
# Never in a handout, whatever SHIP says (a second line of defence, checked on the result). The
# measurements may be linked in the published repository (--repo-url).
FORBIDDEN = INSTRUCTOR_ONLY + ["results/*", "profiles/history/*"]
# The committed captures of one stage: its annotated page and its raw metrics. They ship with the
# stage's folder (they describe the reference solution's behaviour, measured, not its code), and
# check_handout refuses one whose stage folder is not in the handout.
PROFILE_FILE = re.compile(r"^profiles/(?:data/)?(\d\d_[A-Za-z0-9_]+)\.(?:md|txt)$")
PROFILE_COMMON = ["profiles/README.md", "profiles/data/floor_streaming_read.txt"]
STAGE_DIR = re.compile(r"^(\d\d)_([A-Za-z0-9_]+)$")
TRACK_DIR = re.compile(r"^([a-z][a-z0-9]*)_[A-Za-z0-9_]+$")          # tracks/p38_spatial_softmax: track p38
TRACK_RUNG_DIR = STAGE_DIR                                           # its rungs/03_block_tree/: p38-03
TRACK_RUNG_SOURCE = re.compile(r"^[A-Za-z0-9_.+-]+\.(?:cu|cpp)$")    # the folder's one source (block_tree.cu)
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
    """A handout cannot be written or failed its check; the message says why. status: the exit
    status of scripts/assignment.py."""
    status = 2


class UsageError(HandoutError):
    """A bad command-line argument (exit status 2)."""


class ToolError(HandoutError):
    """A program the command needs is missing (exit status 3)."""
    status = 3


def repo_files(root):
    """The repository's files, relative to root: `git ls-files` where root is a git work tree,
    else every file outside build folders (a handout or a copy without .git)."""
    if os.path.isdir(os.path.join(root, ".git")):
        try:
            out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                 check=True, capture_output=True).stdout
        except FileNotFoundError:
            raise ToolError(f"git not found: it lists the files of {root} (install git)") from None
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


def track_rung_folders(root):
    """{"TRACK-NN": the rung's folder, tracks/TRACK_name/rungs/NN_name} for every rung folder of
    every track under root (the same rule as cmake/Stages.cmake's ladder_discover_track_rungs)."""
    out = {}
    for tid, folder in track_folders(root).items():
        base = os.path.join(root, "tracks", folder, "rungs")
        for name in sorted(os.listdir(base)):
            if (m := TRACK_RUNG_DIR.match(name)) and os.path.isdir(os.path.join(base, name)):
                out[f"{tid}-{m.group(1)}"] = f"tracks/{folder}/rungs/{name}"
    return out


def track_rungs(root):
    """{"TRACK-NN": path of the rung's source} for every rung folder of every track under root: the
    folder's one .cu (or .cpp) file. Raises HandoutError for a folder with none or several, as the
    build stops on one."""
    out = {}
    for rung, folder in track_rung_folders(root).items():
        sources = sorted(n for n in os.listdir(os.path.join(root, folder)) if TRACK_RUNG_SOURCE.match(n)
                         and os.path.isfile(os.path.join(root, folder, n)))
        if len(sources) != 1:
            raise HandoutError(f"{folder}: a rung folder holds one source file (.cu, or .cpp for the CPU rung); "
                               f"found {len(sources)}")
        out[rung] = f"{folder}/{sources[0]}"
    return out


def is_handout(root):
    """Whether root is a handout (its assignment.json), not the instructor's tree."""
    return os.path.exists(os.path.join(root, MANIFEST))


def is_track_rung(rung):
    return "-" in rung


def rung_name(root, rung):
    """The rung's name without its number: shared_tree (stage 03), block_tree (p38-03)."""
    if is_track_rung(rung):
        return TRACK_RUNG_DIR.match(os.path.basename(track_rung_folders(root)[rung])).group(2)
    return stage_folders(root)[rung].split("_", 1)[1]


def default_owner(path):
    """The rung a file's regions belong to by default: its stage folder's number, a track rung's
    TRACK-NN for a file in its rung folder (tracks/p38_x/rungs/03_y/y.cu: p38-03), else None."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == "stages" and (m := STAGE_DIR.match(parts[1])):
        return m.group(1)
    if len(parts) >= 5 and parts[0] == "tracks" and parts[2] == "rungs" and (t := TRACK_DIR.match(parts[1])) \
            and (m := TRACK_RUNG_DIR.match(parts[3])):
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


def rung_lists(root, config, rung):
    """Track rung `rung`'s settings as it is graded (problems.rung_settings): its rung.json's
    "grader" (its own problem lists, where it has them) over its track's in config, rungs.json's.
    Read here, not through grader/rung_meta.py, which imports this module."""
    track, number = rung.split("-")
    path = os.path.join(root, track_rung_folders(root)[rung], "rung.json")
    own = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            own = json.load(f).get("grader", {})
    return problems.rung_settings({**problems.track_settings(config, track), "rungs": {number: own}}, number)


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
    shipped_folders = {folders[i] for i in folders if i <= last}
    shipped_stage_files = [f for f in files if f.split("/")[0] == "stages" and len(f.split("/")) == 3
                           and f.split("/")[1] in shipped_folders]
    profiles = [f for f in files if f in PROFILE_COMMON or
                ((m := PROFILE_FILE.match(f)) and m.group(1) in shipped_folders)]
    sources = [f for f in shipped_stage_files if f.endswith((".cu", ".cpp"))]
    libs = lib_closure(root, sources) + ["stages/lib/README.md"]
    track_files = [f for t in tracks + needed_tracks(root, tracks) for f in files
                   if f.startswith(f"tracks/{track_folders(root)[t]}/")]
    if tracks:  # what the tracks share (tracks/shared/), read-only like common/
        track_files += [f for f in files if f.startswith("tracks/shared/")]
    if tracks:  # the track's public problem lists (problems.track_settings)
        with open(os.path.join(root, "grader", "rungs.json"), encoding="utf-8") as f:
            config = json.load(f)
        track_files += [problems.track_settings(config, t)[k] for t in tracks if t in config.get("tracks", {})
                        for k in ("public", "practice")]
        track_files += [rung_lists(root, config, r)[k] for r in track_ids if r.split("-")[0] in config.get("tracks", {})
                        for k in ("public", "practice")]  # a rung's own lists (p74-10's)
    ship = [f for f in files if any(fnmatch.fnmatch(f, g) for g in SHIP)] + shipped_stage_files + libs + track_files \
        + profiles
    ship = sorted(set(f for f in ship if not forbidden(f)))
    owners = owners_in(root, ship)
    stubbed = set(rungs)
    if stub_needed and stage_ids:  # the earlier rungs whose code the chosen rungs' sources reach through lib/
        chosen_sources = [f for f in sources if default_owner(f) in stage_ids]
        for lib in lib_closure(root, chosen_sources):
            stubbed |= {o for o in owners.get(lib, ()) if o <= last}
    for r in sorted(stubbed):
        if not any(r in o for o in owners.values()):
            where = track_rung_folders(root)[r] + "/" if is_track_rung(r) else folders[r]
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


def write_handout(root, rungs, out, stub_needed=False, force=False, public_seed=None, repo_url=""):
    """Writes the handout of `rungs` to `out` and checks it (check_handout, unresolved_links).
    repo_url: where the whole repository is published; links to files the handout leaves out
    point there (relink), or without it become plain text. Returns the manifest."""
    if repo_url and not re.match(r"^https?://[^\s/]+\S*$", repo_url):
        raise UsageError("--repo-url must be an http(s) address, e.g. https://github.com/ORG/REPO/blob/main, "
                         f"got '{repo_url}'")
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
    relink(root, out, render_stubbed, repo_url)
    leaks = check_handout(root, out)
    if leaks:
        raise HandoutError("the handout leaks solutions:\n  " + "\n  ".join(leaks))
    broken = unresolved_links(out)
    if broken:
        raise HandoutError("the handout has links that do not resolve:\n  " + "\n  ".join(broken))
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
    gpu, note = hardware_note(root, manifest["rungs"])
    text = text.replace("{{GPU}}", gpu).replace("{{HARDWARE_NOTE}}", note)
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(text)


def rung_needs(root, rung):
    """"sm_90a" where the stage's rung.json builds it for sm_90a (wgmma, the bulk copy: an H100 or
    H200), "sm_80" where its technique rules need sm_80 code (cp.async, TF32 mma.sync), else ""."""
    path = os.path.join(root, "stages", stage_folders(root)[rung], "rung.json")
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as f:
        meta = json.load(f)
    if meta.get("build", {}).get("sm_90a") or any(r.get("needs_sm90a") for r in meta.get("sass", [])):
        return "sm_90a"
    return "sm_80" if any(r.get("needs_sm80") for r in meta.get("sass", [])) else ""


def hardware_note(root, rungs):
    """(the GPU the students' README asks for, a note on what the handed-out rungs need beyond
    sm_75: "" where any GPU of compute capability 7.5 or newer will do)."""
    need = {r: rung_needs(root, r) for r in rungs}
    hopper = [r for r in rungs if need[r] == "sm_90a"]
    ampere = [r for r in rungs if need[r] == "sm_80"]
    say = lambda rs: ("Rung " if len(rs) == 1 else "Rungs ") + ", ".join(rs)  # noqa: E731
    verb = lambda rs: "needs" if len(rs) == 1 else "need"  # noqa: E731
    gpu = "An NVIDIA GPU of compute capability 7.5 or newer (T4, RTX 20xx and later, A100, L4, H100)"
    out = []
    if hopper:
        gpu = f"An NVIDIA H100 or H200 for {say(hopper).lower()} (the note below says why)"
        out.append(
            f"**{say(hopper)} {verb(hopper)} an H100 or H200.** The idea (`wgmma`, the bulk copy "
            "and its mbarriers) exists only in sm_90a code, and sm_90a code runs only on compute "
            "capability 9.0: an NVIDIA H100 or H200. CMake builds the stage for sm_90a whenever 90 is "
            "among the CUDA architectures (on an H100 or H200 it is by default). On every other GPU (a T4, "
            "an A100, an L4, an RTX card, a B200) the stage prints a device note and runs the general FP32 "
            "path instead of tensor cores: your kernel does not run, the stage's tests check the fallback "
            "rather than your code, and its time is far from the reference's. A build without 90 among its "
            "architectures has no sm_90a code, and the technique check, which looks for `HGMMA` and "
            "`UBLKCP` there, fails. Without an H100 or H200 you can still write the code, build it with "
            "`-DCMAKE_CUDA_ARCHITECTURES=90` on any machine with the CUDA toolkit (no GPU needed) and check "
            "its machine code with `scripts/check_sass.sh build`; to run, test and time it, ask your "
            "instructor for time on an H100 or H200.")
    if ampere:
        out.append(
            f"**{say(ampere)} {verb(ampere)} compute capability 8.0 or newer** (an A100, an RTX 30xx or "
            "newer, an L4, an H100) for the idea (`cp.async`, TF32 `mma.sync`). On a T4 or an RTX 20xx "
            "(sm_75) the stage says so when it runs and takes a substitute (plain copies, or the general "
            "FP32 path), so what it measures there is not the rung's idea, and the technique check needs "
            "sm_80 code in the build (`-DCMAKE_CUDA_ARCHITECTURES=\"75;80\"`).")
    wrap = lambda p: textwrap.fill(p, 99, break_long_words=False, break_on_hyphens=False)  # noqa: E731
    return gpu, "".join(f"\n{wrap(p)}\n" for p in out)


def write_track_readme(root, out, manifest):
    """The students' README of a track handout (TRACK_README_TEMPLATE): rung table, the loop with
    the track's program, grading; the track's words come from its "readme" entry in rungs.json."""
    rungs = manifest["rungs"]
    name = rungs[0].split("-")[0]
    folder = f"tracks/{track_folders(root)[name]}"
    with open(os.path.join(root, TRACK_README_TEMPLATE), encoding="utf-8") as f:
        text = f.read()
    rows = "\n".join(f"| {r} | `{track_rung_folders(root)[r]}/` | " + ", ".join(f"`{p}`" for p in manifest["files"][r])
                     + " |" for r in rungs)
    numbers = ",".join(r.split("-")[1] for r in rungs)
    with open(os.path.join(root, "grader", "rungs.json"), encoding="utf-8") as f:
        config = json.load(f)
    t, _ = problems.settings(config, rungs[0])
    about = t.get("readme", {})

    def lists(key):  # the assigned rungs' problem lists of `key`, each once (the template quotes them)
        named = [rung_lists(root, config, r)[key] for r in rungs]
        return "`, `".join(sorted(set(named), key=named.index))
    for key, value in {"{{RUNGS}}": ", ".join(rungs), "{{RUNG_TABLE}}": rows, "{{TRACK}}": name,
                       "{{TRACK_FOLDER}}": folder, "{{RUNG_NUMBERS}}": numbers, "{{FIRST_RUNG}}": rungs[0],
                       "{{TRACK_TITLE}}": about.get("title", f"the {name} track"),
                       "{{TRACK_COMPUTES}}": about.get("computes", "the track's problem"),
                       "{{PROGRAM}}": t["program"], "{{RUNG_TESTS}}": f"{name}_rung_tests",
                       "{{TRY_ARGS}}": about.get("try", ""), "{{OPTIONS}}": about.get("options", "`--help` names them"),
                       "{{CHECKED}}": about.get("checked", ""),
                       "{{PUBLIC}}": lists("public"), "{{PRACTICE}}": lists("practice")}.items():
        text = text.replace(key, value)
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(text)


def forms(line):
    """The forms a line is compared in: stripped, and its code without a trailing // comment."""
    s = line.strip()
    return {s, re.sub(r"\s*//.*$", "", s)} - {""}


def solution_lines(root, owners, shipped=None):
    """{stripped line: where} for the lines of `owners`' solution regions long enough to count,
    less the lines that ship by design: those a region handed out complete also holds, where that
    region's rung is earlier (a chapter quoting the rung before it) or named by the line's own
    region (a snippet comparing two rungs; a later rung's region, which ships only in a track's
    handout, exempts nothing: it may hold a copy of the idea), and those of the shared code
    outside every region (common/, ladder/, stages/lib/: index arithmetic, bounds checks; for a track's rungs, that
    track's code outside its rung folders too, and that of the tracks it needs, not its chapters, and the code outside regions of its rungs numbered below
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
    complete = {}  # form: the owner sets of the shipped, unstubbed regions that hold it
    shared = ["common/", "harness/", "ladder/", "stages/lib/"]
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
                        for form in forms(line):
                            complete.setdefault(form, []).append(region.owners)
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
                            (f"{path}:{region.begin_line + len(region.stub) + 1 + k}", first, region.owners))

    def predates(form, first):  # the line ships, outside regions, in an earlier rung of the region's track
        return any(t in first and n < first[t] and form in lines for t, n, lines in earlier)

    def quoted(form, named):  # a complete region holds the line: of a rung the line's region names
        mine = named & owners   # (a chapter's snippet of two rungs), or of rungs before its stubbed ones
        return any(o & named or all(precedes(a, b) for a in o for b in mine) for o in complete.get(form, ()))

    return {form: uses[0][0] for form, uses in candidates.items()
            if form not in given and not all(predates(form, first) or quoted(form, named) for _, first, named in uses)}


def precedes(a, b):
    """Whether rung a comes before rung b: a lower number of the same ladder, or another ladder
    (a stage's region in a track's handout ships as the build's, not as a later rung)."""
    ladder = lambda r: r.split("-")[0] if is_track_rung(r) else ""  # noqa: E731
    return ladder(a) != ladder(b) or a < b


def check_handout(root, handout):
    """Checks the handout at `handout` against the instructor's tree at `root`: no forbidden file,
    no marker, no solution line of a stubbed rung anywhere. Returns the problems found (empty: clean)."""
    if not os.path.isfile(os.path.join(handout, MANIFEST)):
        raise HandoutError(f"{handout} has no {MANIFEST}: not a handout written by scripts/assignment.py")
    with open(os.path.join(handout, MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    secrets = solution_lines(root, set(manifest["rungs"]), set(repo_files(handout)))
    found = []
    for path in repo_files(handout):
        if forbidden(path):
            found.append(f"{path}: instructor-only file")
            continue
        if (m := PROFILE_FILE.match(path)) and not os.path.isdir(os.path.join(handout, "stages", m.group(1))):
            found.append(f"{path}: the profile of a stage the handout does not hold (stages/{m.group(1)}/)")
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
                found.append(f"{path}:{number}: a solution marker")
            for form in forms(line):
                if form in secrets:
                    found.append(f"{path}:{number}: solution line (from {secrets[form]}): {s[:80]}")
                    break
    return found


# Links in Markdown: [text](target "title") and ![alt](target), whose text may wrap but not span
# a blank line; reference definitions [id]: target; HTML <a href> and <img src>.
MD_LINK = re.compile(r'(!?)\[((?:[^\[\]\n]|\n(?![ \t]*\n)|\[[^\[\]\n]*\])*)\]'
                     r'\(\s*([^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(\s+"[^"\n]*")?\s*\)')
MD_DEF = re.compile(r'^ {0,3}\[([^\]\n]+)\]:[ \t]*(\S+)[^\n]*$', re.M)
HTML_A = re.compile(r'<a\s[^>]*?\bhref\s*=\s*(["\'])(.*?)\1[^>]*>(.*?)</a>', re.S | re.I)
HTML_IMG = re.compile(r'<img\s[^>]*?\bsrc\s*=\s*(["\'])(.*?)\1[^>]*>', re.I)
FENCE = re.compile(r'^ {0,3}(`{3,}|~{3,})(.*)$')
CODE_SPAN = re.compile(r'(`+)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)', re.S)
URL = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:|^//')  # a scheme (https:, mailto:) or a host


def code_spans(text):
    """(start, end) of the fenced code blocks and inline code spans of Markdown text: a link
    written inside code is an example, not a link."""
    spans, offset, fence, outside = [], 0, None, []
    for line in text.splitlines(keepends=True):
        m = FENCE.match(line.rstrip("\n"))
        if fence is None and m:
            fence, opened = m.group(1), offset
        elif fence is not None and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                and not m.group(2).strip():
            spans.append((opened, offset + len(line)))
            fence = None
        elif fence is None:
            outside.append((offset, line))
        offset += len(line)
    if fence is not None:
        spans.append((opened, len(text)))
    # Inline code within the runs of lines outside the fences.
    runs, start, chunk = [], None, ""
    for off, line in outside:
        if start is not None and off == start + len(chunk):
            chunk += line
        else:
            runs.append((start, chunk))
            start, chunk = off, line
    runs.append((start, chunk))
    for start, chunk in runs:
        spans += [(start + m.start(), start + m.end()) for m in CODE_SPAN.finditer(chunk)] if chunk else []
    return spans


def edit_links(text, decide, base=0):
    """text with each relative link's target replaced by decide(target, offset in the text): the
    target to use, or None to drop the link and keep its text (an image keeps its alt text).
    Links in code, external links and #anchors are left as they are."""
    code = code_spans(text)
    found = sorted((m.start(), n, m) for n, rx in enumerate((MD_LINK, MD_DEF, HTML_A, HTML_IMG))
                   for m in rx.finditer(text))
    out, last, dropped = [], 0, set()
    for start, kind, m in found:
        if start < last or any(a <= start < b for a, b in code):
            continue
        group = {0: 3, 1: 2, 2: 2, 3: 2}[kind]  # the target's group
        target = m.group(group)
        relative = target and not target.startswith("#") and not URL.match(target)
        new = decide(target, base + m.start(group)) if relative else target
        if kind == 0:  # [text](target): the text may hold an image link
            label = edit_links(m.group(2), decide, base + m.start(2))
            repl = label if new is None else m.group(0) if (new, label) == (target, m.group(2)) else \
                f"{m.group(1)}[{label}]({new}{m.group(4) or ''})"
        elif kind == 2:  # <a href="target">text</a>
            inner = edit_links(m.group(3), decide, base + m.start(3))
            repl = inner if new is None else \
                text[m.start():m.start(2)] + new + text[m.end(2):m.start(3)] + inner + text[m.end(3):m.end()]
        elif new is None:  # a reference definition goes; an image leaves its alt text
            if kind == 1:
                dropped.add(m.group(1).lower())
            alt = re.search(r'\balt\s*=\s*(["\'])(.*?)\1', m.group(0)) if kind == 3 else None
            repl = alt.group(2) if alt else ""
        else:
            repl = text[m.start():m.start(group)] + new + text[m.end(group):m.end()]
        out += [text[last:start], repl]
        last = m.end()
    out.append(text[last:])
    result = "".join(out)
    for ref in dropped:  # [text][id] of a dropped definition: the text
        result = re.sub(r"\[([^\[\]]+)\]\[" + re.escape(ref) + r"\]", r"\1", result, flags=re.I)
    return result


def link_path(path, target):
    """(repository path, anchor) that the relative link `target` of file `path` names; the path is
    None where the link climbs out of the repository. A leading / is the repository's root, as
    GitHub reads it."""
    where, _, anchor = target.partition("#")
    where = urllib.parse.unquote(where.split("?")[0])
    joined = posixpath.normpath(posixpath.join("" if where.startswith("/") else posixpath.dirname(path),
                                               where.lstrip("/")))
    return (None if joined == ".." or joined.startswith("../") else joined), anchor


def markdown_files(folder):
    return [p for p in repo_files(folder) if p.endswith(".md")]


def markdown_texts(folder):
    """(path, text) of every Markdown file under folder."""
    for path in markdown_files(folder):
        with open(os.path.join(folder, path), encoding="utf-8") as f:
            yield path, f.read()


def unresolved_links(handout):
    """Every relative link of the handout's Markdown whose file or folder it does not hold, as
    "path:line: link to TARGET ..." (empty: every link resolves)."""
    found = []
    for path, text in markdown_texts(handout):
        def check(target, offset):
            p, _ = link_path(path, target)
            if p is None or not os.path.exists(os.path.join(handout, p)):
                found.append(f"{path}:{text.count(chr(10), 0, offset) + 1}: link to {target}: "
                                + ("outside the repository" if p is None else "not in the handout"))
            return target

        edit_links(text, check)
    return found


def relink(root, out, stubbed, repo_url=""):
    """Rewrites the relative links of the handout's Markdown that name a file or folder it leaves
    out: to repo_url + its path where the instructor's tree has it and it may be published, else
    to plain text. Never published: instructor-only files, and files that hold a solution region
    of a stubbed rung (a later stage's copy of it): a link would hand the solution out."""
    files = repo_files(root)

    def publishable(p):
        inside = [f for f in files if f == p or f.startswith(p.rstrip("/") + "/")]
        return inside and not any(fnmatch.fnmatch(f, g) for f in inside for g in INSTRUCTOR_ONLY) \
            and not set().union(*owners_in(root, inside).values()) & set(stubbed)

    for path, text in markdown_texts(out):
        def decide(target, _offset):
            p, anchor = link_path(path, target)
            if p is not None and os.path.exists(os.path.join(out, p)):
                return target
            if repo_url and p is not None and publishable(p):
                return f"{repo_url.rstrip('/')}/{urllib.parse.quote(p)}" + (f"#{anchor}" if anchor else "")
            return None

        new = edit_links(text, decide)
        if new != text:
            with open(os.path.join(out, path), "w", encoding="utf-8") as f:
                f.write(new)


# --cuda-architectures: CMake's keywords alone, or numbers with an optional a/f suffix (90a) and
# -real/-virtual, separated by ; or , (cmake/CudaArchitectures.cmake checks the same at configure).
ARCH = re.compile(r"^(\d+)[af]?(?:-real|-virtual)?$")
ARCH_KEYWORDS = ("native", "all-major")
MIN_CUDA_ARCH = 75  # cmake/CudaArchitectures.cmake's LADDER_MIN_CUDA_ARCH


def parse_rungs(text):
    """The sorted rungs of a comma-separated list (03,04 or p38-03,p38-04); UsageError if malformed."""
    rungs = sorted({r.strip() for r in text.split(",") if r.strip()})
    bad = [r for r in rungs if not RUNG_ID.match(r)]
    if bad or not rungs:
        raise UsageError("--rungs: rungs are two-digit numbers separated by commas (03,04), or a track's rungs as "
                         f"TRACK-NN (p38-03,p38-04), got '{text}'")
    return rungs


def check_rungs(root, rungs):
    """HandoutError (exit 2) unless `root` can grade every one of `rungs`: in a handout, the rungs
    it hands out; in the instructor's tree, rungs with solution regions, of one ladder (plan's refusals)."""
    manifest = os.path.join(root, MANIFEST)
    if not os.path.isfile(manifest):
        plan(root, rungs)
        return
    handed = read_manifest(manifest)["rungs"]
    for r in rungs:
        if r not in handed:
            raise UsageError(f"rung {r} is not in this handout: it hands out {', '.join(handed)}")


def read_manifest(path):
    """A handout's manifest; UsageError where it is not one (a student may have edited it)."""
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
        if not m["rungs"] or not all(isinstance(r, str) and RUNG_ID.match(r) for r in m["rungs"]):
            raise ValueError(f"rungs {m['rungs']!r}")
        return m
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path} is not a handout's manifest ({e}): pass --rungs") from None


def cuda_architectures(text, nvcc=""):
    """--cuda-architectures as CMake takes it (75;90a), or "" for the build's own choice.
    UsageError for a malformed list, an architecture below sm_75, or one `nvcc` cannot build."""
    items = [a.strip() for a in re.split(r"[;,]", text.strip())] if text.strip() else []
    if any(a in ARCH_KEYWORDS for a in items) and len(items) > 1:
        raise UsageError(f"--cuda-architectures: {' or '.join(ARCH_KEYWORDS)} stands alone, got '{text}'")
    offers = None
    if nvcc and any(a not in ARCH_KEYWORDS for a in items):
        try:
            listed = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True, timeout=60)
            if listed.returncode == 0:
                offers = sorted({int(c) for c in re.findall(r"sm_(\d+)", listed.stdout)})
        except (OSError, subprocess.SubprocessError):
            pass  # CMake's own check names it at configure
    for a in items:
        if a in ARCH_KEYWORDS:
            continue
        m = ARCH.match(a)
        if not m:
            raise UsageError(f"--cuda-architectures: '{a}' is not an architecture: give numbers separated by ; or , "
                             f"(75;90, 90a), or {' or '.join(ARCH_KEYWORDS)}")
        if int(m.group(1)) < MIN_CUDA_ARCH:
            raise UsageError(f"--cuda-architectures: sm_{m.group(1)} is too old: the minimum is sm_{MIN_CUDA_ARCH} "
                             "(Turing: T4, RTX 20xx)")
        if offers and int(m.group(1)) not in offers:
            raise UsageError(f"--cuda-architectures: this nvcc ({nvcc}) cannot build sm_{m.group(1)}; it offers "
                             + ", ".join(map(str, offers)))
    return ";".join(items)


def find_nvcc():
    """The nvcc CMake will use: $CUDACXX, PATH, /usr/local/cuda/bin (cmake/CudaArchitectures.cmake)."""
    for c in (os.environ.get("CUDACXX", ""), shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"):
        if c and os.access(c, os.X_OK):
            return c
    return ""


def find_cuobjdump():
    try:
        return integrity.find_cuobjdump()
    except OSError:  # no bash to run scripts/check_sass.sh's lookup
        return ""


def check_tools():
    """ToolError naming the first program that grading needs and cannot find; returns nvcc's path."""
    nvcc = find_nvcc()
    for name, found, how in (
            ("cmake", shutil.which("cmake"), "CMake 3.24 or newer (bash scripts/install_deps.sh)"),
            ("ninja", shutil.which("ninja"), "Ninja (bash scripts/install_deps.sh, or pip install --user ninja)"),
            ("nvcc", nvcc, "the CUDA toolkit 12 or 13, on PATH or in /usr/local/cuda/bin, or set CUDACXX"),
            ("cuobjdump", find_cuobjdump(), "the CUDA toolkit's cuobjdump and nvdisasm, or set CUOBJDUMP")):
        if not found:
            raise ToolError(f"{name} not found: grading needs {how}")
    return nvcc


def validate_grade_args(root, args, tools=True):
    """Checks `scripts/assignment.py grade`'s arguments before anything is copied or built, so that
    a mistake ends in one line, not a traceback or a report of code that "does not compile".
    Raises UsageError (exit 2) for a bad argument and ToolError (exit 3) for a missing program
    (tools=False skips that). Normalizes, in args only: args.rungs to "03,04" (sorted) and
    args.cuda_architectures to CMake's "75;90". Stores nothing: each grading decides afresh."""
    submission = getattr(args, "submission", root)
    if not os.path.isdir(submission):
        raise UsageError(f"--submission {submission}: no such folder")
    secret_file = getattr(args, "secret_file", "")
    if secret_file and not (os.path.isfile(secret_file) and os.access(secret_file, os.R_OK)):
        raise UsageError(f"--secret-file {secret_file}: not a readable file")
    for name in ("work", "out"):
        where = getattr(args, name, "")
        if where and os.path.exists(where) and not os.path.isdir(where):
            raise UsageError(f"--{name} {where}: a file, not a folder")
    if getattr(args, "jobs", 1) < 1:
        raise UsageError(f"--jobs must be 1 or more, got {args.jobs}")
    if not getattr(args, "timeout", 1) > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    secret = secret_file or os.environ.get("LADDER_GRADER_SECRET")
    official = secret and os.path.isdir(os.path.join(root, "grader", "hidden"))  # as grade.grade decides
    if args.rungs:
        rungs = parse_rungs(args.rungs)
        args.rungs = ",".join(rungs)
    elif official:
        raise UsageError("an official run (a secret) needs --rungs: the rung list is not taken from the submission")
    elif os.path.isfile(os.path.join(submission, MANIFEST)):
        rungs = read_manifest(os.path.join(submission, MANIFEST))["rungs"]
    else:
        raise UsageError(f"no --rungs and no {os.path.join(submission, MANIFEST)}: say which rungs to grade")
    check_rungs(root, rungs)
    nvcc = check_tools() if tools else find_nvcc()
    args.cuda_architectures = cuda_architectures(getattr(args, "cuda_architectures", "") or "", nvcc)
