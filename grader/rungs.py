"""The rungs of one grading, each resolved once, up front, into one record (Rung): a stage
(stages/NN_name/) and a track's rung (tracks/T_x/rungs/NN_name/) are shaped alike, so grade.py
walks one path for both. What differs between them is data in the record (its program, build
targets, problem lists, settings) and the kind (programs.KINDS: how its program is driven).

Everything here comes from the grader's own tree (ROOT): rungs.json, the rung folders'
rung.json, the problem lists, the handout's stub markers. The submission gives only its
declared files' text, read for the TODO lines (stub_todos).
"""
import json
import os
from dataclasses import dataclass

from . import handout, markers, problems, rung_meta, todo_hints

HIDDEN_STAGES = "grader/hidden/hidden.problems"


@dataclass
class Rung:
    """One rung of a grading, with everything its grading needs."""
    id: str               # "03" (a stage) or "p38-03" (a track's rung)
    kind: str             # "stage" or "track": how its program is driven (programs.KINDS)
    ladder: str           # "" (the stages) or the track ("p38"): its rungs share one GPU probe
    number: str           # the NN its program is asked for (--stages NN, --rungs NN)
    name: str             # the report's label: "03 shared_tree", "p38-03 block_tree"
    files: list           # the declared files: what the submission provides for this rung
    settings: dict        # a stage's rungs.json entry; a track's settings (problems.track_settings)
    program: str          # the program its cases run, a file of the build: stage_03_x, p38_ladder
    given: list           # build targets it needs that are not the student's (built first)
    compile: list         # build targets of its own objects (the integrity check reads them)
    link: list            # build targets of its programs
    shared_program: bool  # its program links every rung of its ladder: a broken rung is stubbed
    reference_target: str  # the reference build's program it is timed against
    timing: dict          # its "timing" entry (rung.json "grader"), or None: not timed
    performance: dict     # the performance scoring settings, rung over track over rungs.json
    sanitizer_tools: list
    public: list          # problems.Case
    hidden: list          # the hidden cases (official) or the practice ones
    todos: list           # stub_todos: the handout's stubs still in the submission
    rules: list           # a stage's grader options (--check-precision, --refill-check)
    report: dict          # a track's report_settings: how its program's JSON is read
    source: str           # a track rung's one source file ("" for a stage)
    carriers: list        # a track's other rungs holding code of this one's regions: run with it


def object_target(t, path):
    """The Ninja target (and path under the build) of a rung file's object in the track library."""
    return f"CMakeFiles/{t['library']}.dir/{path}.o"


def grader_rules(rung_cfg):
    """The options of the grader's rules for a stage rung (rungs.json): the precision it is
    checked at, a second run on refilled buffers, and for TF32 rungs inputs between TF32 values."""
    return ["--check-precision", rung_cfg.get("precision", "fp32"), "--refill-check"]


def carriers(root, rung, files):
    """The numbers of the other rungs of rung's track whose own source is among `files`, the
    rung's declared files, which hold its regions (p38-05's rescale in rung 07's file): its
    grading runs them too, so every region it hands out is run. From the declared files, not a
    fresh handout.plan: a handout's own tree has no regions left to plan from."""
    track_id = rung.split("-")[0]
    return [r.split("-")[1] for r, path in sorted(handout.track_rungs(root).items())
            if r.startswith(track_id + "-") and r != rung and path in files]


def stub_todos(root, r, label, files, submission):
    """The TODO lines of rung r, from the grader's reading of its stub markers: for each stub
    that the handout puts in a declared file and that the submission's file still holds, the
    stub's own message, as the instructor wrote it, and where its hint is (grader/todo_hints.py).
    Nothing of the submission's text is copied."""
    lines = set()
    for path in files:
        try:
            stubbed = markers.render(handout.parse_file(root, path), [r])
            with open(os.path.join(submission, path), encoding="utf-8", errors="replace") as f:
                theirs = f.read()
        except (OSError, markers.MarkerError):
            continue
        code = "\n".join(l for l in theirs.splitlines() if not markers.STUB.match(l))  # not the STUB comments
        left = set(todo_hints.TODO_CALL.findall(code))
        for hint_id, message in todo_hints.TODO_CALL.findall(stubbed):
            if (hint_id, message) in left:
                lines.add(todo_hints.todo_line(root, label, hint_id, message))
    return sorted(lines)


def load_config(root):
    """grader/rungs.json (points, performance scoring, the tracks), with each rung's own settings
    ("grader" in its folder's rung.json) merged in, all from the grader's own tree."""
    with open(os.path.join(root, "grader", "rungs.json"), encoding="utf-8") as f:
        return rung_meta.with_rung_settings(json.load(f), root)


def hidden_lists(config, ids):
    """The hidden problem lists an official grading of `ids` needs: the stages' where a stage is
    graded (or no track), each graded track's that rungs.json lists."""
    tracks = sorted({r.split("-")[0] for r in ids if handout.is_track_rung(r)})
    stages = [HIDDEN_STAGES] if not tracks or any(not handout.is_track_rung(r) for r in ids) else []
    lists = [problems.track_settings(config, t)["hidden"] for t in tracks if t in config.get("tracks", {})]
    lists += [problems.rung_settings(problems.track_settings(config, t), n)["hidden"]
              for t, n in (r.split("-") for r in ids if handout.is_track_rung(r)) if t in config.get("tracks", {})]
    return stages + sorted(set(lists), key=lists.index)


def declared_files(root, ids):
    """{rung: the files it declares}: the files of a handout of `ids` written from this tree
    (handout.plan), or this handout's own assignment.json; decided here, never read from the
    submission. Raises handout.HandoutError for a stage this tree does not have, or a rung this
    handout does not assign."""
    folders = handout.stage_folders(root)
    unknown = [r for r in ids if not handout.is_track_rung(r) and r not in folders]
    if unknown:
        raise handout.HandoutError(f"unknown rung(s) {', '.join(unknown)}: this tree has stages {', '.join(sorted(folders))}")
    if not handout.is_handout(root):
        declared = handout.plan(root, ids)[2]
    else:
        with open(os.path.join(root, handout.MANIFEST), encoding="utf-8") as f:
            declared = json.load(f)["files"]
        if any(r not in declared for r in ids):
            raise handout.HandoutError(f"rung(s) {', '.join(r for r in ids if r not in declared)} are not assigned in "
                                       f"this handout (it assigns {', '.join(sorted(declared))})")
    return {r: declared.get(r, []) for r in ids}


def resolve(root, config, ids, declared, submission, official):
    """The Rung of each id, in order (declared: declared_files). official: the hidden problem lists,
    else the practice ones; each list is read once. Raises ValueError for a track rung whose
    track has no rungs.json entry."""
    lists = {}

    def cases(path):
        if path not in lists:
            lists[path] = problems.load(os.path.join(root, path))
        return lists[path]
    folders, out = handout.stage_folders(root), []
    for r in ids:
        if handout.is_track_rung(r):
            t, number = problems.settings(config, r)
            own = t.get("rungs", {}).get(number, {})
            t = problems.rung_settings(t, number)  # its own problem lists, where it has them
            source = handout.track_rungs(root)[r]
            name = f"{r} {handout.rung_name(root, r)}"
            rung = Rung(
                id=r, kind="track", ladder=r.split("-")[0], number=number, name=name, files=declared[r],
                settings=t, program=t["program"], given=[t["host_library"], "ladder_harness"],
                compile=[object_target(t, source)], link=[t["program"]], shared_program=True,
                reference_target=t["program"], timing=own.get("timing"),
                performance={**config["performance"], **t.get("performance", {}), **own.get("performance", {})},
                sanitizer_tools=t.get("sanitizer_tools", config["sanitizer_tools"]),
                public=cases(t["public"]), hidden=cases(t["hidden"] if official else t["practice"]),
                todos=stub_todos(root, r, name, declared[r], submission), rules=[],
                report=problems.report_settings(t, number), source=source,
                carriers=carriers(root, r, declared[r]))
        else:
            own, folder = config["rungs"].get(r, {}), folders[r]
            rung = Rung(
                id=r, kind="stage", ladder="", number=r, name=f"{r} {folder.split('_', 1)[1]}", files=declared[r],
                settings=own, program=f"stage_{folder}", given=["ladder_common", "ladder_runner", "ladder_main"],
                compile=[f"stage_{r}"], link=[f"stage_{folder}", f"grade_timing_{r}"], shared_program=False,
                reference_target=f"grade_timing_{r}", timing=own.get("timing"),
                performance={**config["performance"], **own.get("performance", {})},
                sanitizer_tools=config["sanitizer_tools"], public=cases("grader/public.problems"),
                hidden=cases("grader/hidden/hidden.problems" if official else "grader/practice.problems"),
                todos=stub_todos(root, r, f"stage {r}", declared[r], submission), rules=grader_rules(own),
                report={}, source="", carriers=[])
        out.append(rung)
    return out
