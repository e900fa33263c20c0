"""scripts/assignment.py grade: one command for a student's local check and the official grading.

It copies this tree (the instructor's, or a handout) to a work folder, puts the submission's
declared files (the files holding the assigned rungs' regions, decided here and never read from
the submission) over it, builds the rungs, and per rung runs
  public     the public problems (grader/public.problems), public seed;
  hidden     the hidden categories (grader/hidden/hidden.problems where present, else the practice
             shapes), seeds mixed with the secret (--secret-file or LADDER_GRADER_SECRET);
  sanitizer  compute-sanitizer memcheck, racecheck, synccheck, initcheck on small awkward problems;
             an error caps the rung's correctness;
  technique  the rung's idea in its machine code (scripts/check_sass.sh) and the integrity check
             of its compiled objects (integrity.py: no oracle, library or process escape, no
             symbol outside the rung's allow-list, no static constructor); an integrity failure
             also zeroes correctness;
  performance  the rung and the reference solution (official runs; the reference build's program,
             never linked with the student's) timed in separate processes, in alternating rounds on
             seeds the grader hands over after prepare(), with the streaming-read floor; the
             student's outputs compared with the reference's by the grader (runs.timing).
Without a GPU the build and static checks still run; the report says what was skipped and why.
A second track's rungs (TRACK-NN, e.g. p38-03) are graded with the same parts by grader/track.py,
through the track's program.
"""
import argparse
import datetime
import fcntl
import filecmp
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import tempfile

from . import handout, integrity, markers, problems, reports, rung_meta, runs, sandbox, todo_hints, track

ROOT = None  # set by add_parser
log = runs.log


def add_parser(sub, root):
    global ROOT
    ROOT = root
    g = sub.add_parser("grade", help="grade a submission rung by rung", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("--submission", default=root, help="the student's repository (default: this tree)")
    g.add_argument("--rungs", default="",
                   help="comma-separated rungs, 03,04 or p38-03,p38-04 (default: the submission's assignment.json)")
    g.add_argument("--work", default="", help="work folder (default: build-grade/ in this tree)")
    g.add_argument("--out", default="", help="folder for results.json, junit.xml, report.txt (default: WORK)")
    g.add_argument("--secret-file", default="", help="the official secret (else $LADDER_GRADER_SECRET; none locally)")
    g.add_argument("--reveal", action="store_true",
                   help="after the due date: count the hidden parts in the visible total and name the failing hidden "
                        "cases' inputs")
    g.add_argument("--submission-id", default="",
                   help="official runs: the submission's identity, mixed into the hidden seeds (default: Gradescope's "
                        "submission id from --submission-metadata, else a fresh random nonce); a regrade with the same "
                        "id reproduces the seeds, which the instructor's copy (instructor.json) records")
    g.add_argument("--submission-metadata", default="",
                   help=f"Gradescope's submission_metadata.json (default: {GRADESCOPE_METADATA} where it exists): the "
                        "submission id, and the due date after which a regrade reveals the hidden parts")
    g.add_argument("--isolation", choices=("auto", *sandbox.ISOLATIONS), default="auto",
                   help="how the submission is isolated: bwrap (bubblewrap namespaces), user (a root grader drops it to "
                        "an unprivileged uid, for containers that refuse namespaces), none (practice only); auto: bwrap "
                        "where it starts, else user as root, else none")
    g.add_argument("--reuse-work", action="store_true", help=argparse.SUPPRESS)  # the self-test's incremental builds
    g.add_argument("--cuda-architectures", default="", help="CMAKE_CUDA_ARCHITECTURES (default: the build's own choice)")
    g.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="build jobs")
    g.add_argument("--timeout", type=float, default=600, help="seconds one program run may take")
    g.add_argument("--skip-gpu", action="store_true", help="build and static checks only")
    g.add_argument("--skip-performance", action="store_true", help="no timing (the grader's self-test)")
    g.add_argument("--fail-fast", action="store_true",
                   help="stop a rung's tests at its first failure (the grader's self-test: a verdict, not a score)")
    g.set_defaults(run=run)


GRADESCOPE_METADATA = "/autograder/submission_metadata.json"


def gradescope_metadata(args):
    """Gradescope's submission metadata (--submission-metadata, else its default path), or {}."""
    path = getattr(args, "submission_metadata", "") or (GRADESCOPE_METADATA if os.path.isfile(GRADESCOPE_METADATA)
                                                         else "")
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise handout.HandoutError(f"--submission-metadata {path}: cannot read it as JSON ({e})")
    return data if isinstance(data, dict) else {}


def submission_identity(args, metadata):
    """The identity mixed into an official run's hidden seeds: --submission-id, else Gradescope's
    submission id (metadata: gradescope_metadata), else a fresh nonce. Seeds then differ between
    students and between one student's resubmissions, so answers to the hidden cases cannot
    accumulate."""
    if getattr(args, "submission_id", ""):
        return str(args.submission_id)
    sid = metadata.get("id")
    return f"gradescope-{sid}" if sid is not None else "nonce-" + secrets.token_hex(8)


def seed_secret(secret, submission_id):
    """The string problems.seed_for mixes into a hidden case's seed: the class secret and the
    submission's identity."""
    return f"{secret}|{submission_id}"


def due_date_passed(metadata):
    """True when Gradescope's metadata (gradescope_metadata) says the (late) due date has passed:
    a regrade then counts and reveals the hidden parts, as --reveal does."""
    meta = metadata.get("assignment") or {}
    due = meta.get("late_due_date") or meta.get("due_date")
    if not due:
        return False
    try:
        when = datetime.datetime.fromisoformat(str(due))
    except ValueError:
        raise handout.HandoutError(f"submission metadata: cannot read the due date '{due}'")
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return datetime.datetime.now(datetime.timezone.utc) > when


def make_grading_dir(work, reuse):
    """The grading's folder under `work`, for the official run and the self-test alike: a fresh
    one (mkdtemp) per grading, so nothing one submission leaves reaches the next, or with
    `reuse` (the self-test's, whose submissions are the instructor's own fixtures) always the
    same one, to rebuild only what changed. Both are mode 0711, like `work`: the sandbox's uid
    may pass through to the folders bound for it, but list neither (another grading's name)."""
    os.makedirs(work, exist_ok=True)
    os.chmod(work, 0o711)
    if reuse:
        path = os.path.join(work, "grading-selftest")
        os.makedirs(path, exist_ok=True)
    else:
        path = tempfile.mkdtemp(prefix="grading-", dir=work)
    os.chmod(path, 0o711)
    return path


_HELD_WORK = {}  # work folder -> its lock file, held by this process until it exits


def hold_work(work):
    """One grading at a time per work folder: gradings there share the reference build (and the
    self-test's reused grading folder), which a second one would rebuild under the first one's
    feet. A second grading waits, and says why; gradings that should run side by side need a
    --work each. Held until the process exits, so a self-test's gradings in one process go on."""
    if work in _HELD_WORK:
        return
    path = os.path.join(work, ".grading.lock")  # the grader's alone: no student process may hold it
    f = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+")
    os.fchmod(f.fileno(), 0o600)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"another grading is using {work}: waiting for it to end (give gradings that should run "
            "side by side a --work each)")
        fcntl.flock(f, fcntl.LOCK_EX)
    _HELD_WORK[work] = f


def load_config():
    """grader/rungs.json (points, performance scoring, the tracks), with each rung's own settings
    ("grader" in its folder's rung.json) merged in, all from the grader's own tree."""
    with open(os.path.join(ROOT, "grader", "rungs.json"), encoding="utf-8") as f:
        return rung_meta.with_rung_settings(json.load(f), ROOT)


def is_handout(root):
    return os.path.exists(os.path.join(root, handout.MANIFEST))


def choose_rungs(args, official):
    if args.rungs:
        return sorted({r.strip() for r in args.rungs.split(",") if r.strip()})
    manifest = os.path.join(args.submission, handout.MANIFEST)
    if official:  # the submission's manifest is the student's to edit
        raise handout.HandoutError("an official run (with a secret) needs --rungs: the rung list is not taken from the submission")
    if not os.path.exists(manifest):
        raise handout.HandoutError(f"no --rungs and no {manifest}: say which rungs to grade")
    with open(manifest, encoding="utf-8") as f:
        return json.load(f)["rungs"]


def sync_file(src, dst):
    """Copies src to dst unless dst already holds the same bytes. A fresh copy gets a new mtime
    (copyfile, not copy2), so an incremental build sees every file that changed."""
    if os.path.isfile(dst) and filecmp.cmp(src, dst, shallow=False):
        return
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    shutil.copymode(src, dst)


def prepare_tree(args, grading_dir, rungs, declared):
    """The grading tree (grading_dir/tree): exactly what a student has, the handout of `rungs`
    written from this tree (or this handout's own files), with the submission's declared files
    (decided here, never read from the submission) over it. Files are synced, so a reused
    folder (the self-test's) rebuilds only what changed. Returns {rung: [declared files missing
    from the submission]}."""
    tree = os.path.join(grading_dir, "tree")
    if is_handout(ROOT):
        source, files = ROOT, handout.repo_files(ROOT)
    else:
        source = os.path.join(grading_dir, "handout")
        handout.write_handout(ROOT, rungs, source, force=True)
        files = [os.path.relpath(os.path.join(d, n), source) for d, _, ns in os.walk(source) for n in ns]
    overlay, missing = {}, {}
    for rung, paths in declared.items():
        for path in paths:
            src = os.path.join(args.submission, path)
            if os.path.isfile(src) and not os.path.islink(src):
                overlay[path] = src
            else:
                missing.setdefault(rung, []).append(path)
    for path in files:
        sync_file(overlay.get(path, os.path.join(source, path)), os.path.join(tree, path))
    for path, src in overlay.items():  # a declared file the handout does not ship (a stubbed rung's own)
        sync_file(src, os.path.join(tree, path))
    return missing


def reference_build_dir(work_root):
    """The reference build: this tree (the instructor's), built by the grader in WORK/reference-build."""
    return os.path.join(work_root, "reference-build")


def reference_timing_program(work_root, r):
    """The reference build's grade_timing_NN of stage rung r (runs.timing runs it as the grader)."""
    return os.path.join(reference_build_dir(work_root), f"grade_timing_{r}")


def reference_libraries(args, work_root, jail, rungs):
    """Builds the reference solutions of the stage rungs from this tree (instructor code only),
    outside the sandbox, in WORK/reference-build: their timing programs grade_timing_NN (which
    runs.timing runs beside the student's, in a process of their own) and their stage objects
    (which reference_integrity reads). The folder is the grader's alone (mode 0700: root's when
    grading as root), never bound into the sandbox and never copied into the grading folder, so
    neither the student's build nor their programs can read the reference's sources or objects.
    Returns {rung: why} for those that failed."""
    build_dir = reference_build_dir(work_root)
    os.makedirs(build_dir, exist_ok=True)
    os.chmod(build_dir, 0o700)
    cmake = ["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja", "-DLADDER_BUILD_TESTS=OFF",
             "-DLADDER_GRADE_RUNGS=" + ";".join(rungs)]
    if args.cuda_architectures:
        cmake.append("-DCMAKE_CUDA_ARCHITECTURES=" + args.cuda_architectures)
    p = subprocess.run(cmake, capture_output=True, text=True)
    if p.returncode != 0:
        return {r: "the reference build could not be configured: " + (p.stdout + p.stderr)[-500:] for r in rungs}
    failed = {}
    for r in rungs:
        program = reference_timing_program(work_root, r)
        if os.path.exists(program):  # never an older build's program in place of one that now fails
            os.remove(program)
        p = subprocess.run(["cmake", "--build", build_dir, "-j", str(args.jobs), "--target", f"grade_timing_{r}"],
                           capture_output=True, text=True)
        if p.returncode != 0 or not os.path.isfile(program):
            failed[r] = "the reference solution did not build: " + (p.stdout + p.stderr)[-500:]
    return failed


def reference_integrity(ctx, r):
    """The integrity check of stage rung r's objects in the student's build (runs.integrity), with
    rule 2e comparing their weak symbols with the reference solution's own objects of the rung:
    those of the reference build (WORK/reference-build/CMakeFiles/stage_NN.dir), read here by the
    grader, outside the sandbox, where the student's build and programs never see them. Without a
    reference (a handout graded locally), or where the reference build has no objects of the rung,
    runs.integrity's own check (weak symbols against the ladder libraries)."""
    build, ref_build = ctx["build"], reference_build_dir(ctx["work"])
    if not ctx["reference"]:
        return runs.integrity(build, r)
    listed = integrity.ninja_objects(build)
    report = integrity.Report()
    report.objects = integrity.target_objects(build, f"CMakeFiles/stage_{r}.dir", listed)
    references = integrity.target_objects(ref_build, f"CMakeFiles/stage_{r}.dir", integrity.ninja_objects(ref_build))
    if not report.objects or not references:
        return runs.integrity(build, r)
    report.reference = True
    for folder in integrity.REFERENCE_TARGETS:  # the ladder libraries, as the student's build compiled them
        if not folder.startswith("grader/"):
            references += integrity.target_objects(build, folder.format(id=r), listed)
    return integrity.check_objects(report, r, references)


def build(args, jail, rungs, folders, reference, track_rungs=(), declared=None, config=None):
    """Configures and builds the rungs' programs in the jail (the grading tree, read-only; the
    build folder its only writable place); returns {rung: (built, log tail, compiled)}:
    compiled, the stage's objects compiled (the integrity check reads them even when the programs
    do not link); built, its programs linked as well. track_rungs: a track's rungs, built by
    track.build (declared: {rung: its files}; config: rungs.json)."""
    tree, build_dir = jail.inside("tree"), jail.inside("build")
    cmake = ["cmake", "-S", tree, "-B", build_dir, "-G", "Ninja", "-DLADDER_BUILD_TESTS=OFF",
             "-DLADDER_GRADE_RUNGS=" + ";".join(rungs)]
    # Nothing of the reference: its programs are the reference build's (reference_libraries).
    if args.cuda_architectures:
        cmake.append("-DCMAKE_CUDA_ARCHITECTURES=" + args.cuda_architectures)
    p = jail.build(cmake)
    if p.returncode != 0:
        tail = (p.stdout + p.stderr).strip()[-3000:]
        return {r: (False, "the build could not be configured:\n" + tail, False) for r in [*rungs, *track_rungs]}

    def make(targets):
        p = jail.build(["cmake", "--build", build_dir, "-j", str(args.jobs), "--target", *targets])
        lines = [l for l in (p.stdout + p.stderr).splitlines()
                 if any(w in l.lower() for w in ("error", "warning", "undefined reference", "multiple definition"))]
        return p.returncode == 0, "\n".join(lines[:40]) if p.returncode else ""

    out = {}
    for r in rungs:
        log(f"building rung {r}")
        # The given libraries first, then the stage's objects alone, then its programs.
        make(["ladder_common", "ladder_runner", "ladder_main"])
        compiled, compile_log = make([f"stage_{r}"])
        built, build_log = make([f"stage_{folders[r]}", f"grade_timing_{r}"]) if compiled else (False, compile_log)
        out[r] = (built, build_log, compiled)
    if track_rungs:
        log(f"building rungs {', '.join(track_rungs)}")
        out.update(track.build(ROOT, jail.dirs["tree"], build_dir, track_rungs, declared, config, make))
    return out


def stub_todos(r, files, submission):
    """The TODO lines of rung r, from the grader's reading of its stub markers: for each stub
    that the handout puts in a declared file and that the submission's file still holds, the
    stub's own message, as the instructor wrote it, and where its hint is (grader/todo_hints.py).
    Nothing of the submission's text is copied."""
    lines = set()
    label = f"{r} {handout.rung_name(ROOT, r)}" if handout.is_track_rung(r) else f"stage {r}"
    for path in files:
        try:
            stubbed = markers.render(handout.parse_file(ROOT, path), [r])
            with open(os.path.join(submission, path), encoding="utf-8", errors="replace") as f:
                theirs = f.read()
        except (OSError, markers.MarkerError):
            continue
        code = "\n".join(l for l in theirs.splitlines() if not markers.STUB.match(l))  # not the STUB comments
        left = set(todo_hints.TODO_CALL.findall(code))
        for hint_id, message in todo_hints.TODO_CALL.findall(stubbed):
            if (hint_id, message) in left:
                lines.add(todo_hints.todo_line(ROOT, label, hint_id, message))
    return sorted(lines)


def grade_rung(args, r, folder, ctx):
    """Every part of one rung: a list of reports.Part."""
    cfg, pts = ctx["config"], ctx["config"]["points"]
    name = f"{r} {folder.split('_', 1)[1]}"
    P = lambda part, **kw: reports.Part(rung=name, part=part, max_score=pts[part], **kw)  # noqa: E731
    built, build_log, compiled = ctx["built"][r]
    if r in ctx["missing"]:
        msg = "missing from the submission: " + ", ".join(ctx["missing"][r])
        return [P(p, score=0, output=msg) for p in pts]
    if not compiled:
        msg = "does not compile:\n" + build_log
        return [P(p, score=0, output=msg) for p in pts]
    program = runs.stage_program(ctx["run_build"], folder)
    rules = runs.grader_rules(cfg["rungs"].get(r, {}))
    mark = len(ctx["jail"].loaded)  # the rule 5 lines of this rung's own runs come after it

    # Static: integrity (the compiled objects) and technique (the SASS).
    integrity = reference_integrity(ctx, r)
    if not built:
        msg = "does not link:\n" + build_log + ("\n" + "\n".join(integrity.lines()) if integrity.failed else "")
        return [P(p, score=0, output=msg) for p in pts]
    ok, lines = runs.technique(ROOT, ctx["build"], r)
    if ctx["todos"].get(r):  # the failures below are the stub's own (its TODO printf uses local memory)
        lines.insert(0, f"NOTE: rung {r} still holds {len(ctx['todos'][r])} stub(s) of the handout (the TODO "
                        "lines of the public part): the checks below judge the stub's code, not yours")
    bad = integrity.failed
    lines += integrity.lines()
    if bad:
        lines.append("integrity failed: no correctness or sanitizer points, no timing")
    technique = P("technique", score=pts["technique"] if ok and not bad else 0, output="\n".join(lines))
    parts = [technique]

    if not ctx["gpu"]:
        why = ctx["gpu_why"]
        for p in ("public", "hidden", "sanitizer", "performance"):
            parts.append(P(p, score=0, skipped=True, output=why if why.startswith("skipped") else f"skipped: {why}"))
        return parts

    def sanitize(tool):  # the report keeps the last lines of a failure, the reason of a skip
        status, out = runs.sanitizer(program, r, tool, args.timeout, rules)
        if status in ("fail", "wrong"):
            return status, "\n".join(out.splitlines()[-12:])
        if status == "skipped":
            return status, out.splitlines()[-1] if out else ""
        return status, out

    correctness, clean = runs.correctness_parts(
        args, r, P, cfg, ctx["public"], ctx["hidden"], ctx["hidden_source"], ctx["secret"],
        lambda case, seed, public: runs.run_case(program, r, case, seed, args.timeout, rules, show_output=public),
        cfg["sanitizer_tools"], sanitize, bad, ctx["todos"].get(r, ()))
    parts += correctness

    # Performance: only for a correct, clean, honest rung.
    perf_cfg = {**cfg["performance"], **cfg["rungs"].get(r, {}).get("performance", {})}
    timing = cfg["rungs"].get(r, {}).get("timing")
    untimed = f"rung {r} has no timing entry (\"grader\" in its rung.json)" if timing is None else ""
    clean = clean and not ctx["jail"].findings_since(mark)
    parts.append(runs.performance_gate(args, P, clean, lambda: performance(args, r, P, pts, ctx, timing, perf_cfg),
                                       untimed))
    return runs.loaded_library_verdict(parts, ctx["jail"].findings_since(mark))


def performance(args, r, P, pts, ctx, timing, perf_cfg):
    """The performance part of stage rung r: runs.timing of the student's grade_timing_NN and, in
    an official run (ctx["reference"]), the reference build's, in separate processes, in
    perf_cfg["rounds"] rounds (default 3)."""
    log(f"rung {r}: timing ({timing['mode']} mode)")
    reference = reference_timing_program(ctx["work"], r) if ctx["reference"] else None
    part = P("performance", score=0, output="")
    if reference and not os.path.isfile(reference):
        part.skipped = True
        part.output = "not scored: the reference solution's timing program did not build (the grading log says why)"
        return part
    status, data = runs.timing(ctx["build"], r, timing["mode"], timing.get("args", []), perf_cfg["reps"],
                               perf_cfg["warmup"], args.timeout, reference=reference,
                               rounds=perf_cfg.get("rounds", 3))
    if status != "ok":
        part.output = f"timing {status}: {data.get('first_mismatch') or data.get('error', '')}"
        part.skipped = status == "skipped"
    else:
        s, fl = data["student"]["median_ms"], data["floor"]["median_ms"]
        lines = [f"problem: {data.get('problem', '')}",
                 f"your rung: {s:.4g} ms (median of {data['reps']} repetitions x {data['rounds']} round(s))",
                 f"streaming-read floor: {fl:.4g} ms"]
        if "uncovered_ms" in data:
            lines.append(f"host wall time beyond the CUDA events: {data['uncovered_ms']:.3f} ms "
                         f"(allowed {data['uncovered_allowance_ms']:.3f} ms)")
        if s < perf_cfg["floor_slack"] * fl:
            lines.append(f"VOID: faster than {perf_cfg['floor_slack']}x the memory floor allows: the rung cannot have read its input")
        elif data.get("reference"):
            ratio = data["ratio_to_reference"]
            part.ratio = ratio
            part.score = round(pts["performance"] * runs.score_perf(ratio, perf_cfg), 2)
            lines.append(f"reference solution: {data['reference']['median_ms']:.4g} ms, in processes of its own; "
                         f"ratio {ratio:.3g} (full credit at <= {perf_cfg['full_at']}x, none at >= {perf_cfg['zero_at']}x)")
        else:
            part.skipped = True
            lines.append(f"not scored here: the reference solution is timed at official grading "
                         f"({s / fl:.3g}x the floor now)")
        part.output = "\n".join(lines)
    return part


def run(args):
    parts, meta, out_dir = grade(args)
    print(reports.write_all(parts, meta, out_dir))
    return 0


def grade(args):
    """Grades args.submission; returns (parts, meta, output folder). Raises handout.HandoutError
    (one line) for bad arguments or a missing tool, sandbox.SandboxError when official grading
    cannot be sandboxed."""
    handout.validate_grade_args(ROOT, args, tools=not getattr(args, "skip_tool_check", False))
    metadata = gradescope_metadata(args)
    args.reveal = args.reveal or due_date_passed(metadata)
    config = load_config()
    secret = ""
    if args.secret_file:
        with open(args.secret_file, encoding="utf-8") as f:
            secret = f.read().strip()
    # The secret leaves the environment at once: no process the grader starts inherits it.
    secret = secret or os.environ.get("LADDER_GRADER_SECRET", "")
    os.environ.pop("LADDER_GRADER_SECRET", None)
    hidden_file = os.path.join(ROOT, "grader", "hidden", "hidden.problems")
    official = bool(secret) and os.path.exists(hidden_file)
    rungs = choose_rungs(args, official)
    stage_rungs = [r for r in rungs if not handout.is_track_rung(r)]
    track_rungs = [r for r in rungs if handout.is_track_rung(r)]
    listed = [track.track_settings(config, name) for name in sorted({r.split("-")[0] for r in track_rungs})
              if name in config.get("tracks", {})]
    tracks = {t["program"]: t for t in listed}
    if track_rungs:  # official: every graded ladder has its hidden problems here
        official = bool(secret) and (os.path.exists(hidden_file) or not stage_rungs) and all(
            os.path.exists(os.path.join(ROOT, t["hidden"])) for t in tracks.values())
    folders = handout.stage_folders(ROOT)
    unknown = [r for r in stage_rungs if r not in folders]
    if unknown:
        raise handout.HandoutError(f"unknown rung(s) {', '.join(unknown)}: this tree has stages {', '.join(sorted(folders))}")
    _ship, _stubbed, declared = handout.plan(ROOT, rungs) if not is_handout(ROOT) else (None, None, _handout_declared())
    if is_handout(ROOT) and any(r not in declared for r in rungs):
        raise handout.HandoutError(f"rung(s) {', '.join(r for r in rungs if r not in declared)} are not assigned in this "
                                   f"handout (it assigns {', '.join(sorted(declared))})")
    declared = {r: declared.get(r, []) for r in rungs}
    for r in track_rungs:
        track.settings(config, r)  # a track without a rungs.json entry: say so before building
    isolation, iso_note = sandbox.choose(getattr(args, "isolation", "auto"), official)
    if isolation == "none":
        log(f"WARNING: practice grading without isolation{' (' + iso_note + ')' if iso_note else ''}: "
            "the submission runs with your rights")
    lease = sandbox.UidLease() if isolation != "none" else None
    uid = lease.uid if lease else os.geteuid()
    submission_id = submission_identity(args, metadata) if official else ""
    root = os.geteuid() == 0
    # As root, the default work folder is under the system's temp folder: the sandbox's uid must
    # pass through every folder above the ones it uses, and root's home is private.
    # One default per instructor tree: two trees on one machine never share a reference build.
    default_work = (os.path.join(tempfile.gettempdir(),
                                 "ladder-grade-" + hashlib.sha256(ROOT.encode()).hexdigest()[:12])
                    if root and isolation != "none" else os.path.join(ROOT, "build-grade"))
    work = os.path.abspath(args.work or default_work)
    if root and isolation != "none" and not sandbox.traversable(work):
        moved = os.path.join(tempfile.gettempdir(), "ladder-grade-" + hashlib.sha256(work.encode()).hexdigest()[:12])
        log(f"the sandbox's uid cannot reach {work}: grading in {moved} instead")
        work = moved
    os.makedirs(work, exist_ok=True)
    hold_work(work)
    grading_dir = make_grading_dir(work, getattr(args, "reuse_work", False))
    # The reports stay where the docs say, --work (default build-grade/), whatever folder the grading used.
    out_dir = os.path.abspath(args.out or args.work or os.path.join(ROOT, "build-grade"))
    os.makedirs(out_dir, exist_ok=True)
    jail = runs.JAIL = runs.Jail(grading_dir, isolation, uid)
    try:
        jail.enable_audit()
    except (RuntimeError, OSError) as e:  # integrity rule 5 needs the audit: official grading refuses without it
        if official:
            raise sandbox.SandboxError(f"{e}: official grading needs the load audit (integrity rule 5)")
        log(f"WARNING: {e}: the libraries the programs load are not checked (integrity rule 5)")
    private = [ROOT if not is_handout(ROOT) else "", os.path.abspath(args.secret_file) if args.secret_file else "",
               os.path.join(ROOT, "grader", "hidden"), os.path.join(work, "reference-build")]
    if isolation == "bwrap":
        sandbox.Sandbox(ro={jail.dirs[k]: jail.inside(k) for k in ("tree", "build")}, uid=uid).check_paths(private)
    elif isolation == "user":
        os.makedirs(os.path.join(work, "reference-build"), exist_ok=True)
        sandbox.make_private(uid, private)
    reference = ROOT if not is_handout(ROOT) else ""
    log(f"grading rungs {', '.join(rungs)} of {args.submission} in {grading_dir} "
        f"({'official: hidden shapes, secret seed' if official else 'local: practice shapes, public seeds'}; "
        f"isolation: {sandbox.describe(isolation, uid, iso_note)})")
    missing = prepare_tree(args, grading_dir, rungs, declared)
    tree, build_dir = jail.dirs["tree"], jail.dirs["build"]
    ref_failed = reference_libraries(args, work, jail, stage_rungs) if reference and stage_rungs else {}
    for r, why in ref_failed.items():
        log(f"rung {r}: {why}")
    built = build(args, jail, stage_rungs, folders, reference, track_rungs, declared, config)
    todos = {r: stub_todos(r, declared[r], args.submission) for r in rungs}
    ctx = {"config": config, "tree": tree, "build": build_dir, "run_build": jail.inside("build"), "jail": jail,
           "todos": todos, "built": built, "missing": missing,
           "public": problems.load(os.path.join(ROOT, "grader", "public.problems")),
           "hidden": problems.load(hidden_file if official and stage_rungs else
                                   os.path.join(ROOT, "grader", "practice.problems")),
           "hidden_source": "hidden shapes" if official else "practice shapes",
           "secret": seed_secret(secret, submission_id) if official else "",
           "gpu": False, "gpu_why": "--skip-gpu" if args.skip_gpu else "",
           "root": ROOT, "work": work, "reference": reference,
           "track_public": {p: problems.load(os.path.join(ROOT, t["public"])) for p, t in tracks.items()},
           "track_hidden": {p: problems.load(os.path.join(ROOT, t["hidden"] if official else t["practice"]))
                            for p, t in tracks.items()},
           "track_gpu": {p: (False, "--skip-gpu" if args.skip_gpu else "") for p in tracks}}
    if not args.skip_gpu:
        first = next((r for r in stage_rungs if built[r][0]), None)
        if first is None:
            ctx["gpu_why"] = "nothing compiled"
        else:
            ctx["gpu"], ctx["gpu_why"] = runs.gpu_available(runs.stage_program(ctx["run_build"], folders[first]), first)
        for prog, t in tracks.items():
            first = next((r for r in track_rungs
                          if built[r][0] and track.settings(config, r)[0]["program"] == prog), None)
            ctx["track_gpu"][prog] = (track.gpu_available(track.program(ctx["run_build"], t),
                                                          track.settings(config, first)[1],
                                                          t["probe"]) if first else (False, "nothing compiled"))
    parts = []
    for r in rungs:
        parts.extend(track.grade_rung(args, r, ctx) if handout.is_track_rung(r)
                     else grade_rung(args, r, folders[r], ctx))
    if track_rungs and not stage_rungs:  # the report's GPU line: the track's program said
        ctx["gpu"] = any(g for g, _ in ctx["track_gpu"].values())
        ctx["gpu_why"] = next((w for g, w in ctx["track_gpu"].values() if not g), "")
    meta = {"rungs": rungs, "official": official, "gpu": ctx["gpu"], "gpu_why": ctx["gpu_why"],
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "reference": bool(reference), "reveal": args.reveal,
            "isolation": isolation, "isolation_note": sandbox.describe(isolation, uid, iso_note),
            "submission_id": submission_id}
    if lease:
        lease.release()
    return parts, meta, out_dir


def _handout_declared():
    with open(os.path.join(ROOT, handout.MANIFEST), encoding="utf-8") as f:
        return json.load(f)["files"]
