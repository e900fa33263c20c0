#!/usr/bin/env python3
"""CPU tests of the classroom-assignment tooling: scripts/assignment.py and the Python half of
grader/ (markers, handouts and their leak check, problem lists, reports, the self-test's fixtures,
the integrity check). No GPU and no build needed; about a second. Run: python3 scripts/test_assignment.py
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # leave no __pycache__ in grader/
sys.path.insert(0, os.path.join(ROOT, "grader"))

import grade  # noqa: E402
import handout  # noqa: E402
import markers  # noqa: E402
import problems  # noqa: E402
import reports  # noqa: E402
import runs  # noqa: E402
import selftest  # noqa: E402

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


class HandoutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ta_")
        cls.out = os.path.join(cls.tmp, "handout")
        cls.made = cli("handout", "--rungs", "03,04", "--out", cls.out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def setUp(self):
        self.assertEqual(self.made.returncode, 0, self.made.stdout + self.made.stderr)

    def files(self, root=None):
        return handout.repo_files(root or self.out)

    def read(self, path, root=None):
        with open(os.path.join(root or self.out, path), encoding="utf-8") as f:
            return f.read()

    def mutant(self, name):
        dst = os.path.join(self.tmp, name)
        shutil.copytree(self.out, dst)
        return dst

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
        bad = [f for f in files if f.startswith(("grader/hidden", "grader/fixtures", "results/", "profiles/"))
               or f.endswith(".mutant") or f == "docs/answers.md"]
        self.assertEqual(bad, [])
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

    def test_repository_lists(self):
        grader = os.path.join(ROOT, "grader")
        self.assertGreater(len(problems.load(os.path.join(grader, "public.problems"))), 0)
        practice = {c.category for c in problems.load(os.path.join(grader, "practice.problems"))}
        hidden = {c.category for c in problems.load(os.path.join(grader, "hidden", "hidden.problems"))}
        self.assertEqual(practice, hidden)


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
        self.assertEqual(doc["score"], 80.0)
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
    def test_score_perf(self):
        conf = {"full_at": 1.2, "zero_at": 10.0}
        for ratio, want in ((1.0, 1.0), (1.2, 1.0), (10.0, 0.0), (20.0, 0.0), (5.6, 0.5), (3.4, 0.75)):
            self.assertAlmostEqual(grade.score_perf(ratio, conf), want, places=12, msg=f"ratio {ratio}")


FIXTURE_HEAD = "rung: 03\nfile: stages/03_shared_tree/shared_tree.cu\nwhy: test\n"


class SelftestTest(unittest.TestCase):
    def test_repository_fixtures_apply(self):
        paths = sorted(glob.glob(os.path.join(ROOT, "grader", "fixtures", "*", "*.fixture")))
        self.assertGreater(len(paths), 0)
        fixtures = [selftest.parse_fixture(p) for p in paths]
        declared = handout.plan(ROOT, sorted({fx["rung"] for fx in fixtures}))[2]
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
        flagged = "integrity: the rung's objects use system (a process or loader escape)"
        cases = [("integrity", parts(0, 0, 0, flagged), True), ("integrity", parts(0, 0, 10), False),
                 ("integrity", parts(20, 0, 0, flagged), False),
                 ("technique", parts(20, 40, 0), True), ("technique", parts(20, 40, 10), False),
                 ("correctness", parts(10, 40, 10), True), ("correctness", parts(20, 20, 10), True),
                 ("correctness", parts(20, 40, 10), False), ("correctness", parts(0, 0, 10, skipped=True), None)]
        for n, (loses, ps, want) in enumerate(cases):
            with self.subTest(n=n, loses=loses):
                self.assertIs(selftest.verdict(ps, loses)[0], want)


@unittest.skipUnless(shutil.which("g++") and shutil.which("nm"), "needs g++ and nm")
class RunsIntegrityTest(unittest.TestCase):
    ORACLE = ("namespace ladder { struct Problem; struct HostInputs; struct Reference;\n"
              "Reference linearity_pipeline(const Problem&, const HostInputs&); }\n"
              "using Fn = ladder::Reference (*)(const ladder::Problem&, const ladder::HostInputs&);\n"
              "Fn oracle() { return &ladder::linearity_pipeline; }  // the undefined symbol, as a call makes it\n")
    ESCAPE = '#include <cstdlib>\nint escape() { return std::system("true"); }\n'
    CLEAN = "float add(const float* v, int n) { float s = 0; for (int i = 0; i < n; ++i) s += v[i]; return s; }\n"

    def compile(self, tmp, stage, name, source):
        src = write(os.path.join(tmp, "CMakeFiles", f"stage_{stage}.dir", "sub", name + ".cpp"), source)
        p = subprocess.run(["g++", "-c", "-O1", "-o", src[:-4] + ".o", src], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_integrity(self):
        with tempfile.TemporaryDirectory(prefix="ta_") as tmp:
            self.compile(tmp, "42", "oracle", self.ORACLE)
            self.compile(tmp, "42", "escape", self.ESCAPE)
            self.compile(tmp, "43", "clean", self.CLEAN)
            found = runs.integrity(tmp, "42")
            self.assertEqual([why for _s, why in found], ["the CPU oracle or the input generator", "a process or loader escape"])
            self.assertTrue(found[0][0].startswith("ladder::linearity_pipeline("), found)
            self.assertEqual(found[1][0], "system")
            self.assertEqual(runs.integrity(tmp, "43"), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
