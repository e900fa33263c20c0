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
  performance  the rung, the reference solution (official runs) and the streaming-read floor timed
             interleaved in one process on fresh inputs (grader/grade_timing.cu).
Without a GPU the build and static checks still run; the report says what was skipped and why.
A second track's rungs (TRACK-NN, e.g. p38-03) are graded with the same parts by grader/track.py,
through the track's program.
"""
import argparse
import datetime
import filecmp
import json
import os
import shutil
import subprocess

import handout
import problems
import reports
import runs
import track

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
    g.add_argument("--reveal", action="store_true", help="name the failing hidden cases' inputs (after the due date)")
    g.add_argument("--cuda-architectures", default="", help="CMAKE_CUDA_ARCHITECTURES (default: the build's own choice)")
    g.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="build jobs")
    g.add_argument("--timeout", type=float, default=600, help="seconds one program run may take")
    g.add_argument("--skip-gpu", action="store_true", help="build and static checks only")
    g.add_argument("--skip-performance", action="store_true", help="no timing (the grader's self-test)")
    g.add_argument("--fail-fast", action="store_true",
                   help="stop a rung's tests at its first failure (the grader's self-test: a verdict, not a score)")
    g.set_defaults(run=run)


def load_config():
    with open(os.path.join(ROOT, "grader", "rungs.json"), encoding="utf-8") as f:
        return json.load(f)


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


def prepare_tree(args, work, declared):
    """work/tree = this tree with the submission's declared files over it, updated in place so
    that a second grading in the same work folder rebuilds only what changed. Returns the tree and
    {rung: [declared files missing from the submission]}."""
    tree = os.path.join(work, "tree")
    overlay = {}
    missing = {}
    for rung, files in declared.items():
        for path in files:
            src = os.path.join(args.submission, path)
            if os.path.isfile(src):
                overlay[path] = src
            else:
                missing.setdefault(rung, []).append(path)
    for path in handout.repo_files(ROOT):
        sync_file(overlay.get(path, os.path.join(ROOT, path)), os.path.join(tree, path))
    return tree, missing


def build(args, tree, build_dir, rungs, folders, reference, track_rungs=(), declared=None, config=None):
    """Configures and builds the rungs' programs; returns {rung: (built, log tail, compiled)}:
    compiled, the stage's objects compiled (the integrity check reads them even when the programs
    do not link); built, its programs linked as well. track_rungs: a track's rungs, built by
    track.build (declared: {rung: its files}; config: rungs.json)."""
    cmake = ["cmake", "-S", tree, "-B", build_dir, "-G", "Ninja", "-DLADDER_BUILD_TESTS=OFF",
             "-DLADDER_GRADE_RUNGS=" + ";".join(rungs)]
    if reference:
        cmake.append("-DLADDER_REFERENCE_DIR=" + reference)
    if args.cuda_architectures:
        cmake.append("-DCMAKE_CUDA_ARCHITECTURES=" + args.cuda_architectures)
    p = subprocess.run(cmake, capture_output=True, text=True)
    if p.returncode != 0:
        tail = (p.stdout + p.stderr).strip()[-3000:]
        return {r: (False, "the build could not be configured:\n" + tail, False) for r in [*rungs, *track_rungs]}

    def make(targets):
        p = subprocess.run(["cmake", "--build", build_dir, "-j", str(args.jobs), "--target", *targets],
                           capture_output=True, text=True)
        lines = [l for l in (p.stdout + p.stderr).splitlines()
                 if any(w in l.lower() for w in ("error", "warning", "undefined reference", "multiple definition"))]
        return p.returncode == 0, "\n".join(lines[:40]) if p.returncode else ""

    out = {}
    for r in rungs:
        log(f"building rung {r}")
        # The instructor's objects first (the integrity check compares with them), then the
        # stage's objects alone, then its programs.
        make(["ladder_common", "ladder_runner", "ladder_main"] + ([f"reference_stage_{r}"] if reference else []))
        compiled, compile_log = make([f"stage_{r}"])
        built, build_log = make([f"stage_{folders[r]}", f"grade_timing_{r}"]) if compiled else (False, compile_log)
        out[r] = (built, build_log, compiled)
    if track_rungs:
        log(f"building rungs {', '.join(track_rungs)}")
        out.update(track.build(ROOT, tree, build_dir, track_rungs, declared, config, make))
    return out


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
    program = runs.stage_program(ctx["build"], folder)

    # Static: integrity (the compiled objects) and technique (the SASS).
    integrity = runs.integrity(ctx["build"], r)
    if not built:
        msg = "does not link:\n" + build_log + ("\n" + "\n".join(integrity.lines()) if integrity.failed else "")
        return [P(p, score=0, output=msg) for p in pts]
    ok, lines = runs.technique(ctx["tree"], ctx["build"], r)
    bad = integrity.failed
    lines += integrity.lines()
    if bad:
        lines.append("integrity failed: no correctness points (public and hidden), no timing")
    technique = P("technique", score=pts["technique"] if ok and not bad else 0, output="\n".join(lines))
    parts = [technique]

    if not ctx["gpu"]:
        why = ctx["gpu_why"]
        for p in ("public", "hidden", "sanitizer", "performance"):
            parts.append(P(p, score=0, skipped=True, output=why if why.startswith("skipped") else f"skipped: {why}"))
        return parts

    def sanitize(tool):  # the report keeps the last lines of a failure, the reason of a skip
        status, out = runs.sanitizer(ctx["tree"], program, tool, args.timeout)
        if status == "fail":
            return status, "\n".join(out.splitlines()[-8:])
        if status == "skipped":
            return status, out.splitlines()[-1] if out else ""
        return status, out

    correctness, clean = runs.correctness_parts(
        args, r, P, cfg, ctx["public"], ctx["hidden"], ctx["hidden_source"], ctx["secret"],
        lambda case, seed: runs.run_case(program, r, case, seed, args.timeout), cfg["sanitizer_tools"], sanitize, bad)
    parts += correctness

    # Performance: only for a correct, clean, honest rung.
    perf_cfg = {**cfg["performance"], **cfg["rungs"].get(r, {}).get("performance", {})}
    timing = cfg["rungs"].get(r, {}).get("timing")
    untimed = f"rung {r} has no timing entry in grader/rungs.json" if timing is None else ""
    parts.append(runs.performance_gate(args, P, clean, lambda: performance(args, r, P, pts, ctx, timing, perf_cfg),
                                       untimed))
    return parts


def performance(args, r, P, pts, ctx, timing, perf_cfg):
    """The performance part of stage rung r, timed by grade_timing_NN."""
    log(f"rung {r}: timing ({timing['mode']} mode)")
    status, data = runs.timing(ctx["build"], r, timing["mode"], timing.get("args", []), perf_cfg["reps"],
                               perf_cfg["warmup"], args.timeout)
    part = P("performance", score=0, output="")
    if status != "ok":
        part.output = f"timing {status}: {data.get('first_mismatch') or data.get('error', '')}"
        part.skipped = status == "skipped"
    else:
        s, fl = data["student"]["median_ms"], data["floor"]["median_ms"]
        lines = [f"problem: {data.get('problem', '')}", f"your rung: {s:.4g} ms (median of {data['reps']})",
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
            lines.append(f"reference solution: {data['reference']['median_ms']:.4g} ms; ratio {ratio:.3g} "
                         f"(full credit at <= {perf_cfg['full_at']}x, none at >= {perf_cfg['zero_at']}x)")
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
    """Grades args.submission; returns (parts, meta, output folder)."""
    config = load_config()
    secret = ""
    if args.secret_file:
        with open(args.secret_file, encoding="utf-8") as f:
            secret = f.read().strip()
    secret = secret or os.environ.get("LADDER_GRADER_SECRET", "")
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
    _ship, _stubbed, declared = handout.plan(ROOT, rungs) if not is_handout(ROOT) else (None, None, _handout_declared())
    declared = {r: declared.get(r, []) for r in rungs}
    for r in track_rungs:
        track.settings(config, r)  # a track without a rungs.json entry: say so before building
    work = os.path.abspath(args.work or os.path.join(ROOT, "build-grade"))
    out_dir = os.path.abspath(args.out or work)
    os.makedirs(work, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    reference = ROOT if not is_handout(ROOT) else ""
    log(f"grading rungs {', '.join(rungs)} of {args.submission} "
        f"({'official: hidden shapes, secret seed' if official else 'local: practice shapes, public seeds'})")
    tree, missing = prepare_tree(args, work, declared)
    build_dir = os.path.join(work, "build")
    built = build(args, tree, build_dir, stage_rungs, folders, reference, track_rungs, declared, config)
    ctx = {"config": config, "tree": tree, "build": build_dir, "built": built, "missing": missing,
           "public": problems.load(os.path.join(ROOT, "grader", "public.problems")),
           "hidden": problems.load(hidden_file if official and stage_rungs else
                                   os.path.join(ROOT, "grader", "practice.problems")),
           "hidden_source": "hidden shapes" if official else "practice shapes", "secret": secret if official else "",
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
            ctx["gpu"], ctx["gpu_why"] = runs.gpu_available(runs.stage_program(build_dir, folders[first]), first)
        for prog, t in tracks.items():
            first = next((r for r in track_rungs
                          if built[r][0] and track.settings(config, r)[0]["program"] == prog), None)
            ctx["track_gpu"][prog] = (track.gpu_available(track.program(build_dir, t), track.settings(config, first)[1],
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
            "reference": bool(reference), "reveal": args.reveal}
    return parts, meta, out_dir


def _handout_declared():
    with open(os.path.join(ROOT, handout.MANIFEST), encoding="utf-8") as f:
        return json.load(f)["files"]
