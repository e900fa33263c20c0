"""Running the built programs for the grader: correctness cases, compute-sanitizer, the SASS and
integrity checks (the rules of the latter in integrity.py), and the interleaved timing. Each
returns plain data; grade.py scores it. correctness_parts and performance_gate are the scoring
the stages (grade.py) and the tracks (track.py) share."""
import contextlib
import fcntl
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import time

from tooling.checks import check_program  # the problem lists, compute-sanitizer's location and exit code

from . import integrity as integrity_check
from . import loaded_libraries, problems, sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the grader's own tree: its tools
MAX_REPORT_BYTES = 64 << 20
EXCERPT_LINES, EXCERPT_CHARS = 3, 200

# A compute-sanitizer summary with at least one error or hazard.
SANITIZER_ERROR = re.compile(r"ERROR SUMMARY: [1-9]\d* error|\(([1-9]\d*) errors?,|[1-9]\d* hazards? displayed \([1-9]")


def log(msg):
    print(f"[grade] {msg}", file=sys.stderr, flush=True)


class Jail:
    """Where one grading's student code is built and run: a grading folder (mode 0711: passable,
    not listable) with tree/ (the handout and the submission's declared files), build/, io/ (one
    fresh folder per run, for its report), tmp/ (the 'user' isolation's private temporary
    folder) and reference/ (the grader's alone: mode 0700, never shown to the student's code).
    `isolation` (sandbox.py): bwrap, where tree/, build/ and io/ appear as /grade/<name>, build/
    writable only while building and io/ only to its run; user, where the same folders keep their
    paths and belong to the grading's uid; none (practice grading), where the programs run as the
    grader."""

    def __init__(self, grading, isolation, uid=None):
        if isolation not in sandbox.ISOLATIONS:
            raise ValueError(f"unknown isolation '{isolation}'")
        self.grading, self.isolation = grading, isolation
        self.sandboxed = isolation != "none"
        self.uid = os.geteuid() if uid is None else uid
        self.dirs = {k: os.path.join(grading, k) for k in ("tree", "build", "reference", "io", "tmp")}
        for d in self.dirs.values():
            os.makedirs(d, exist_ok=True)
        os.chmod(self.dirs["reference"], 0o700)
        if isolation == "user":  # the grading's private temporary folder, its uid's alone
            os.chmod(self.dirs["tmp"], 0o700)
            os.chown(self.dirs["tmp"], self.uid, self.uid)
        self.audit = None  # the load audit's .so (enable_audit), outside: every plain run is audited
        self.loaded = []  # integrity rule 5's failing lines, in run order (findings_since)

    def inside(self, key, *rest):
        return os.path.join(f"/grade/{key}" if self.isolation == "bwrap" else self.dirs[key], *rest)

    def enable_audit(self):
        """Builds the load audit (loaded_libraries.py) into the grading's audit/ folder, which the
        student's code may read but not write. RuntimeError (no C compiler) is the caller's to report."""
        self.dirs["audit"] = os.path.join(self.grading, "audit")
        self.audit = loaded_libraries.build_audit(self.dirs["audit"])
        readable(self.dirs["audit"])

    def findings_since(self, mark):
        """The rule 5 lines found by the runs after len(self.loaded) was `mark`."""
        return self.loaded[mark:]

    def _box(self, rw, gpu=True):
        """The isolation over the grading folder: `rw` ({outside: inside}) writable, tree/ (and
        the audit) read-only; build/ read-only unless in `rw`."""
        if self.isolation == "user":
            box = sandbox.UserBox(self.uid, self.dirs["tmp"], rw=rw, gpu=gpu)
        else:
            keys = ("tree", "build") + (("audit",) if self.audit else ())
            ro = {self.dirs[k]: self.inside(k) for k in keys if self.dirs[k] not in rw}
            box = sandbox.Sandbox(ro=ro, rw=rw, gpu=gpu, uid=self.uid)
        box.writable_prepare()
        return box

    def build(self, argv):
        """Runs a build command (cmake) with build/ writable; a CompletedProcess."""
        readable(self.dirs["tree"])
        if not self.sandboxed:
            return sandbox.run_group(argv, env=student_env(), cwd=self.dirs["build"])
        box = self._box({self.dirs["build"]: self.inside("build")}, gpu=False)
        p = box.run(argv, cwd=self.inside("build"))
        if self.isolation == "user":  # no namespace makes it read-only for the runs: the grader takes it back
            for dirpath, dirnames, filenames in os.walk(self.dirs["build"]):
                for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                    os.lchown(name, os.geteuid(), os.getegid())
            readable(self.dirs["build"])
        return p

    def run(self, argv_of, timeout):
        """Runs argv_of(io) (io: the run's own fresh folder, as the program sees it); returns
        (CompletedProcess, the folder as the grader sees it). Raises subprocess.TimeoutExpired.
        With the audit enabled, a plain run (not compute-sanitizer's, which loads its own
        libraries) is audited: every library it maps outside the allow-list becomes a rule 5 line
        in self.loaded."""
        io = tempfile.mkdtemp(dir=self.dirs["io"])
        os.chmod(io, 0o755)
        argv = argv_of(self.inside("io") if self.isolation == "bwrap" else io)
        audited = self.audit and not os.path.basename(argv[0]).startswith("compute-sanitizer")
        env, fds, collect = loaded_libraries.audited(argv, self.inside("audit", os.path.basename(self.audit))) \
            if audited else ({}, (), None)
        try:
            with gpu_turn():
                if not self.sandboxed:
                    return sandbox.run_group(argv, timeout, env={**student_env(), **env}, pass_fds=fds, cwd=io), io
                box = self._box({io: self.inside("io") if self.isolation == "bwrap" else io})
                return box.run(argv, cwd=self.inside("io") if self.isolation == "bwrap" else io, timeout=timeout,
                               env=env, pass_fds=fds), io
        finally:
            if collect:
                found = loaded_libraries.check(collect(), program=argv[0],
                                               untrusted=[self.inside(k) for k in ("tree", "build")] +
                                               [self.inside("io") if self.isolation == "bwrap" else io])
                self.loaded += loaded_libraries.report_lines(found, os.path.basename(argv[0]))


JAIL = None  # the grading's Jail, set by grade.grade


def current_jail():
    """The grading's Jail; outside a grading (the tooling's tests), one without isolation."""
    return JAIL or Jail(tempfile.mkdtemp(), "none")


def readable(folder):
    """Makes a folder the grader wrote readable by the sandbox's unprivileged user."""
    for dirpath, dirnames, filenames in os.walk(folder):
        os.chmod(dirpath, 0o755)
        for n in filenames:
            path = os.path.join(dirpath, n)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)


def read_report(path):
    """The JSON a student's program wrote, or None: never through a link, never over
    MAX_REPORT_BYTES, never a parse error raised (the program controls the file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_REPORT_BYTES:
            return None
        try:
            data = json.loads(f.read().decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None
    return data if isinstance(data, dict) else None


def excerpt(text):
    """A bounded, labelled excerpt of a program's error output: the only program output that
    reaches the feedback (public cases only)."""
    lines = [l[:EXCERPT_CHARS] for l in text.strip().splitlines()[-EXCERPT_LINES:]]
    return ("; your program's error output ends: " + " | ".join(lines)) if lines else ""


def student_env():
    """The environment of a student's program without isolation (practice grading on the
    student's own machine, which may need its CUDA variables): the grader's, without the secret
    (grade.grade also removes it from the grader's own environment)."""
    return {k: v for k, v in os.environ.items() if k != "LADDER_GRADER_SECRET"}


def stage_program(build, folder):
    return os.path.join(build, f"stage_{folder}")


def grader_rules(rung_cfg):
    """The options of the grader's rules for a stage rung (rungs.json): the precision it is
    checked at, a second run on refilled buffers, and for TF32 rungs inputs between TF32 values."""
    return ["--check-precision", rung_cfg.get("precision", "fp32"), "--refill-check"]


def _gpu_key():
    """This grading's GPU (CUDA_VISIBLE_DEVICES, "all" when unset), safe in a file name: the key
    of the per-GPU lock file."""
    return re.sub(r"[^A-Za-z0-9,-]", "_", os.environ.get("CUDA_VISIBLE_DEVICES", "all"))


_TURN_HELD = False  # this process holds its GPU's turn (a timing's rounds): its own runs take no second one


@contextlib.contextmanager
def gpu_turn(alone=True):
    """This grading's GPU (CUDA_VISIBLE_DEVICES) to itself: every program run, and a timing's
    whole interleaved rounds, waits for an exclusive lock shared by every grading of this user on
    the machine. So a correct submission never runs beside another grading's program: not beside
    one that fills the GPU's memory, nor one that spins, nor its timing beside anything (the
    promise of docs/assignments.md). The runs of a process that holds the turn take no turn of
    their own. Waiting does not count against a run's timeout. `alone` is accepted for the
    callers that say so; every turn is exclusive."""
    del alone
    global _TURN_HELD
    if _TURN_HELD:
        yield
        return
    try:
        gpu = open(os.path.join(sandbox.lock_dir(), f"gpu-{_gpu_key()}.lock"), "a")
    except (OSError, sandbox.SandboxError) as e:
        log(f"runs take no GPU turns: {e}")
        yield
        return
    with gpu:  # closing the file releases the lock
        fcntl.flock(gpu, fcntl.LOCK_EX)
        _TURN_HELD = True
        try:
            yield
        finally:
            _TURN_HELD = False


def run_case(program, stage_id, case, seed, timeout, rules=(), show_output=False):
    """One correctness case (_run_case), in its GPU turn (Jail.run)."""
    return _run_case(program, stage_id, case, seed, timeout, rules, show_output)


def _run_case(program, stage_id, case, seed, timeout, rules=(), show_output=False):
    """Runs one correctness case (two runs on one workspace, then a third on the same buffers
    refilled with other values; all checked, rules: grader_rules). Returns (status, detail);
    status: pass, fail, error, timeout, skipped (no GPU). show_output: a failing run's detail
    may end with an excerpt of its error output (public cases only)."""
    jail = current_jail()

    def argv(io):
        return [program, *case.args, "--seed", str(seed), "--stages", stage_id, "--reps", "1", "--warmup", "1",
                "--no-cub", "--no-flush-l2", "-q", *rules, "--json", os.path.join(io, "report.json")]
    try:
        p, io = jail.run(argv, timeout)
    except subprocess.TimeoutExpired:
        return "timeout", f"took longer than {timeout:.0f} s"
    data = read_report(os.path.join(io, "report.json"))
    tail = excerpt(p.stderr) if show_output else ""
    if data is None:
        return "error", f"the program stopped without a report (exit {p.returncode})" + tail
    try:
        stage = next((s for s in data["stages"] if s["id"] == stage_id), None)
        if stage is None:
            return "error", f"stage {stage_id} is not in the program's report"
        if not stage["ran"]:
            note = str(stage.get("note", ""))
            if note.startswith("skipped: no CUDA device"):
                return "skipped", note[:300]
            return "error", ("did not run: " + note[:EXCERPT_CHARS]) if show_output else "did not run (an error)"
        agreement = stage["vs_oracle"]
        if agreement["pass"] is True:
            return "pass", ""
        refill = "run on refilled inputs" in str(stage.get("note", ""))
        detail = (f"{int(agreement['nan_count'])} output(s) NaN (never written?)" if agreement["nan_count"]
                  else f"disagrees with the fp64 oracle: worst error {float(agreement['worst_ratio_to_tolerance']):.3g}x "
                       "the tolerance")
        return "fail", detail + (" (on the second inputs in the same buffers)" if refill else "")
    except (KeyError, TypeError, ValueError):
        return "error", "the program's report is malformed"


def gpu_available(program, stage_id, timeout=120):
    """(True, "") if the program runs its GPU stage here, else (False, why)."""
    case = problems.Case("probe", 0, ["--batch", "1", "--in-channels", "1", "--out-channels", "2", "--size", "4"], "")
    status, detail = run_case(program, stage_id, case, 1, timeout)
    if status == "skipped":
        return False, detail
    return True, ""


def sanitizer(program, stage_id, tool, timeout, rules=()):
    """(status, output) of compute-sanitizer `tool` on every problem of the grader's own
    tests/mutants/sanitizer.problems, each run and reported; status pass, fail (a sanitizer
    error: caps correctness), wrong (a run without a sanitizer error but with a wrong or missing
    result: no sanitizer points, never a pass) or skipped."""
    exe = check_program.find_sanitizer(None)
    if exe is None:
        return "skipped", "compute-sanitizer not found (PATH, $CUDA_HOME, /usr/local/cuda)"
    distributions, problem_args = check_program.read_problems(os.path.join(ROOT, "tests", "mutants",
                                                                           "sanitizer.problems"))
    jail = current_jail()
    lines, worst = [], "pass"
    for i, args in enumerate([a + ["--distribution", d] for a in problem_args for d in distributions]):
        def argv(io):
            cmd = [exe, "--tool", tool, "--error-exitcode", str(check_program.SANITIZER_EXIT), "--print-limit", "20"]
            return cmd + [program, *args, "--seed", str(i + 1), "--stages", stage_id, "--reps", "1", "--warmup", "1",
                          "--no-cub", "--no-flush-l2", "-q", *rules, "--json", os.path.join(io, "report.json")]
        try:
            p, io = jail.run(argv, timeout)
        except subprocess.TimeoutExpired:
            lines.append(f"problem {i + 1}: took longer than {timeout:.0f} s under {tool}")
            worst = "fail"
            continue
        out = (p.stdout + p.stderr)
        if check_program.SANITIZER_UNUSABLE.search(out) and p.returncode != 0:
            return "skipped", out.strip().splitlines()[-1][:200]
        if p.returncode == check_program.SANITIZER_EXIT or SANITIZER_ERROR.search(out):
            found = [l[:200] for l in out.splitlines() if l.startswith("=========")]
            lines.append(f"problem {i + 1} ({' '.join(args)}): sanitizer error\n" + "\n".join(found[:6]))
            worst = "fail"
            continue
        data = read_report(os.path.join(io, "report.json"))
        stage = next((s for s in (data or {}).get("stages", []) if isinstance(s, dict) and s.get("id") == stage_id),
                     None)
        if not stage or not stage.get("ran") or not (stage.get("vs_oracle") or {}).get("pass") is True:
            lines.append(f"problem {i + 1} ({' '.join(args)}): no sanitizer error, but the result is wrong or missing "
                         "(a correctness failure, not a sanitizer pass)")
            worst = worst if worst == "fail" else "wrong"
        else:
            lines.append(f"problem {i + 1}: clean")
    return worst, "\n".join(lines)


def technique(root, build, stage_id):
    """(passed, lines) of scripts/check_sass.sh for one stage: its idea in its machine code. The
    script is the grader's own (root: the instructor's tree), never the grading tree's copy."""
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
    """Runs grade_timing_NN (built in BUILD, the grader's view of the build folder) in the
    jail; returns (status, data): status ok, mismatch, error, skipped."""
    if not os.path.exists(os.path.join(build, f"grade_timing_{stage_id}")):
        return "error", {"error": f"grade_timing_{stage_id} was not built"}
    jail = current_jail()
    program = jail.inside("build", f"grade_timing_{stage_id}") if JAIL else os.path.join(build, f"grade_timing_{stage_id}")

    def argv(io):
        return [program, *problem_args, "--mode", mode, "--reps", str(reps), "--warmup", str(warmup), "-q",
                "--json", os.path.join(io, "timing.json")]
    try:
        with gpu_turn(alone=True):
            p, io = jail.run(argv, timeout)
    except subprocess.TimeoutExpired:
        return "error", {"error": f"timing took longer than {timeout:.0f} s"}
    if p.returncode == 77:
        return "skipped", {"error": p.stderr.strip()[-300:]}
    data = read_report(os.path.join(io, "timing.json")) or {}
    if p.returncode == 0 and data.get("student"):
        return "ok", data
    data.setdefault("error", excerpt(p.stderr) or f"exit {p.returncode}")
    return ("mismatch" if data.get("mismatches") else "error"), data


def run_cases(cases, public_seed, secret, reveal, run_one, fail_fast):
    """Runs correctness cases with run_one(case, seed) -> (status, detail); returns
    ({category: [passed, ...]}, failure lines). With fail_fast, cases after the first failure count
    as failed without running."""
    by_cat, lines = {}, []
    for case in cases:
        if fail_fast and lines:
            by_cat.setdefault(case.category, []).append(False)
            continue
        seed = problems.seed_for(public_seed, secret, case)
        status, detail = run_one(case, seed)
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


# The gate looks at the visible parts alone: a performance score that waited on the hidden tests
# would tell the student, before the due date, whether they passed.
NOT_TIMED = "not timed: performance counts once every public test passes and the sanitizers are clean"


def correctness_parts(args, r, P, cfg, public, hidden, hidden_source, secret, run_one, tools, sanitize, bad,
                      todo_lines=()):
    """The public, hidden and sanitizer parts of rung r (P builds a reports.Part) and whether the
    rung may be timed (every public case passed, sanitizers clean, integrity held; never the
    hidden cases, whose verdict the timing would reveal). run_one(case, seed)
    -> (status, detail) runs one correctness case; sanitize(tool) -> (status, output)
    runs one compute-sanitizer tool (status pass, fail, wrong or skipped; output as the report
    shows it); bad: the integrity check failed (no correctness points); todo_lines: the stubs the
    grader found still in the submission's files (stub_todos), the only TODO lines reported.
    run_one(case, seed, public) may show an excerpt of the program's error output for public
    cases only: a hidden case's options reach the program, so nothing of its output is shown."""
    pts, todos = cfg["points"], set(todo_lines)
    if bad:  # an integrity failure leaves no correctness or sanitizer points: nothing of it is run
        why = "not run: the integrity check failed (no correctness points)"
        return [P("public", score=0, output=why), P("hidden", score=0, output=why, hidden=True),
                P("sanitizer", score=0, output=why)], False

    def cases(listed, secret, reveal, public):
        return run_cases(listed, cfg["public_seed"], secret, reveal, lambda c, s: run_one(c, s, public),
                         args.fail_fast)

    log(f"rung {r}: public tests")
    pub_cat, pub_lines = cases(public, "", True, True)
    pub_pass = sum(sum(v) for v in pub_cat.values())
    pub_total = sum(len(v) for v in pub_cat.values())
    log(f"rung {r}: hidden tests ({hidden_source})")
    if args.fail_fast and pub_lines:
        hid_cat = {c.category: [False] for c in hidden}
        hid_lines = ["not run (--fail-fast: a public test failed)"]
    else:
        hid_cat, hid_lines = cases(hidden, secret, args.reveal, False)
    cats_passed = sorted(c for c, v in hid_cat.items() if all(v))
    cats_failed = sorted(c for c, v in hid_cat.items() if not all(v))
    public_frac = pub_pass / pub_total if pub_total else 0.0
    hidden_frac = len(cats_passed) / len(hid_cat) if hid_cat else 0.0

    # Sanitizers: any error caps correctness.
    log(f"rung {r}: compute-sanitizer")
    san_lines, san_fail, san_skip, san_wrong = [], [], [], []
    for tool in tools:
        if args.fail_fast and (pub_lines or hid_lines or san_fail):
            san_skip.append(tool)
            san_lines.append(f"{tool}: not run (--fail-fast: the rung has failed already)")
            continue
        status, out = sanitize(tool)
        if status == "fail":
            san_fail.append(tool)
            san_lines.append(f"{tool}: FAIL\n{out}")
        elif status == "wrong":
            san_wrong.append(tool)
            san_lines.append(f"{tool}: no sanitizer error, but wrong results\n{out}")
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
    parts.append(P("sanitizer", score=pts["sanitizer"] if not san_fail and not san_wrong and len(san_skip) < len(tools)
                   else 0,
                   output="\n".join(san_lines), skipped=len(san_skip) == len(tools)))
    return parts, not (public_frac < 1 or san_fail or san_wrong or bad)


def loaded_library_verdict(parts, lines):
    """Applies integrity rule 5 (libraries the rung's runs loaded, Jail.findings_since) to a
    rung's parts in place: with any line, technique, correctness and sanitizer points are lost
    and nothing is timed, as for a static integrity failure. Returns parts."""
    if not lines:
        return parts
    note = "integrity failed (rule 5, at run time): no correctness or sanitizer points, no timing"
    for p in parts:
        if p.part == "technique":
            p.output = "\n".join([p.output, *lines[:5], note]).strip()
        elif p.part in ("public", "hidden", "sanitizer", "performance"):
            p.output = (p.output + "\n" + note).strip()
        if p.part in ("technique", "public", "hidden", "sanitizer", "performance"):
            p.score, p.skipped = 0, False
    return parts


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
