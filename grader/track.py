"""How the grader runs a track's program (p38_ladder, p74_ladder) and reads its JSON report: a
track rung's correctness case, its GPU probe, its compute-sanitizer runs and its timing rounds.
programs.Track is its one caller; the grading path around it is grade.py's, the same as a
stage's.

  cases      the program with `--rungs NN` on each problem of the track's lists, twice on one
             workspace (--warmup 1 --reps 1) with NaN-filled outputs and once more on refilled
             buffers, checked elementwise against the fp64 oracle;
  sanitizer  compute-sanitizer (memcheck with leak checking, racecheck, synccheck) on the
             program with --reps 1 --warmup 0 on small awkward problems;
  timing     `--rungs NN --json` at the rung's timing size, in rounds that alternate the
             student's program with the reference build's: medians and the floors the program
             measures (read x + write the output; the convolution at the FP32 peak).

How a track's program reports is the track's "report" setting (problems.report_settings):
"check", the key of a rung entry's agreement with the oracle (p38_ladder: "vs_oracle";
p74_ladder: "check", with one sub-object per gradient); "floors", the section of the report's
"floors" to time against (none: p38_ladder's flat floors; p74_ladder: "forward" or
"backward"); "direction", the entry to take when a rung reports two passes (p74_ladder's rung
00: "forward" and "backward"); "floors_about", how the floors line names the two floors. An
agreement whose "checked" is false (too large for the oracle) never passes.
"""
import os
import re
import statistics
import subprocess
import tempfile

from tooling.checks import check_program  # compute-sanitizer's location and exit code

from . import problems, runs

NO_DEVICE = "not run: no CUDA device"


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


def run_case(prog, number, case, seed, timeout, rep=None, show_output=False, also=()):
    """One correctness case; returns (status, detail), status pass, fail, error,
    timeout or skipped (no GPU), as runs.run_case does for a stage. rep: report_settings
    (default p38_ladder's). also: carrier rungs (carriers) run in the same program, each of
    which must run and pass as well."""
    rep = rep or problems.DEFAULT_REPORT
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


def timing(args, progs, rep, number, perf_cfg, timing_cfg):
    """(status, data): alternates the programs `progs` [(name, path)], the student's and, where
    there is one, the reference's, for perf_cfg's rounds (one when there is no reference); rep:
    report_settings; data: student and reference median ms, floors (the section rep names)."""
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
