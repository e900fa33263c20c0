#!/usr/bin/env python3
"""The grader's isolation (grader/sandbox.py) from the inside, without a GPU: a probe that uses
raw system calls (grader/tests/testdata/isolation_probe.c) runs through runs.Jail, the path every
student program of a grading takes, beside a stand-in grader process that holds the secret in
its environment and names the secret file, the work folder and the instructor's tree on its
command line. Under bwrap and under the 'user' isolation (root only) the probe must find
nothing; without isolation it must find all of it (the probe can fail). Also: leftover
processes die with the run, nothing of the grader's environment reaches the program, and the
grading's uid cannot write the instructor's folders."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from grader import runs, sandbox  # noqa: E402

PROBE = os.path.join(ROOT, "grader", "tests", "testdata", "isolation_probe.c")
SECRET = "probe-secret-0123456789abcdef"


class IsolationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ladder-sandbox-test-")
        os.chmod(cls.tmp, 0o755)
        cls.probe = os.path.join(cls.tmp, "probe")
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise unittest.SkipTest("no C compiler")
        subprocess.run([cc, "-O1", "-o", cls.probe, PROBE], check=True)
        os.chmod(cls.probe, 0o755)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        """A stand-in instructor: its tree with the hidden problems, the secret file, a work
        folder with a reference build, and a process whose environment and command line hold
        them, as a careless grader's would."""
        base = tempfile.mkdtemp(dir=self.tmp)
        os.chmod(base, 0o755)
        self.instructor = os.path.join(base, "instructor")
        os.makedirs(os.path.join(self.instructor, "grader", "hidden"))
        os.makedirs(os.path.join(self.instructor, "scripts"))
        for rel in ("grader/hidden/hidden.problems", "scripts/assignment.py"):
            with open(os.path.join(self.instructor, rel), "w") as f:
                f.write("@category x\n")
        self.secret_file = os.path.join(base, "secret")
        with open(self.secret_file, "w") as f:
            f.write(SECRET)
        self.work = os.path.join(base, "work")
        os.makedirs(os.path.join(self.work, "reference-build"))
        with open(os.path.join(self.work, "reference-build", "CMakeCache.txt"), "w") as f:
            f.write("reference\n")
        for d, _, files in os.walk(base):  # everything world-readable: the isolation must hide it
            os.chmod(d, 0o755)
            for n in files:
                os.chmod(os.path.join(d, n), 0o644)
        self.grader = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)", os.path.join(self.instructor, "scripts", "assignment.py"),
             "--secret-file", self.secret_file, "--work", self.work],
            env={**os.environ, "LADDER_GRADER_SECRET": SECRET})
        self.addCleanup(self.grader.wait)
        self.addCleanup(self.grader.kill)
        self.grading = grading = os.path.join(self.work, "grading-test")
        os.makedirs(grading)
        os.chmod(self.work, 0o711)
        os.chmod(grading, 0o711)
        shutil.copy(self.probe, os.path.join(grading, "probe"))

    def jail(self, isolation):
        lease = sandbox.UidLease() if isolation != "none" else None
        if lease:
            self.addCleanup(lease.release)
        jail = runs.Jail(self.grading, isolation, lease.uid if lease else None)
        shutil.copy(self.probe, os.path.join(jail.dirs["tree"], "probe"))
        runs.readable(jail.dirs["tree"])
        if isolation == "user":
            sandbox.make_private(jail.uid, [self.instructor, self.secret_file, os.path.join(self.work, "reference-build")])
        return jail

    def probe_in(self, isolation):
        jail = self.jail(isolation)
        p, _io = jail.run(lambda io: [jail.inside("tree", "probe")], 120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("probed processes: ", p.stdout)
        # Only this test's own stand-ins count: other gradings may run on the machine.
        ours = (self.instructor, self.secret_file, self.work, f"pid {self.grader.pid}")
        return [line for line in p.stdout.splitlines()
                if line.startswith("FOUND") and any(line.endswith(x) or x + "/" in line for x in ours)]

    def test_probe_finds_everything_without_isolation(self):
        """The control: run as the grader, the probe finds the secret and every private path."""
        found = "\n".join(self.probe_in("none"))
        for what in ("the secret in the environment", "the secret file readable", "the reference build readable",
                     "the hidden problems readable"):
            self.assertIn(what, found)

    @unittest.skipUnless(sandbox.bwrap_works()[0], "bwrap cannot start here")
    def test_bwrap_hides_everything(self):
        self.assertEqual(self.probe_in("bwrap"), [])

    @unittest.skipUnless(os.geteuid() == 0, "the 'user' isolation needs a root grader")
    def test_user_isolation_hides_everything(self):
        self.assertEqual(self.probe_in("user"), [])
        self.assertEqual(os.stat(self.instructor).st_mode & 0o077, 0)  # made owner-only by make_private
        self.assertEqual(os.stat(self.secret_file).st_mode & 0o077, 0)

    @unittest.skipUnless(os.geteuid() == 0, "the 'user' isolation needs a root grader")
    def test_user_isolation_refuses_what_it_cannot_hide(self):
        """A private path the grader does not own (so cannot make owner-only) stops official grading."""
        jail = self.jail("none")
        other = os.path.join(self.tmp, "not-mine")
        os.makedirs(other, exist_ok=True)
        os.chown(other, 12345, 12345)
        os.chmod(other, 0o755)
        lease = sandbox.UidLease()
        self.addCleanup(lease.release)
        with self.assertRaisesRegex(sandbox.SandboxError, "could read .*not-mine"):
            sandbox.make_private(lease.uid, [other])
        del jail

    def isolations(self):
        modes = [m for m, ok in (("bwrap", sandbox.bwrap_works()[0]), ("user", os.geteuid() == 0)) if ok]
        if not modes:
            self.skipTest("no isolation can run here")
        return modes

    def test_leftovers_die_and_environment_is_clean(self):
        """A program that leaves a process behind returns at once and the process is gone; the
        program's environment is PATH, HOME, TMPDIR, LANG (and the GPU's) alone."""
        for isolation in self.isolations():
            with self.subTest(isolation=isolation):
                jail = self.jail(isolation)
                t0 = time.monotonic()
                p, _ = jail.run(lambda io: ["sh", "-c", "(setsid sleep 300 &); env"], 60)
                self.assertLess(time.monotonic() - t0, 30)
                names = {line.split("=", 1)[0] for line in p.stdout.splitlines() if "=" in line}
                self.assertLessEqual(names - {"PWD", "SHLVL", "_", "CUDA_VISIBLE_DEVICES"},
                                     {"PATH", "HOME", "TMPDIR", "LANG"})
                if isolation == "user":
                    self.assertEqual(sandbox.processes_of(jail.uid), [])

    def test_cannot_write_the_tree(self):
        for isolation in self.isolations():
            with self.subTest(isolation=isolation):
                jail = self.jail(isolation)
                p, _ = jail.run(lambda io: ["sh", "-c", f"touch {jail.inside('tree', 'x')} && echo WROTE"], 60)
                self.assertNotIn("WROTE", p.stdout)


class ChooseTest(unittest.TestCase):
    def test_choose(self):
        ok = sandbox.bwrap_works()[0]
        if ok:
            self.assertEqual(sandbox.choose("auto", True)[0], "bwrap")
        if os.geteuid() == 0:
            self.assertEqual(sandbox.choose("user", True)[0], "user")
        else:
            with self.assertRaisesRegex(sandbox.SandboxError, "root"):
                sandbox.choose("user", True)
            if not ok:
                with self.assertRaisesRegex(sandbox.SandboxError, "official grading needs isolation"):
                    sandbox.choose("auto", True)
        self.assertEqual(sandbox.choose("none", False)[0], "none")
        with self.assertRaisesRegex(sandbox.SandboxError, "official grading needs isolation"):
            sandbox.choose("none", True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
