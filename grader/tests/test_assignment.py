#!/usr/bin/env python3
"""CPU tests of the classroom-assignment tooling: scripts/assignment.py and the Python half of
grader/ (markers, handouts and their leak check, problem lists, reports, the self-test's fixtures,
the integrity check). No GPU and no build needed; about ten seconds, most of them compiling small
objects for the integrity tests (g++, and nvcc where there is one). Run: python3 grader/tests/test_assignment.py
"""
import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True  # leave no __pycache__ in grader/
sys.path.insert(0, ROOT)  # the packages' root: this test is an entry point

from grader import build, grade, handout, integrity, markers, problems, programs, reports, rung_meta, rungs, runs, sandbox, selftest, technique, todo_hints, track  # noqa: E402

ENV = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")


def cli(*args):
    """Runs scripts/assignment.py; returns the CompletedProcess (text)."""
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "assignment.py"), *args],
                          capture_output=True, text=True, timeout=120, env=ENV)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def where(path, line):  # a message that starts by naming path:line
    return "^" + re.escape(f"{path}:{line}:")


CPP = """\
int a;
  // BEGIN SOLUTION
  // STUB: ladder_todo("first");
  // STUB: return 0;
  int x = 1;
  // END SOLUTION
// BEGIN INSTRUCTOR
// the answers: docs/answers.md
// END INSTRUCTOR
    // BEGIN SOLUTION 02
    // STUB: ladder_todo("second");
    y();
    // END SOLUTION
int b;
"""

MD = """\
# Title
<!-- BEGIN SOLUTION 03 04 -->
<!-- STUB: *Yours to write.* -->
```cuda
sh[tid] = v;
```
<!-- END SOLUTION -->
<!-- BEGIN INSTRUCTOR -->
[answers](../../docs/answers.md)
<!-- END INSTRUCTOR -->
text
"""


class MarkersTest(unittest.TestCase):
    def test_cpp_regions_and_render(self):
        p = markers.parse("stages/03_x/f.cu", CPP, "03")
        r1, r2 = p.regions()
        self.assertEqual((r1.owners, r1.begin_line, r1.indent), (frozenset({"03"}), 2, "  "))
        self.assertEqual(r1.stub, ['ladder_todo("first");', "return 0;"])
        self.assertEqual(r1.solution, ["  int x = 1;\n"])
        self.assertEqual((r2.owners, r2.begin_line, r2.indent), (frozenset({"02"}), 10, "    "))
        self.assertEqual(p.parts.count(None), 3)  # the instructor region's lines
        self.assertEqual(markers.render(p, {"03"}), 'int a;\n  ladder_todo("first");\n  return 0;\n    y();\nint b;\n')
        self.assertEqual(markers.render(p, {"02"}), 'int a;\n  int x = 1;\n    ladder_todo("second");\nint b;\n')
        self.assertEqual(markers.instructor_text(p), "int a;\n  int x = 1;\n    y();\nint b;\n")

    def test_markdown_and_multi_owner(self):
        p = markers.parse("stages/04_w/README.md", MD, "04")
        (r,) = p.regions()
        self.assertEqual(r.owners, frozenset({"03", "04"}))  # named owners replace the folder's
        self.assertEqual(r.stub, ["*Yours to write.*"])
        stubbed = "# Title\n*Yours to write.*\ntext\n"
        self.assertEqual(markers.render(p, {"04"}), stubbed)
        self.assertEqual(markers.render(p, {"03"}), stubbed)
        self.assertEqual(markers.render(p, {"05"}), "# Title\n```cuda\nsh[tid] = v;\n```\ntext\n")

    def test_cmake_form(self):
        p = markers.parse("CMakeLists.txt", "# BEGIN SOLUTION 03\n# STUB: set(X 0)\nset(X 1)\n# END SOLUTION\n")
        self.assertEqual(markers.render(p, {"03"}), "set(X 0)\n")
        self.assertEqual(markers.render(p, {"04"}), "set(X 1)\n")

    def test_malformed_regions_name_file_and_line(self):
        lib = "stages/lib/x.cuh"
        cases = {
            "nested BEGIN": ("f.cu", "// BEGIN SOLUTION\n// STUB: a\nx\n// BEGIN SOLUTION\n// END SOLUTION\n", 4),
            "unclosed": ("f.cu", "a\n// BEGIN SOLUTION\n// STUB: a\nx\n", 2),
            "END without BEGIN": ("f.cu", "a\n// END SOLUTION\n", 2),
            "STUB after solution": ("f.cu", "// BEGIN SOLUTION\n// STUB: a\nx\n// STUB: b\n// END SOLUTION\n", 4),
            "STUB outside a region": ("f.cu", "x\n// STUB: a\n", 2),
            "lib region without owner": (lib, "x\n// BEGIN SOLUTION\n// STUB: a\ny\n// END SOLUTION\n", 2),
            "one-digit owner": ("f.cu", "x\n// BEGIN SOLUTION 3\n", 2),
            "solution in instructor": ("f.cu", "// BEGIN INSTRUCTOR\n// BEGIN SOLUTION\n", 2),
            "unclosed instructor": ("f.cu", "x\n<!-- BEGIN INSTRUCTOR -->\n", 2),
        }
        for name, (path, text, line) in cases.items():
            with self.subTest(name):
                owner = handout.default_owner(path) if path.startswith("stages/") else "03"
                with self.assertRaisesRegex(markers.MarkerError, where(path, line)):
                    markers.parse(path, text, owner)
        self.assertIsNone(handout.default_owner(lib))
        self.assertEqual(handout.default_owner("stages/03_shared_tree/shared_tree.cu"), "03")

    def test_track_owners(self):
        rung = "tracks/p38_spatial_softmax/rungs/03_block_tree/block_tree.cu"
        self.assertEqual(handout.default_owner(rung), "p38-03")
        self.assertIsNone(handout.default_owner("tracks/p38_spatial_softmax/device/warp.cuh"))
        self.assertIsNone(handout.default_owner("tracks/p38_spatial_softmax/runner.cu"))
        self.assertEqual(handout.default_owner("tracks/p38_spatial_softmax/rungs/03_block_tree/notes.md"), "p38-03")
        self.assertIsNone(handout.default_owner("tracks/p38_spatial_softmax/rungs/03_block_tree.cu"))  # in no rung folder
        p = markers.parse(rung, CPP, handout.default_owner(rung))
        self.assertEqual([r.owners for r in p.regions()], [frozenset({"p38-03"}), frozenset({"02"})])
        text = "x\n// BEGIN SOLUTION p38-04 03\n// STUB: a\ny\n// END SOLUTION\n"
        (r,) = markers.parse("tracks/p38_x/device/w.cuh", text).regions()
        self.assertEqual(r.owners, frozenset({"p38-04", "03"}))  # a track's owner and a stage's apart
        self.assertEqual(markers.render(markers.parse("f.cu", text), {"04"}), "x\ny\n")
        for bad in ("// BEGIN SOLUTION p38-3\n", "// BEGIN SOLUTION P38-03\n", "// BEGIN SOLUTION p38_03\n"):
            with self.subTest(bad), self.assertRaisesRegex(markers.MarkerError, where("f.cu", 2)):
                markers.parse("f.cu", "x\n" + bad, "03")

    def test_lookalike_marker_is_an_error(self):
        # A typo in both markers would otherwise ship the solution as ordinary lines.
        cases = {
            "typo outside a region": ("x\n// BEGIN SOLUTON\nsecret();\n// END SOLUTON\n", 2),
            "typo inside a region": ("// BEGIN SOLUTION\n// STUB: a\nx\n// END SOLUTON\ny\n// END SOLUTION\n", 4),
        }
        for name, (text, line) in cases.items():
            with self.subTest(name), self.assertRaisesRegex(markers.MarkerError, where("f.cu", line)):
                markers.parse("f.cu", text, "03")

    def test_region_without_stub(self):
        p = markers.parse("f.cu", "a\n// BEGIN SOLUTION\nx\n// END SOLUTION\n", "03")
        self.assertEqual(markers.render(p, {"04"}), "a\nx\n")  # handed complete: fine
        with self.assertRaisesRegex(markers.MarkerError, where("f.cu", 2)):
            markers.render(p, {"03"})


class TreeMarkersTest(unittest.TestCase):
    def test_markers_command(self):
        p = cli("markers")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"(?m)^\d+ solution regions, all well formed$")

    def test_code_regions_of_rungs_01_to_05_stub_with_ladder_todo(self):
        early, owners = {"01", "02", "03", "04", "05"}, set()
        for path in handout.repo_files(ROOT):
            if not (path.startswith("stages/") and path.endswith((".cu", ".cuh"))):
                continue
            for region in handout.parse_file(ROOT, path).regions():
                owners |= region.owners
                if region.owners & early:
                    self.assertTrue(any("ladder_todo(" in s for s in region.stub),
                                    f"{path}:{region.begin_line}: no ladder_todo(...) stub line")
        self.assertLessEqual(early, owners, "every rung 01..05 owns a code region")

    def kernel_files(self):
        return [p for p in handout.repo_files(ROOT) if todo_hints.is_kernel_file(p)]

    def test_kernel_lines_fit(self):
        """No line of a kernel-bearing file (stages/, tracks/: .cu, .cuh; any source of a rung's
        folder) is longer than todo_hints.MAX_LINE: a stub's long hint lives in the chapter's TODO hints."""
        files = self.kernel_files()
        self.assertIn("tracks/p38_spatial_softmax/rungs/00_cpu_reference/cpu_reference.cpp", files)
        self.assertNotIn("tracks/p38_spatial_softmax/main.cpp", files)
        self.assertIn("stages/09_async_copy/async_copy.cu", files)
        self.assertIn("tracks/p74_backward/device/reduce.cuh", files)
        self.assertEqual(todo_hints.long_lines(ROOT, files), [])

    def test_a_planted_long_line_is_found(self):
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            path = "stages/09_async_copy/async_copy.cu"
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                lines = f.read().splitlines()
            lines.insert(3, "// STUB: ladder_todo(\"09.9\", \"" + "x" * todo_hints.MAX_LINE + "\");")
            lines.insert(5, "y" * todo_hints.MAX_LINE)  # exactly at the limit: fits
            write(os.path.join(tmp, path), "\n".join(lines) + "\n")
            write(os.path.join(tmp, "stages/09_async_copy/README.md"), "z" * 500 + "\n")  # a chapter: not a kernel
            found = todo_hints.long_lines(tmp, [path, "stages/09_async_copy/README.md"])
            self.assertEqual(len(found), 1, found)
            self.assertRegex(found[0], where(path, 4))

    def test_every_stub_names_a_hint_of_its_chapter(self):
        p = cli("markers")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("every stub's hint id names a hint in its chapter", p.stdout)
        files = [(f, handout.parse_file(ROOT, f)) for f in handout.repo_files(ROOT)
                 if f.startswith(("stages/", "tracks/")) and f.endswith((".cu", ".cuh", ".md"))]
        self.assertEqual(todo_hints.problems(ROOT, files), [])
        ids = [i for _, parsed in files for r in parsed.regions() for i, _ in todo_hints.stub_ids(r)]
        self.assertGreater(len(ids), 60)
        self.assertIn("09.1", ids)
        self.assertIn("p74-07.2", ids)  # a TODO(...) comment in a stub that runs nothing

    def test_hint_problems_are_found(self):
        """Planted: a ladder_todo without its id, a missing hint, a stub of stage 13 naming stage
        12's hint, a shared id, and a hint no stub names."""
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            write(os.path.join(tmp, "stages/12_a/README.md"), "# 12\n\n## TODO hints\n\n- **12.1**: x.\n- **12.2**: y.\n")
            write(os.path.join(tmp, "stages/13_b/README.md"), "# 13\n\n## TODO hints\n\n- **13.1**: z.\n")
            src = ("  // BEGIN SOLUTION\n  // STUB: ladder_todo(\"13.1\", \"a\");\n  // STUB: ladder_todo(\"12.1\", \"b\");\n"
                   "  x();\n  // END SOLUTION\n  // BEGIN SOLUTION\n  // STUB: ladder_todo(\"no id\");\n"
                   "  // STUB: // TODO(13.1): again\n  // STUB: ladder_todo(\"13.7\", \"c\");\n  y();\n  // END SOLUTION\n")
            path = "stages/13_b/b.cu"
            files = [(path, markers.parse(path, src, "13"))]
            found = todo_hints.problems(tmp, files)
            expected = [(path, 1, "hint 12.1 is in a chapter that need not ship"),
                        (path, 6, "ladder_todo takes the hint id first"),
                        (path, 6, "hint id 13.1 is used already at stages/13_b/b.cu:1"),
                        (path, 6, "hint 13.7 is missing from stages/13_b/README.md"),
                        ("stages/12_a/README.md", 6, "hint 12.2 is named by no stub")]
            self.assertEqual(len(found), len(expected), found)
            for (f, line, text), got in zip(expected, found):
                self.assertRegex(got, where(f, line))
                self.assertIn(text, got)
            # A stages/lib/ file may name the chapter of any owner of its region.
            lib = "stages/lib/x.cuh"
            ok = "  // BEGIN SOLUTION 12 13\n  // STUB: ladder_todo(\"12.2\", \"b\");\n  x();\n  // END SOLUTION\n"
            self.assertFalse([p for p in todo_hints.problems(tmp, [(lib, markers.parse(lib, ok))]) if "x.cuh" in p])


class HandoutCase(unittest.TestCase):
    """A handout of RUNGS, written once for the class in a temporary folder (self.out)."""
    RUNGS = ""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ta_")
        cls.out = os.path.join(cls.tmp, "handout")
        cls.made = cli("handout", "--rungs", cls.RUNGS, "--out", cls.out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def setUp(self):
        self.assertEqual(self.made.returncode, 0, self.made.stdout + self.made.stderr)

    def read(self, path, root=None):
        with open(os.path.join(root or self.out, path), encoding="utf-8") as f:
            return f.read()


class HandoutTest(HandoutCase):
    RUNGS = "03,04"

    def files(self, root=None):
        return handout.repo_files(root or self.out)

    def mutant(self, name):
        dst = os.path.join(self.tmp, name)
        shutil.copytree(self.out, dst)
        return dst

    def test_the_grader_imports_in_the_handout(self):
        """Every module the student's grade command loads ships: the grader's packages import
        from the handout alone (not from this tree)."""
        p = subprocess.run([sys.executable, "-c", "import grader.grade, grader.technique, grader.integrity, grader.track"],
                           cwd=self.out, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=""))
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_manifest(self):
        m = json.loads(self.read(handout.MANIFEST))
        self.assertEqual((m["rungs"], m["chosen"]), (["03", "04"], ["03", "04"]))
        self.assertEqual(sorted(m["files"]), ["03", "04"])
        self.assertIn("stages/03_shared_tree/shared_tree.cu", m["files"]["03"])
        self.assertIn("stages/04_warp_shuffle/warp_shuffle.cu", m["files"]["04"])
        self.assertEqual(m["files"], handout.plan(ROOT, ["03", "04"])[2])
        for files in m["files"].values():
            for path in files:
                self.assertTrue(os.path.isfile(os.path.join(self.out, path)), path)

    def test_no_instructor_file_ships(self):
        files = self.files()
        bad = [f for f in files if f.startswith(("grader/hidden", "grader/fixtures", "results/", "profiles/history/"))
               or f.endswith(".mutant") or f == "docs/answers.md"]
        self.assertEqual(bad, [])
        # The committed captures ship for the stages the handout holds (01-04 here), no other.
        shipped = {f for f in files if f.startswith("profiles/")}
        expected = set(handout.PROFILE_COMMON) | {
            f for f in handout.repo_files(ROOT) if (m := handout.PROFILE_FILE.match(f)) and m.group(1)[:2] <= "04"}
        self.assertEqual(shipped, expected)
        self.assertIn("profiles/data/03_shared_tree.txt", shipped)
        self.assertIn("profiles/04_warp_shuffle.md", shipped)
        self.assertIn("grader/public.problems", files)
        self.assertIn("grader/practice.problems", files)
        numbered = {d[:2] for d in os.listdir(os.path.join(self.out, "stages")) if handout.STAGE_DIR.match(d)}
        self.assertEqual(numbered, {r for r in handout.stage_folders(ROOT) if r <= "04"})

    def test_no_marker_and_stubs_in_place(self):
        for path in self.files():
            if handout.has_markers(path):
                for n, line in enumerate(self.read(path).splitlines(), 1):
                    self.assertIsNone(markers.LOOKS_LIKE_MARKER.match(line), f"{path}:{n}: {line}")
        for path in ("stages/03_shared_tree/shared_tree.cu", "stages/04_warp_shuffle/warp_shuffle.cu"):
            self.assertIn("ladder_todo(", self.read(path), path)
        for path in ("stages/01_per_thread_loop/per_thread_loop.cu", "stages/02_atomics/atomics.cu"):
            self.assertNotIn("ladder_todo(", self.read(path), f"{path} is handed complete")

    def test_stub_hints_ship(self):
        """Every stub the handout holds names a hint that its own chapter holds, and the grader's
        TODO line for a stub left in place says where that hint is."""
        stubs = 0
        for path in ("stages/03_shared_tree/shared_tree.cu", "stages/04_warp_shuffle/warp_shuffle.cu",
                     "stages/lib/warp_reduce.cuh"):
            for hint_id, what in todo_hints.TODO_CALL.findall(self.read(path)):
                stubs += 1
                chapter = todo_hints.chapter_of(self.out, hint_id)
                self.assertIn(hint_id, todo_hints.hints_in(self.read(chapter)), f"{path}: {hint_id}")
                self.assertLessEqual(len(what), todo_hints.MAX_LINE)
        self.assertGreaterEqual(stubs, 4)
        files = ["stages/03_shared_tree/shared_tree.cu"]
        self.assertEqual(rungs.stub_todos(ROOT, "03", "stage 03", files, self.out),
                         ["TODO(stage 03): pool_shared_tree: the loads, a tree in shared memory, one atomicAdd "
                          '[hint 03.1: "TODO hints" in stages/03_shared_tree/README.md]'])
        self.assertEqual(rungs.stub_todos(ROOT, "03", "stage 03", files, ROOT), [])  # solved

    def test_check_handout_clean(self):
        p = cli("check-handout", self.out)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(handout.check_handout(ROOT, self.out), [])

    def test_leak_of_a_solution_line(self):
        secrets = handout.solution_lines(ROOT, {"03"})
        line = sorted(s for s, w in secrets.items() if w.startswith("stages/03_shared_tree/shared_tree.cu:")
                      and s.endswith(";"))[0]
        dst, chapter = self.mutant("leak_line"), "stages/03_shared_tree/README.md"
        text = self.read(chapter, dst).rstrip("\n") + "\n    " + line + "\n"
        write(os.path.join(dst, chapter), text)
        found = handout.check_handout(ROOT, dst)
        self.assertEqual(len(found), 1, found)
        self.assertTrue(found[0].startswith(f"{chapter}:{len(text.splitlines())}: solution line (from "), found)
        p = cli("check-handout", dst)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"LEAK: {chapter}:", p.stdout)

    def test_every_absent_solution_line_is_checked(self):
        # A line of a stubbed region in a declared file that the handout does not hold must be a
        # secret of the leak check, or a stray copy of it would pass unseen.
        shipped, rungs = set(), {"03", "04"}
        for path in self.files():
            for line in self.read(path).splitlines() if handout.is_text(path) else ():
                shipped |= handout.forms(line)
        known, missed = shipped | set(handout.solution_lines(ROOT, rungs)), []
        for path in sorted(set(sum(handout.plan(ROOT, sorted(rungs))[2].values(), []))):
            for region in (r for r in handout.parse_file(ROOT, path).regions() if r.owners & rungs):
                missed += [f"{path}:{region.begin_line}: {s}" for line in region.solution for s in handout.forms(line)
                           if len(re.sub(r"\s", "", s)) >= handout.MIN_LEAK_CHARS and s not in known]
        self.assertEqual(missed, [])

    def test_leak_of_hidden_problems(self):
        dst = self.mutant("leak_hidden")
        os.makedirs(os.path.join(dst, "grader", "hidden"))
        shutil.copy(os.path.join(ROOT, "grader", "hidden", "hidden.problems"), os.path.join(dst, "grader", "hidden"))
        self.assertEqual(handout.check_handout(ROOT, dst), ["grader/hidden/hidden.problems: instructor-only file"])

    def test_profile_of_a_later_stage(self):
        dst = self.mutant("leak_profile")
        for path in ("profiles/05_vectorized_loads.md", "profiles/data/05_vectorized_loads.txt"):
            shutil.copy(os.path.join(ROOT, path), os.path.join(dst, path))
        self.assertEqual(handout.check_handout(ROOT, dst), [
            "profiles/05_vectorized_loads.md: the profile of a stage the handout does not hold (stages/05_vectorized_loads/)",
            "profiles/data/05_vectorized_loads.txt: the profile of a stage the handout does not hold "
            "(stages/05_vectorized_loads/)"])

    def test_readme_hardware_note(self):
        """A handout of rung 03 asks for any GPU of sm_75 or newer; one of rung 15 says plainly that
        the rung needs an H100 or H200 (sm_90a) and what happens elsewhere."""
        readme = self.read("README.md")
        self.assertIn("An NVIDIA GPU of compute capability 7.5 or newer", readme)
        self.assertNotIn("H100 or H200", readme)
        self.assertNotIn("sm_90a", readme)
        self.assertNotIn("{{", readme)
        out = os.path.join(self.tmp, "h15")
        p = cli("handout", "--rungs", "15", "--out", out)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        readme = " ".join(self.read("README.md", out).split())
        self.assertIn("An NVIDIA H100 or H200 for rung 15", readme)
        self.assertIn("**Rung 15 needs an H100 or H200.**", readme)
        self.assertIn("sm_90a", readme)
        self.assertIn("runs the general FP32 path instead of tensor cores", readme)
        self.assertNotIn("compute capability 7.5 or newer (T4", readme)  # a T4 or an A100 is not "fine"
        self.assertNotIn("{{", readme)
        self.assertEqual(handout.hardware_note(ROOT, ["03", "04"])[1], "")
        self.assertIn("Rungs 15, 16 need an H100 or H200", handout.hardware_note(ROOT, ["15", "16"])[1])
        self.assertIn("Rung 14 needs compute capability 8.0", handout.hardware_note(ROOT, ["14"])[1])

    def test_leftover_marker(self):
        dst, path = self.mutant("leak_marker"), "stages/03_shared_tree/shared_tree.cu"
        text = self.read(path, dst) + "  // BEGIN SOLUTION\n"
        write(os.path.join(dst, path), text)
        self.assertEqual(handout.check_handout(ROOT, dst), [f"{path}:{len(text.splitlines())}: a solution marker"])

    def test_refusals(self):
        full = os.path.dirname(write(os.path.join(self.tmp, "full", "keep.txt"), "mine\n"))
        p = cli("handout", "--rungs", "03", "--out", full)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not empty", p.stderr)
        self.assertEqual(os.listdir(full), ["keep.txt"])
        fresh = os.path.join(self.tmp, "fresh")
        p = cli("handout", "--rungs", "42", "--out", fresh)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no rung 42: the rungs are " + ", ".join(handout.stage_folders(ROOT)), p.stderr)
        self.assertFalse(os.path.exists(fresh))
        p = cli("handout", "--rungs", "3", "--out", fresh)
        self.assertEqual(p.returncode, 2)
        self.assertIn("usage:", p.stderr)
        self.assertIn("argument --rungs: rungs are two-digit numbers", p.stderr)

    def test_out_is_a_file(self):
        path = write(os.path.join(self.tmp, "a_file"), "mine\n")
        p = cli("handout", "--rungs", "03", "--out", path)
        self.assertEqual(p.returncode, 2, p.stderr)  # a refusal with a message, not a traceback
        self.assertIn("error:", p.stderr)
        self.assertEqual(self.read(path), "mine\n")


class TrackHandoutTest(HandoutCase):
    """A handout of the problem-38 track's rungs: what ships, the stubs, the leak check's track rules."""
    RUNGS = "p38-04,p38-03"

    def test_manifest_and_files(self):
        m = json.loads(self.read(handout.MANIFEST))
        rungs = {"p38-03": "tracks/p38_spatial_softmax/rungs/03_block_tree/block_tree.cu",
                 "p38-04": "tracks/p38_spatial_softmax/rungs/04_online_softmax/online_softmax.cu"}
        self.assertEqual((m["rungs"], m["files"]), (sorted(rungs), {r: [f] for r, f in rungs.items()}))
        files = handout.repo_files(self.out)
        track_files = [f for f in handout.repo_files(ROOT)
                       if f.startswith("tracks/p38_spatial_softmax/") and not handout.forbidden(f)]
        self.assertLessEqual(set(track_files), set(files))  # the whole track: its registry lists every rung
        for path in ("tests/test_p38_rungs.cpp", "grader/p38_public.problems", "grader/p38_practice.problems",
                     "grader/track.py"):
            self.assertIn(path, files)
        self.assertFalse([f for f in files if f.startswith("grader/hidden")])
        numbered = {d[:2] for d in os.listdir(os.path.join(self.out, "stages")) if handout.STAGE_DIR.match(d)}
        self.assertEqual(numbered, {"00", "01"})  # the main ladder: only what the build needs
        for path in rungs.values():
            text = self.read(path)
            self.assertIn('ladder_todo("', text)  # the one stub convention, the stages' (common/toolkit/todo.cuh)
            self.assertIsNone(re.search(r"(?m)^\s*//\s*(BEGIN|END) SOLUTION|STUB:", text), path)
        self.assertNotIn("ladder_todo(", self.read("tracks/p38_spatial_softmax/rungs/05_fused_rescale/fused_rescale.cu"))
        readme = self.read("README.md")
        self.assertIn("rungs p38-03, p38-04 of the spatial-softmax track", readme)
        self.assertIn("| p38-03 | `tracks/p38_spatial_softmax/rungs/03_block_tree/` |", readme)
        self.assertNotIn("{{", readme)

    def test_check_handout_and_leaks(self):
        self.assertEqual(handout.check_handout(ROOT, self.out), [])
        secrets = handout.solution_lines(ROOT, {"p38-03"})
        line = sorted(s for s, w in secrets.items() if w.startswith("tracks/p38_spatial_softmax/rungs/03_") and "partial" in s)[0]
        dst = os.path.join(self.tmp, "leak")
        shutil.copytree(self.out, dst)
        later = "tracks/p38_spatial_softmax/rungs/06_fused_recompute/fused_recompute.cu"  # an unmarked copy in a later rung
        write(os.path.join(dst, later), self.read(later, dst) + "  " + line + "\n")
        found = handout.check_handout(ROOT, dst)
        self.assertEqual(len(found), 1, found)
        self.assertIn(f"{later}:", found[0])
        # A line an earlier rung holds outside its regions ships by design (a grid-stride loop).
        loop = "for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)"
        self.assertIn(loop, self.read("tracks/p38_spatial_softmax/rungs/02_atomics/atomics.cu"))
        self.assertNotIn(loop, handout.solution_lines(ROOT, {"p38-05"}))

    def test_refusals(self):
        fresh = os.path.join(self.tmp, "fresh")
        for ids, message in (("03,p38-03", "one handout holds one ladder"),
                             ("p38-09", "no rung p38-09: the track's rungs are p38-00, p38-01"),
                             ("p39-03", "no rung p39-03: no track p39 (tracks: p38"),
                             ("p38-00", "rung p38-00 (tracks/p38_spatial_softmax/rungs/00_cpu_reference/) has no solution regions")):
            with self.subTest(ids):
                p = cli("handout", "--rungs", ids, "--out", fresh)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(message, p.stderr)
                self.assertFalse(os.path.exists(fresh))
        p = cli("handout", "--rungs", "p38-3", "--out", fresh)
        self.assertEqual(p.returncode, 2)
        self.assertIn("or a track's rungs as TRACK-NN", p.stderr)


class P74HandoutTest(HandoutCase):
    """A handout of the problem-74 track's backward rungs, whose solutions sit in shared headers
    (device/reduce.cuh, device/backward_two_level.cuh) rather than in the rung files."""
    RUNGS = "p74-06,p74-07,p74-08"

    def test_manifest_stubs_and_readme(self):
        m = json.loads(self.read(handout.MANIFEST))
        reduce, two_level = "tracks/p74_backward/device/reduce.cuh", "tracks/p74_backward/device/backward_two_level.cuh"
        self.assertEqual(m["files"], {"p74-06": [reduce], "p74-07": [reduce], "p74-08": [two_level]})
        for path, stubs in ((reduce, ("block_tree_sum", "block_warp_sum")), (two_level, ("channel_sums",))):
            text = self.read(path)
            for name in stubs:  # the one stub convention, the stages' (common/toolkit/todo.cuh)
                self.assertRegex(text, r'ladder_todo\("p74-0\d\.\d", "' + name + ': ')
            self.assertIsNone(re.search(r"(?m)^\s*//\s*(BEGIN|END) SOLUTION|STUB:", text), path)
        self.assertNotIn("__shfl_down_sync(", self.read(reduce))
        self.assertNotIn("partials[plane * gridDim.x + blockIdx.x] = sum", self.read(two_level))
        for path in ("grader/p74_public.problems", "grader/p74_practice.problems", "tests/test_p74_rungs.cpp"):
            self.assertIn(path, handout.repo_files(self.out))
        self.assertFalse([f for f in handout.repo_files(self.out) if f.startswith("grader/hidden")])
        readme = self.read("README.md")
        self.assertIn("rungs p74-06, p74-07, p74-08 of the forward-and-backward track", readme)
        self.assertIn("./build/p74_ladder --rungs 06,07,08 --batch 2", readme)
        self.assertIn("`grader/p74_public.problems`", readme)
        self.assertNotIn("p38", readme)
        self.assertNotIn("{{", readme)
        # p74 links no code of p38 (both use tracks/shared/): the other track does not ship.
        self.assertFalse([f for f in handout.repo_files(self.out) if f.startswith("tracks/p38_")])
        self.assertIn("tracks/shared/geometry3d.hpp", handout.repo_files(self.out))

    def test_check_handout_and_leaks(self):
        self.assertEqual(handout.check_handout(ROOT, self.out), [])
        secrets = handout.solution_lines(ROOT, {"p74-06", "p74-07", "p74-08"})
        self.assertTrue(any("__shfl_down_sync" in s for s in secrets))
        self.assertTrue(any("partial[threadIdx.x + stride]" in s for s in secrets))


class P74TensorCoreGradsHandoutTest(HandoutCase):
    """A handout of p74-11, the tensor-core gradients: its solutions sit in the rung's own file
    (the weights' layout, the TF32 rounding at staging, the two mma loops), and it is graded on
    problem lists of its own (the KernelBench geometry family, backward)."""
    RUNGS = "p74-11"
    RUNG_FILE = "tracks/p74_backward/rungs/11_tensor_core_grads/tensor_core_grads.cu"

    def test_manifest_stubs_and_lists(self):
        m = json.loads(self.read(handout.MANIFEST))
        self.assertEqual(m["files"], {"p74-11": [self.RUNG_FILE]})
        text = self.read(self.RUNG_FILE)
        self.assertEqual(sorted(re.findall(r'ladder_todo\("(p74-11\.\d)"', text)),
                         [f"p74-11.{k}" for k in range(1, 7)])
        self.assertIsNone(re.search(r"(?m)^\s*//\s*(BEGIN|END) SOLUTION|STUB:", text))
        for solution in ("mma_tf32(acc", "tf32_bits(gy)", "tf32_bits(v)", "tf32_bits(win[b]"):
            self.assertNotIn(solution, text)
        shipped = handout.repo_files(self.out)
        for path in ("grader/p74_family_backward_public.problems", "grader/p74_family_backward_practice.problems"):
            self.assertIn(path, shipped)
        self.assertFalse([f for f in shipped if f.startswith("grader/hidden")])
        self.assertIn("`grader/p74_family_backward_public.problems`", self.read("README.md"))

    def test_check_handout_and_leaks(self):
        self.assertEqual(handout.check_handout(ROOT, self.out), [])
        secrets = handout.solution_lines(ROOT, {"p74-11"})
        self.assertTrue(any("mma_tf32(acc[mt][nt], a_lo, a_hi, bf[nt])" in s for s in secrets))


class P74ThreeTf32HandoutTest(HandoutCase):
    """A handout of p74-12, 3xTF32: its chunk loop (a region of p74-10 and p74-12) and split_tf32's
    body are stubbed, rung 10's weight layout (p74-10's alone) stays; it is graded on p74-10's
    forward lists (the KernelBench geometry family)."""
    RUNGS = "p74-12"
    RUNG_FILE = "tracks/p74_backward/rungs/12_three_tf32/three_tf32.cu"

    def test_manifest_stubs_and_lists(self):
        m = json.loads(self.read(handout.MANIFEST))
        self.assertEqual(m["files"], {"p74-12": [self.RUNG_FILE]})
        text = self.read(self.RUNG_FILE)
        self.assertEqual(sorted(re.findall(r'ladder_todo\("(p74-12\.\d)"', text)), ["p74-12.2"])
        self.assertIn("// TODO(p74-12.3)", text)  # the split's stub runs nothing: a comment id
        self.assertIsNone(re.search(r"(?m)^\s*//\s*(BEGIN|END) SOLUTION|STUB:", text))
        for solution in ("mma_tf32(acc", "tf32_bits(__uint_as_float(v.x) - "):
            self.assertNotIn(solution, text)
        self.assertIn("wt[e] = v;", text)  # rung 10's weight layout, p74-10's region, stays
        shipped = handout.repo_files(self.out)
        for path in ("grader/p74_forward_public.problems", "grader/p74_forward_practice.problems"):
            self.assertIn(path, shipped)
        self.assertFalse([f for f in shipped if f.startswith("grader/hidden")])

    def test_check_handout_and_leaks(self):
        self.assertEqual(handout.check_handout(ROOT, self.out), [])
        secrets = handout.solution_lines(ROOT, {"p74-12"})
        self.assertTrue(any("mma_tf32(acc[p][mt][nt], lo_big[mt], hi_big[mt], b_small[nt]);" in s for s in secrets))


class P74TensorCoresHandoutTest(HandoutCase):
    """A handout of p74-10: rungs 11 and 12 build on rung 10, and their files ship with their own
    solutions. Neither may carry a line of rung 10's (rung 12's copies of rung 10's weight layout
    and chunk loop are regions of p74-10, stubbed in this handout)."""
    RUNGS = "p74-10"
    RUNG12 = "tracks/p74_backward/rungs/12_three_tf32/three_tf32.cu"

    def test_check_handout_and_later_rungs(self):
        self.assertEqual(handout.check_handout(ROOT, self.out), [])
        text = self.read(self.RUNG12)
        self.assertEqual(sorted(re.findall(r'ladder_todo\("(p74-12\.\d)"', text)), ["p74-12.1", "p74-12.2"])
        self.assertIn("split_tf32(", text)  # rung 12's own idea stays


class ProblemsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ta_")
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_load(self):
        path = write(os.path.join(self.tmp, "a.problems"),
                     "# a comment\n@category alpha\n--batch 2 --size 3 4  # why\n\n--distribution exact\n"
                     "@category beta # b\n--kernelbench-v1\n@category alpha\n--batch 1\n")
        got = [(c.category, c.index, c.args, c.where) for c in problems.load(path)]
        self.assertEqual(got, [("alpha", 0, ["--batch", "2", "--size", "3", "4"], f"{path}:3"),
                               ("alpha", 1, ["--distribution", "exact"], f"{path}:5"),
                               ("beta", 0, ["--kernelbench-v1"], f"{path}:7"),
                               ("alpha", 2, ["--batch", "1"], f"{path}:9")])

    def test_errors_name_the_line(self):
        for text, line in (("@category a\n--batch 1\n--batch 2 --seed 7\n", 3), ("# c\n--batch 1\n", 2)):
            with self.subTest(text):
                path = write(os.path.join(self.tmp, f"e{line}.problems"), text)
                with self.assertRaisesRegex(ValueError, where(path, line)):
                    problems.load(path)

    def test_seed_for(self):
        a0, a1, b0 = (problems.Case(c, i, [], "") for c, i in (("a", 0), ("a", 1), ("b", 0)))
        seeds = {problems.seed_for(7, s, c) for s in ("", "s") for c in (a0, a1, b0)}
        self.assertEqual(len(seeds), 6)
        self.assertTrue(all(0 <= s < 2**31 for s in seeds))
        self.assertEqual(problems.seed_for(7, "s", a1), problems.seed_for(7, "s", problems.Case("a", 1, ["x"], "y")))
        self.assertNotEqual(problems.seed_for(7, "", a0), problems.seed_for(8, "", a0))

    def test_every_run_has_the_gpu_alone(self):
        """Every run, and a timing's rounds, holds its GPU's lock exclusively (so no grading runs
        beside another's memory hog or spinning kernel); a process that holds the turn takes no
        second one (no self-deadlock); another GPU's lock is separate; the lock folder is the
        user's own."""
        probe = ("import fcntl, sys\nf = open(sys.argv[1], 'a')\n"
                 "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n    sys.exit(3)\n")
        locks = os.path.join(self.tmp, f"ladder-grader-locks-{os.geteuid()}")

        def free(gpu="5"):
            return subprocess.run([sys.executable, "-c", probe, os.path.join(locks, f"gpu-{gpu}.lock")]).returncode == 0
        with mock.patch.dict(os.environ, {"CUDA_VISIBLE_DEVICES": "5"}), mock.patch.object(tempfile, "tempdir", self.tmp):
            with runs.gpu_turn():
                self.assertFalse(free())     # another grading's run waits
                self.assertTrue(free("6"))   # another GPU is not held
                with runs.gpu_turn():  # a timing's own run: no second turn, no deadlock
                    self.assertFalse(free())
            self.assertTrue(free())
            self.assertEqual(os.stat(locks).st_mode & 0o777, 0o700)
        ran = []
        with mock.patch.object(tempfile, "tempdir", os.path.join(self.tmp, "no", "such", "file")), \
                mock.patch.object(sandbox, "lock_dir", side_effect=OSError("no lock folder")), \
                mock.patch.object(runs, "log") as log:
            with runs.gpu_turn():  # no lock file to be had: the run still happens, and says so
                ran.append(True)
        self.assertEqual(ran, [True])
        self.assertIn("no GPU turns", log.call_args[0][0])

    def test_repository_lists(self):
        grader = os.path.join(ROOT, "grader")
        self.assertGreater(len(problems.load(os.path.join(grader, "public.problems"))), 0)
        practice = {c.category for c in problems.load(os.path.join(grader, "practice.problems"))}
        hidden = {c.category for c in problems.load(os.path.join(grader, "hidden", "hidden.problems"))}
        self.assertEqual(practice, hidden)
        with open(os.path.join(grader, "rungs.json"), encoding="utf-8") as f:
            config = rung_meta.with_rung_settings(json.load(f), ROOT)  # the rungs' own lists too (p74-10)
        graded = [(name, problems.rung_settings(problems.track_settings(config, name), n))
                  for name in config["tracks"] for n in [None, *problems.track_settings(config, name).get("rungs", {})]]
        self.assertIn("grader/p74_forward_public.problems", {t["public"] for _, t in graded})
        for name, t in graded:
            with self.subTest(track=name, lists=t["public"]):
                self.assertGreater(len(problems.load(os.path.join(ROOT, t["public"]))), 0)
                practice = {c.category for c in problems.load(os.path.join(ROOT, t["practice"]))}
                self.assertEqual(practice, {c.category for c in problems.load(os.path.join(ROOT, t["hidden"]))})
                for case in problems.load(os.path.join(ROOT, t["public"])) + problems.load(os.path.join(ROOT, t["practice"])):
                    # p38_ladder's default problem is KernelBench's (1 GiB of output): every line sizes its own.
                    self.assertTrue({"--batch", "--in-channels", "--out-channels", "--input-size"} <= set(case.args),
                                    case.where)


def part(rung, name, max_score, **kw):
    return reports.Part(rung=rung, part=name, max_score=max_score, **kw)


PARTS = [part("03 shared_tree", "public", 20, score=20, output="4 of 4 public cases pass"),
         part("03 shared_tree", "hidden", 40, score=30, output="3 of 4 categories pass", hidden=True),
         part("03 shared_tree", "performance", 20, score=10, ratio=1.5, output="ratio 1.5"),
         part("04 warp_shuffle", "public", 20, score=0, output="FAIL public #1: NaN"),
         part("04 warp_shuffle", "sanitizer", 10, skipped=True, output="skipped: no CUDA device\nmore"),
         part("04 warp_shuffle", "performance", 20, score=20, ratio=6.0)]
META = {"rungs": ["03", "04"], "official": False, "gpu": True, "gpu_why": "", "reference": True}


class ReportsTest(unittest.TestCase):
    def test_results_json(self):
        doc = reports.results_json(PARTS, META)
        # Before the due date the total counts the visible parts alone (the hidden part has 30).
        self.assertEqual(doc["score"], 50.0)
        self.assertIn("hidden tests (40 points) are scored after the due date", doc["output"])
        revealed = reports.results_json(PARTS, {**META, "reveal": True})
        self.assertEqual(revealed["score"], 80.0)
        self.assertNotIn("after the due date", revealed["output"])
        self.assertEqual(len(doc["tests"]), 6)
        for t in doc["tests"]:
            self.assertLessEqual({"name", "score", "max_score", "output", "visibility"}, set(t))
        self.assertEqual([t["visibility"] for t in doc["tests"]], ["visible", "after_due_date"] + ["visible"] * 4)
        self.assertEqual(doc["tests"][1]["name"], "03 shared_tree: hidden tests")
        self.assertEqual([t.get("status") for t in doc["tests"]], ["passed", "failed", "failed", "failed", None, "passed"])
        (board,) = doc["leaderboard"]
        self.assertAlmostEqual(board["value"], 3.0, places=4)  # sqrt(1.5 * 6)
        self.assertEqual(board["order"], "asc")
        no_ratio = [p for p in PARTS if p.ratio is None]
        self.assertNotIn("leaderboard", reports.results_json(no_ratio, META))
        json.dumps(doc)  # serializable

    def test_instructor_copy(self):
        """An official run writes instructor.json (owner-only): every part, the whole total and
        the submission id that reproduces the hidden seeds; a local run writes none."""
        with tempfile.TemporaryDirectory() as out:
            reports.write_all(PARTS, {**META, "official": True, "submission_id": "gradescope-42"}, out)
            path = os.path.join(out, "instructor.json")
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
            with open(path, encoding="utf-8") as f:
                copy = json.load(f)
            self.assertEqual((copy["total"], copy["visible_total"], copy["submission_id"]), (80.0, 50.0, "gradescope-42"))
            self.assertIn("--submission-id gradescope-42", copy["regrade"])
            with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
                self.assertEqual(json.load(f)["score"], 50.0)
        with tempfile.TemporaryDirectory() as out:
            reports.write_all(PARTS, META, out)
            self.assertFalse(os.path.exists(os.path.join(out, "instructor.json")))

    def test_junit_xml(self):
        suites = ET.fromstring(reports.junit_xml(PARTS, META))
        got = [(s.get("name"), s.get("tests"), s.get("failures"), s.get("skipped")) for s in suites]
        self.assertEqual(got, [("03 shared_tree", "3", "2", "0"), ("04 warp_shuffle", "3", "1", "1")])
        hidden = suites[0][1].find("failure")
        self.assertEqual(hidden.text or "", "")  # hidden failures say nothing before the due date
        revealed = ET.fromstring(reports.junit_xml(PARTS, {**META, "reveal": True}))
        self.assertEqual(revealed[0][1].find("failure").text, "3 of 4 categories pass")
        self.assertEqual(suites[1][1].find("skipped").get("message"), "skipped: no CUDA device")

    def test_text_report(self):
        text = reports.text_report(PARTS, META)
        for line in ("== rung 03 shared_tree: 60.0 / 80", "  [PASS] public tests: 20 / 20",
                     "  [FAIL] hidden tests: 30 / 40", "  [SKIP] memory safety and races: 0 / 10",
                     "== rung 04 warp_shuffle: 20.0 / 50"):
            self.assertIn(line + "\n", text)


class GradeTest(unittest.TestCase):
    def test_hidden_seeds_are_per_submission(self):
        """The hidden seeds mix the class secret with the submission's identity: two submissions
        (or two resubmissions) get different hidden inputs, and a regrade with the same id the
        same ones; without an id, Gradescope's metadata, else a fresh nonce."""
        case = problems.Case("odd_sizes", 0, [], "")
        seed = lambda sid: problems.seed_for(7, grade.seed_secret("class", sid), case)  # noqa: E731
        self.assertEqual(seed("gradescope-1"), seed("gradescope-1"))
        self.assertNotEqual(seed("gradescope-1"), seed("gradescope-2"))
        ns = argparse.Namespace(submission_id="", submission_metadata="")
        with mock.patch.object(grade, "GRADESCOPE_METADATA", "/no/such/file"):
            none = grade.gradescope_metadata(ns)
        self.assertEqual(none, {})
        a, b = grade.submission_identity(ns, none), grade.submission_identity(ns, none)
        self.assertTrue(a.startswith("nonce-") and a != b)
        with tempfile.TemporaryDirectory() as tmp:
            meta = write(os.path.join(tmp, "m.json"), json.dumps({"id": 123, "assignment": {
                "due_date": "2001-01-01T00:00:00.000000-07:00", "late_due_date": None}}))
            ns = argparse.Namespace(submission_id="", submission_metadata=meta)
            self.assertEqual(grade.submission_identity(ns, grade.gradescope_metadata(ns)), "gradescope-123")
            self.assertTrue(grade.due_date_passed(grade.gradescope_metadata(ns)))  # a regrade after the due date
            write(meta, json.dumps({"id": 5, "assignment": {"due_date": "2999-01-01T00:00:00-07:00"}}))
            self.assertFalse(grade.due_date_passed(grade.gradescope_metadata(ns)))
            write(meta, "{not json")
            with self.assertRaisesRegex(handout.HandoutError, "submission-metadata"):
                grade.gradescope_metadata(ns)

    def test_grading_folders(self):
        """The official run and the self-test make their grading folder with one function: mode
        0711 (passable by the sandbox's uid, not listable), fresh per grading or reused."""
        with tempfile.TemporaryDirectory() as tmp:
            work = os.path.join(tmp, "work")
            a, b = grade.make_grading_dir(work, False), grade.make_grading_dir(work, False)
            self.assertNotEqual(a, b)
            again = grade.make_grading_dir(work, True)
            self.assertEqual(again, grade.make_grading_dir(work, True))
            for path in (work, a, b, again):
                self.assertEqual(os.stat(path).st_mode & 0o777, 0o711, path)

    def test_one_grading_at_a_time_per_work_folder(self):
        """A second grading in the same work folder (here another process) waits, saying why,
        until the first one ends; the same process may grade there again."""
        with tempfile.TemporaryDirectory() as tmp:
            grade.hold_work(tmp)
            grade.hold_work(tmp)  # the self-test's gradings, one process: no deadlock
            self.assertEqual(os.stat(os.path.join(tmp, ".grading.lock")).st_mode & 0o777, 0o600)
            second = subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, {ROOT!r}); "
                                       f"from grader import grade; grade.hold_work({tmp!r}); print('got it')"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                out, err = second.communicate(timeout=3)
                self.fail(f"the second grading did not wait: {out!r} {err!r}")
            except subprocess.TimeoutExpired:
                pass
            grade._HELD_WORK.pop(tmp).close()  # the first grading ends
            out, err = second.communicate(timeout=30)
            self.assertEqual(out.strip(), "got it")
            self.assertIn(f"another grading is using {tmp}: waiting", err)

    def test_score_perf(self):
        conf = {"full_at": 1.2, "zero_at": 10.0}
        for ratio, want in ((1.0, 1.0), (1.2, 1.0), (10.0, 0.0), (20.0, 0.0), (5.6, 0.5), (3.4, 0.75)):
            self.assertAlmostEqual(runs.score_perf(ratio, conf), want, places=12, msg=f"ratio {ratio}")


# A stand-in for p38_ladder: writes the report its FAKE_P38 mode says (pass, fail, todo, throw, nodevice).
FAKE_P38 = """\
import json, os, sys
args = sys.argv[1:]
path, rung, mode = args[args.index("--json") + 1], args[args.index("--rungs") + 1], os.environ["FAKE_P38"]
entry = {"id": rung, "ran": mode in ("pass", "fail", "todo"), "failed": mode == "throw", "note": ""}
if mode == "nodevice":
    entry["note"] = "not run: no CUDA device (none)"
if mode == "throw":
    entry["note"] = "TODO(stage p38-05 fused_rescale): run: launch the epilogue"
if mode == "todo":
    print("TODO(stage p38-03 block_tree): block_tree: the tree")
if entry["ran"]:
    entry.update(ms=2.0 if "slow" not in path else 4.0,
                 vs_oracle={"pass": mode == "pass", "worst_ratio": 3.5, "nan_count": 0})
json.dump({"rungs": [entry], "floors": {"memory_floor_ms": 1.0, "compute_floor_ms": 0.5},
           "problem": {"describe": "batch=8"}}, open(path, "w"))
sys.exit(0 if mode == "pass" else 1)
"""
# A stand-in for p74_ladder: rung 00 reports two passes; a backward rung's "check" has a
# sub-object per gradient; floors by pass. FAKE_P74: pass, fail, nan, unchecked.
FAKE_P74 = """\
import json, os, sys
args = sys.argv[1:]
path, rung, mode = args[args.index("--json") + 1], args[args.index("--rungs") + 1], os.environ["FAKE_P74"]
def grads(ok, nans=0):
    g = {k: {"pass": True, "worst_ratio": 0.5, "nan_count": 0} for k in ("grad_x", "grad_weight", "grad_bias", "grad_multiplier")}
    if not ok:
        g["grad_multiplier"] = {"pass": False, "worst_ratio": 7.0, "nan_count": nans}
    return g
ok = mode == "pass"
check = {"checked": mode != "unchecked", "on": "unchecked: the backward exceeds --oracle-max-macs" if mode == "unchecked"
         else "every element", "pass": ok or mode == "unchecked", "worst_ratio": 0.5 if ok else 7.0,
         **grads(ok, 3 if mode == "nan" else 0)}
rungs = [{"id": rung, "direction": "forward", "ran": True, "note": "", "ms": 9.0,
          "check": {"checked": True, "pass": True, "worst_ratio": 0.1}}] if rung == "00" else []
rungs.append({"id": rung, "direction": "backward", "ran": True, "note": "", "ms": 3.0, "check": check})
json.dump({"rungs": rungs, "problem": {"describe": "batch=2"},
           "floors": {"forward": {"memory_floor_ms": 5.0, "compute_floor_ms": 0.1},
                      "backward": {"memory_floor_ms": 1.5, "compute_floor_ms": 0.25}}}, open(path, "w"))
sys.exit(0 if ok else 1)
"""
SASS = """\
\t\tFunction : _ZN6ladder3p3849_GLOBAL__N__f58ec9f8_16_03_block_tree_cu_20cb870f21softmax_block_per_rowENS0_8GeometryEPKfPf
\t.headerflags\t@"EF_CUDA_SM75 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM75)"
        /*0270*/                   STS [R0.X4], R5 ;                                      /* 0x0000000500007388 */
        /*0280*/                   BAR.SYNC 0x0 ;                                         /* 0x0000000000007b1d */
        /*02d0*/              @!P1 LDS.U R7, [R0.X4] ;                                    /* 0x0000000000079984 */
\t\tFunction : _ZN6ladder3p3817conv_clamp_kernelENS0_8GeometryEPKfS3_S3_Pf
        /*0000*/                   SHFL.BFLY PT, R3, R2, 0x10, 0x1f ;                     /* 0x0000000000007b1d */
        /*0010*/              @!P0 REDG.E.ADD.F32.FTZ.RN.STRONG.GPU desc[UR4][R2.64], R5 ;   /* 0x0000000000007b1d */
        /*0020*/                   ATOMS.ADD R4, [R0], R5 ;                               /* 0x0000000000007b1d */
"""


class TrackGradeTest(unittest.TestCase):
    """A track rung's CPU half (grader/track.py, problems.py): a case's verdict from the program's
    report, the timing rounds, the SASS checks, the integrity rules of a track's rung."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ta_")
        self.addCleanup(shutil.rmtree, self.tmp)
        self.prog = write(os.path.join(self.tmp, "p38_ladder"), "#!" + sys.executable + "\n" + FAKE_P38)
        os.chmod(self.prog, 0o755)
        self.addCleanup(os.environ.pop, "FAKE_P38", None)

    def case(self, mode):
        os.environ["FAKE_P38"] = mode
        return track.run_case(self.prog, "03", problems.Case("c", 0, ["--batch", "1"], ""), 7, 60)

    def test_run_case(self):
        self.assertEqual(self.case("pass"), ("pass", ""))
        status, detail = self.case("fail")
        self.assertEqual(status, "fail")
        self.assertIn("worst error 3.5x the tolerance", detail)
        # A closed channel: what the program prints never reaches the detail (the TODO lines come
        # from the grader's reading of the stub markers, rungs.stub_todos).
        self.assertNotIn("TODO", self.case("todo")[1])
        status, detail = self.case("throw")  # a host stub's exception: the runner's note
        self.assertEqual(status, "error")
        self.assertEqual(self.case("nodevice")[0], "skipped")
        self.assertEqual(track.gpu_available(self.prog, "03", ["--batch", "1"]), (False, "not run: no CUDA device (none)"))

    def test_timing(self):
        os.environ["FAKE_P38"] = "pass"
        args = argparse.Namespace(timeout=60)
        cfg = {"reps": 20, "warmup": 2, "rounds": 3}
        rep = problems.report_settings({"program": "p38_ladder"}, "03")
        status, data = track.timing(args, [("student", self.prog)], rep, "03", cfg, {"args": ["--batch", "8"]})
        self.assertEqual(status, "ok", data)
        self.assertEqual((data["student_ms"], data["rounds"], data["memory_floor_ms"]), (2.0, 1, 1.0))
        self.assertNotIn("reference_ms", data)
        os.environ["FAKE_P38"] = "fail"
        self.assertEqual(track.timing(args, [("student", self.prog)], rep, "03", cfg, {})[0], "mismatch")

    def p74_case(self, mode, rung="06"):
        prog = write(os.path.join(self.tmp, "p74_ladder"), "#!" + sys.executable + "\n" + FAKE_P74)
        os.chmod(prog, 0o755)
        os.environ["FAKE_P74"] = mode
        rep = problems.report_settings({"report": {"check": "check", "floors": "backward", "direction": "backward"}}, rung)
        return prog, rep, track.run_case(prog, rung, problems.Case("c", 0, ["--batch", "1"], ""), 7, 60, rep)

    def test_p74_report(self):
        self.addCleanup(os.environ.pop, "FAKE_P74", None)
        self.assertEqual(self.p74_case("pass")[2], ("pass", ""))
        self.assertEqual(self.p74_case("pass", "00")[2], ("pass", ""))  # rung 00: its backward entry
        status, detail = self.p74_case("fail")[2]
        self.assertEqual(status, "fail")
        self.assertIn("worst error 7x the tolerance (grad_multiplier 7x)", detail)
        status, detail = self.p74_case("nan")[2]
        self.assertEqual((status, detail), ("fail", "3 output(s) NaN (never written?): grad_multiplier 3"))
        status, detail = self.p74_case("unchecked")[2]  # "pass" without a check is no pass
        self.assertEqual(status, "fail")
        self.assertIn("not checked against the oracle (unchecked: the backward exceeds", detail)
        prog, rep, _ = self.p74_case("pass", "00")
        t = {"program": "p74_ladder", "report": {"check": "check", "floors": "backward", "direction": "backward"}}
        status, data = track.timing(argparse.Namespace(timeout=60), [("student", prog)], problems.report_settings(t, "00"),
                                    "00", {"reps": 20, "warmup": 2, "rounds": 3}, {"args": []})
        self.assertEqual(status, "ok", data)
        self.assertEqual((data["student_ms"], data["memory_floor_ms"], data["compute_floor_ms"]), (3.0, 1.5, 0.25))
        self.assertEqual(problems.report_settings({}, "03"), problems.DEFAULT_REPORT)  # p38_ladder's, unchanged
        rung_own = {"report": {"check": "check"}, "rungs": {"01": {"report": {"direction": "forward"}}}}
        self.assertEqual((problems.report_settings(rung_own, "01")["direction"], problems.report_settings(rung_own, "06")["direction"]),
                         ("forward", None))

    def test_settings(self):
        config = {"tracks": {"p38": {"probe": ["--batch", "1"]}, "p9": {"program": "p9_main", "needs": ["p38"]}}}
        t, number = problems.settings(config, "p38-05")  # what the track's name gives, where rungs.json is silent
        self.assertEqual((t, number), ({"program": "p38_ladder", "library": "p38_track", "host_library": "p38_host",
                                        "public": "grader/p38_public.problems",
                                        "practice": "grader/p38_practice.problems",
                                        "hidden": "grader/hidden/p38_hidden.problems", "probe": ["--batch", "1"]}, "05"))
        t, _ = problems.settings(config, "p9-01")
        self.assertEqual((t["program"], t["library"], t["needs"]), ("p9_main", "p9_track", ["p38"]))
        with self.assertRaisesRegex(ValueError, "no \"tracks\" entry for track p39"):
            problems.settings(config, "p39-01")
        with open(os.path.join(ROOT, "grader", "rungs.json"), encoding="utf-8") as f:
            config = rung_meta.with_rung_settings(json.load(f), ROOT)  # each rung's rung.json
        for rung in handout.track_rungs(ROOT):  # every rung with regions has its grading entry
            if any(rung in o for o in handout.owners_in(ROOT, [handout.track_rungs(ROOT)[rung]]).values()):
                t, number = problems.settings(config, rung)
                self.assertIn("timing", t["rungs"][number], rung)
                self.assertTrue(technique.TRACK_RULES.get(rung), rung)  # its technique rules
        # A rung with problem lists of its own (p74-10: the KernelBench geometry family, forward)
        t, number = problems.settings(config, "p74-10")
        own = problems.rung_settings(t, number)
        self.assertEqual((own["public"], own["hidden"]), ("grader/p74_forward_public.problems",
                                                          "grader/hidden/p74_forward_hidden.problems"))
        self.assertEqual(len(own["sanitizer_problems"]), 2)
        self.assertEqual(problems.rung_settings(t, "08")["public"], "grader/p74_public.problems")  # the track's
        self.assertEqual(problems.report_settings(t, number)["direction"], "forward")
        self.assertIn("grader/hidden/p74_forward_hidden.problems", rungs.hidden_lists(config, ["p74-10"]))
        # p74-11: the same family, backward (the track's report settings: its four gradients)
        own = problems.rung_settings(t, "11")
        self.assertEqual((own["public"], own["hidden"]), ("grader/p74_family_backward_public.problems",
                                                          "grader/hidden/p74_family_backward_hidden.problems"))
        self.assertEqual(len(own["sanitizer_problems"]), 2)
        self.assertEqual(problems.report_settings(t, "11")["direction"], "backward")
        self.assertIn("grader/hidden/p74_family_backward_hidden.problems", rungs.hidden_lists(config, ["p74-11"]))
        # p74-12: p74-10's forward family lists and report (3xTF32, held to the FP32 bound)
        own = problems.rung_settings(t, "12")
        self.assertEqual((own["public"], own["hidden"]), ("grader/p74_forward_public.problems",
                                                          "grader/hidden/p74_forward_hidden.problems"))
        self.assertEqual(len(own["sanitizer_problems"]), 2)
        self.assertEqual(problems.report_settings(t, "12")["direction"], "forward")
        self.assertIn("grader/hidden/p74_forward_hidden.problems", rungs.hidden_lists(config, ["p74-12"]))

    def test_sanitizer_timeout_stops_the_program(self):
        # A compute-sanitizer that starts the program and hangs: the timeout must stop both.
        pid_file = os.path.join(self.tmp, "program.pid")
        fake = write(os.path.join(self.tmp, "compute-sanitizer"),
                     "#!/bin/sh\nsleep 300 >/dev/null 2>&1 &\necho $! > " + shlex.quote(pid_file) + "\nwait\n")
        os.chmod(fake, 0o755)
        status, out = track.sanitizer(fake, self.prog, "03", "memcheck", [["--batch", "1"]], 1)
        self.assertEqual((status, out), ("fail", "--batch 1: took longer than 1 s under memcheck"))
        with open(pid_file, encoding="utf-8") as f:
            pid = int(f.read())
        for _ in range(50):  # killed at once; reaped by init a moment later
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            self.fail(f"the sanitized program (pid {pid}) outlived the timeout")
        self.assertEqual(track.sanitizer(None, self.prog, "03", "memcheck", [["--batch", "1"]], 1)[0], "skipped")

    def test_sass_checks(self):
        # programs.Track hands the rung's object to grader/technique.py (grader/tests/test_technique.py tests
        # the rules themselves); here: the interface, with a cuobjdump that prints SASS.
        obj = write(os.path.join(self.tmp, "r.o"), "")
        fake = write(os.path.join(self.tmp, "bin", "cuobjdump"), "#!/bin/sh\ncat " + shlex.quote(
            write(os.path.join(self.tmp, "r.sass"), SASS)) + "\n")
        os.chmod(fake, 0o755)
        with mock.patch.dict(os.environ, {"CUOBJDUMP": fake}):
            ok, lines = technique.check_track(obj, "p38-03")
            self.assertFalse(ok)  # BAR, LDS and STS, but no tree: one store, then one load
            self.assertRegex(lines[0], r"^FAIL: rung p38-03: a shared-memory tree in softmax_block_per_row: no loop")
            ok, lines = technique.check_track(obj, "p74-08")
            self.assertFalse(ok)
            self.assertIn("no floating-point atomics in any function: forbidden, found @!P0 REDG.E.ADD.F32", "\n".join(lines))
            self.assertEqual(technique.check_track(obj, "p38-99")[1][0],
                             "FAIL: rung p38-99: no technique rules (\"sass\" in the rung.json of its folder)")

    def test_integrity_rules(self):
        self.assertEqual(integrity.descriptor_symbol("p38-03"), "_ZN6ladder3p387rung_03Ev")
        self.assertEqual(integrity.descriptor_text("p38-03"), "ladder::p38::rung_03()")
        oracle = "ladder::p38::reference(ladder::p38::Problem38 const&, ladder::p38::Inputs const&)"
        self.assertIsNotNone(integrity.forbidden(oracle, "p38-03"))
        self.assertIsNone(integrity.forbidden(oracle, "03"))  # the stages' rules know nothing of the track
        self.assertIsNotNone(integrity.forbidden("ladder::p38::rung_06()", "p38-05"))
        self.assertIsNone(integrity.forbidden("ladder::p38::rung_05()", "p38-05"))
        self.assertIsNone(integrity.forbidden("ladder::p38::launch_avg_pool3d(ladder::p38::Geometry const&)", "p38-05"))
        grad_oracle = ("ladder::p74::backward(ladder::p74::Problem74 const&, ladder::p74::Inputs const&, "
                       "ladder::p74::Saved const&, std::vector<float, std::allocator<float> > const&)")
        self.assertIsNotNone(integrity.forbidden(grad_oracle, "p74-08"))
        self.assertIsNotNone(integrity.forbidden("ladder::p38::reference(int)", "p74-08", ["p38"]))  # p74 needs p38
        self.assertIsNone(integrity.forbidden("ladder::p38::reference(int)", "p74-08"))  # only through its "needs"
        self.assertIsNotNone(integrity.forbidden("ladder::p74::rung_09()", "p74-08"))
        self.assertIsNone(integrity.forbidden("ladder::p74::backward_aligned(unsigned long)", "p74-08"))
        self.assertIsNone(integrity.forbidden("ladder::p74::launch_two_level_reduction(ladder::p74::Geometry const&)", "p74-08"))

    @unittest.skipUnless(all(shutil.which(t) for t in ("g++", "readelf", "c++filt")), "needs g++, readelf and c++filt")
    def test_integrity_objects(self):
        folder, rung_file = "CMakeFiles/p38_track.dir/tracks/p38_x/rungs/03_y", "tracks/p38_x/rungs/03_y/y.cu"
        clean = ("namespace ladder { namespace p38 { struct Rung { int id; };\n"
                 "namespace { int helper(int x) { return x + 1; } }\n"
                 "const Rung& rung_03() { static const Rung r{helper(2)}; return r; } } }\n")
        calls = clean.replace("namespace {", "struct Problem38; struct Inputs; struct Reference;\n"
                                             "Reference reference(const Problem38&, const Inputs&);\nnamespace {")
        calls = calls.replace("return r; }", "return r; }\nvoid* peek() { return (void*)&reference; }")
        compile_object(self.tmp, folder, "y.cu", clean)
        report = integrity.check_track(self.tmp, "p38-03", rung_file, "p38_track", "p38_host")
        self.assertEqual(report.findings, [], report.lines())
        compile_object(self.tmp, folder, "y.cu", calls)
        text = "\n".join(integrity.check_track(self.tmp, "p38-03", rung_file, "p38_track", "p38_host").lines())
        self.assertIn("rule 1 (forbidden names): y.cu.o: calls ladder::p38::reference", text)
        self.assertIn("rule 2 (allow-list): y.cu.o: defines ladder::p38::peek()", text)
        self.assertIn("with external linkage a rung defines only ladder::p38::rung_03()", text)
        self.assertIn("no compiled object of rung p38-04", integrity.check_track(self.tmp, "p38-04", "x/04_z/z.cu", "p38_track",
                                                                          "p38_host").lines()[0])


FIXTURE_HEAD = "rung: 03\nfile: stages/03_shared_tree/shared_tree.cu\nwhy: test\n"


class SelftestTest(unittest.TestCase):
    def test_repository_fixtures_apply(self):
        paths = sorted(glob.glob(os.path.join(ROOT, "grader", "fixtures", "*", "*.fixture")))
        self.assertGreater(len(paths), 0)
        fixtures = [selftest.parse_fixture(p) for p in paths]
        declared = {}
        for group in selftest.ladders(sorted({fx["rung"] for fx in fixtures})):  # one ladder a handout
            declared.update(handout.plan(ROOT, group)[2])
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            for fx in fixtures:
                with self.subTest(fx["name"]):
                    dest = os.path.join(tmp, fx["name"].replace("/", "_"))
                    selftest.apply_fixture(ROOT, fx, declared[fx["rung"]], dest)
                    with open(os.path.join(dest, fx["file"]), encoding="utf-8") as f:
                        text = f.read()
                    for _orig, repl in fx["edits"]:
                        self.assertIn(repl, text)

    def test_parse_errors(self):
        edit = "--- original\nint a;\n--- replacement\nint b;\n--- end\n"
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            for text, message in ((FIXTURE_HEAD + edit, "no 'loses:' line"),
                                  (FIXTURE_HEAD + "loses: speed\n" + edit, "loses: must be one of"),
                                  (FIXTURE_HEAD + "loses: correctness\n", "no edit"),
                                  (FIXTURE_HEAD + "loses: correctness\nrule: 1\n" + edit, "rule: names the integrity rule"),
                                  (FIXTURE_HEAD + "loses: integrity\nrule: 6\n" + edit, "rule: names the integrity rule"),
                                  (FIXTURE_HEAD + "loses: correctness\n--- replacement\nx\n--- end\n",
                                   "'--- replacement' without '--- original'")):
                with self.subTest(message), self.assertRaisesRegex(selftest.FixtureError, re.escape(message)):
                    selftest.parse_fixture(write(os.path.join(tmp, "x.fixture"), text))
            fx = selftest.parse_fixture(write(
                os.path.join(tmp, "x.fixture"), FIXTURE_HEAD + "loses: correctness\n--- original\nno such line in the file;\n"
                "--- replacement\nx\n--- end\n"))
            with self.assertRaisesRegex(selftest.FixtureError, "occurs 0 times"):
                selftest.apply_fixture(ROOT, fx, [fx["file"]], os.path.join(tmp, "sub"))

    def test_verdict(self):
        def parts(public, hidden, technique, tech_out="", skipped=False):
            return [part("03 t", "public", 20, score=public, skipped=skipped),
                    part("03 t", "hidden", 40, score=hidden, hidden=True, skipped=skipped),
                    part("03 t", "technique", 10, score=technique, output=tech_out)]
        flagged = "PASS: tree\nFAIL: integrity rule 1 (forbidden names): x.cu.o: calls system: a process or loader escape"
        clean = "PASS: integrity: x.cu.o: no forbidden name, no symbol outside the rung's allow-list, no static constructor"
        cases = [("integrity", parts(0, 0, 0, flagged), True), ("integrity", parts(0, 0, 10), False),
                 ("integrity", parts(0, 0, 10, clean), False), ("integrity", parts(20, 0, 0, flagged), False),
                 ("technique", parts(20, 40, 0), True), ("technique", parts(20, 40, 10), False),
                 ("correctness", parts(10, 40, 10), True), ("correctness", parts(20, 20, 10), True),
                 ("correctness", parts(20, 40, 10), False), ("correctness", parts(0, 0, 10, skipped=True), None)]
        for n, (loses, ps, want) in enumerate(cases):
            with self.subTest(n=n, loses=loses):
                self.assertIs(selftest.verdict(ps, loses)[0], want)
        # A fixture's `rule:` line: that rule, and no other, must have fired.
        self.assertIs(selftest.verdict(parts(0, 0, 0, flagged), "integrity", "1")[0], True)
        self.assertIs(selftest.verdict(parts(0, 0, 0, flagged), "integrity", "3")[0], False)


# Captured from nvcc 13.0 objects of stage 03 (readelf 2.40, cuobjdump 13.0), shortened.
READELF_SYMBOLS = """\
Symbol table '.symtab' contains 180 entries:
   Num:    Value          Size Type    Bind   Vis      Ndx Name
     0: 0000000000000000     0 NOTYPE  LOCAL  DEFAULT  UND 
    29: 0000000000000020   232 FUNC    LOCAL  DEFAULT   19 _ZL24__sti____cudaRegisterAllv
    47: 0000000000000000     0 SECTION LOCAL  DEFAULT   19 .text.startup
    98: 0000000000000000    24 FUNC    GLOBAL HIDDEN    19 _ZN6ladder45_GLOBAL__N__a17d529a_12_ctor_attr_cu_537207d96tamperEv
    99: 0000000000000000     0 NOTYPE  GLOBAL DEFAULT  UND _ZdlPvm
   144: 0000000000000000     1 OBJECT  UNIQUE DEFAULT   82 _ZN4cuda3std3__45__cpo5beginE
   150: 0000000000000000    12 FUNC    WEAK   DEFAULT   11 _ZN6ladder15StageDescriptorD2Ev
"""
READELF_SECTIONS = """\
  [ 0]                   NULL            0000000000000000 000000 000000 00      0   0  0
  [19] .text.startup     PROGBITS        0000000000000000 00b740 000108 00  AX  0   0 16
  [21] .init_array.00101 INIT_ARRAY      0000000000000000 00b848 000008 08  WA  0   0  8
  [22] .rela.init_array.00101 RELA            0000000000000000 010800 000018 18   I 43  21  8
  [25] .fini_array       FINI_ARRAY      0000000000000000 00b868 000010 08  WA  0   0  8
  [28] .init_array       INIT_ARRAY      0000000000000000 00bbe8 000010 08  WA  0   0  8
"""
READELF_RELOCATIONS = """\
Relocation section '.rela.text.startup' at offset 0x105f0 contains 1 entry:
    Offset             Info             Type               Symbol's Value  Symbol's Name + Addend
0000000000000014  0000006300000004 R_X86_64_PLT32         0000000000000000 setenv - 4

Relocation section '.rela.init_array' at offset 0x10740 contains 2 entries:
    Offset             Info             Type               Symbol's Value  Symbol's Name + Addend
0000000000000000  0000006200000001 R_X86_64_64            0000000000000000 _ZN6ladder45_GLOBAL__N__a17d529a_12_ctor_attr_cu_537207d96tamperEv + 0
0000000000000008  0000002f00000001 R_X86_64_64            0000000000000000 .text.startup + 20

Relocation section '.rela.fini_array' at offset 0x10860 contains 1 entry:
    Offset             Info             Type               Symbol's Value  Symbol's Name + Addend
0000000000000000  0000006200000001 R_X86_64_64            0000000000000000 _ZN6ladder45_GLOBAL__N__a17d529a_12_ctor_attr_cu_537207d96tamperEv + 0
"""
CUOBJDUMP_SYMBOLS = """\

Fatbin elf code:
================
arch = sm_90
code version = [1,8]
host = linux
compile_size = 64bit

symbols:
FUNC          LOCAL   DEFAULT    ENTRY                                _ZN6ladder38_GLOBAL__N__cccef12d_6_ref_cu_537207d916pool_shared_treeEPKfijPf
OBJECT        WEAK    DEFAULT    -                                 U  .nv.reservedSmem.offset0
NOTYPE        LOCAL   INTERNAL   -                                 U  
FUNC          WEAK    DEFAULT    -                                    $__internal_1_$__cuda_sm20_div_s64
OBJECT        LOCAL   DEFAULT    -                                    _ZN42_INTERNAL_ee1e1a6d_11_cub_host_cu_537207d96thrust23THRUST_300001_SM_900_NS6system6detail10sequential3seqE
FUNC          GLOBAL  DEFAULT    -                                    _ZN3cub17CUB_300001_SM_9006detail11EmptyKernelIvEEvv
"""
STUB = "_Z99__device_stub__ZN6ladder47_GLOBAL__N__be8183fe_14_shared_tree_cu_537207d916pool_shared_treeEPKfijPfPKfijPf"


class IntegrityParseTest(unittest.TestCase):
    """grader/integrity.py's readers and rules on captured tool output."""

    def test_symbols(self):
        syms = {s.num: s for s in integrity.parse_symbols(READELF_SYMBOLS)}
        self.assertEqual(len(syms), 7)
        self.assertEqual((syms[0].name, syms[0].defined), ("", False))
        self.assertEqual((syms[29].value, syms[29].type, syms[29].bind, syms[29].ndx), (0x20, "FUNC", "LOCAL", "19"))
        self.assertEqual((syms[144].bind, syms[144].name), ("UNIQUE", "_ZN4cuda3std3__45__cpo5beginE"))
        self.assertFalse(syms[99].defined)

    def test_sections_and_relocations(self):
        secs = {s.name: s for s in integrity.parse_sections(READELF_SECTIONS)}
        self.assertEqual(sorted(secs), ["", ".fini_array", ".init_array", ".init_array.00101", ".rela.init_array.00101",
                                        ".text.startup"])
        self.assertEqual((secs[".init_array"].size, secs[".init_array"].entsize, secs[".init_array"].index), (16, 8, 28))
        relocs = integrity.parse_relocations(READELF_RELOCATIONS)
        self.assertEqual(sorted(relocs), [".fini_array", ".init_array", ".text.startup"])
        self.assertEqual([(r.offset, r.sym, r.addend) for r in relocs[".init_array"]], [(0, 0x62, 0), (8, 0x2f, 0x20)])
        self.assertEqual(relocs[".text.startup"][0].addend, -4)

    def test_startup_entries(self):
        syms = integrity.parse_symbols(READELF_SYMBOLS)
        for s in syms:  # the symbol indices of the captured relocations
            s.num = {98: 0x62, 47: 0x2f}.get(s.num, s.num)
        entries = integrity.startup_entries(integrity.parse_sections(READELF_SECTIONS), syms,
                                            integrity.parse_relocations(READELF_RELOCATIONS))
        tamper = "_ZN6ladder45_GLOBAL__N__a17d529a_12_ctor_attr_cu_537207d96tamperEv"
        # .init_array.00101 has an entry and no relocation: a fixed address.
        self.assertEqual(entries, [(".init_array.00101", None), (".fini_array", tamper), (".fini_array", None),
                                   (".init_array", tamper), (".init_array", "_ZL24__sti____cudaRegisterAllv")])

    def test_device_symbols(self):
        names = [n for _b, n in integrity.parse_device_symbols(CUOBJDUMP_SYMBOLS)]
        self.assertEqual(len(names), 5)
        self.assertEqual(names[0], "_ZN6ladder38_GLOBAL__N__cccef12d_6_ref_cu_537207d916pool_shared_treeEPKfijPf")
        self.assertEqual(names[1], ".nv.reservedSmem.offset0")
        self.assertEqual(names[-1], "_ZN3cub17CUB_300001_SM_9006detail11EmptyKernelIvEEvv")

    def test_entity_path(self):
        cases = {
            "cudaEventElapsedTime": ["cudaEventElapsedTime"],
            "_ZL24__sti____cudaRegisterAllv": ["__sti____cudaRegisterAll"],
            "_ZNSt7__cxx119to_stringEl": ["std", "__cxx11", "to_string"],
            "_ZStplIcSt11char_traitsIcESaIcEENSt7__cxx1112basic_stringIT_T0_T1_EEOS8_S9_": ["std"],
            "_ZZNSt8__detail18__to_chars_10_implImEEvPcjT_E8__digits": ["std", "__detail", "__to_chars_10_impl"],
            "_ZN4cuda3std3__45__cpo5beginE": ["cuda", "std", "__4", "__cpo", "begin"],
            "_ZGVZN6ladder19stage_03_descriptorEvE10descriptor": ["ladder", "stage_03_descriptor"],
            "_ZNK6ladder7Problem5out_hEv": ["ladder", "Problem", "out_h"],
            "_ZTVN6ladder12_GLOBAL__N_13FooE": ["ladder", "_GLOBAL__N_1", "Foo"],
            "_ZNSaIcED2Ev": ["std", "Sa"],
            STUB: ["ladder", "_GLOBAL__N__be8183fe_14_shared_tree_cu_537207d9", "pool_shared_tree"],
        }
        for name, path in cases.items():
            with self.subTest(name):
                self.assertEqual(integrity.entity_path(name), path)
        self.assertEqual(integrity.stub_kernel(STUB),
                         "_ZN6ladder47_GLOBAL__N__be8183fe_14_shared_tree_cu_537207d916pool_shared_treeEPKfijPf")
        self.assertEqual(integrity.stub_kernel("_Z29__device_stub__ZN6thrust1kEPfPf"), "_ZN6thrust1kEPf")
        self.assertIsNone(integrity.stub_kernel("_ZN6ladder1kEPf"))
        self.assertTrue(integrity.in_anonymous_namespace(STUB))
        self.assertTrue(integrity.in_anonymous_namespace("_ZTVN6ladder12_GLOBAL__N_13FooE"))
        # An anonymous type among the parameters does not put the function in that namespace.
        self.assertFalse(integrity.in_anonymous_namespace("_ZN6ladder3fooENS_12_GLOBAL__N_11TE"))
        self.assertFalse(integrity.in_anonymous_namespace("_Z17__device_stub__Z1kvv"))

    def test_normalize_anonymous(self):
        # One entity compiled from two copies of a file: nvcc's scope names differ in their hashes.
        student = "_ZNSt6vectorIN6ladder47_GLOBAL__N__be8183fe_14_shared_tree_cu_537207d93FooESaIS2_EE9push_backEv"
        reference = "_ZNSt6vectorIN6ladder47_GLOBAL__N__0123abcd_14_shared_tree_cu_89abcdef3FooESaIS2_EE9push_backEv"
        self.assertEqual(integrity.normalize_anonymous(student), "_ZNSt6vectorIN6ladder11_GLOBAL__N_3FooESaIS2_EE9push_backEv")
        self.assertEqual(integrity.normalize_anonymous(reference), integrity.normalize_anonymous(student))
        self.assertEqual(integrity.normalize_anonymous("_ZN42_INTERNAL_ee1e1a6d_11_cub_host_cu_537207d94cuda3std3__45__cpo5beginE"),
                         "_ZN10_INTERNAL_4cuda3std3__45__cpo5beginE")
        # A source name that ends in digits before the length: only the length is replaced.
        self.assertEqual(integrity.normalize_anonymous("_ZN7stage0347_GLOBAL__N__be8183fe_14_shared_tree_cu_537207d91fEv"),
                         "_ZN7stage0311_GLOBAL__N_1fEv")
        self.assertEqual(integrity.normalize_anonymous("_ZN6ladder3fooEv"), "_ZN6ladder3fooEv")
        weak = integrity.Symbol(1, 0, "FUNC", "WEAK", "5", "_ZN4cuda6detail3barIN6ladder47_GLOBAL__N__be8183fe_14_"
                                "shared_tree_cu_537207d93FooEEEvv")
        self.assertTrue(integrity.allowed(weak, "03", {integrity.normalize_anonymous(weak.name.replace("be8183fe", "01234567"))}))

    def test_forbidden(self):
        cases = {"cublasSdot_v2": "cuBLAS", "cudnnCreate": "cuDNN", "system": "process", "execve": "process",
                 "ladder::make_inputs(ladder::Problem const&, unsigned long)": "input generator",
                 "_INTERNAL_ee1e1a6d_11_x_cu_537207d9::thrust::THRUST_300001_SM_900_NS::seq": "Thrust",
                 "void cub::CUB_300001_SM_900::detail::EmptyKernel<void>()": "CUB",
                 "std::vector<at::Tensor, std::allocator<at::Tensor> >::~vector()": "PyTorch",
                 "std::system_error::~system_error()": None, "std::vector<int>::at(unsigned long)": None,
                 "fmt::format::x()": None, "ladder::(anonymous namespace)::not_cublas(float)": None}
        for name, want in cases.items():
            with self.subTest(name):
                got = integrity.forbidden(name)
                if want is None:
                    self.assertIsNone(got)
                else:
                    self.assertIn(want, got or "")

    def test_allowed(self):
        def sym(name, bind="GLOBAL"):
            return integrity.Symbol(1, 0, "FUNC", bind, "5", name)
        ok = [sym("_ZN6ladder19stage_07_descriptorEv"), sym(STUB),
              sym("_ZN6ladder47_GLOBAL__N__be8183fe_14_shared_tree_cu_537207d93runERKNS_12GpuStageArgsE"),
              sym("_ZNSt7__cxx119to_stringEl", "WEAK"), sym("_ZN4cuda3std3__45__cpo5beginE", "UNIQUE"),
              sym("_ZN6ladder15StageDescriptorD2Ev", "WEAK"), sym("DW.ref.__gxx_personality_v0", "WEAK"),
              sym("_ZNK6ladder7Problem5out_hEv", "WEAK")]
        bad = [sym("_ZN6ladder19stage_08_descriptorEv"), sym("cudaEventElapsedTime"),
               sym("_ZN6ladder15stage_toleranceERKNS_7ProblemERKNS_9ReferenceE"),
               sym("_ZNSt7__cxx119to_stringEl"),  # a strong definition in std: an explicit specialization
               sym("_ZNK6ladder7Problem5out_hEv"),  # weak in the reference, strong here
               sym("_ZN4cuda10some_thingEv", "WEAK")]
        reference_weak = {"_ZNK6ladder7Problem5out_hEv"}
        for s in ok:
            with self.subTest(s.name):
                self.assertTrue(integrity.allowed(s, "07", reference_weak))
        for s in bad:
            with self.subTest(s.name):
                self.assertFalse(integrity.allowed(s, "07", reference_weak))

    def test_display_and_report(self):
        self.assertEqual(integrity.display("void cub::K<cub::P<float>, int>(float*) [clone .cold]"), "void cub::K<...>(float*)")
        report = integrity.Report(objects=["/b/x.cu.o"])
        self.assertEqual(report.lines(), ["PASS: integrity: x.cu.o: no forbidden name, no symbol outside the rung's "
                                          "allow-list, no static constructor"])
        report.findings = [integrity.Finding(2, "x.cu.o", f"defines f{i}") for i in range(integrity.MAX_LINES + 2)]
        lines = report.lines()
        self.assertEqual(lines[0], "FAIL: integrity rule 2 (allow-list): x.cu.o: defines f0")
        self.assertEqual(lines[-1], "FAIL: integrity: ... and 2 more")
        self.assertEqual(len(lines), integrity.MAX_LINES + 1)

    def test_find_cuobjdump_runs_check_sass_lookup(self):
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            fake = write(os.path.join(tmp, "cuobjdump"), "#!/bin/sh\nexit 0\n")
            os.chmod(fake, 0o755)
            with mock.patch.dict(os.environ, {"CUOBJDUMP": fake}):
                self.assertEqual(integrity.find_cuobjdump(), fake)


def compile_object(tmp, folder, name, source, compiler="g++"):
    """Compiles source into tmp/folder/name.o (a build tree's layout); returns the object."""
    src = write(os.path.join(tmp, "src", name + (".cu" if compiler == "nvcc" else ".cpp")), source)
    obj = os.path.join(tmp, folder, name + ".o")
    os.makedirs(os.path.dirname(obj), exist_ok=True)
    cmd = [compiler, "-c", "-O2", "-std=c++17", "-o", obj, src]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{p.stderr}")
    return obj


# A stage object's shape in plain C++: the registration (with the descriptor's inline destructor),
# helpers in an anonymous namespace, a standard-library instantiation, and nvcc's registration
# constructor as nvcc's stub file writes it.
CLEAN_STAGE = """\
#include <vector>
namespace ladder {
struct StageDescriptor { std::vector<int> changes; };
namespace {
int helper(int x) { return x + 1; }
std::vector<int> grow(int n) { std::vector<int> v; for (int i = 0; i < n; ++i) v.push_back(helper(i)); return v; }
}  // namespace
const StageDescriptor& stage_42_descriptor() { static const StageDescriptor d{grow(3)}; return d; }
}  // namespace ladder
static void __sti____cudaRegisterAll(void) __attribute__((__constructor__));
static void __sti____cudaRegisterAll(void) {}
"""
MUTANTS = {  # name: (source, the rule that must catch it, a word of its finding)
    "oracle": ("namespace ladder { struct Problem; struct HostInputs; struct Reference;\n"
               "Reference linearity_pipeline(const Problem&, const HostInputs&);\n"
               "void* stage_oracle_descriptor() { return (void*)&linearity_pipeline; } }\n", 1,
               "calls ladder::linearity_pipeline"),
    "escape": ('#include <cstdlib>\nnamespace { int escape() { return std::system("true"); } }\n'
               "namespace ladder { int stage_escape_descriptor() { return escape(); } }\n", 1, "calls system"),
    "library_defined": ("namespace cub { int sum(int a, int b) { return a + b; } }\n", 1, "defines cub::sum(int, int)"),
    "interposer": ('extern "C" int cudaEventElapsedTime(float* ms, void*, void*) { *ms = 0; return 0; }\n', 2,
                   "defines cudaEventElapsedTime (a global symbol)"),
    "outside_anonymous": ("namespace ladder { int helper(int x) { return x + 1; } }\n", 2, "defines ladder::helper(int)"),
    "constructor": ('namespace { __attribute__((constructor)) void early() { __asm__ volatile(""); } }\n', 3,
                    "runs (anonymous namespace)::early() from .init_array (before main)"),
    "global_object": ("struct Setup { Setup(); };\nnamespace { Setup setup; }\n", 3, "dynamic initialization"),
    "destructor": ('namespace { __attribute__((destructor)) void late() { __asm__ volatile(""); } }\n', 3,
                   "from .fini_array (after main)"),
    "ifunc": ('static int impl() { return 1; }\nextern "C" { static void* resolve_f() { return (void*)&impl; } }\n'
              'static int f() __attribute__((ifunc("resolve_f")));\nint stage_ifunc_descriptor() { return f(); }\n', 3,
              "defines the IFUNC f()"),
}


@unittest.skipUnless(all(shutil.which(t) for t in ("g++", "readelf", "c++filt")), "needs g++, readelf and c++filt")
class IntegrityObjectsTest(unittest.TestCase):
    """The integrity check on objects compiled here (g++; nvcc where there is one)."""

    def test_clean_stage(self):
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            compile_object(tmp, "CMakeFiles/stage_42.dir/stages", "clean", CLEAN_STAGE)
            report = integrity.check(tmp, "42", cuobjdump="")
            self.assertEqual(report.findings, [], report.lines())
            self.assertTrue(report.lines()[0].startswith("PASS: integrity: clean.o"))
            self.assertFalse(report.reference)
            # Another rung's registration function is outside stage 43's allow-list.
            os.rename(os.path.join(tmp, "CMakeFiles/stage_42.dir"), os.path.join(tmp, "CMakeFiles/stage_43.dir"))
            self.assertIn("defines ladder::stage_42_descriptor()", "\n".join(integrity.check(tmp, "43", cuobjdump="").lines()))

    def test_mutants(self):
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            for name, (source, rule, words) in MUTANTS.items():
                with self.subTest(name):
                    folder = f"CMakeFiles/stage_{name}.dir"
                    compile_object(tmp, folder, name, source)
                    report = integrity.check(tmp, name, cuobjdump="")
                    self.assertTrue(report.failed, name)
                    lines = [l for l in report.lines() if l.startswith(integrity.FAIL)]
                    self.assertTrue(any(l.startswith(f"{integrity.FAIL} rule {rule} ") and words in l for l in lines),
                                    "\n".join(lines))

    def test_weak_symbols_against_the_reference(self):
        # ladder::twice, an inline function kept out of line: a weak definition.
        weak = ("namespace ladder { __attribute__((noinline)) inline int twice(int x) { return 2 * x; }\n"
                "const int* stage_42_descriptor() { static int v = twice(1); return &v; } }\n")
        strong = "namespace ladder { int twice(int x) { return 2 * x; } }\n"
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            compile_object(tmp, "CMakeFiles/stage_42.dir", "stage", weak)
            self.assertIn("defines ladder::twice(int) (a weak symbol that the reference build does not define)",
                          "\n".join(integrity.check(tmp, "42", cuobjdump="").lines()))
            # A library that defines it strongly does not make the weak copy acceptable ...
            compile_object(tmp, "CMakeFiles/ladder_common.dir/common", "lib", strong)
            self.assertTrue(integrity.check(tmp, "42", cuobjdump="").failed)
            # ... the reference solution's weak copy does.
            compile_object(tmp, "grader/CMakeFiles/reference_stage_42.dir/stages", "ref",
                           weak.replace("stage_42_descriptor", "reference_stage_42_descriptor"))
            report = integrity.check(tmp, "42", cuobjdump="")
            self.assertEqual(report.findings, [], report.lines())
            self.assertTrue(report.reference)

    def test_no_objects(self):
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            report = integrity.check(tmp, "42", cuobjdump="")
            self.assertTrue(report.failed)
            self.assertIn("no compiled objects of stage 42", report.lines()[0])


@unittest.skipUnless(shutil.which("nvcc") and shutil.which("readelf"), "needs nvcc")
class IntegrityNvccTest(unittest.TestCase):
    """Real nvcc objects: its kernel registration and anonymous-namespace kernel stubs (global
    symbols) pass; a kernel outside the anonymous namespace, and device code in a library's
    namespace, do not."""

    def test_nvcc_objects(self):
        clean = ("namespace ladder { struct StageDescriptor { int id; };\n"
                 "namespace { __global__ void pool(float* p) { p[threadIdx.x] += 1.0f; } }\n"
                 "const StageDescriptor& stage_42_descriptor() { pool<<<1, 32>>>(nullptr); static StageDescriptor d{42};"
                 " return d; } }\n")
        bad = ("namespace ladder { __global__ void pool(float* p) { p[threadIdx.x] += 1.0f; } }\n"
               "namespace thrust { __device__ float twice(float x) { return 2 * x; }\n"
               "__global__ void k(float* p) { p[0] = twice(p[1]); } }\n")
        cuobjdump = integrity.find_cuobjdump()
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            obj = compile_object(tmp, "CMakeFiles/stage_42.dir", "clean", clean, compiler="nvcc")
            report = integrity.check(tmp, "42", cuobjdump=cuobjdump)
            self.assertEqual(report.findings, [], report.lines())
            symbols = integrity.parse_symbols(integrity.readelf(obj, "-s"))
            stubs = [s for s in symbols if re.match(r"_Z\d+__device_stub__", s.name) and s.type == "FUNC"
                     and not s.name.endswith(".cold")]
            self.assertTrue(stubs and all(s.bind == "GLOBAL" for s in stubs), "nvcc's kernel stubs are global")
            entries = integrity.startup_entries(integrity.parse_sections(integrity.readelf(obj, "-S")), symbols,
                                                integrity.parse_relocations(integrity.readelf(obj, "-r")))
            self.assertEqual(entries, [(".init_array", integrity.NVCC_REGISTRATION)])
            compile_object(tmp, "CMakeFiles/stage_43.dir", "bad", bad, compiler="nvcc")
            text = "\n".join(integrity.check(tmp, "43", cuobjdump=cuobjdump).lines())
            self.assertIn("rule 2 (allow-list): bad.o: defines", text)
            self.assertIn("ladder::pool(float*)", text)
            self.assertIn("rule 1 (forbidden names): bad.o: defines", text)
            self.assertIn("thrust::k(float*) (its host stub)", text)
            if cuobjdump:
                self.assertIn("device code has", text)

    def test_iostream_initializer(self):
        """Before GCC 13, <iostream> alone adds an initializer (std::ios_base::Init): accepted by
        rule 3; a global object with a constructor beside it is not."""
        base = ("#include <iostream>\nnamespace ladder { struct StageDescriptor { int id; };\n"
                "namespace { __global__ void pool(float* p) { p[threadIdx.x] += 1.0f; } }\n")
        io_only = base + ("const StageDescriptor& stage_42_descriptor() { pool<<<1, 32>>>(nullptr);"
                          " static StageDescriptor d{42}; return d; } }\n")
        with_ctor = base + ("namespace { struct Early { Early() { std::puts(\"early\"); } } early; }\n"
                            "const StageDescriptor& stage_43_descriptor() { static StageDescriptor d{43}; return d; } }\n")
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            obj = compile_object(tmp, "CMakeFiles/stage_42.dir", "io", io_only, compiler="nvcc")
            self.assertEqual(integrity.check(tmp, "42", cuobjdump="").findings, [])
            symbols = integrity.parse_symbols(integrity.readelf(obj, "-s"))
            if not any(s.name.startswith("_GLOBAL__sub_I_") for s in symbols):
                self.skipTest("this libstdc++ (GCC 13 or newer) adds no initializer for <iostream>")
            compile_object(tmp, "CMakeFiles/stage_43.dir", "ctor", with_ctor, compiler="nvcc")
            text = "\n".join(integrity.check(tmp, "43", cuobjdump="").lines())
            self.assertIn("rule 3 (static constructors): ctor.o: runs the dynamic initialization", text)

    def test_inlined_cub_block_reduce(self):
        """docs/assignments.md: with CCCL 3.0, an inlined cub::BlockReduce leaves Thrust's
        sequential::seq object behind (CUB's block headers include a Thrust header)."""
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            probe = write(os.path.join(tmp, "v.cu"), "#include <cuda/version>\nCCCL_VERSION\n")
            p = subprocess.run(["nvcc", "-E", "-x", "cu", probe], capture_output=True, text=True)
            version = p.stdout.strip().splitlines()[-1].strip() if p.returncode == 0 and p.stdout.strip() else ""
            if not version.isdigit() or int(version) // 1000 != 3000:
                self.skipTest(f"CCCL {version or 'of unknown version'}: the documented footprint was measured with CCCL 3.0")
            kernel = ("#include <cub/block/block_reduce.cuh>\nnamespace { __global__ void pool(float* p) {\n"
                      "  using R = cub::BlockReduce<float, 128>; __shared__ typename R::TempStorage t;\n"
                      "  const float v = R(t).Sum(p[threadIdx.x]); if (threadIdx.x == 0) p[0] = v; } }\n"
                      "void* stage_42_descriptor() { return (void*)&pool; }\n")
            compile_object(tmp, "CMakeFiles/stage_42.dir", "block", kernel, compiler="nvcc")
            text = "\n".join(integrity.check(tmp, "42", cuobjdump=integrity.find_cuobjdump()).lines())
            self.assertIn("rule 1 (forbidden names): block.o: defines thrust::", text)
            self.assertIn("system::detail::sequential::seq", text)


# A stand-in for grade_timing_NN: the seed handshake (ready-R written, seed-R awaited), then the
# report, the outputs (a function of the seeds) and, for the reference (--tolerance), the tolerance.
# FAKE_TIMING: pass, wrong (one output off), nan, fixed (ignores the seeds), untimed (work outside
# the events), crash, nodevice; FAKE_TIMING_MS: the stage's event time; FAKE_TIMING_LOG: a file
# each process appends its role to.
FAKE_TIMING = """\
import array, json, math, os, sys, time
args = sys.argv[1:]
opt = lambda name: args[args.index(name) + 1] if name in args else None
role = "reference" if "--tolerance" in args else "student"
mode = os.environ.get("FAKE_TIMING", "pass") if role == "student" else "pass"
reps, warmup, hs = int(opt("--reps")), int(opt("--warmup")), opt("--handshake")
if os.environ.get("FAKE_TIMING_LOG"):
    with open(os.environ["FAKE_TIMING_LOG"], "a") as f:
        f.write(role + "\\n")
if mode == "nodevice":
    sys.exit(77)
if mode == "crash":
    sys.exit(1)
seeds = []
for r in range(warmup + reps):
    if os.path.exists(os.path.join(hs, f"seed-{r}")):
        sys.exit(9)  # a seed before the program asked for it
    open(os.path.join(hs, f"ready-{r}"), "w").write("ready\\n")
    t0 = time.time()
    while not os.path.exists(os.path.join(hs, f"seed-{r}")):
        if time.time() - t0 > 20:
            sys.exit(8)
        time.sleep(0.0005)
    seeds.append(int(open(os.path.join(hs, f"seed-{r}")).read()))
out = array.array("f")
for r in range(warmup, warmup + reps):
    s = 12345 if mode == "fixed" else seeds[r]
    vals = [(s % 1000) / 1000.0 + i for i in range(5)]
    if mode == "wrong":
        vals[4] += 0.5
    if mode == "nan":
        vals[1] = math.nan
    out.extend(vals)
with open(opt("--outputs"), "wb") as f:
    out.tofile(f)
if role == "reference":
    with open(opt("--tolerance"), "wb") as f:
        array.array("d", [0.01] * 5).tofile(f)
ms = float(os.environ.get("FAKE_TIMING_MS", "1.0"))
wall = ms + (0.09 if mode == "untimed" else 0.005)
json.dump({"problem": "fake problem", "seeds": seeds, "stage_ms": [ms] * reps, "stage_wall_ms": [wall] * reps,
           "floor_ms": [0.5] * reps, "floor_wall_ms": [0.505] * reps, "pooled_elems": 3, "y_elems": 2},
          open(opt("--json"), "w"))
"""


class StageTimingTest(unittest.TestCase):
    """runs.timing: the student's and the reference's grade_timing_NN in separate processes, in
    rounds of alternating order, on seeds handed over one repetition at a time; the comparison
    and the wall-time rule in the grader's own process. Stand-in programs (FAKE_TIMING)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ta_")
        self.addCleanup(shutil.rmtree, self.tmp)
        self.build = os.path.join(self.tmp, "build")
        for prog in (os.path.join(self.build, "grade_timing_03"), os.path.join(self.tmp, "ref", "grade_timing_03")):
            write(prog, "#!" + sys.executable + "\n" + FAKE_TIMING)
            os.chmod(prog, 0o755)
        self.reference = os.path.join(self.tmp, "ref", "grade_timing_03")
        self.log = os.path.join(self.tmp, "order.log")
        for k in ("FAKE_TIMING", "FAKE_TIMING_MS", "FAKE_TIMING_LOG"):
            self.addCleanup(os.environ.pop, k, None)
        os.environ["FAKE_TIMING_LOG"] = self.log

    def timing(self, mode="pass", reference=True, ms="1.0", rounds=3):
        os.environ["FAKE_TIMING"], os.environ["FAKE_TIMING_MS"] = mode, ms
        with mock.patch.object(tempfile, "tempdir", self.tmp):  # the GPU turn's lock files
            return runs.timing(self.build, "03", "pool", ["--batch", "1"], 4, 1, 60,
                               reference=self.reference if reference else None, rounds=rounds)

    def test_rounds_alternate_on_shared_seeds(self):
        status, data = self.timing()
        self.assertEqual(status, "ok", data)
        self.assertEqual((data["rounds"], data["checked_reps"], data["mismatches"]), (3, 12, 0))
        self.assertEqual(data["ratio_to_reference"], 1.0)
        self.assertEqual(data["problem"], "fake problem")  # the reference's description
        with open(self.log) as f:  # separate processes, the first of each round alternating
            self.assertEqual(f.read().split(), ["student", "reference", "reference", "student", "student", "reference"])
        self.assertAlmostEqual(data["uncovered_allowance_ms"], 0.01 + 2 * 0.005 + 0.02 * 1.0)

    def test_outputs_compared_by_the_grader(self):
        for mode, words in (("wrong", "worst error 25x the tolerance, at y[1]"), ("nan", "1 non-finite output(s)"),
                            ("fixed", "disagrees with the reference solution's")):
            with self.subTest(mode):
                status, data = self.timing(mode)
                self.assertEqual(status, "mismatch", data)
                self.assertIn(words, data["first_mismatch"])
                self.assertTrue(data["first_mismatch"].startswith("round 1, repetition 1: "))

    def test_wall_time_rule_scales_with_the_problem(self):
        # 0.09 ms of work outside the events: inside the old fixed 0.1 ms, not inside an allowance
        # made of the reference's own overhead on a 0.02 ms problem (0.01 + 2 x 0.005 + 2% x 0.02).
        status, data = self.timing("untimed", ms="0.02")
        self.assertEqual(status, "error", data)
        self.assertIn("more than the 0.020 ms allowed", data["error"])
        self.assertEqual(self.timing("pass", ms="0.02")[0], "ok")  # the reference's own overhead passes
        self.assertLess(runs.uncovered_allowance_ms(0.02, 0.005), 0.05)
        self.assertGreater(runs.uncovered_allowance_ms(10.0, 0.005), 0.2)

    def test_failures_in_the_graders_words(self):
        status, data = self.timing("crash")
        self.assertEqual(status, "error")
        self.assertEqual(data["error"], "your rung's timing process failed: " + runs.EXIT_WHY[1])
        self.assertEqual(self.timing("nodevice")[0], "skipped")
        os.remove(self.reference)
        self.assertIn("is missing", self.timing()[1]["error"])

    def test_without_reference(self):
        status, data = self.timing(reference=False)
        self.assertEqual(status, "ok", data)
        self.assertEqual((data["rounds"], data["reference"]), (1, None))
        self.assertEqual(self.timing("nan", reference=False)[0], "mismatch")  # finiteness still checked
        self.assertEqual(self.timing("wrong", reference=False)[0], "ok")      # nothing to compare with

    def test_untrusted_files(self):
        folder = os.path.join(self.tmp, "io")
        os.makedirs(folder)
        write(os.path.join(self.tmp, "elsewhere"), "x" * 20)
        os.symlink(os.path.join(self.tmp, "elsewhere"), os.path.join(folder, "outputs.bin"))
        self.assertIsNone(runs.read_raw(os.path.join(folder, "outputs.bin"), "f", 5))  # never through a link
        write(os.path.join(folder, "short.bin"), "x" * 19)
        self.assertIsNone(runs.read_raw(os.path.join(folder, "short.bin"), "f", 5))  # exactly the size asked
        self.assertIsNone(runs.read_raw(os.path.join(folder, "none.bin"), "f", 5))
        self.assertIsNone(runs.read_raw(os.path.join(folder, "short.bin"), "f", runs.MAX_OUTPUT_BYTES))

    def test_seeds_only_when_asked(self):
        folder = os.path.join(self.tmp, "hs")
        os.makedirs(folder)
        write(os.path.join(folder, "ready-0"), "ready\n")
        calls = iter([True, True, False])
        self.assertEqual(runs.serve_seeds(lambda: folder, [7, 8], lambda: next(calls)), 1)
        self.assertEqual(sorted(n for n in os.listdir(folder) if not n.startswith(".")), ["ready-0", "seed-0"])
        with open(os.path.join(folder, "seed-0")) as f:
            self.assertEqual(f.read(), "7\n")
        self.assertEqual(os.stat(os.path.join(folder, "seed-0")).st_mode & 0o777, 0o644)

    def test_the_students_build_holds_no_reference(self):
        """build.student configures the student's build without any reference option, and
        build.reference builds the reference's programs in a private folder (mode 0700), and
        an older build's program never stands in for one that now fails."""
        jail = runs.Jail(os.path.join(self.tmp, "grading"), "none")
        commands = []

        def fake_build(argv):
            commands.append(argv)
            return subprocess.CompletedProcess(argv, 0, "", "")
        jail.build = fake_build
        args = argparse.Namespace(cuda_architectures="90", jobs=1)
        with open(os.path.join(ROOT, "grader", "rungs.json"), encoding="utf-8") as f:
            config = rung_meta.with_rung_settings(json.load(f), ROOT)
        rung = rungs.resolve(ROOT, config, ["03"], {"03": []}, ROOT, False)
        with mock.patch.object(build, "log"):
            build.student(args, jail, rung, ROOT)
        self.assertFalse([a for a in commands[0] if "REFERENCE" in a], commands[0])
        work = os.path.join(self.tmp, "work")
        stale = write(os.path.join(build.reference_dir(work), "grade_timing_03"), "an older build's program")
        with mock.patch.object(build.subprocess, "run", return_value=subprocess.CompletedProcess([], 0, "", "")), \
                mock.patch.object(build, "log"):
            refs = build.reference(args, work, rung, ROOT)
        self.assertEqual(refs["03"][0], None)  # the mock built nothing, and the old program is gone
        self.assertFalse(os.path.exists(stale))
        self.assertEqual(os.stat(build.reference_dir(work)).st_mode & 0o777, 0o700)
        self.assertEqual(sorted(os.listdir(jail.grading)), ["build", "io", "tmp", "tree"])  # no reference there

    def test_integrity_reads_the_reference_build(self):
        """Rule 2e against the reference build's own stage object, read by the grader."""
        weak = ("namespace ladder { __attribute__((noinline)) inline int twice(int x) { return 2 * x; }\n"
                "const int* stage_42_descriptor() { static int v = twice(1); return &v; } }\n")
        objects, work = os.path.join(self.tmp, "build"), os.path.join(self.tmp, "work")
        compile_object(objects, "CMakeFiles/stage_42.dir", "stage", weak)
        ref = os.path.join(work, "reference-build")
        self.assertTrue(programs.reference_integrity(objects, ref, "42").failed)  # no reference objects: rule 2e fails it
        compile_object(ref, "CMakeFiles/stage_42.dir/stages", "ref", weak)
        report = programs.reference_integrity(objects, ref, "42")
        self.assertEqual(report.findings, [], report.lines())
        self.assertTrue(report.reference)
        self.assertTrue(programs.reference_integrity(objects, "", "42").failed)  # a handout: none


class RungRecordTest(unittest.TestCase):
    """grader/rungs.py resolves a stage and a track's rung into one record; grader/build.py builds
    both from it: the given libraries once, each rung's objects, each program once, and a track
    rung that does not compile replaced by its stub in the grading tree so the others still link."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ta_")
        self.addCleanup(shutil.rmtree, self.tmp)
        self.config = rungs.load_config(ROOT)

    def resolve(self, ids):
        return rungs.resolve(ROOT, self.config, ids, rungs.declared_files(ROOT, ids), ROOT, False)

    def test_a_reference_build_of_another_tree_is_made_again(self):
        """A reference build folder configured from another checkout (the tree moved, or a copy
        graded with --reuse-work) would make CMake refuse, and every rung's timing fail: it is
        recognized, so reference() starts it afresh."""
        build_dir = os.path.join(self.tmp, "reference-build")
        self.assertFalse(build.configured_from_elsewhere(build_dir, ROOT))  # none yet
        os.makedirs(build_dir)
        cache = os.path.join(build_dir, "CMakeCache.txt")
        for home, elsewhere in ((ROOT, False), (os.path.join(self.tmp, "old-copy"), True)):
            with open(cache, "w") as f:
                f.write(f"CMAKE_CACHEFILE_DIR:INTERNAL={build_dir}\nCMAKE_HOME_DIRECTORY:INTERNAL={home}\n")
            self.assertEqual(build.configured_from_elsewhere(build_dir, ROOT), elsewhere, home)

    def test_a_stage_and_a_track_rung(self):
        stage, = self.resolve(["03"])
        self.assertEqual((stage.kind, stage.ladder, stage.name, stage.program, stage.compile, stage.link,
                          stage.reference_target, stage.shared_program),
                         ("stage", "", "03 shared_tree", "stage_03_shared_tree", ["stage_03"],
                          ["stage_03_shared_tree", "grade_timing_03"], "grade_timing_03", False))
        self.assertEqual(stage.rules, ["--check-precision", "fp32", "--refill-check"])
        self.assertEqual(stage.todos, [])  # the tree is its own (solved) submission
        rung, = self.resolve(["p38-05"])
        source = handout.track_rungs(ROOT)["p38-05"]
        self.assertEqual((rung.kind, rung.ladder, rung.number, rung.program, rung.compile, rung.link, rung.carriers),
                         ("track", "p38", "05", "p38_ladder", [f"CMakeFiles/p38_track.dir/{source}.o"], ["p38_ladder"],
                          ["07"]))
        self.assertEqual(rung.report, problems.report_settings(rung.settings, "05"))
        self.assertEqual(rung.hidden, problems.load(os.path.join(ROOT, "grader", "p38_practice.problems")))
        with self.assertRaisesRegex(handout.HandoutError, "unknown rung"):
            rungs.declared_files(ROOT, ["99"])

    def test_build_stubs_a_broken_track_rung(self):
        graded = self.resolve(["p38-03", "p38-04"])
        jail = runs.Jail(os.path.join(self.tmp, "grading"), "none")
        broken = graded[0].files[0]
        write(os.path.join(jail.dirs["tree"], broken), "does not compile")
        commands = []

        def fake_build(argv):
            commands.append(argv[argv.index("--target") + 1:] if "--target" in argv else "configure")
            fails = graded[0].compile[0] in argv
            return subprocess.CompletedProcess(argv, 1 if fails else 0, "", "error: no" if fails else "")
        jail.build = fake_build
        with mock.patch.object(build, "log"):
            built = build.student(argparse.Namespace(cuda_architectures="", jobs=1), jail, graded, ROOT)
        self.assertEqual(commands, ["configure", graded[0].given, graded[0].compile, graded[1].compile, ["p38_ladder"]])
        self.assertEqual(built, {"p38-03": (False, "error: no", False), "p38-04": (True, "", True)})
        with open(os.path.join(jail.dirs["tree"], broken), encoding="utf-8") as f:
            self.assertIn('ladder_todo("', f.read())  # the handout's stub, in the grading tree only


if __name__ == "__main__":
    unittest.main(verbosity=2)
