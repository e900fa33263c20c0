"""Running the built programs for the grader: correctness cases, compute-sanitizer, the SASS and
integrity checks (the rules of the latter in integrity.py), and the interleaved timing. Each
returns plain data; programs.Stage scores a stage's. correctness_parts and performance_gate are
the scoring every rung shares (grade.grade_rung), stage or track."""
import array
import collections
import contextlib
import fcntl
import json
import math
import os
import re
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from tooling.checks import check_program  # the problem lists, compute-sanitizer's location and exit code

from . import integrity as integrity_check
from . import loaded_libraries, problems, sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the grader's own tree: its tools
MAX_REPORT_BYTES = 64 << 20
EXCERPT_LINES, EXCERPT_CHARS = 3, 200


_STARTED = time.monotonic()


def log(msg):
    """A progress line on stderr, with the seconds since the grader started (a long grading shows
    where its time goes)."""
    print(f"[grade {time.monotonic() - _STARTED:6.1f} s] {msg}", file=sys.stderr, flush=True)


class Jail:
    """Where one grading's student code is built and run: a grading folder (mode 0711: passable,
    not listable) with tree/ (the handout and the submission's declared files), build/, io/ (one
    fresh folder per run, for its report) and tmp/ (the 'user' isolation's private temporary
    folder). The reference solution is never here (build.reference).
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
        self.dirs = {k: os.path.join(grading, k) for k in ("tree", "build", "io", "tmp")}
        for d in self.dirs.values():
            os.makedirs(d, exist_ok=True)
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
            sandbox.chown_tree(self.dirs["build"], os.geteuid(), os.getegid())
            readable(self.dirs["build"])
        return p

    def run(self, argv_of, timeout, on_folder=None):
        """Runs argv_of(io) (io: the run's own fresh folder, as the program sees it); returns
        (CompletedProcess, the folder as the grader sees it). on_folder(folder), if given, learns
        the grader's path of the folder before the program starts. Raises subprocess.TimeoutExpired.
        With the audit enabled, a plain run (not compute-sanitizer's, which loads its own
        libraries) is audited: every library it maps outside the allow-list becomes a rule 5 line
        in self.loaded."""
        io = tempfile.mkdtemp(dir=self.dirs["io"])
        os.chmod(io, 0o755)
        if on_folder:
            on_folder(io)
        view = self.inside("io") if self.isolation == "bwrap" else io  # the folder as the program sees it
        argv = argv_of(view)
        audited = self.audit and not os.path.basename(argv[0]).startswith("compute-sanitizer")
        env, fds, collect = loaded_libraries.audited(argv, self.inside("audit", os.path.basename(self.audit))) \
            if audited else ({}, (), None)
        try:
            with gpu_turn():
                if not self.sandboxed:
                    return sandbox.run_group(argv, timeout, env={**student_env(), **env}, pass_fds=fds, cwd=io), io
                return self._box({io: view}).run(argv, cwd=view, timeout=timeout, env=env, pass_fds=fds), io
        finally:
            if collect:
                # The 'user' isolation's launchers (prlimit, setpriv) start under the audit too.
                wrappers = [w for w in map(shutil.which, ("prlimit", "setpriv")) if w] \
                    if self.isolation == "user" else []
                found = loaded_libraries.check(collect(), program=argv[0], wrappers=wrappers,
                                               untrusted=[self.inside(k) for k in ("tree", "build")] + [view])
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
    """A bounded, labelled excerpt of a program's error output (its last EXCERPT_LINES lines, each
    cut at EXCERPT_CHARS, control characters shown as '?'): a deliberate aid to the student, and
    the only program output that reaches the feedback. Shown for a failing PUBLIC case only
    (run_case's show_output): never for a hidden case, a sanitizer run or a timing."""
    lines = [re.sub(r"[^\x20-\x7e]", "?", l[:EXCERPT_CHARS]) for l in text.strip().splitlines()[-EXCERPT_LINES:]]
    return ("; your program's error output ends: " + " | ".join(lines)) if lines else ""


def student_env():
    """The environment of a student's program without isolation (practice grading on the
    student's own machine, which may need its CUDA variables): the grader's, without the secret
    (grade.grade also removes it from the grader's own environment)."""
    return {k: v for k, v in os.environ.items() if k != "LADDER_GRADER_SECRET"}


def _gpu_key():
    """This grading's GPU (CUDA_VISIBLE_DEVICES, "all" when unset), safe in a file name: the key
    of the per-GPU lock file."""
    return re.sub(r"[^A-Za-z0-9,-]", "_", os.environ.get("CUDA_VISIBLE_DEVICES", "all"))


_TURN_HELD = False  # this process holds its GPU's turn (a timing's rounds): its own runs take no second one


@contextlib.contextmanager
def gpu_turn():
    """This grading's GPU (CUDA_VISIBLE_DEVICES) to itself: every program run, and a timing's
    whole interleaved rounds, waits for an exclusive lock shared by every grading of this user on
    the machine. So a correct submission never runs beside another grading's program: not beside
    one that fills the GPU's memory, nor one that spins, nor its timing beside anything (the
    promise of docs/assignments.md). The runs of a process that holds the turn take no turn of
    their own. Waiting does not count against a run's timeout."""
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
    """Runs one correctness case (two runs on one workspace, then a third on the same buffers
    refilled with other values; all checked, rules: rungs.grader_rules). Returns (status, detail);
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


# ---- compute-sanitizer's findings -------------------------------------------------------------
# They come from the sanitizer's own channel, its log file (--log-file, in the run's io folder),
# never from the program's stdout or stderr. The program runs as the same user and may write that
# file too, so nothing of it is copied into the feedback: the grader decides on the exit code
# (--error-exitcode) and the log's summary, and writes its own lines from the fixed vocabulary
# below (a tool, a problem of the grader's public sanitizer.problems, counts, error kinds).
SANITIZER_LOG = "sanitizer.log"   # in the run's io folder
SANITIZER_LOG_BYTES = 1 << 20     # what is read of it (--print-limit 20 keeps a real one far smaller)
SANITIZER_KINDS_SHOWN = 4         # error kinds named per problem
SANITIZER_COUNT_CAP = 20          # counts above it are shown as "more than 20" (--print-limit)
_SANITIZER_PREFIX = re.compile(r"^\s*=+\s?")
_SIZES = {"1", "2", "4", "8", "12", "16", "32", "64", "128"}
_CUDA_ERRORS = {  # the error names a "Program hit cudaError..." line may carry into the feedback
    "cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorMisalignedAddress", "cudaErrorInvalidValue",
    "cudaErrorMemoryAllocation", "cudaErrorInvalidConfiguration", "cudaErrorLaunchOutOfResources",
    "cudaErrorInvalidDevicePointer", "cudaErrorIllegalInstruction", "cudaErrorHardwareStackError",
    "cudaErrorAssert", "cudaErrorInvalidResourceHandle", "cudaErrorInvalidMemcpyDirection",
    "cudaErrorInvalidDeviceFunction", "cudaErrorNoKernelImageForDevice", "cudaErrorUnsupportedPtxVersion"}


def _size(text):
    return f"{text} bytes" if text in _SIZES else "an unusual size"


# (a strict regex on a log line without its "========= " prefix, the grader's phrase for it)
SANITIZER_KINDS = [
    (re.compile(r"Invalid __(global|shared|local)__ (read|write|atomic) of size (\d{1,4}) bytes?$"),
     lambda m: f"an invalid {m[2]} of {_size(m[3])} in {m[1]} memory (out of bounds or misaligned)"),
    (re.compile(r"(?:Warp|Lane|Device) (Illegal Address|Misaligned Address|Out-of-range (?:Shared or Local )?Address|"
                r"Illegal Instruction|Invalid PC|Hardware Stack Overflow)$"),
     lambda m: f"a hardware exception: {m[1].lower()}"),
    (re.compile(r"Program hit (cudaError[A-Za-z]{1,40}) \(error \d{1,4}\) due to "),
     lambda m: "a CUDA call returned " + (m[1] if m[1] in _CUDA_ERRORS else "an error")),
    (re.compile(r"Leaked \d{1,15} bytes? at 0x[0-9a-fA-F]{1,16}$"),
     lambda m: "device memory allocated and never freed (a leak)"),
    (re.compile(r"Uninitialized __global__ memory read of size (\d{1,4}) bytes?$"),
     lambda m: f"a read of uninitialized global memory ({_size(m[1])})"),
    (re.compile(r"Host API uninitialized memory access"),
     lambda m: "a CUDA API call that read uninitialized device memory"),
    (re.compile(r"(Error|Warning): Race reported between (?:Read|Write) access"),
     lambda m: f"a shared-memory race (racecheck {m[1].lower()})"),
    (re.compile(r"(ERROR|WARNING): Potential (WAW|WAR|RAW) hazard detected at __shared__ "),
     lambda m: f"a potential {m[2]} hazard on shared memory (racecheck {m[1].lower()})"),
    (re.compile(r"Barrier error detected\. Divergent thread\(s\) in (block|warp)$"),
     lambda m: f"a barrier not reached by every thread of its {m[1]} (synccheck)"),
    (re.compile(r"Barrier error detected\. Invalid arguments$"),
     lambda m: "a barrier with invalid arguments (synccheck)"),
    (re.compile(r"Barrier error detected\."), lambda m: "another barrier error (synccheck)"),
]
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY: (\d{1,9}) errors?$")
_RACECHECK_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d{1,9}) hazards? displayed \((\d{1,9}) errors?, "
                                r"(\d{1,9}) warnings?\)$")
_SANITIZER_SEEN = {"ran": False, "unusable": False}  # this machine's compute-sanitizer, so far in this process


def read_sanitizer_log(path):
    """The text of compute-sanitizer's log file, "" if there is none: never through a link, never
    a FIFO or device, at most SANITIZER_LOG_BYTES (the program may have written it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return ""
        return f.read(SANITIZER_LOG_BYTES).decode("utf-8", "replace")


def sanitizer_findings(text):
    """What a compute-sanitizer log says, as the grader's own data: errors (the summary's count,
    None without a summary line), kinds ({phrase: count} of the lines matched by SANITIZER_KINDS)
    and unusable (the sanitizer says it cannot run on this device or system)."""
    errors, kinds = None, collections.Counter()
    unusable = False
    for raw in text.splitlines():
        line = _SANITIZER_PREFIX.sub("", raw).strip()
        m = _ERROR_SUMMARY.match(line)
        if m:
            errors = max(errors or 0, int(m[1]))
            continue
        m = _RACECHECK_SUMMARY.match(line)
        if m:
            errors = max(errors or 0, int(m[2]))
            continue
        unusable = unusable or bool(check_program.SANITIZER_UNUSABLE.search(line))
        for pattern, phrase in SANITIZER_KINDS:
            m = pattern.match(line)
            if m:
                kinds[phrase(m)] += 1
                break
    return {"errors": errors, "kinds": kinds, "unusable": unusable}


def _count(n):
    return f"more than {SANITIZER_COUNT_CAP}" if n > SANITIZER_COUNT_CAP else str(n)


def sanitizer_verdict(tool, returncode, log_text):
    """(kind, text) of one run under compute-sanitizer `tool`, from its exit code and its log
    alone: kind error (a sanitizer error: caps correctness), incomplete (the run ended without the
    sanitizer's summary: counted as an error), unusable (the sanitizer cannot run here: the tool
    is skipped) or ran (no sanitizer error; the caller judges the program's own result). text: the
    grader's own words."""
    found = sanitizer_findings(log_text)
    errors, kinds = found["errors"], found["kinds"]
    if returncode == check_program.SANITIZER_EXIT or (errors or 0) > 0 or (errors is None and kinds):
        _SANITIZER_SEEN["ran"] = True
        shown = [f"{phrase} ({_count(n)})" for phrase, n in kinds.most_common(SANITIZER_KINDS_SHOWN)]
        more = len(kinds) - len(shown)
        head = f"{tool} reported {_count(errors)} error(s)" if errors else f"{tool} reported errors"
        return "error", head + (": " + "; ".join(shown) + (f"; and {more} other kind(s)" if more > 0 else "")
                                if shown else
                                f", of kinds the grader does not name (compute-sanitizer --tool {tool} on this "
                                f"problem shows them)")
    if found["unusable"] and returncode != 0 and errors is None:
        if _SANITIZER_SEEN["ran"]:
            return "incomplete", (f"the run under {tool} ended (exit status {returncode}) saying that "
                                  f"compute-sanitizer cannot run here, where it ran before: counted as a sanitizer "
                                  f"error")
        _SANITIZER_SEEN["unusable"] = True
        return "unusable", "compute-sanitizer cannot run on this GPU or system (its log says so)"
    if errors is None:
        return "incomplete", (f"the run under {tool} ended (exit status {returncode}) without compute-sanitizer's "
                              f"summary in its log: counted as a sanitizer error")
    _SANITIZER_SEEN["ran"] = True
    if _SANITIZER_SEEN["unusable"]:
        return "incomplete", (f"{tool} ran here, but an earlier run said that compute-sanitizer cannot run on this "
                              f"GPU or system: counted as a sanitizer error")
    return "ran", ""


def sanitizer(program, stage_id, tool, timeout, rules=()):
    """(status, output) of compute-sanitizer `tool` on every problem of the grader's own
    tests/mutants/sanitizer.problems, each run and reported; status pass, fail (a sanitizer
    error: caps correctness), wrong (a run without a sanitizer error but with a wrong or missing
    result: no sanitizer points, never a pass) or skipped. Decided on
    the sanitizer's exit code and log file (sanitizer_verdict), never on the program's output;
    every line of the output is the grader's own."""
    exe = check_program.find_sanitizer(None)
    if exe is None:
        return "skipped", "compute-sanitizer not found (PATH, $CUDA_HOME, /usr/local/cuda)"
    distributions, problem_args = check_program.read_problems(os.path.join(ROOT, "tests", "mutants",
                                                                           "sanitizer.problems"))
    jail = current_jail()
    lines, worst = [], "pass"
    for i, args in enumerate([a + ["--distribution", d] for a in problem_args for d in distributions]):
        def argv(io):
            cmd = [exe, "--tool", tool, "--error-exitcode", str(check_program.SANITIZER_EXIT), "--print-limit", "20",
                   "--log-file", os.path.join(io, SANITIZER_LOG).replace("%", "%%")]  # "%" is its format character
            return cmd + [program, *args, "--seed", str(i + 1), "--stages", stage_id, "--reps", "1", "--warmup", "1",
                          "--no-cub", "--no-flush-l2", "-q", *rules, "--json", os.path.join(io, "report.json")]
        what = f"problem {i + 1} ({' '.join(args)})"
        try:
            p, io = jail.run(argv, timeout)
        except subprocess.TimeoutExpired:
            lines.append(f"{what}: took longer than {timeout:.0f} s under {tool}")
            worst = "fail"
            continue
        kind, why = sanitizer_verdict(tool, p.returncode, read_sanitizer_log(os.path.join(io, SANITIZER_LOG)))
        if kind == "unusable":
            return "skipped", why
        if kind != "ran":
            lines.append(f"{what}: {why}")
            worst = "fail"
            continue
        data = read_report(os.path.join(io, "report.json"))
        stage = next((s for s in (data or {}).get("stages", []) if isinstance(s, dict) and s.get("id") == stage_id),
                     None)
        if not stage or not stage.get("ran") or not (stage.get("vs_oracle") or {}).get("pass") is True:
            lines.append(f"{what}: no sanitizer error, but the result is wrong or missing (a correctness failure, "
                         "not a sanitizer pass)")
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


# ---- the timing (grade_timing_NN): the student's and the reference's processes, interleaved ----
# The student's grade_timing_NN (its build, in the jail) and the reference's (the reference build,
# run as the grader) run in separate processes, in rounds whose first process alternates, while
# this grading holds the GPU alone. Each round's seeds (os.urandom, one per repetition) reach
# both processes through the seed handshake (grade_timing.cu): the grader writes io/seed-R only
# once the program has written io/ready-R, which it does after prepare() and then before each
# repetition, so no run holds a later repetition's seed. The programs report times and write
# their outputs; the comparison and the wall-time rule are the grader's, here.
SEED_POLL_S = 0.0005               # how often the grader looks for a program's ready-R
MAX_OUTPUT_BYTES = 256 << 20       # the most of a program's raw outputs read back
UNCOVERED_FIXED_MS = 0.01          # host clock and wake-up jitter, ms: no share of any timed problem
UNCOVERED_REFERENCE_FACTOR = 2.0   # times the reference's own wall time beyond its events
UNCOVERED_FRACTION = 0.02          # of the reference's event time
TIMING_TOLERANCE_FACTOR = 2.0      # both sides are fp32 results, each within 1x the tolerance of the truth
TIMES = ("stage_ms", "stage_wall_ms", "floor_ms", "floor_wall_ms")
EXIT_WHY = {1: "the stage raised an error during the timing, or its prepare() took longer than 1000 ms",
            2: "the timing could not run (an invalid problem, too little memory, or no seed in time)"}


def uncovered_allowance_ms(reference_event_ms, reference_uncovered_ms):
    """The host wall time a launch may take beyond its CUDA events (the wall-time rule), in ms:
    twice the reference solution's own (its median wall time minus its median event time, in its
    own processes in the same rounds on the same GPU: launch latency, host-side planning, the
    synchronization's wake-up), plus 2% of the reference's median event time and 0.01 ms of clock
    jitter. Nothing fixed that a small problem's whole run could hide in: the reference against
    itself has, by construction, about its own uncovered time, half the allowance or less."""
    return (UNCOVERED_FIXED_MS + UNCOVERED_REFERENCE_FACTOR * max(0.0, reference_uncovered_ms) +
            UNCOVERED_FRACTION * reference_event_ms)


def read_raw(path, typecode, count):
    """`count` values of array typecode `typecode` ("f": fp32, "d": fp64) from a file a program
    wrote, or None: never through a link, only a regular file of exactly that size, at most
    MAX_OUTPUT_BYTES, never an exception (the program controls the file)."""
    size = array.array(typecode).itemsize * count
    if count < 0 or size > MAX_OUTPUT_BYTES:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return None
        values = array.array(typecode)
        try:
            values.frombytes(f.read(size + 1))
        except (OSError, ValueError):
            return None
    return values if len(values) == count else None


def _plain_file(path):
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def serve_seeds(folder_of, seeds, running):
    """The grader's half of the seed handshake: for R = 0, 1, ... in order, once FOLDER/ready-R is
    a plain file, writes seeds[R] to FOLDER/seed-R (a new file of the grader's, renamed into place
    whole, readable by the sandbox's user). folder_of(): the run's folder as the grader sees it
    (None while unknown); running(): false once the program ended. Returns the seeds handed over."""
    given = 0
    while given < len(seeds) and running():
        folder = folder_of()
        if folder and _plain_file(os.path.join(folder, f"ready-{given}")):
            try:
                fd, tmp = tempfile.mkstemp(dir=folder, prefix=".seed-")
                with os.fdopen(fd, "w") as f:
                    f.write(f"{seeds[given]}\n")
                os.chmod(tmp, 0o644)
                os.rename(tmp, os.path.join(folder, f"seed-{given}"))  # replaces a link, never follows it
            except OSError:
                return given
            given += 1
        else:
            time.sleep(SEED_POLL_S)
    return given


def _run_serving_seeds(run, folder_of, seeds):
    """run() (which starts a program and waits for it) in a thread, the seeds served meanwhile;
    returns what run returned, or raises what it raised (subprocess.TimeoutExpired)."""
    box = {}

    def target():
        try:
            box["result"] = run()
        except BaseException as e:  # re-raised below, in the grader's thread
            box["raised"] = e
    t = threading.Thread(target=target, daemon=True)
    t.start()
    serve_seeds(folder_of, seeds, t.is_alive)
    t.join()
    if "raised" in box:
        raise box["raised"]
    return box["result"]


def _student_process(program, args, seeds, timeout):
    """One round's student process, in the jail: (CompletedProcess, its io folder outside)."""
    jail, where = current_jail(), {}

    def argv(io):
        return [program, *args, "--handshake", io, "--json", os.path.join(io, "timing.json"),
                "--outputs", os.path.join(io, "outputs.bin")]
    return _run_serving_seeds(lambda: jail.run(argv, timeout, on_folder=lambda f: where.update(io=f)),
                              lambda: where.get("io"), seeds)


def _reference_process(program, args, seeds, timeout, folder):
    """One round's reference process (instructor code, the reference build's program), run as the
    grader in `folder`, a private folder of the grader's: the CompletedProcess."""
    argv = [program, *args, "--handshake", folder, "--json", os.path.join(folder, "timing.json"),
            "--outputs", os.path.join(folder, "outputs.bin"), "--tolerance", os.path.join(folder, "tolerance.bin")]
    return _run_serving_seeds(lambda: sandbox.run_group(argv, timeout, env=student_env()), lambda: folder, seeds)


def _times(data, reps):
    """The four lists of `reps` times (TIMES) of a report, each finite and >= 0, or None."""
    out = {}
    for key in TIMES:
        v = data.get(key)
        if not isinstance(v, list) or len(v) != reps or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < float("inf") for x in v):
            return None
        out[key] = [float(x) for x in v]
    return out


def _process_result(who, p, folder, reps, elems=None, tolerance=False):
    """(status, result) of one finished process: status ok, error or skipped; result {times,
    outputs, tolerance, elems, problem}, or {error} in the grader's own words. elems: (pooled, y)
    counts, the reference's (None: read from this report, for a run without a reference)."""
    if p.returncode == 77:
        return "skipped", {"error": "no CUDA device: the timing needs a GPU"}
    data = read_report(os.path.join(folder, "timing.json")) or {}
    if p.returncode != 0:
        why = EXIT_WHY.get(p.returncode, f"it stopped with exit status {p.returncode}")
        prep = data.get("prepare_ms")
        if isinstance(prep, (int, float)) and not isinstance(prep, bool) and prep > 1000:
            why = f"its prepare() took {prep:.0f} ms, more than the 1000 ms allowed for host-side setup"
        return "error", {"error": f"{who}'s timing process failed: {why}"}
    times = _times(data, reps)
    if elems is None:
        elems = tuple(data.get(k) for k in ("pooled_elems", "y_elems"))
    ok_counts = all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in elems)
    outputs = read_raw(os.path.join(folder, "outputs.bin"), "f", reps * sum(elems)) if ok_counts else None
    tol = read_raw(os.path.join(folder, "tolerance.bin"), "d", sum(elems)) if tolerance and ok_counts else None
    if times is None or outputs is None or (tolerance and tol is None):
        return "error", {"error": f"{who}'s timing process left a malformed or missing report or outputs"}
    return "ok", {"times": times, "outputs": outputs, "tolerance": tol, "elems": elems,
                  "problem": data.get("problem") if isinstance(data.get("problem"), str) else ""}


def compare_outputs(student, reference, tolerance, elems, reps, factor=TIMING_TOLERANCE_FACTOR):
    """Checks a round's student outputs (array of reps x (pooled, y)) against the reference's, at
    `factor` times the reference's per-element tolerance; reference None: finiteness alone (no
    reference to compare with). Returns (repetitions that fail, the first failure in words)."""
    n_pooled, n = elems[0], sum(elems)
    bad, first = 0, ""
    for k in range(reps):
        worst, at, non_finite = 0.0, -1, 0
        for i in range(k * n, (k + 1) * n):
            s = student[i]
            if not math.isfinite(s):
                non_finite += 1
                continue
            if reference is not None:
                t = factor * tolerance[i - k * n]
                err = abs(s - reference[i])
                ratio = err / t if t > 0 else (0.0 if err == 0 else math.inf)
                if not ratio <= worst:  # also a NaN ratio (a non-finite reference)
                    worst, at = (ratio if ratio == ratio else math.inf), i - k * n
        if non_finite or worst > 1:
            bad += 1
            if not first:
                where = f"pooled[{at}]" if at < n_pooled else f"y[{at - n_pooled}]"
                first = (f"repetition {k + 1}: {non_finite} non-finite output(s) (a NaN may be an element never "
                         "written)" if non_finite else
                         f"repetition {k + 1}: your output disagrees with the reference solution's on the same input: "
                         f"worst error {worst:.3g}x the tolerance, at {where}")
    return bad, first


def _spread(ms):
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms)}


def timing(build, stage_id, mode, problem_args, reps, warmup, timeout, reference=None, rounds=3):
    """Times stage rung stage_id: grade_timing_NN of the student's BUILD (the grader's view of the
    build folder) in the jail, and where `reference` is the reference build's grade_timing_NN
    (official runs), that program too, as the grader: separate processes in `rounds` rounds (one
    without a reference) on the same seeds, the first process alternating, the GPU held alone
    throughout (gpu_turn). The student's outputs are compared with the reference's here
    (compare_outputs), and the wall-time rule applied (uncovered_allowance_ms; without a
    reference, against the floor's own launch in the student's process). Returns (status, data):
    status ok, mismatch, error or skipped (no GPU); data the medians over every timed repetition
    of every round, and the verdict's numbers."""
    student = os.path.join(build, f"grade_timing_{stage_id}")
    if not os.path.exists(student):
        return "error", {"error": f"grade_timing_{stage_id} was not built"}
    if reference is not None and not os.path.isfile(reference):
        return "error", {"error": f"the reference solution's timing program {reference} is missing"}
    program = current_jail().inside("build", f"grade_timing_{stage_id}") if JAIL else student
    args = [*problem_args, "--mode", mode, "--reps", str(reps), "--warmup", str(warmup), "-q"]
    n_rounds = max(1, int(rounds)) if reference else 1
    got = {"student": [], "reference": []}
    mismatches, first = 0, ""
    with gpu_turn():  # the GPU to itself for every round: no other grading's runs between them
        for k in range(n_rounds):
            seeds = [int.from_bytes(os.urandom(8), "little") for _ in range(warmup + reps)]
            order = ["student", "reference"] if reference else ["student"]
            round_ = {}
            for who in (order if k % 2 == 0 else order[::-1]):
                with contextlib.ExitStack() as stack:  # the reference's private folder, removed after reading
                    try:
                        if who == "student":
                            p, folder = _student_process(program, args, seeds, timeout)
                        else:
                            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="ladder-reference-timing-"))
                            p = _reference_process(reference, args, seeds, timeout, folder)
                    except subprocess.TimeoutExpired:
                        return "error", {"error": f"the {who}'s timing took longer than {timeout:.0f} s"}
                    elems = round_["reference"]["elems"] if who == "student" and "reference" in round_ else None
                    status, result = _process_result("your rung" if who == "student" else "the reference solution",
                                                     p, folder, reps, elems, tolerance=who == "reference")
                if status != "ok":
                    return status, result
                round_[who] = result
            if reference and round_["student"]["elems"] != round_["reference"]["elems"]:
                # the student's process came first: its own counts, which must be the reference's
                return "error", {"error": "your rung's timing process wrote outputs of another shape than the "
                                          "reference solution's"}
            ref = round_.get("reference")
            bad, why = compare_outputs(round_["student"]["outputs"], ref and ref["outputs"], ref and ref["tolerance"],
                                       round_["student"]["elems"], reps)
            mismatches += bad
            first = first or (f"round {k + 1}, {why}" if why else "")
            for who, result in round_.items():
                got[who].append(result)

    def cat(who, key):
        return [x for r in got[who] for x in r["times"][key]]
    s_ms, s_wall = cat("student", "stage_ms"), cat("student", "stage_wall_ms")
    baseline = "reference" if reference else "student"  # whose floor, and whose own overhead, is the yardstick
    floor_ms = cat(baseline, "floor_ms")
    data = {"problem": (got["reference"][0]["problem"] if reference else "") or " ".join([*problem_args, "--mode", mode]),
            "reps": reps, "rounds": n_rounds, "student": _spread(s_ms), "floor": _spread(floor_ms),
            "ratio_to_floor": statistics.median(s_ms) / statistics.median(floor_ms) if statistics.median(floor_ms) > 0
            else None, "student_wall": _spread(s_wall), "mismatches": mismatches,
            "checked_reps": reps * n_rounds, "reference": None, "ratio_to_reference": None}
    uncovered = statistics.median(s_wall) - statistics.median(s_ms)
    if reference:
        r_ms = cat("reference", "stage_ms")
        ref_uncovered = statistics.median(cat("reference", "stage_wall_ms")) - statistics.median(r_ms)
        data["reference"] = _spread(r_ms)
        data["ratio_to_reference"] = statistics.median(s_ms) / statistics.median(r_ms)
        yardstick = statistics.median(r_ms)
    else:  # no reference: the harness's own launch (the floor's) in the student's process
        ref_uncovered = statistics.median(cat("student", "floor_wall_ms")) - statistics.median(floor_ms)
        yardstick = statistics.median(s_ms)
    allowance = uncovered_allowance_ms(yardstick, ref_uncovered)
    data.update(uncovered_ms=uncovered, reference_uncovered_ms=max(0.0, ref_uncovered),
                uncovered_allowance_ms=allowance)
    if mismatches:
        data["first_mismatch"] = first
        return "mismatch", data
    if uncovered > allowance:
        data["error"] = (f"the host wall time of a launch (median {statistics.median(s_wall):.3f} ms) exceeds its "
                         f"CUDA-event time ({statistics.median(s_ms):.3f} ms) by {uncovered:.3f} ms, more than the "
                         f"{allowance:.3f} ms allowed: the stage does work the events do not time (on the host, or "
                         "on another stream, outside its marks)")
        return "error", data
    return "ok", data


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
