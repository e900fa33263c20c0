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
A second track's rungs (TRACK-NN, e.g. p38-03) are graded by the same path and parts, through the
track's program (grader/programs.py says how each kind of rung's program is driven).
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
import tempfile

from . import build, handout, programs, reports, rungs, runs, sandbox

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


def prepare_tree(args, grading_dir, ids, declared):
    """The grading tree (grading_dir/tree): exactly what a student has, the handout of the rungs `ids`
    written from this tree (or this handout's own files), with the submission's declared files
    (decided here, never read from the submission) over it. Files are synced, so a reused
    folder (the self-test's) rebuilds only what changed. Returns {rung: [declared files missing
    from the submission]}."""
    tree = os.path.join(grading_dir, "tree")
    if handout.is_handout(ROOT):
        source, files = ROOT, handout.repo_files(ROOT)
    else:
        source = os.path.join(grading_dir, "handout")
        handout.write_handout(ROOT, ids, source, force=True)
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


def run(args):
    parts, meta, out_dir = grade(args)
    print(reports.write_all(parts, meta, out_dir))
    return 0


def grade(args):
    """Grades args.submission; returns (parts, meta, output folder). One path for every rung,
    stage or track: resolve the rungs, prepare the tree, build, then per rung (grade_rung)
    integrity, technique, correctness, sanitizers, performance; then the report's meta. Raises
    handout.HandoutError (one line) for bad arguments or a missing tool, sandbox.SandboxError
    when official grading cannot be sandboxed."""
    handout.validate_grade_args(ROOT, args, tools=not getattr(args, "skip_tool_check", False))
    metadata = gradescope_metadata(args)
    args.reveal = args.reveal or due_date_passed(metadata)
    config = rungs.load_config(ROOT)
    secret = ""
    if args.secret_file:
        with open(args.secret_file, encoding="utf-8") as f:
            secret = f.read().strip()
    # The secret leaves the environment at once: no process the grader starts inherits it.
    secret = secret or os.environ.get("LADDER_GRADER_SECRET", "")
    os.environ.pop("LADDER_GRADER_SECRET", None)
    ids = choose_rungs(args, bool(secret) and os.path.exists(os.path.join(ROOT, rungs.HIDDEN_STAGES)))
    official = bool(secret) and all(os.path.exists(os.path.join(ROOT, p)) for p in rungs.hidden_lists(config, ids))
    declared = rungs.declared_files(ROOT, ids)
    # Every rung resolved before anything is built: a track without its rungs.json entry stops here.
    graded = rungs.resolve(ROOT, config, ids, declared, args.submission, official)
    isolation, iso_note = sandbox.choose(getattr(args, "isolation", "auto"), official)
    if isolation == "none":
        log(f"WARNING: practice grading without isolation{' (' + iso_note + ')' if iso_note else ''}: "
            "the submission runs with your rights")
    lease = sandbox.UidLease() if isolation != "none" else None
    uid = lease.uid if lease else os.geteuid()
    submission_id = submission_identity(args, metadata) if official else ""
    work, grading_dir, out_dir = work_folders(args, isolation)
    jail = runs.JAIL = runs.Jail(grading_dir, isolation, uid)
    try:
        jail.enable_audit()
    except (RuntimeError, OSError) as e:  # integrity rule 5 needs the audit: official grading refuses without it
        if official:
            raise sandbox.SandboxError(f"{e}: official grading needs the load audit (integrity rule 5)")
        log(f"WARNING: {e}: the libraries the programs load are not checked (integrity rule 5)")
    reference = "" if handout.is_handout(ROOT) else ROOT  # the instructor's tree: its solutions are the reference
    private = [reference, os.path.abspath(args.secret_file) if args.secret_file else "",
               os.path.join(ROOT, "grader", "hidden"), build.reference_dir(work)]
    if isolation == "bwrap":
        sandbox.Sandbox(ro={jail.dirs[k]: jail.inside(k) for k in ("tree", "build")}, uid=uid).check_paths(private)
    elif isolation == "user":
        os.makedirs(build.reference_dir(work), exist_ok=True)
        sandbox.make_private(uid, private)
    log(f"grading rungs {', '.join(ids)} of {args.submission} in {grading_dir} "
        f"({'official: hidden shapes, secret seed' if official else 'local: practice shapes, public seeds'}; "
        f"isolation: {sandbox.describe(isolation, uid, iso_note)})")
    missing = prepare_tree(args, grading_dir, ids, declared)
    references = build.reference(args, work, graded, ROOT) if reference else {}
    built = build.student(args, jail, graded, ROOT)
    ctx = {"config": config, "build": jail.dirs["build"], "run_build": jail.inside("build"), "jail": jail,
           "missing": missing, "built": built, "root": ROOT, "reference": reference,
           "reference_dir": build.reference_dir(work), "references": references,
           "hidden_source": "hidden shapes" if official else "practice shapes",
           "secret": seed_secret(secret, submission_id) if official else ""}
    ctx["gpu"] = probe_gpus(args, graded, ctx)
    parts = [p for rung in graded for p in grade_rung(args, rung, ctx)]
    gpu = ctx["gpu"].values()
    meta = {"rungs": ids, "official": official, "gpu": any(g for g, _ in gpu),
            "gpu_why": next((w for g, w in gpu if not g), ""),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "reference": bool(reference), "reveal": args.reveal,
            "isolation": isolation, "isolation_note": sandbox.describe(isolation, uid, iso_note),
            "submission_id": submission_id}
    if lease:
        lease.release()
    return parts, meta, out_dir


def work_folders(args, isolation):
    """(work folder, this grading's folder in it, the reports' folder), made and held
    (hold_work). As root, the default work folder is under the system's temp folder: the
    sandbox's uid must pass through every folder above the ones it uses, and root's home is
    private. One default per instructor tree: two trees on one machine never share a
    reference build."""
    root = os.geteuid() == 0
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
    return work, grading_dir, out_dir


def probe_gpus(args, graded, ctx):
    """{ladder: (True, "") or (False, why)}: whether each ladder's program runs on a GPU here,
    asked of its first rung that built (--skip-gpu: none is asked)."""
    out = {}
    for rung in graded:
        if rung.ladder in out:
            continue
        first = next((r for r in graded if r.ladder == rung.ladder and ctx["built"][r.id][0]), None)
        out[rung.ladder] = ((False, "--skip-gpu") if args.skip_gpu else (False, "nothing compiled") if first is None
                            else programs.KINDS[first.kind](args, first, ctx).probe())
    return out


def grade_rung(args, rung, ctx):
    """Every part of one rung, a stage or a track's (rungs.Rung): a list of reports.Part. The
    kind's program (programs.KINDS) answers each step; the path and the rules are the same."""
    cfg, pts = ctx["config"], ctx["config"]["points"]
    P = lambda part, **kw: reports.Part(rung=rung.name, part=part, max_score=pts[part], **kw)  # noqa: E731
    built, build_log, compiled = ctx["built"][rung.id]
    if rung.id in ctx["missing"]:
        msg = "missing from the submission: " + ", ".join(ctx["missing"][rung.id])
        return [P(p, score=0, output=msg) for p in pts]
    if not compiled:
        return [P(p, score=0, output="does not compile:\n" + build_log) for p in pts]
    program = programs.KINDS[rung.kind](args, rung, ctx)
    mark = len(ctx["jail"].loaded)  # the rule 5 lines of this rung's own runs come after it

    # Static: integrity (the compiled objects) and technique (the machine code).
    report = program.integrity()
    if not built:
        msg = "does not link:\n" + build_log + ("\n" + "\n".join(report.lines()) if report.failed else "")
        return [P(p, score=0, output=msg) for p in pts]
    ok, lines = program.technique()
    bad = report.failed
    lines += report.lines()
    if bad:
        lines.append("integrity failed: no correctness or sanitizer points, no timing")
    parts = [P("technique", score=pts["technique"] if ok and not bad else 0, output="\n".join(lines))]
    gpu, why = ctx["gpu"][rung.ladder]
    if not gpu:
        for p in ("public", "hidden", "sanitizer", "performance"):
            parts.append(P(p, score=0, skipped=True, output=why if why.startswith("skipped") else f"skipped: {why}"))
        return parts

    correctness, clean = runs.correctness_parts(
        args, rung.id, P, cfg, rung.public, rung.hidden, ctx["hidden_source"], ctx["secret"], program.run_case,
        rung.sanitizer_tools, program.sanitize, bad, rung.todos)
    parts += correctness
    # Performance: only for a correct, clean, honest rung.
    clean = clean and not ctx["jail"].findings_since(mark)
    parts.append(runs.performance_gate(args, P, clean, lambda: program.performance(P, pts), program.untimed()))
    return runs.loaded_library_verdict(parts, ctx["jail"].findings_since(mark))
