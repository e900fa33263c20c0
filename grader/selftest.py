"""scripts/assignment.py selftest: the grader proves itself on the instructor's machine.

For the chosen rungs it grades (1) the reference solutions, which must get full marks, (2) the
stubbed handout, which must score no correctness points and show the stubs' TODO messages, and
(3) every fixture in grader/fixtures/NN/*.fixture, known-wrong or cheating submissions, each of
which must lose the points its `loses:` line names:
  correctness  public or hidden points (a wrong result, or a sanitizer error that caps them);
  technique    the machine-code check fails (the previous rung's code handed in, a serial loop);
               decided without a GPU, so these fixtures are graded without one;
  integrity    the compiled objects break a rule of grader/integrity.py (the CPU oracle or a
               library called, a symbol defined outside the rung's allow-list, a static
               constructor), which zeroes correctness; decided without a GPU;
  performance  the timing fails or scores less than full (work the CUDA events do not time);
  nothing      a valid submission written another way (a mean formed by scaling each element
               by 1/P as it is added): it must keep every correctness, sanitizer and technique
               point.
Every grading runs as an official one, with a secret made for the run, and its results.json is
scanned: the secret, a hidden problem's options or a line of a reference solution found there
fails the self-test (a leak through the feedback).
A fixture file: `#` comments, `rung: NN`, `file: path`, `loses: ...`, `why: ...`, optionally
`rule: N` (an integrity fixture: the rule of grader/integrity.py that must catch it),
`leaks-not: TEXT` (text the fixture's program prints, which its results.json must not hold: the
feedback carries only the grader's words) and `shows: TEXT` (the grader's words its results.json
must hold once the GPU parts ran), then one or more edits of the reference file (`--- original`, the exact text, `--- replacement`, its
replacement, `--- end`); an original text that does not occur exactly once is an error.
"""
import argparse
import fnmatch
import glob
import json
import os
import shutil

from . import grade, handout, integrity, reports

LOSSES = ("correctness", "technique", "integrity", "performance", "nothing")


class FixtureError(ValueError):
    pass


def parse_fixture(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    head, edits, mode, buf, orig = {}, [], None, [], None
    for line in lines:
        if line == "--- original":
            mode, buf = "orig", []
        elif line == "--- replacement":
            if mode != "orig":
                raise FixtureError(f"{path}: '--- replacement' without '--- original'")
            orig, mode, buf = "\n".join(buf) + "\n", "repl", []
        elif line == "--- end":
            if mode != "repl":
                raise FixtureError(f"{path}: '--- end' without '--- replacement'")
            edits.append((orig, "\n".join(buf) + "\n"))
            mode = None
        elif line.rstrip().endswith(("--- original", "--- replacement", "--- end")):
            raise FixtureError(f"{path}: '{line}': a '--- ...' separator must be a line of its own")
        elif mode:
            buf.append(line)
        elif line.startswith("#") or not line.strip():
            continue
        elif ":" in line:
            key, value = line.split(":", 1)
            head[key.strip()] = value.strip()
        else:
            raise FixtureError(f"{path}: cannot read the line '{line}'")
    for key in ("rung", "file", "loses", "why"):
        if key not in head:
            raise FixtureError(f"{path}: no '{key}:' line")
    if head["loses"] not in LOSSES:
        raise FixtureError(f"{path}: loses: must be one of {', '.join(LOSSES)}")
    if "rule" in head and (head["loses"] != "integrity" or head["rule"] not in ("1", "2", "3", "4", "5")):
        raise FixtureError(f"{path}: rule: names the integrity rule (1 to 5) of a fixture that loses integrity")
    if not edits:
        raise FixtureError(f"{path}: no edit")
    head["edits"] = edits
    head["name"] = f"{head['rung']}/{os.path.basename(path)[:-len('.fixture')]}"
    return head


def apply_fixture(root, fixture, declared, dest):
    """Writes a submission to `dest`: the rung's declared files from `root`, with the edits."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    for path in declared:
        os.makedirs(os.path.dirname(os.path.join(dest, path)), exist_ok=True)
        shutil.copyfile(os.path.join(root, path), os.path.join(dest, path))
    target = os.path.join(dest, fixture["file"])
    if fixture["file"] not in declared:
        raise FixtureError(f"{fixture['name']}: {fixture['file']} is not a file rung {fixture['rung']} declares")
    with open(target, encoding="utf-8") as f:
        text = f.read()
    for orig, repl in fixture["edits"]:
        if text.count(orig) != 1:
            raise FixtureError(f"{fixture['name']}: the original text occurs {text.count(orig)} times in "
                               f"{fixture['file']} (once expected): update the fixture to the code")
        text = text.replace(orig, repl)
    with open(target, "w", encoding="utf-8") as f:
        f.write(text)


def points(parts, part):
    mine = [p for p in parts if p.part == part]
    return sum(p.score for p in mine), sum(p.max_score for p in mine), any(p.skipped for p in mine)


def verdict(parts, loses, rule=None):
    """(rejected?, why) for a fixture's parts; rule: the integrity rule that must fire (a
    fixture's optional `rule:` line)."""
    pub, pub_max, pub_skip = points(parts, "public")
    hid, hid_max, _ = points(parts, "hidden")
    tech, tech_max, _ = points(parts, "technique")
    prefix = integrity.FAIL if rule is None else f"{integrity.FAIL} rule {rule} "
    flagged = [line for p in parts if p.part == "technique" for line in p.output.splitlines()
               if line.startswith(prefix)]
    if loses == "integrity":
        ok = bool(flagged) and pub + hid == 0
        first = f" ({flagged[0][len(integrity.FAIL):].strip()[:120]})" if flagged else ""
        return ok, f"integrity flagged: {bool(flagged)}{first}; correctness {pub + hid:g} / {pub_max + hid_max:g}"
    if loses == "technique":
        return tech < tech_max, f"technique {tech:g} / {tech_max:g}"
    if loses == "performance":
        perf, perf_max, perf_skip = points(parts, "performance")
        if perf_skip:
            why = next((p.output.splitlines()[0] for p in parts if p.part == "performance" and p.output), "")
            return None, f"performance not timed ({why[:160] or 'no GPU'})"
        why = next((p.output.splitlines()[0] for p in parts if p.part == "performance" and p.output), "")
        # Lost to the timing itself, with correctness intact: not merely "not timed" after a failure.
        ok = perf < perf_max and pub + hid == pub_max + hid_max and why.startswith("timing ")
        return ok, (f"performance {perf:g} / {perf_max:g}, correctness {pub + hid:g} / {pub_max + hid_max:g}" +
                    (f" ({why[:160]})" if why else ""))
    if loses == "nothing":
        san, san_max, san_skip = points(parts, "sanitizer")
        ok = tech == tech_max and not flagged and (pub_skip or pub + hid == pub_max + hid_max) and \
            (pub_skip or san_skip or san == san_max)
        return ok, f"technique {tech:g} / {tech_max:g}; correctness " + (
            "not run (no GPU)" if pub_skip else f"{pub + hid:g} / {pub_max + hid_max:g}") + (
            "" if pub_skip or san_skip else f"; sanitizer {san:g} / {san_max:g}")
    if pub_skip:
        return None, "correctness not run (no GPU)"
    return pub + hid < pub_max + hid_max, f"correctness {pub + hid:g} / {pub_max + hid_max:g}"


def leaks(out_dir, secret, rungs, markers=()):
    """What of the grader's secrets the results.json in out_dir holds: the secret, a hidden
    problem's options, a line of a rung's reference solution, and any of `markers` (text a
    fixture's program printed: a fixture's `leaks-not:`)."""
    from . import problems
    root = grade.ROOT
    path = os.path.join(out_dir, "results.json")
    if not os.path.exists(path):
        return ["no results.json"]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = ["the secret"] if secret and secret in text else []
    found += [f"the program's own text '{m}'" for m in markers if m and m in text]
    public = {c.describe() for listed in glob.glob(os.path.join(root, "grader", "*.problems"))
              for c in problems.load(listed)}
    for listed in glob.glob(os.path.join(root, "grader", "hidden", "*.problems")):
        for case in problems.load(listed):
            if case.args and case.describe() not in public and len(case.describe()) >= 24 and case.describe() in text:
                found.append(f"hidden problem '{case.describe()}'")
    for line, where in handout.solution_lines(root, set(rungs)).items():
        if line in text:
            found.append(f"reference line of {where}")
    return found[:5]


def graded(args, rungs, record, what, markers=()):
    """grade.grade, its reports written, and the leak scan of its results.json (a leak is a
    self-test failure of its own; markers: see leaks)."""
    parts, meta, out = grade.grade(args)
    reports.write_all(parts, meta, out)
    found = leaks(out, open(SECRET_FILE, encoding="utf-8").read().strip(), rungs, markers)
    if found:
        record(f"{what}: the feedback leaks", False, "; ".join(found))
    hidden = hidden_in_total(out)
    if hidden:
        record(f"{what}: the visible total reveals the hidden parts", False, hidden)
    return parts, meta, out


def hidden_in_total(out_dir):
    """"" if results.json's top-level score is the sum of its visible tests' scores (before the
    due date, nothing of the hidden parts may be read off the total), else what differs."""
    with open(os.path.join(out_dir, "results.json"), encoding="utf-8") as f:
        doc = json.load(f)
    visible = round(sum(t["score"] for t in doc["tests"] if t.get("visibility", "visible") == "visible"), 2)
    return "" if abs(doc["score"] - visible) < 0.005 else f"score {doc['score']} but the visible tests hold {visible}"


def add_parser(sub, root):
    s = sub.add_parser("selftest", help="grade the references, the stubs and every fixture: the grader proves itself",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--rungs", default="", help="comma-separated rungs (default: every rung with fixtures)")
    s.add_argument("--work", default=os.path.join(root, "build-selftest"), help="work folder")
    s.add_argument("--cuda-architectures", default="")
    s.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    s.add_argument("--timeout", type=float, default=600)
    s.add_argument("--skip-gpu", action="store_true", help="static parts only (no GPU here)")
    s.add_argument("--isolation", choices=("auto", "bwrap", "user", "none"), default="auto",
                   help="grade's --isolation for every grading (default auto)")
    s.add_argument("--only", default="", help="comma-separated parts to run: reference, stub, fixtures")
    s.add_argument("--fixtures", default="*", help="the fixtures to run: a glob on their names, or several separated by commas "
                        "(e.g. '03/untimed_*,04/nonatomic_add')")
    s.set_defaults(run=lambda a: run(a, root))


def grade_args(a, submission, rungs, work, skip_performance=False, skip_gpu=None, fail_fast=False):
    """An official grading (the self-test's own secret, a fixed submission id) in one reused work
    folder, hidden cases not revealed: what a student would see before the due date. The
    arguments go through the grade command's own parser, so the self-test grades exactly as
    `scripts/assignment.py grade` does; --reuse-work (a fixed grading folder, made by the same
    function as a fresh one) only spares the rebuilds."""
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    argv = ["grade", "--submission", submission, "--rungs", ",".join(rungs), "--work", work, "--out", out,
            "--secret-file", SECRET_FILE, "--jobs", str(a.jobs), "--timeout", str(a.timeout),
            "--submission-id", "selftest", "--isolation", getattr(a, "isolation", "auto"), "--reuse-work"]
    if a.cuda_architectures:
        argv += ["--cuda-architectures", a.cuda_architectures]
    if a.skip_gpu if skip_gpu is None else skip_gpu:
        argv.append("--skip-gpu")
    if skip_performance:
        argv.append("--skip-performance")
    if fail_fast:
        argv.append("--fail-fast")
    parser = argparse.ArgumentParser(prog="assignment.py")
    grade.add_parser(parser.add_subparsers(dest="command"), grade.ROOT)
    return parser.parse_args(argv)


def ladders(rungs):
    """The rungs grouped by ladder, each group handed out and graded on its own: the stages'
    rungs, then each track's (p38-03, ...)."""
    groups = {}
    for r in rungs:
        groups.setdefault(r.split("-")[0] if handout.is_track_rung(r) else "", []).append(r)
    return [groups[k] for k in sorted(groups)]


SECRET_FILE = ""


def run(a, root):
    global SECRET_FILE
    import secrets
    os.makedirs(a.work, exist_ok=True)
    SECRET_FILE = os.path.join(a.work, "selftest-secret")
    with open(SECRET_FILE, "w", encoding="utf-8") as f:
        f.write(secrets.token_hex(16) + "\n")
    os.chmod(SECRET_FILE, 0o600)
    fixture_files = sorted(glob.glob(os.path.join(root, "grader", "fixtures", "*", "*.fixture")))
    fixtures = [parse_fixture(f) for f in fixture_files]
    rungs = sorted({r.strip() for r in a.rungs.split(",") if r.strip()}) or sorted({f["rung"] for f in fixtures})
    only = set(a.only.split(",")) if a.only else {"reference", "stub", "fixtures"}
    os.makedirs(a.work, exist_ok=True)
    rows, failures = [], 0
    work = os.path.join(a.work, "grade")  # one work folder: every grading rebuilds only what changed

    def record(what, ok, why):
        nonlocal failures
        status = "SKIP" if ok is None else ("PASS" if ok else "FAIL")
        failures += ok is False
        rows.append(f"[{status}] {what}: {why}")
        print(rows[-1], flush=True)

    for group in ladders(rungs):
        run_ladder(a, root, group, fixtures, only, work, record)
    print(f"\nselftest: {len(rows)} checks, {failures} failed")
    with open(os.path.join(a.work, "selftest.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    return 1 if failures else 0


def run_ladder(a, root, rungs, fixtures, only, work, record):
    """The references, the stubs and the fixtures of rungs of one ladder."""
    _ship, _stubbed, declared = handout.plan(root, rungs)
    if "reference" in only:
        parts, meta, _ = graded(grade_args(a, root, rungs, work), rungs, record, "reference")
        for r in rungs:
            mine = [p for p in parts if p.rung.startswith(r + " ")]
            lost = [f"{p.part} {p.score:g}/{p.max_score:g}" for p in mine if not p.skipped and p.score < p.max_score]
            ran = [p for p in mine if not p.skipped]
            record(f"reference {r}", None if len(ran) < len(mine) and not lost else not lost,
                   "full marks" if not lost and len(ran) == len(mine) else
                   ("lost " + ", ".join(lost) if lost else f"{len(ran)} of {len(mine)} parts ran (no GPU?)"))
            for p in mine:
                print(f"    {p.part}: {p.score:g}/{p.max_score:g} " + (p.output.splitlines()[0] if p.output else ""))
    if "stub" in only:
        stub_dir = os.path.join(a.work, "handout" + ("-" + rungs[0].split("-")[0] if "-" in rungs[0] else ""))
        try:
            handout.write_handout(root, rungs, stub_dir, force=True)
            parts, _meta, _ = graded(grade_args(a, stub_dir, rungs, work, skip_performance=True), rungs, record, "stub")
        except handout.HandoutError as e:  # a leak or a missing region: no stub to grade
            parts = []
            for r in rungs:
                record(f"stub {r}", False, f"the handout cannot be written: {e}")
        for r in rungs if parts else ():
            mine = [p for p in parts if p.rung.startswith(r + " ")]
            pub, pub_max, skip = points(mine, "public")
            hid, hid_max, _ = points(mine, "hidden")
            todo = any("TODO(stage" in p.output for p in mine)
            tech, tech_max, _ = points(mine, "technique")
            if skip:  # no GPU: the static half, the stub's machine code lacks the idea
                record(f"stub {r} (static)", tech < tech_max, f"technique {tech:g} / {tech_max:g}")
            else:
                # Zero where every path of the rung is stubbed; rungs 07-09 keep their given general
                # kernel for the problems their tiled path does not take, whose points a stub keeps.
                record(f"stub {r}", pub + hid < (pub_max + hid_max) / 2 and todo,
                       f"correctness {pub + hid:g} of {pub_max + hid_max:g}; TODO message shown: {todo}")
    if "fixtures" in only:
        for fx in fixtures:
            if fx["rung"] not in rungs or not any(fnmatch.fnmatch(fx["name"], g.strip()) for g in a.fixtures.split(",")):
                continue
            sub = os.path.join(a.work, "fixtures", fx["name"].replace("/", "_"))
            apply_fixture(root, fx, declared[fx["rung"]], sub)
            timed = fx["loses"] == "performance"  # only these need the (slow) timing
            # A technique fixture's verdict is its machine code alone: its GPU runs would prove nothing.
            static = a.skip_gpu or fx["loses"] == "technique"
            parts, _meta, out = graded(grade_args(a, sub, [fx["rung"]], work, skip_performance=not timed,
                                                  skip_gpu=static, fail_fast=not timed and fx["loses"] != "nothing"),
                                       [fx["rung"]], record, f"fixture {fx['name']}", [fx.get("leaks-not", "")])
            if fx.get("shows") and not points(parts, "public")[2]:  # the grader's words, once the GPU parts ran
                with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
                    shown = fx["shows"] in f.read()
                record(f"fixture {fx['name']}: the feedback says '{fx['shows']}'", shown,
                       "found in results.json" if shown else "not in results.json")
            ok, why = verdict(parts, fx["loses"], fx.get("rule"))
            record(f"fixture {fx['name']} (must lose {fx['loses']})", ok, why)
            if ok is False:  # where it went wrong: each part that lost points, its first lines
                for p in parts:
                    if not p.skipped and p.score < p.max_score:
                        print(f"    {p.part}: {p.score:g}/{p.max_score:g} " + " | ".join(p.output.splitlines()[:3]))
