"""Running the built programs for the grader: correctness cases, compute-sanitizer, the SASS and
integrity checks (the rules of the latter in integrity.py), and the interleaved timing. Each
returns plain data; grade.py scores it. correctness_parts and performance_gate are the scoring
the stages (grade.py) and the tracks (track.py) share."""
import json
import os
import re
import subprocess
import sys
import tempfile

import integrity as integrity_check
import problems

# A compute-sanitizer summary with at least one error or hazard.
SANITIZER_ERROR = re.compile(r"ERROR SUMMARY: [1-9]\d* error|\(([1-9]\d*) errors?,|[1-9]\d* hazards? displayed \([1-9]")
TODO_LINE = re.compile(r"^TODO\(stage [^)]*\):.*$", re.M)


def log(msg):
    print(f"[grade] {msg}", file=sys.stderr, flush=True)


def student_env():
    """The environment of a student's program: the grader's, without the secret."""
    return {k: v for k, v in os.environ.items() if k != "LADDER_GRADER_SECRET"}


def stage_program(build, folder):
    return os.path.join(build, f"stage_{folder}")


def run_case(program, stage_id, case, seed, timeout):
    """Runs one correctness case (two runs on one workspace, the second checked). Returns
    (status, detail, todo_lines); status: pass, fail, error, timeout, skipped (no GPU)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [program, *case.args, "--seed", str(seed), "--stages", stage_id, "--reps", "1",
               "--warmup", "1", "--no-cub", "--no-flush-l2", "-q", "--json", report]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=student_env())
        except subprocess.TimeoutExpired:
            return "timeout", f"took longer than {timeout:.0f} s", []
        todos = sorted(set(TODO_LINE.findall(p.stdout)))
        if not os.path.exists(report):
            tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
            return "error", f"the program stopped without a report (exit {p.returncode}): " + " | ".join(tail), todos
        with open(report, encoding="utf-8") as f:
            data = json.load(f)
    stage = next((s for s in data["stages"] if s["id"] == stage_id), None)
    if stage is None:
        return "error", f"stage {stage_id} is not in the program's report", todos
    if not stage["ran"]:
        if stage.get("note", "").startswith("skipped: no CUDA device"):
            return "skipped", stage["note"], todos
        return "error", stage.get("note") or "did not run", todos
    agreement = stage["vs_oracle"]
    if agreement["pass"]:
        return "pass", "", todos
    detail = (f"{agreement['nan_count']} output(s) NaN (never written?)" if agreement["nan_count"]
              else f"disagrees with the fp64 oracle: worst error {agreement['worst_ratio_to_tolerance']:.3g}x the tolerance")
    return "fail", detail, todos


def gpu_available(program, stage_id, timeout=120):
    """(True, "") if the program runs its GPU stage here, else (False, why)."""
    case = problems.Case("probe", 0, ["--batch", "1", "--in-channels", "1", "--out-channels", "2", "--size", "4"], "")
    status, detail, _ = run_case(program, stage_id, case, 1, timeout)
    if status == "skipped":
        return False, detail
    return True, ""


def sanitizer(root, program, tool, timeout):
    """(status, output) of scripts/check_program.py --expect accept under compute-sanitizer `tool`
    on tests/mutants/sanitizer.problems; status pass, fail or skipped."""
    cmd = ["python3", os.path.join(root, "scripts", "check_program.py"), "--program", program,
           "--problems", os.path.join(root, "tests", "mutants", "sanitizer.problems"), "--expect", "accept",
           "--tool", tool, "--timeout", str(timeout), "--label", tool]
    p = subprocess.run(cmd, capture_output=True, text=True, env=student_env())
    out = (p.stdout + p.stderr).strip()
    status = {0: "pass", 77: "skipped"}.get(p.returncode, "fail")
    # check_program.py also fails a run whose results are wrong; that is the correctness parts'
    # business. Here only what the sanitizer itself reported counts.
    if status == "fail" and not SANITIZER_ERROR.search(out):
        status = "pass"
    summary = [l for l in out.splitlines() if l.startswith("=========")]
    return status, "\n".join(summary[-12:])


def technique(root, build, stage_id):
    """(passed, lines) of scripts/check_sass.sh for one stage: its idea in its machine code."""
    env = dict(os.environ, LADDER_SASS_STAGES=stage_id)
    p = subprocess.run(["bash", os.path.join(root, "scripts", "check_sass.sh"), build], capture_output=True,
                       text=True, env=env)
    lines = [l for l in (p.stdout + p.stderr).splitlines() if l.startswith(("PASS", "FAIL"))]
    return p.returncode == 0, lines


def integrity(build, stage_id):
    """The integrity check of stage NN's compiled objects in BUILD (grader/integrity.py: forbidden
    names, the allow-list of defined symbols, static constructors): an integrity.Report."""
    return integrity_check.check(build, stage_id)


def timing(build, stage_id, mode, problem_args, reps, warmup, timeout):
    """Runs grade_timing_NN; returns (status, data): status ok, mismatch, error, skipped."""
    program = os.path.join(build, f"grade_timing_{stage_id}")
    if not os.path.exists(program):
        return "error", {"error": f"{program} was not built"}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "timing.json")
        cmd = [program, *problem_args, "--mode", mode, "--reps", str(reps), "--warmup", str(warmup), "-q", "--json", out]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=student_env())
        except subprocess.TimeoutExpired:
            return "error", {"error": f"timing took longer than {timeout:.0f} s"}
        if p.returncode == 77:
            return "skipped", {"error": (p.stderr or p.stdout).strip()}
        data = {}
        if os.path.exists(out):
            with open(out, encoding="utf-8") as f:
                data = json.load(f)
        if p.returncode == 0:
            return "ok", data
        data.setdefault("error", (p.stderr or p.stdout).strip()[-500:])
        return ("mismatch" if data.get("mismatches") else "error"), data


def run_cases(cases, public_seed, secret, reveal, run_one, fail_fast, todos):
    """Runs correctness cases with run_one(case, seed) -> (status, detail, todo_lines); returns
    ({category: [passed, ...]}, failure lines). With fail_fast, cases after the first failure count
    as failed without running. Adds every TODO line seen to the set `todos`."""
    by_cat, lines = {}, []
    for case in cases:
        if fail_fast and lines:
            by_cat.setdefault(case.category, []).append(False)
            continue
        seed = problems.seed_for(public_seed, secret, case)
        status, detail, todo = run_one(case, seed)
        todos.update(todo)
        by_cat.setdefault(case.category, []).append(status == "pass")
        if status != "pass":
            what = f"{case.category} #{case.index + 1}"
            if reveal:
                what += f" ({case.describe()} --seed {seed})"
            lines.append(f"FAIL {what}: {detail}")
    return by_cat, lines


def score_perf(ratio, conf):
    """The performance fraction of a time ratio: 1 at or below conf["full_at"], 0 at or above
    conf["zero_at"], linear between."""
    full, zero = conf["full_at"], conf["zero_at"]
    if ratio <= full:
        return 1.0
    if ratio >= zero:
        return 0.0
    return (zero - ratio) / (zero - full)


NOT_TIMED = "not timed: performance counts once every public and hidden test passes, sanitizers clean"


def correctness_parts(args, r, P, cfg, public, hidden, hidden_source, secret, run_one, tools, sanitize, bad):
    """The public, hidden and sanitizer parts of rung r (P builds a reports.Part) and whether the
    rung may be timed (every case passed, sanitizers clean, integrity held). run_one(case, seed)
    -> (status, detail, todo_lines) runs one correctness case; sanitize(tool) -> (status, output)
    runs one compute-sanitizer tool (status pass, fail or skipped; output as the report shows
    it); bad: the integrity check failed (no correctness points)."""
    pts, todos = cfg["points"], set()

    def cases(listed, secret, reveal):
        return run_cases(listed, cfg["public_seed"], secret, reveal, run_one, args.fail_fast, todos)

    log(f"rung {r}: public tests")
    pub_cat, pub_lines = cases(public, "", True)
    pub_pass = sum(sum(v) for v in pub_cat.values())
    pub_total = sum(len(v) for v in pub_cat.values())
    log(f"rung {r}: hidden tests ({hidden_source})")
    if args.fail_fast and pub_lines:
        hid_cat = {c.category: [False] for c in hidden}
        hid_lines = ["not run (--fail-fast: a public test failed)"]
    else:
        hid_cat, hid_lines = cases(hidden, secret, args.reveal)
    cats_passed = sorted(c for c, v in hid_cat.items() if all(v))
    cats_failed = sorted(c for c, v in hid_cat.items() if not all(v))
    public_frac = pub_pass / pub_total if pub_total else 0.0
    hidden_frac = len(cats_passed) / len(hid_cat) if hid_cat else 0.0

    # Sanitizers: any error caps correctness.
    log(f"rung {r}: compute-sanitizer")
    san_lines, san_fail, san_skip = [], [], []
    for tool in tools:
        if args.fail_fast and (pub_lines or hid_lines or san_fail):
            san_skip.append(tool)
            san_lines.append(f"{tool}: not run (--fail-fast: the rung has failed already)")
            continue
        status, out = sanitize(tool)
        if status == "fail":
            san_fail.append(tool)
            san_lines.append(f"{tool}: FAIL\n{out}")
        elif status == "skipped":
            san_skip.append(tool)
            san_lines.append(f"{tool}: skipped: {out}")
        else:
            san_lines.append(f"{tool}: clean")
    # A sanitizer error caps correctness; an integrity failure leaves none (technique alone costs
    # only its own points).
    cap = 0.0 if bad else (cfg["sanitizer_cap"] if san_fail else 1.0)
    todo_text = ("\n".join(sorted(todos)) + "\n") if todos else ""
    capped = f"\n(capped at {cap:.0%} by the sanitizer)" if cap < 1 and san_fail else ""
    capped += "\n(no correctness points: integrity check failed)" if bad else ""
    parts = [P("public", score=round(pts["public"] * min(public_frac, cap), 2),
               output=todo_text + f"{pub_pass} of {pub_total} public cases pass" + capped +
               ("\n" + "\n".join(pub_lines) if pub_lines else ""))]
    hidden_out = (todo_text + f"{len(cats_passed)} of {len(hid_cat)} categories pass" +
                  (": failing " + ", ".join(cats_failed) if cats_failed else "") + capped)
    if args.reveal and hid_lines:
        hidden_out += "\n" + "\n".join(hid_lines)
    parts.append(P("hidden", score=round(pts["hidden"] * min(hidden_frac, cap), 2), output=hidden_out, hidden=True))
    parts.append(P("sanitizer", score=pts["sanitizer"] if not san_fail and len(san_skip) < len(tools) else 0,
                   output="\n".join(san_lines), skipped=len(san_skip) == len(tools)))
    return parts, not (public_frac < 1 or hidden_frac < 1 or san_fail or bad)


def performance_gate(args, P, clean, perform, untimed=""):
    """The performance part: not timed with --skip-performance, skipped with the reason `untimed`
    (a rung without a timing entry), zero unless `clean` (correctness_parts), else perform()."""
    if args.skip_performance:
        return P("performance", score=0, skipped=True, output="not timed (--skip-performance)")
    if untimed:
        return P("performance", score=0, skipped=True, output=untimed)
    if not clean:
        return P("performance", score=0, output=NOT_TIMED)
    return perform()
