"""Runs one ladder program on a list of problems, optionally under compute-sanitizer, and says
whether its stage was accepted or rejected. One driver for the sanitizer tests (a stage program
must be accepted), the mutant tests (a known-bad program must be rejected) and their controls.

A program is build/stage_NN_name, build/tests/mutant_<name> or build/ladder; it exits 0 when every
check passed, 1 when a check failed or a stage raised an error, 2 on any other error. Each run
adds `--reps 1 --warmup 1 --no-cub --no-flush-l2 -q --json FILE` (two runs on one workspace, the
second checked: a stage that leaves its workspace wrong for the next run fails), and the JSON says
what happened.

What one run shows, and how it counts:
  pass            exit 0, every stage ran on a GPU and matched the oracle, no sanitizer error
  oracle          a stage ran and disagreed with the fp64 oracle (or left NaN)
  sanitizer       compute-sanitizer reported an error (its --error-exitcode 99)
  stage error     a stage raised an error (a CUDA error such as an illegal address)
  crash           exit 2, a signal, or no JSON: the program itself broke (under a sanitizer,
                  no JSON and no sanitizer error means the sanitizer broke: infrastructure)
With --expect accept every run must be `pass`. With --expect reject the test passes at the first
run that rejects: `oracle` or `sanitizer` always count; `stage error` (a CUDA error the program
caught and reported, such as an illegal address) counts only with --tool memcheck, where a bad
access is the expected evidence. A `crash` (exit 2, a signal, no report) never counts: it says
the program or the machine broke (a bad option, a host fault), not the kernel; like a stage error
outside memcheck it is an infrastructure failure, and the test fails. A run that exceeds --timeout fails the test too.

A first run on a tiny problem finds out whether there is a GPU and whether the stage runs on it.
Without a GPU, --expect accept with --tool none or memcheck still runs every problem (the program
validates it and builds the oracle on the CPU, so a bad line fails even in CI) before skipping.

Exit status: 0 the expectation held; 1 it did not, or the infrastructure failed; 77 skipped (no
CUDA device, no compute-sanitizer or one that cannot run on this device, or a CPU stage asked to
be sanitized). CTest maps 77 to "skipped" (SKIP_RETURN_CODE).

Problem lists (tests/mutants/*.problems): one problem per line as ladder options; `#` starts a
comment; `@distributions a b` names the distributions each line runs with (default: structured).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

SKIP = 77
SANITIZER_EXIT = 99
TOOLS = ("none", "memcheck", "racecheck", "synccheck", "initcheck")
RUN_ARGS = ["--reps", "1", "--warmup", "1", "--no-cub", "--no-flush-l2", "-q"]
PROBE = ["--batch", "1", "--in-channels", "1", "--out-channels", "1", "--size", "4", "--distribution", "structured"]
# compute-sanitizer's answers when it cannot instrument this device or system (not a stage's fault).
SANITIZER_UNUSABLE = re.compile(r"Device not supported|not supported on this (device|platform|system)", re.I)


def read_problems(path):
    """Returns (distributions, [argument lists]) from a problem list file."""
    distributions, problems = ["structured"], []
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("@distributions"):
                distributions = line.split()[1:]
                if not distributions:
                    sys.exit(f"error: {path}:{number}: @distributions names no distribution")
            elif line.startswith("@"):
                sys.exit(f"error: {path}:{number}: unknown directive {line.split()[0]}")
            else:
                args = shlex.split(line)
                if "--distribution" in args:
                    sys.exit(f"error: {path}:{number}: give distributions with @distributions, not per line")
                problems.append(args)
    if not problems:
        sys.exit(f"error: {path} lists no problem")
    return distributions, problems


def find_sanitizer(given):
    """compute-sanitizer from --sanitizer, PATH, $CUDA_HOME or /usr/local/cuda; None if absent."""
    candidates = [given, shutil.which("compute-sanitizer")]
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            candidates += [os.path.join(root, "bin", "compute-sanitizer"),
                           os.path.join(root, "compute-sanitizer", "compute-sanitizer")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


class Run:
    """One execution of the program: its command, exit code, output and JSON report."""

    def __init__(self, cmd, rc, output, report, timed_out):
        self.cmd, self.rc, self.output, self.report, self.timed_out = cmd, rc, output, report, timed_out

    def tail(self, lines=40):
        return "\n".join(self.output.rstrip().splitlines()[-lines:])


def execute(program, args, tool, sanitizer, timeout):
    fd, json_path = tempfile.mkstemp(prefix="ladder_check_", suffix=".json")
    os.close(fd)
    os.unlink(json_path)  # the program writes it only if it gets that far
    cmd = [program] + args + RUN_ARGS + ["--json", json_path]
    if tool != "none":
        extra = ["--leak-check", "full"] if tool == "memcheck" else []
        cmd = [sanitizer, "--tool", tool, "--error-exitcode", str(SANITIZER_EXIT), "--print-limit", "20"] + extra + cmd
    # A new session, so that a timeout can stop compute-sanitizer and the program it started.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True)
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        timed_out = True
    report = None
    if os.path.exists(json_path):
        try:
            with open(json_path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = None
        os.unlink(json_path)
    return Run(cmd, proc.returncode, output, report, timed_out)


def sanitizer_summary(output):
    lines = [l.strip("= ").strip() for l in output.splitlines() if "SUMMARY" in l]
    return lines[-1] if lines else "no summary line"


def classify(run, tool):
    """Returns (kind, detail): kind is pass, oracle, sanitizer, stage_error, crash, no_gpu,
    cpu_stage, sanitizer_unusable or infra (see the module comment)."""
    if run.timed_out:
        return "infra", "timed out (a hang?)"
    if tool != "none":
        match = SANITIZER_UNUSABLE.search(run.output)
        if match and run.rc != 0:
            return "sanitizer_unusable", match.group(0)
        if "COMPUTE-SANITIZER" not in run.output:
            return "infra", f"compute-sanitizer printed no banner (exit {run.rc})"
        if run.rc == SANITIZER_EXIT:
            return "sanitizer", f"{tool}: {sanitizer_summary(run.output)}"
        if run.report is None:  # neither an error report nor the program's: the sanitizer broke
            return "infra", f"no JSON report and no {tool} error (exit {run.rc})"
    if run.rc < 0:
        return "crash", f"killed by signal {-run.rc}"
    if run.report is None:
        return "crash", f"exit {run.rc} and no JSON report"
    stages = run.report.get("stages", [])
    if not stages:
        return "infra", "the report lists no stage"
    if any(not s.get("gpu") for s in stages):
        return "cpu_stage", "stage " + ", ".join(s["id"] for s in stages if not s.get("gpu")) + " runs on the CPU"
    if not run.report.get("device"):
        notes = [s.get("note", "") for s in stages if s.get("note")]
        return "no_gpu", notes[0] if notes else "no CUDA device"
    for s in stages:
        if not s.get("ran"):
            note = s.get("note", "")
            error = s.get("failed") or note.startswith("error")
            return ("stage_error" if error else "infra"), f"stage {s['id']}: {note}"
    for s in stages:
        for key in ("vs_oracle", "vs_previous"):
            a = s.get(key)
            # vs_previous may be information only ("checked": false, no "pass").
            if a is not None and a.get("checked", True) and not a.get("pass"):
                return "oracle", (f"stage {s['id']} {key}: worst error {a.get('worst_ratio_to_tolerance', 0):.3g}x "
                                  f"the tolerance, {a.get('nan_count', 0)} NaN")
    if run.rc == 2:
        return "crash", "exit 2 after a passing report"
    if run.rc != 0:
        return "infra", f"exit {run.rc} with a passing report"
    return "pass", "accepted"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", required=True, help="the ladder program to run")
    ap.add_argument("--problems", required=True, help="problem list file (tests/mutants/*.problems)")
    ap.add_argument("--expect", required=True, choices=("accept", "reject"))
    ap.add_argument("--tool", default="none", choices=TOOLS, help="compute-sanitizer tool; none: the oracle alone")
    ap.add_argument("--sanitizer", default="", help="path of compute-sanitizer (default: PATH, then the CUDA toolkit)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one run may take")
    ap.add_argument("--label", default="", help="what is checked, for the messages")
    opt = ap.parse_args()

    label = opt.label or os.path.basename(opt.program)
    if not os.access(opt.program, os.X_OK):
        print(f"FAIL {label}: no program {opt.program} (not built?)")
        return 1
    distributions, problems = read_problems(opt.problems)

    # Probe: is there a GPU, and is this a GPU stage? Plain run, tiny problem.
    probe = execute(opt.program, PROBE, "none", None, opt.timeout)
    kind, detail = classify(probe, "none")
    if kind == "no_gpu":
        if opt.expect == "accept" and opt.tool in ("none", "memcheck"):
            # Without a GPU the controls and the memcheck tests (once per list and stage is
            # enough) still check that every line is a valid problem: the program validates it
            # and builds the oracle on the CPU.
            for dist in distributions:
                for args in problems:
                    r = execute(opt.program, args + ["--distribution", dist], "none", None, opt.timeout)
                    if r.rc != 0:
                        print(f"FAIL {label}: the problem '{shlex.join(args)}' ({dist}) is not valid:\n{r.tail()}")
                        return 1
            print(f"SKIPPED {label}: {detail}; the {len(problems)} problems of {opt.problems} are valid")
        else:
            print(f"SKIPPED {label}: {detail}")
        return SKIP
    if kind == "cpu_stage":
        print(f"SKIPPED {label}: {detail}: nothing for a GPU check to see")
        return SKIP
    if kind == "stage_error" and opt.expect == "reject" and opt.tool == "memcheck":
        print(f"{shlex.join(PROBE)}: REJECTED ({kind}: {detail})\n{probe.tail(25)}")
        print(f"PASS {label}: rejected (it breaks on the smallest problem, even without memcheck)")
        return 0
    if kind in ("crash", "infra", "stage_error"):
        print(f"FAIL {label}: the program does not run a tiny problem ({detail}):\n{probe.tail()}")
        return 1

    sanitizer = None
    if opt.tool != "none":
        sanitizer = find_sanitizer(opt.sanitizer)
        if sanitizer is None:
            print(f"SKIPPED {label}: compute-sanitizer not found (PATH, $CUDA_HOME, /usr/local/cuda); {opt.tool} not run")
            return SKIP

    runs = [(args, dist) for dist in distributions for args in problems]
    rejecting = {"oracle", "sanitizer"} | ({"stage_error"} if opt.tool == "memcheck" else set())
    under = f" under {opt.tool}" if opt.tool != "none" else ""
    for i, (args, dist) in enumerate(runs, 1):
        r = execute(opt.program, args + ["--distribution", dist], opt.tool, sanitizer, opt.timeout)
        kind, detail = classify(r, opt.tool)
        where = f"[{i}/{len(runs)}] {shlex.join(args)} --distribution {dist}{under}"
        if kind == "sanitizer_unusable":
            print(f"SKIPPED {label}: compute-sanitizer cannot run here ({detail}):\n{r.tail(10)}")
            return SKIP
        if kind == "pass":
            print(f"{where}: accepted")
            continue
        if opt.expect == "reject" and kind in rejecting:
            print(f"{where}: REJECTED ({kind}: {detail})\n{r.tail(25)}")
            print(f"PASS {label}: rejected, as it must be")
            return 0
        print(f"{where}: {kind}: {detail}\ncommand: {shlex.join(r.cmd)}\n{r.tail()}")
        if opt.expect == "accept":
            print(f"FAIL {label}: a correct stage must pass every run")
        else:
            print(f"FAIL {label}: infrastructure failure, not evidence against the mutant "
                  f"(only {', '.join(sorted(rejecting))} count as rejections{under})")
        return 1
    if opt.expect == "reject":
        print(f"FAIL {label}: survived all {len(runs)} runs{under}: the suite cannot catch this mistake")
        return 1
    print(f"PASS {label}: accepted on all {len(runs)} runs{under}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
