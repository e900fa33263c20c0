#!/usr/bin/env python3
"""The rules of scripts/check_program.py, checked without a GPU: a fake ladder program writes the
JSON report the real one would for each outcome, and a fake compute-sanitizer wraps it.
Run by CTest as check_program_rules; `python3 tests/mutants/test_check_program.py` alone too."""
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check_program.py")

# Outcome from $FAKE_MODE: pass, oracle, stage_error, crash, nogpu, cpu, hang, oracle_on_129
# (rejected only on problems with --size 129) or nogpu_invalid_129 (no GPU; exit 2 on those).
FAKE_PROGRAM = r'''#!/usr/bin/env python3
import json, os, sys, time
args = sys.argv[1:]
mode = os.environ["FAKE_MODE"]
if mode == "oracle_on_129":
    mode = "oracle" if "129" in args else "pass"
if mode == "nogpu_invalid_129":
    if "129" in args:
        print("error: invalid problem: padding too large"); sys.exit(2)
    mode = "nogpu"
if mode == "crash":
    print("error: something outside the stage broke"); sys.exit(2)
if mode == "hang":
    time.sleep(60)
stage = {"id": "07", "name": "fake", "gpu": mode != "cpu", "ran": mode in ("pass", "oracle"), "note": ""}
if stage["ran"]:
    stage["vs_oracle"] = {"pass": mode != "oracle", "worst_ratio_to_tolerance": 1e3 if mode == "oracle" else 0.1, "nan_count": 0}
elif mode == "stage_error":
    stage["note"] = "error: CUDA error: an illegal memory access was encountered"
elif mode == "nogpu":
    stage["note"] = "skipped: no CUDA device (fake)"
report = {"device": "" if mode in ("nogpu", "cpu") else "Fake GPU", "stages": [stage]}
json.dump(report, open(args[args.index("--json") + 1], "w"))
sys.exit(1 if mode in ("oracle", "stage_error") else 0)
'''

# Reports $FAKE_SANITIZER_ERRORS errors (exit 99 if any); $FAKE_SANITIZER=unusable: cannot use
# the device; =broken: fails before running the program.
FAKE_SANITIZER = r'''#!/usr/bin/env python3
import os, subprocess, sys
args = sys.argv[1:]
exitcode = int(args[args.index("--error-exitcode") + 1])
program = next(a for a in args if a.endswith("fake_program"))
print("========= COMPUTE-SANITIZER")
if os.environ.get("FAKE_SANITIZER") == "unusable":
    print("========= Error: Device not supported"); sys.exit(2)
if os.environ.get("FAKE_SANITIZER") == "broken":
    print("========= Error: unrecognized option"); sys.exit(1)
rc = subprocess.call(args[args.index(program):])
errors = int(os.environ.get("FAKE_SANITIZER_ERRORS", "0"))
print(f"========= ERROR SUMMARY: {errors} errors")
sys.exit(exitcode if errors else rc)
'''


class CheckProgramRules(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="check_program_rules_")
        cls.program = cls.write("fake_program", FAKE_PROGRAM)
        cls.sanitizer = cls.write("fake-compute-sanitizer", FAKE_SANITIZER)
        cls.problems = cls.write("fake.problems", textwrap.dedent("""\
            # two problems, two distributions
            @distributions exact structured
            --batch 2 --size 9 7
            --batch 1 --size 129 131 --padding 1
            """))

    @classmethod
    def write(cls, name, text):
        path = os.path.join(cls.dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        return path

    def check(self, mode, expect, tool="none", env=None, extra=()):
        cmd = [sys.executable, DRIVER, "--program", self.program, "--problems", self.problems,
               "--expect", expect, "--tool", tool, "--sanitizer", self.sanitizer, *extra]
        r = subprocess.run(cmd, env={**os.environ, "FAKE_MODE": mode, **(env or {})},
                           capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout

    def test_without_gpu_everything_skips(self):
        for expect in ("accept", "reject"):
            for tool in ("none", "memcheck"):
                self.assertEqual(self.check("nogpu", expect, tool)[0], 77, (expect, tool))

    def test_correct_stage_is_accepted_and_survives_as_mutant(self):
        self.assertEqual(self.check("pass", "accept")[0], 0)
        rc, out = self.check("pass", "reject")
        self.assertEqual(rc, 1)
        self.assertIn("survived all 4 runs", out)

    def test_oracle_failure_rejects(self):
        self.assertEqual(self.check("oracle", "reject")[0], 0)
        self.assertEqual(self.check("oracle", "accept")[0], 1)
        rc, out = self.check("oracle_on_129", "reject")
        self.assertEqual(rc, 0)
        self.assertIn("[1/4]", out)  # the first run passed, the second rejected
        self.assertIn("REJECTED (oracle", out)

    def test_stage_error_counts_only_for_memcheck(self):
        rc, out = self.check("stage_error", "reject")
        self.assertEqual(rc, 1)
        self.assertIn("does not run a tiny problem", out)
        self.assertEqual(self.check("stage_error", "reject", "memcheck")[0], 0)

    def test_a_crash_is_never_evidence(self):
        # exit 2 with no report: a bad option or a host fault, not the kernel, even under memcheck.
        self.assertEqual(self.check("crash", "reject")[0], 1)
        self.assertEqual(self.check("crash", "reject", "memcheck")[0], 1)

    def test_sanitizer_errors(self):
        errors = {"FAKE_SANITIZER_ERRORS": "3"}
        self.assertEqual(self.check("pass", "accept", "racecheck")[0], 0)
        self.assertEqual(self.check("pass", "accept", "racecheck", errors)[0], 1)
        rc, out = self.check("pass", "reject", "synccheck", errors)
        self.assertEqual(rc, 0)
        self.assertIn("REJECTED (sanitizer", out)
        self.assertEqual(self.check("pass", "accept", "initcheck", {"FAKE_SANITIZER": "unusable"})[0], 77)
        # A sanitizer that breaks without reporting an error is no evidence, even for memcheck.
        rc, out = self.check("pass", "reject", "memcheck", {"FAKE_SANITIZER": "broken"})
        self.assertEqual(rc, 1)
        self.assertIn("infrastructure failure", out)

    def test_cpu_stage_is_not_sanitized(self):
        self.assertEqual(self.check("cpu", "accept", "memcheck")[0], 77)

    def test_invalid_problem_fails_even_without_gpu(self):
        rc, out = self.check("nogpu_invalid_129", "accept")
        self.assertEqual(rc, 1)
        self.assertIn("is not valid", out)

    def test_hang_is_an_infrastructure_failure(self):
        rc, out = self.check("hang", "reject", extra=("--timeout", "2"))
        self.assertEqual(rc, 1)
        self.assertIn("timed out", out)


if __name__ == "__main__":
    unittest.main()
