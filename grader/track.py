"""scripts/assignment.py grade for the rungs of a second track (TRACK-NN: the rung folder
tracks/TRACK_name/rungs/NN_name/, its source and rung.json), the same parts and points as a stage
(grader/grade.py):

  public, hidden  the track's program (p38_ladder, p74_ladder) with `--rungs NN` on each problem
             of the track's lists (grader/rungs.json, "tracks"), twice on one workspace (--warmup 1
             --reps 1) with NaN-filled outputs, checked elementwise against the fp64 oracle; seeds
             as for the stages (problems.seed_for), mixed with the secret in official runs;
  sanitizer  compute-sanitizer (memcheck with leak checking, racecheck, synccheck) on the
             program with --reps 1 --warmup 0 on small awkward problems;
  technique  the rung's idea in its machine code (grader/technique.py's TRACK_RULES, on its
             own object) and the integrity check of that object (integrity.check_track);
  performance  `--rungs NN --json` at the rung's timing size, in rounds that alternate the
             student's program with the reference build's (this tree, official runs): the
             median time over the reference's median, scored like a stage's; the floors the
             program measures (read x + write the output; the convolution at the FP32 peak) are
             reported, and a time under floor_slack x the memory floor is void. Without a
             reference (a handout) the time against the floors is reported, not scored, unless
             the track's "score_against" is "floor" (then full_at and zero_at are floor multiples).

How a track's program reports is the track's "report" setting (a rung's own "report" overrides
its keys; track_config.report_settings): "check", the key of a rung entry's agreement with the oracle
(p38_ladder: "vs_oracle"; p74_ladder: "check", with one sub-object per gradient); "floors", the
section of the report's "floors" to time against (none: p38_ladder's flat floors; p74_ladder:
"forward" or "backward"); "direction", the entry to take when a rung reports two passes
(p74_ladder's rung 00: "forward" and "backward"); "floors_about", how the floors line names
the two floors. An agreement whose "checked" is false (too large for the oracle) never passes.

A track's program, libraries and problem lists follow from its name (DEFAULTS: p38_ladder,
p38_track, p38_host, grader/p38_public.problems, ...) unless its section of rungs.json names
others; track_config.track_settings fills them in.

All the rungs of a track link into one program: a rung that does not compile is replaced, in the
grading tree only, by its handout stub, so that the others still link and are graded.
"""
import os
import re
import statistics
import subprocess
import tempfile

from tooling.checks import check_program  # compute-sanitizer's location and exit code

from . import handout, integrity, markers, problems, reports, runs
from . import technique as technique_rules  # track.technique was this module's own check
from .track_config import DEFAULT_REPORT, DEFAULTS, report_settings, settings, track_settings  # noqa: F401

NO_DEVICE = "not run: no CUDA device"


def object_target(t, path):
    """The Ninja target (and path under the build) of a rung file's object in the track library."""
    return f"CMakeFiles/{t['library']}.dir/{path}.o"


def build(root, tree, build_dir, rungs, declared, config, make):
    """Builds the track rungs' objects, then the track's program(s); returns {rung: (built, log
    tail, compiled)} as grade.build does. make(targets) -> (ok, log)."""
    paths, compiled, out, given = handout.track_rungs(root), {}, {}, set()
    for r in rungs:
        t, _ = settings(config, r)
        if t["program"] not in given:  # the given libraries first, once a track: their errors are not the rung's
            given.add(t["program"])
            make([t["host_library"], "ladder_runner"])
        compiled[r] = make([object_target(t, paths[r])])
    failing = {r for r in rungs if not compiled[r][0]}
    for r in sorted(failing):  # in the grading tree only: the handout's stub in place of what does not compile
        kept = {f for o in rungs if o not in failing for f in declared[o]}
        for path in declared[r]:
            if path not in kept:
                with open(os.path.join(tree, path), "w", encoding="utf-8") as f:
                    f.write(markers.render(handout.parse_file(root, path), failing))
    linked = {}
    for track in sorted({r.split("-")[0] for r in rungs}):
        linked[track] = make([track_settings(config, track)["program"]])
    for r in rungs:
        ok, log = compiled[r]
        link_ok, link_log = linked[r.split("-")[0]]
        out[r] = (ok and link_ok, log if not ok else link_log, ok)
    return out


def program(build_dir, t):
    return os.path.join(build_dir, t["program"])


def run_program(prog, args, timeout, trusted=False):
    """Runs the track's program with `args` plus -q --json; returns (process, report or None).
    The student's program runs in the grading's jail (runs.Jail); `trusted`, the reference
    build's (the instructor's code) runs as the grader. Raises subprocess.TimeoutExpired."""
    if trusted or runs.JAIL is None:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "report.json")
            p = subprocess.run([prog, *args, "-q", "--json", path], capture_output=True, text=True, timeout=timeout,
                               env=runs.student_env())
            return p, runs.read_report(path)
    p, io = runs.JAIL.run(lambda io: [prog, *args, "-q", "--json", os.path.join(io, "report.json")], timeout)
    return p, runs.read_report(os.path.join(io, "report.json"))


def rung_entry(data, number, direction=None):
    """The report's entry of rung `number` (of that direction, where one is given), or None."""
    return next((r for r in (data or {}).get("rungs", []) if r.get("id") == number
                 and (direction is None or r.get("direction") == direction)), None)


def agreement_verdict(agreement):
    """(passed, why not) of a rung entry's agreement with the oracle: p38_ladder's flat one
    (pass, worst_ratio, nan_count), or p74_ladder's with one sub-object per tensor, each with its
    own pass, worst_ratio and nan_count. An unchecked agreement ("checked": false) fails."""
    if agreement is None:
        return False, "the report has no check against the oracle for it"
    if agreement.get("checked") is False:
        return False, f"not checked against the oracle ({agreement.get('on') or 'unchecked'})"
    if agreement.get("pass"):
        return True, ""
    parts = {k: v for k, v in agreement.items() if isinstance(v, dict) and "nan_count" in v}
    nans = agreement.get("nan_count", 0) + sum(v["nan_count"] for v in parts.values())
    if nans:
        where = [f"{k} {v['nan_count']}" for k, v in parts.items() if v["nan_count"]]
        return False, f"{nans} output(s) NaN (never written?)" + (f": {', '.join(where)}" if where else "")
    def ratio(v):  # JSON null where the ratio is infinite (an error against a zero tolerance) or NaN
        r = v.get("worst_ratio")
        return "unbounded" if r is None else f"{r:.3g}x"

    bad = [f"{k} {ratio(v)}" for k, v in parts.items() if not v.get("pass", True)]
    return False, (f"disagrees with the fp64 oracle: worst error {ratio(agreement)} the tolerance" +
                   (f" ({', '.join(bad)})" if bad else ""))


def carriers(root, rung):
    """The numbers of the other rungs of rung's track whose files hold regions of `rung` (p38-05's
    rescale in rung 07's file): its grading runs them too, so every region it hands out is run."""
    track_id, number = rung.split("-")
    files = handout.plan(root, [rung])[2].get(rung, [])
    return [r.split("-")[1] for r, path in sorted(handout.track_rungs(root).items())
            if r.startswith(track_id + "-") and r != rung and path in files]


def run_case(prog, number, case, seed, timeout, rep=None, show_output=False, also=()):
    """One correctness case; returns (status, detail), status pass, fail, error,
    timeout or skipped (no GPU), as runs.run_case does for a stage. rep: report_settings
    (default p38_ladder's). also: carrier rungs (carriers) run in the same program, each of
    which must run and pass as well."""
    rep = rep or DEFAULT_REPORT
    numbers = [number, *also]
    args = [*case.args, "--seed", str(seed), "--rungs", ",".join(numbers), "--reps", "1", "--warmup", "1",
            "--no-flush-l2", "--refill-check"]  # the grader's rule: one more run on refilled buffers, checked too
    try:
        p, data = run_program(prog, args, timeout)
    except subprocess.TimeoutExpired:
        return "timeout", f"took longer than {timeout:.0f} s"
    try:
        for n in numbers:
            which = f"rung {n}" + (f" (it holds code of rung {number}'s assignment)" if n != number else "")
            entry = rung_entry(data, n, rep["direction"])
            if entry is None:
                return "error", f"the program stopped without a report of {which} (exit {p.returncode})" + \
                    (runs.excerpt(p.stderr) if show_output else "")
            note = str(entry.get("note", ""))
            if not entry.get("ran"):
                if note.startswith(NO_DEVICE):  # the program's reason only in the runtime's short form, else none
                    m = re.fullmatch(re.escape(NO_DEVICE) + r"( \([A-Za-z0-9 ,.:'_-]{1,100}\))?", note)
                    return "skipped", m.group(0) if m else NO_DEVICE
                # the program's note, bounded and on a public case only (show_output), like runs.excerpt
                return "error", (f"{which} did not run: " + re.sub(r"[^\x20-\x7e]", "?", note[:runs.EXCERPT_CHARS])
                                 if show_output else f"{which} did not run (an error)")
            passed, detail = agreement_verdict(entry.get(rep["check"]))
            if not passed:
                return "fail", (detail if n == number else f"{which}: {detail}")
    except (KeyError, TypeError, ValueError, AttributeError):
        return "error", "the program's report is malformed"
    return "pass", ""


def gpu_available(prog, number, probe):
    """(True, "") if the program runs the rung on a GPU here, else (False, why)."""
    status, detail = run_case(prog, number, problems.Case("probe", 0, list(probe), ""), 1, 120)
    return (False, detail) if status == "skipped" else (True, "")


def sanitizer(exe, prog, number, tool, problem_args, timeout):
    """(status, output) of compute-sanitizer `tool` (exe: its path, check_program.find_sanitizer;
    None: not found) over the problems; status pass, fail, wrong (no sanitizer error, but no
    result) or skipped. Decided on the sanitizer's exit code and its log
    file (runs.sanitizer_verdict), never on the program's output: every line of the output is the
    grader's own. Wrong results are the correctness parts'."""
    if exe is None:
        return "skipped", "compute-sanitizer not found (PATH, $CUDA_HOME, /usr/local/cuda)"
    summary = []
    for k, args in enumerate(problem_args):
        cmd = [exe, "--tool", tool, "--error-exitcode", str(check_program.SANITIZER_EXIT), "--print-limit", "20"]
        cmd += ["--leak-check", "full"] if tool == "memcheck" else []
        argv = lambda io: [*cmd, "--log-file", os.path.join(io, runs.SANITIZER_LOG).replace("%", "%%"),  # noqa: E731
                           prog, *args, "--rungs", number, "--reps", "1", "--warmup", "0",
                           "--no-flush-l2", "-q", "--json", os.path.join(io, "report.json")]
        try:  # in the jail; a timeout stops the program as well as the sanitizer
            p, io = runs.current_jail().run(argv, timeout)
        except subprocess.TimeoutExpired:
            return "fail", f"{' '.join(args)}: took longer than {timeout:.0f} s under {tool}"
        kind, why = runs.sanitizer_verdict(tool, p.returncode,
                                           runs.read_sanitizer_log(os.path.join(io, runs.SANITIZER_LOG)))
        if kind == "unusable":
            return "skipped", why
        if kind != "ran":
            return "fail", f"problem: {' '.join(args)}: {why}"
        entry = rung_entry(runs.read_report(os.path.join(io, "report.json")), number)
        if not entry or not entry.get("ran"):
            return "wrong", f"problem: {' '.join(args)}: no sanitizer error, but no result (a correctness failure)"
        summary.append(f"problem {k + 1}: clean")
    return "pass", "\n".join(summary)


def reference_program(args, root, work, t, ctx):
    """The reference build's program (this tree, built once per work folder), or None with the
    reason in ctx["reference_why"]."""
    key = "reference_program_" + t["program"]
    if key in ctx:
        return ctx[key]
    build_dir = os.path.join(work, "reference-build")
    cmake = ["cmake", "-S", root, "-B", build_dir, "-G", "Ninja", "-DLADDER_BUILD_TESTS=OFF"]
    if args.cuda_architectures:
        cmake.append("-DCMAKE_CUDA_ARCHITECTURES=" + args.cuda_architectures)
    p = subprocess.run(cmake, capture_output=True, text=True)
    if p.returncode == 0:
        p = subprocess.run(["cmake", "--build", build_dir, "-j", str(args.jobs), "--target", t["program"]],
                           capture_output=True, text=True)
    ctx[key] = program(build_dir, t) if p.returncode == 0 else None
    if ctx[key] is None:
        ctx["reference_why"] = "the reference build failed: " + (p.stdout + p.stderr).strip()[-500:]
    return ctx[key]


def timing(args, ctx, prog, t, number, perf_cfg, timing_cfg):
    """(status, data): alternates the student's program `prog` and the reference's for perf_cfg's
    rounds (one when there is no reference); data: student and reference median ms, floors (the
    section report_settings names)."""
    rep = report_settings(t, number)
    progs = [("student", prog)]
    if ctx["reference"]:
        ref = reference_program(args, ctx["reference"], ctx["work"], t, ctx)
        if ref is None:
            return "error", {"error": ctx["reference_why"]}
        progs.append(("reference", ref))
    run_args = [*timing_cfg.get("args", []), "--rungs", number, "--reps", str(perf_cfg["reps"]),
                "--warmup", str(perf_cfg["warmup"])]
    with runs.gpu_turn():  # the GPU to itself: no other grading's runs beside the timing
        return _timed_rounds(args, progs, run_args, number, rep, perf_cfg)


def _timed_rounds(args, progs, run_args, number, rep, perf_cfg):
    """timing's rounds, alternating the programs `progs` [(name, path)]."""
    ms, floors = {name: [] for name, _ in progs}, []
    for _ in range(int(perf_cfg.get("rounds", 3)) if len(progs) > 1 else 1):
        for name, prog in progs:
            try:
                p, data = run_program(prog, run_args, args.timeout, trusted=name == "reference")
            except subprocess.TimeoutExpired:
                return "error", {"error": f"the {name}'s timing took longer than {args.timeout:.0f} s"}
            entry = rung_entry(data, number, rep["direction"])
            if entry is None or not entry.get("ran"):  # the grader's words, never the program's note or output
                if entry is not None and str(entry.get("note", "")).startswith(NO_DEVICE):
                    return "skipped", {"error": f"{name}: {NO_DEVICE}"}
                return "error", {"error": f"the {name}'s program " + (
                    "did not run the rung at the timing size" if entry is not None else
                    f"stopped without a report of the rung (exit status {p.returncode})")}
            passed, why = agreement_verdict(entry.get(rep["check"]))
            if not passed:
                return "mismatch", {"error": f"the {name}'s output at the timing size: {why}"}
            try:
                ms[name].append(float(entry["ms"]))
                if name == "student":
                    section = data["floors"][rep["floors"]] if rep["floors"] else data["floors"]
                    floors.append({k: float(section[k]) for k in ("memory_floor_ms", "compute_floor_ms")})
            except (KeyError, TypeError, ValueError):
                return "error", {"error": f"the {name}'s report at the timing size is malformed"}
    # the problem as the grader's own options say it (the report's "describe" is the program's text)
    problem = " ".join(run_args[:run_args.index("--rungs")]) or "the program's default problem"
    data = {"problem": problem, "reps": perf_cfg["reps"], "rounds": len(ms["student"]),
            "student_ms": statistics.median(ms["student"]),
            "memory_floor_ms": statistics.median(f["memory_floor_ms"] for f in floors),
            "compute_floor_ms": statistics.median(f["compute_floor_ms"] for f in floors)}
    if "reference" in ms:
        data["reference_ms"] = statistics.median(ms["reference"])
    return "ok", data


def performance(args, ctx, prog, r, P, pts):
    """The performance part of track rung r, its program `prog` (P builds a reports.Part)."""
    t, number = settings(ctx["config"], r)
    perf_cfg = {**ctx["config"]["performance"], **t.get("performance", {}),
                **t["rungs"].get(number, {}).get("performance", {})}
    timing_cfg = t["rungs"].get(number, {}).get("timing")
    if timing_cfg is None:
        return P("performance", score=0, skipped=True, output=f"rung {r} has no timing entry (\"grader\" in its folder's rung.json)")
    runs.log(f"rung {r}: timing")
    status, data = timing(args, ctx, prog, t, number, perf_cfg, timing_cfg)
    part = P("performance", score=0, output="")
    if status != "ok":
        part.output = f"timing {status}: {data.get('error', '')}"
        part.skipped = status == "skipped"
        return part
    s, mem, comp = data["student_ms"], data["memory_floor_ms"], data["compute_floor_ms"]
    floor = max(mem, comp)
    about = report_settings(t, number)["floors_about"]
    lines = [f"problem: {data['problem']}",
             f"your rung: {s:.4g} ms (median of {data['reps']}, {data['rounds']} round(s)); "
             f"{s / floor:.3g}x the floor" if floor > 0 else f"your rung: {s:.4g} ms",
             f"floors: memory {mem:.4g} ms ({about['memory']}), compute {comp:.4g} ms ({about['compute']})"]
    mode = perf_cfg.get("score_against", "reference")
    if s < perf_cfg["floor_slack"] * mem:
        lines.append(f"VOID: faster than {perf_cfg['floor_slack']}x the memory floor allows: the rung cannot have "
                     "written its output")
    elif mode == "floor" and floor > 0:
        part.ratio = s / floor
        part.score = round(pts["performance"] * runs.score_perf(part.ratio, perf_cfg), 2)
        lines.append(f"full credit at <= {perf_cfg['full_at']}x the floor, none at >= {perf_cfg['zero_at']}x")
    elif "reference_ms" in data:
        part.ratio = s / data["reference_ms"]
        part.score = round(pts["performance"] * runs.score_perf(part.ratio, perf_cfg), 2)
        lines.append(f"reference solution: {data['reference_ms']:.4g} ms; ratio {part.ratio:.3g} "
                     f"(full credit at <= {perf_cfg['full_at']}x, none at >= {perf_cfg['zero_at']}x)")
    else:
        part.skipped = True
        lines.append("not scored here: the reference solution is timed at official grading")
    part.output = "\n".join(lines)
    return part


def grade_rung(args, r, ctx):
    """Every part of track rung r: a list of reports.Part (grade.grade_rung's counterpart)."""
    cfg, pts = ctx["config"], ctx["config"]["points"]
    t, number = settings(cfg, r)
    rep = report_settings(t, number)
    name = f"{r} {handout.rung_name(ctx['root'], r)}"
    P = lambda part, **kw: reports.Part(rung=name, part=part, max_score=pts[part], **kw)  # noqa: E731
    built, build_log, compiled = ctx["built"][r]
    if r in ctx["missing"]:
        msg = "missing from the submission: " + ", ".join(ctx["missing"][r])
        return [P(p, score=0, output=msg) for p in pts]
    if not compiled:
        return [P(p, score=0, output="does not compile:\n" + build_log) for p in pts]
    rung_file = handout.track_rungs(ctx["root"])[r]
    # Rule 2e against the instructor's build where there is one (official grading): a declared
    # shared header would otherwise be compared with objects compiled from the submission's copy.
    trusted = (os.path.join(ctx["work"], "reference-build")
               if ctx["reference"] and reference_program(args, ctx["reference"], ctx["work"], t, ctx) else None)
    report = integrity.check_track(ctx["build"], r, rung_file, t["library"], t["host_library"], t.get("needs", []),
                                   reference_build=trusted)
    if not built:
        msg = "does not link:\n" + build_log + ("\n" + "\n".join(report.lines()) if report.failed else "")
        return [P(p, score=0, output=msg) for p in pts]
    ok, lines = technique_rules.check_track(os.path.join(ctx["build"], object_target(t, rung_file)), r)
    bad = report.failed
    lines += report.lines()
    if bad:
        lines.append("integrity failed: no correctness or sanitizer points, no timing")
    parts = [P("technique", score=pts["technique"] if ok and not bad else 0, output="\n".join(lines))]
    prog = program(ctx["run_build"], t)
    gpu, why = ctx["track_gpu"][t["program"]]
    if not gpu:
        for p in ("public", "hidden", "sanitizer", "performance"):
            parts.append(P(p, score=0, skipped=True, output=why if why.startswith("skipped") else f"skipped: {why}"))
        return parts

    exe = check_program.find_sanitizer(None)
    also = carriers(ctx["root"], r)  # rungs holding code of r's regions: run and checked with it
    mark = len(runs.current_jail().loaded)
    correctness, clean = runs.correctness_parts(
        args, r, P, cfg, ctx["track_public"][t["program"]], ctx["track_hidden"][t["program"]], ctx["hidden_source"],
        ctx["secret"], lambda case, seed, public: run_case(prog, number, case, seed, args.timeout, rep, public, also),
        t.get("sanitizer_tools", cfg["sanitizer_tools"]),
        lambda tool: sanitizer(exe, prog, number, tool, t["sanitizer_problems"], args.timeout), bad,
        ctx["todos"].get(r, ()))
    parts += correctness
    clean = clean and not runs.current_jail().findings_since(mark)
    parts.append(runs.performance_gate(args, P, clean, lambda: performance(args, ctx, prog, r, P, pts)))
    return runs.loaded_library_verdict(parts, runs.current_jail().findings_since(mark))
