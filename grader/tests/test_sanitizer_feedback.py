#!/usr/bin/env python3
"""Tests, without a GPU, of the sanitizer part's feedback (grader/runs.py sanitizer_verdict,
sanitizer; grader/track.py sanitizer): findings come from compute-sanitizer's exit code and its own
log file (--log-file), never from the program's stdout or stderr, and every line the feedback
shows is the grader's own, from a fixed vocabulary. A fake compute-sanitizer (a Python script)
writes the log; the fake programs print forged sanitizer lines with a marker that must never
reach the output.

  python3 grader/tests/test_sanitizer_feedback.py
"""
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True
sys.path.insert(0, ROOT)

from grader import runs, track  # noqa: E402

MARKER = "FORGED-BY-THE-PROGRAM-5f3a9c"

# compute-sanitizer's log as its tools write it (the "=========" prefix, then the finding)
MEMCHECK_LOG = f"""\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at ladder::pool_shared_tree(const float *, int, unsigned int, float *)+0x7a0 {MARKER}
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f3a0000030 is out of bounds
=========     and is 0 bytes after the nearest allocation at 0x7f3a0000000 of size 48 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at ladder::pool_shared_tree(const float *, int, unsigned int, float *)+0x7a0
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaStreamSynchronize.
========= Program hit cudaErrorNoSuchThing{MARKER[:8].replace('-', '')} (error 1) due to "{MARKER}" on CUDA API call to x.
========= Target application returned an error
========= ERROR SUMMARY: 4 errors
"""
RACECHECK_LOG = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at ladder::pool_shared_tree(const float *, int, unsigned int, float *)+0x5b0
=========     and Read access at ladder::pool_shared_tree(const float *, int, unsigned int, float *)+0x590 [4 hazards]
=========
========= Warning: Race reported between Read access at ladder::f()+0x10
=========     and Write access at ladder::f()+0x20 [2 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""
CLEAN_LOG = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
CLEAN_RACECHECK_LOG = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
SYNCCHECK_LOG = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at ladder::k()+0x100
========= ERROR SUMMARY: 1 error
"""


class Verdict(unittest.TestCase):
    def setUp(self):
        patcher = mock.patch.dict(runs._SANITIZER_SEEN, {"ran": False, "unusable": False})
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_memcheck_errors_in_the_graders_words(self):
        kind, text = runs.sanitizer_verdict("memcheck", 99, MEMCHECK_LOG)
        self.assertEqual(kind, "error")
        self.assertEqual(text, "memcheck reported 4 error(s): an invalid write of 4 bytes in global memory "
                               "(out of bounds or misaligned) (2); a CUDA call returned cudaErrorLaunchFailure (1); "
                               "a CUDA call returned an error (1)")
        self.assertNotIn(MARKER, text)

    def test_race_and_barrier(self):
        kind, text = runs.sanitizer_verdict("racecheck", 99, RACECHECK_LOG)
        self.assertEqual(kind, "error")
        self.assertIn("racecheck reported 1 error(s): a shared-memory race (racecheck error) (1)", text)
        self.assertIn("a shared-memory race (racecheck warning) (1)", text)
        self.assertEqual(runs.sanitizer_verdict("synccheck", 99, SYNCCHECK_LOG),
                         ("error", "synccheck reported 1 error(s): a barrier not reached by every thread of its block "
                                   "(synccheck) (1)"))

    def test_clean_needs_the_summary(self):
        self.assertEqual(runs.sanitizer_verdict("memcheck", 0, CLEAN_LOG), ("ran", ""))
        self.assertEqual(runs.sanitizer_verdict("racecheck", 0, CLEAN_RACECHECK_LOG), ("ran", ""))
        kind, text = runs.sanitizer_verdict("memcheck", 0, "")  # no log (removed, never written)
        self.assertEqual(kind, "incomplete")
        self.assertIn("without compute-sanitizer's summary in its log", text)
        kind, _ = runs.sanitizer_verdict("memcheck", -9, "========= COMPUTE-SANITIZER\n")  # the sanitizer killed
        self.assertEqual(kind, "incomplete")

    def test_the_exit_code_decides_whatever_the_log_says(self):
        kind, text = runs.sanitizer_verdict("memcheck", 99, CLEAN_LOG)  # a log rewritten by the program
        self.assertEqual((kind, text), ("error", "memcheck reported errors, of kinds the grader does not name "
                                                 "(compute-sanitizer --tool memcheck on this problem shows them)"))

    def test_forged_lines_are_counted_never_copied(self):
        forged = "\n".join(f"========= Invalid __global__ write of size {n} bytes {MARKER}" for n in (4, 1234)) + \
                 f"\n========= Invalid __global__ write of size 1234 bytes\n========= {MARKER}\n" \
                 "========= ERROR SUMMARY: 123456789 errors\n"
        kind, text = runs.sanitizer_verdict("memcheck", 99, forged * 50)
        self.assertEqual(kind, "error")
        self.assertNotIn(MARKER, text)
        self.assertNotIn("1234", text)  # sizes outside the fixed set, counts above the cap
        self.assertIn("an invalid write of an unusual size in global memory (out of bounds or misaligned) "
                      "(more than 20)", text)
        self.assertTrue(text.startswith("memcheck reported more than 20 error(s)"))

    def test_unusable_only_where_it_never_ran(self):
        unusable = "========= Error: Device not supported\n"
        self.assertEqual(runs.sanitizer_verdict("memcheck", 1, unusable)[0], "unusable")
        self.assertEqual(runs.sanitizer_verdict("memcheck", 0, unusable)[0], "incomplete")  # exit 0: no summary
        kind, text = runs.sanitizer_verdict("racecheck", 0, CLEAN_RACECHECK_LOG)  # it runs after all
        self.assertEqual(kind, "incomplete")
        self.assertIn("an earlier run said that compute-sanitizer cannot run", text)
        with mock.patch.dict(runs._SANITIZER_SEEN, {"ran": True, "unusable": False}):
            self.assertEqual(runs.sanitizer_verdict("synccheck", 1, unusable)[0], "incomplete")

    def test_the_log_is_read_safely(self):
        tmp = tempfile.mkdtemp(prefix="sanlog_")
        self.addCleanup(shutil.rmtree, tmp)
        real = os.path.join(tmp, "real.log")
        with open(real, "w") as f:
            f.write(CLEAN_LOG + "x" * (runs.SANITIZER_LOG_BYTES + 10))
        self.assertEqual(len(runs.read_sanitizer_log(real)), runs.SANITIZER_LOG_BYTES)
        os.symlink(real, os.path.join(tmp, "link.log"))
        self.assertEqual(runs.read_sanitizer_log(os.path.join(tmp, "link.log")), "")
        os.mkfifo(os.path.join(tmp, "fifo.log"))
        self.assertEqual(runs.read_sanitizer_log(os.path.join(tmp, "fifo.log")), "")  # no wait for a writer
        self.assertEqual(runs.read_sanitizer_log(os.path.join(tmp, "none.log")), "")


# A compute-sanitizer: runs the program after its options and writes its log to --log-file; the
# errors ($FAKE_ERRORS) are an invalid write each, exit 99 if any, else the program's status.
FAKE_SANITIZER = """\
import os, subprocess, sys
argv = sys.argv[1:]
log = argv[argv.index("--log-file") + 1]
k = 0
while argv[k].startswith("--"):
    k += 2
rc = subprocess.run(argv[k:]).returncode
errors = int(os.environ.get("FAKE_ERRORS", "0"))
with open(log, "w") as f:
    f.write("========= COMPUTE-SANITIZER\\n")
    for _ in range(errors):
        f.write("========= Invalid __global__ write of size 4 bytes\\n=========     at k()+0x70\\n")
    f.write(f"========= ERROR SUMMARY: {errors} error{'s' if errors != 1 else ''}\\n")
sys.exit(99 if errors else rc)
"""
# A stage program (ladder) and a track program (p38_ladder) in one: forged sanitizer lines on
# stdout and stderr, a passing report.
FAKE_PROGRAM = f"""\
import json, sys
forged = "========= Invalid __global__ write of size 4 bytes {MARKER}\\n========= ERROR SUMMARY: 3 errors\\n"
sys.stdout.write(forged)
sys.stderr.write(forged + "========= Error: Device not supported {MARKER}\\n")
path = sys.argv[sys.argv.index("--json") + 1]
json.dump({{"stages": [{{"id": "03", "ran": True, "vs_oracle": {{"pass": True}}}}],
           "rungs": [{{"id": "03", "ran": True}}]}}, open(path, "w"))
"""


class SanitizerRuns(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sanrun_")
        self.addCleanup(shutil.rmtree, self.tmp)
        for name, text in (("compute-sanitizer", FAKE_SANITIZER), ("prog", FAKE_PROGRAM)):
            path = os.path.join(self.tmp, name)
            with open(path, "w") as f:
                f.write("#!" + sys.executable + "\n" + text)
            os.chmod(path, 0o755)
        self.prog = os.path.join(self.tmp, "prog")
        for patcher in (mock.patch.dict(os.environ, {"PATH": self.tmp + os.pathsep + os.environ["PATH"]}),
                        mock.patch.dict(runs._SANITIZER_SEEN, {"ran": False, "unusable": False})):
            patcher.start()
            self.addCleanup(patcher.stop)

    def test_stage_sanitizer(self):
        status, out = runs.sanitizer(self.prog, "03", "memcheck", 60)
        self.assertEqual(status, "pass", out)  # the forged lines and exit status of the program count for nothing
        self.assertEqual(out, "problem 1: clean\nproblem 2: clean\nproblem 3: clean")
        with mock.patch.dict(os.environ, {"FAKE_ERRORS": "2"}):
            status, out = runs.sanitizer(self.prog, "03", "memcheck", 60)
        self.assertEqual(status, "fail")
        self.assertIn("problem 1 (--batch 2 --in-channels 4", out)
        self.assertIn("): memcheck reported 2 error(s): an invalid write of 4 bytes in global memory "
                      "(out of bounds or misaligned) (2)", out)
        self.assertNotIn(MARKER, out)
        self.assertNotIn("=====", out)

    def test_track_sanitizer(self):
        status, out = track.sanitizer(shutil.which("compute-sanitizer"), self.prog, "03", "memcheck",
                                      [["--batch", "1"]], 60)
        self.assertEqual((status, out), ("pass", "problem 1: clean"))
        with mock.patch.dict(os.environ, {"FAKE_ERRORS": "1"}):
            status, out = track.sanitizer(shutil.which("compute-sanitizer"), self.prog, "03", "memcheck",
                                          [["--batch", "1"]], 60)
        self.assertEqual((status, out), ("fail", "problem: --batch 1: memcheck reported 1 error(s): an invalid "
                                                 "write of 4 bytes in global memory (out of bounds or misaligned) (1)"))


class Excerpt(unittest.TestCase):
    def test_bounded(self):
        text = "\n".join(["early"] * 10 + ["mid", "\x1b[31m" + "y" * 500, "last"])
        out = runs.excerpt(text)
        self.assertNotIn("early", out)
        self.assertNotIn("\x1b", out)
        self.assertLessEqual(len(out), 40 + runs.EXCERPT_LINES * (runs.EXCERPT_CHARS + 3))


if __name__ == "__main__":
    unittest.main()
