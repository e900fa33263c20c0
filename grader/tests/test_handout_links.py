#!/usr/bin/env python3
"""CPU tests of a handout's links, of what it may hold, and of the grade command's argument
checks (grader/handout.py, scripts/assignment.py). No GPU and no build: nothing here configures
or compiles. Run: python3 grader/tests/test_handout_links.py
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True
sys.path.insert(0, ROOT)  # the packages' root: this test is an entry point

from grader import handout, rung_meta  # noqa: E402

ENV = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
URL = "https://example.org/ladder/blob/main"


def cli(*args, root=ROOT, env=ENV):
    return subprocess.run([sys.executable, os.path.join(root, "scripts", "assignment.py"), *args],
                          capture_output=True, text=True, timeout=120, env=env, cwd=root)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def tmpdir(test):
    d = tempfile.mkdtemp(prefix="thl_")
    test.addCleanup(shutil.rmtree, d)
    return d


def heading_anchors(text):
    """The #anchors GitHub makes for a Markdown text: each heading lowercased, punctuation but
    hyphens dropped, spaces to hyphens, a repeat numbered -1, -2, ...; plus <a name/id="...">."""
    found, seen, fenced = set(), {}, False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        found.update(re.findall(r'<a (?:name|id)="([^"]+)"', line))
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", re.sub(r"<[^>]+>", "", m.group(1)))
            slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def broken_links(root):
    """Every relative link of the repository's Markdown whose file, or whose #anchor in a Markdown
    file, does not exist, as "path:line: target: why". The handout README templates are left out:
    their links are relative to a handout's root, where they become its README."""
    anchors, bad = {}, []
    for path, text in handout.markdown_texts(root):
        if path in (handout.README_TEMPLATE, handout.TRACK_README_TEMPLATE):
            continue

        def check(target, offset):
            p, anchor = handout.link_path(path, target)
            where = f"{path}:{text.count(chr(10), 0, offset) + 1}: {target}"
            if p is None or not os.path.exists(os.path.join(root, p)):
                bad.append(f"{where}: no such file")
            elif anchor and p.endswith(".md"):
                if p not in anchors:
                    with open(os.path.join(root, p), encoding="utf-8") as f:
                        anchors[p] = heading_anchors(f.read())
                if anchor.lower() not in anchors[p]:
                    bad.append(f"{where}: no such heading")
            return target

        handout.edit_links(text, check)
        in_page = re.findall(r"\]\(#([^)\s]+)\)", text)
        if in_page and path not in anchors:
            anchors[path] = heading_anchors(text)
        bad += [f"{path}: #{a}: no such heading in the page" for a in in_page if a.lower() not in anchors[path]]
    return bad


def broken_chapters(root):
    """Every rung whose chapter does not resolve, as "folder: target: why": a stage's or a track
    rung's rung.json "chapter" (a link relative to its folder, grader/rung_meta.py), else its
    folder's README.md, must name a Markdown file that exists and, with an #anchor, a heading or
    an <a id> of it."""
    folders = [f"stages/{f}" for f in handout.stage_folders(root).values()] \
        + list(handout.track_rung_folders(root).values())
    bad = []
    for folder in folders:
        path = os.path.join(root, folder, "rung.json")
        meta = rung_meta.read(path) if os.path.isfile(path) else {}
        target, anchor = rung_meta.chapter(root, folder, meta)
        where = f"{folder}: {meta.get('chapter', 'README.md')}"
        if not target.endswith(".md") or not os.path.isfile(os.path.join(root, target)):
            bad.append(f"{where}: no chapter {target}")
        elif anchor:
            with open(os.path.join(root, target), encoding="utf-8") as f:
                if anchor.lower() not in heading_anchors(f.read()):
                    bad.append(f"{where}: no such heading or anchor in {target}")
    return bad


class RepositoryLinksTest(unittest.TestCase):
    """The repository's own Markdown: every relative link names a file that exists, and every
    #anchor a heading of its page; every rung's chapter resolves."""

    def test_every_link_resolves(self):
        self.assertEqual(broken_links(ROOT), [])

    def test_every_rung_has_its_chapter(self):
        self.assertEqual(broken_chapters(ROOT), [])
        self.assertTrue(handout.track_rung_folders(ROOT))  # the track rungs are found, and checked

    def test_a_planted_broken_chapter_is_found(self):
        d = tmpdir(self)
        write(os.path.join(d, "stages", "01_a", "README.md"), "# Stage 01\n")
        write(os.path.join(d, "stages", "02_b", "b.cu"), "")  # no chapter at all
        write(os.path.join(d, "tracks", "p99_demo", "README.md"), '# Track\n\n<a id="rung-01"></a>**01.** Text.\n')
        write(os.path.join(d, "tracks", "p99_demo", "rungs", "01_x", "rung.json"), '{"chapter": "../../README.md#rung-01"}')
        write(os.path.join(d, "tracks", "p99_demo", "rungs", "02_y", "rung.json"), '{"chapter": "../../README.md#rung-02"}')
        self.assertEqual(broken_chapters(d), ["stages/02_b: README.md: no chapter stages/02_b/README.md",
                                              "tracks/p99_demo/rungs/02_y: ../../README.md#rung-02: no such heading "
                                              "or anchor in tracks/p99_demo/README.md"])

    def test_a_planted_broken_link_and_anchor_are_found(self):
        d = tmpdir(self)
        write(os.path.join(d, "docs", "a.md"), "# Title\n\n## Two words\n\n[ok](b.md#two-words) [x](gone.md)\n")
        write(os.path.join(d, "docs", "b.md"), "## Two words\n\n[up](a.md#two-words) [bad](a.md#no-such) [in](#two-words) [out](#nowhere)\n")
        subprocess.run(["git", "init", "-q", d], check=True)
        subprocess.run(["git", "-C", d, "add", "-A"], check=True)
        found = broken_links(d)
        self.assertEqual(len(found), 3, found)
        self.assertTrue(found[0].startswith("docs/a.md:5: gone.md: no such file"), found)
        self.assertTrue(found[1].startswith("docs/b.md:3: a.md#no-such: no such heading"), found)
        self.assertEqual(found[2], "docs/b.md: #nowhere: no such heading in the page")


class HandoutLinksTest(unittest.TestCase):
    """Generated handouts: every relative link resolves, with and without --repo-url."""
    GROUPS = ("03,04", "11", "p38-03,p38-04")

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="thl_")
        cls.made = {}
        for rungs in cls.GROUPS:
            out = os.path.join(cls.tmp, rungs)
            cls.made[rungs] = (out, cli("handout", "--rungs", rungs, "--out", out))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_no_unresolved_link(self):
        for rungs, (out, p) in self.made.items():
            with self.subTest(rungs):
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertEqual(handout.unresolved_links(out), [])
                c = cli("check-handout", out)
                self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
                self.assertNotIn("LINK:", c.stdout)

    def test_links_dropped_keep_their_text(self):
        out, _ = self.made["03,04"]
        with open(os.path.join(out, "stages/02_atomics/README.md"), encoding="utf-8") as f:
            text = f.read()
        self.assertNotIn("](../../results/", text)
        self.assertIn("results/ladder_h200.json", text)  # the link's text stays
        self.assertNotIn("docs/answers.md#", text)
        self.assertIn("](../../docs/mistakes.md)", text)  # a shipped file keeps its link
        # The committed captures of the handed-out stages ship: the chapters' links to them resolve.
        with open(os.path.join(out, "stages/03_shared_tree/README.md"), encoding="utf-8") as f:
            self.assertIn("](../../profiles/data/03_shared_tree.txt)", f.read())
        self.assertTrue(os.path.isfile(os.path.join(out, "profiles/03_shared_tree.md")))
        self.assertFalse(os.path.exists(os.path.join(out, "profiles/05_vectorized_loads.md")))

    def test_repo_url(self):
        out = os.path.join(tmpdir(self), "h")
        p = cli("handout", "--rungs", "03,04", "--out", out, "--repo-url", URL)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(handout.unresolved_links(out), [])
        texts = "".join(text for _path, text in handout.markdown_texts(out))
        self.assertIn(f"]({URL}/results/ladder_h200.json)", texts)
        # The captures of the handed-out stages ship and keep their relative links; a later
        # stage's capture is linked in the published repository.
        self.assertIn("](../../profiles/data/03_shared_tree.txt)", texts)
        self.assertNotIn(f"]({URL}/profiles/data/03_shared_tree.txt)", texts)
        self.assertIn(f"]({URL}/profiles/data/05_vectorized_loads.txt)", texts)
        self.assertNotIn(f"{URL}/docs/answers.md", texts)  # instructor-only: never linked
        # Stage 05's folder holds regions of rungs 03 and 04: a link there would hand them out.
        self.assertNotIn(f"{URL}/stages/05_", texts)
        bad = cli("handout", "--rungs", "03", "--out", out + "2", "--repo-url", "ftp://example.org/x")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--repo-url must be an http(s) address", bad.stderr)


class LinkCheckerTest(unittest.TestCase):
    def test_planted_broken_links_are_reported(self):
        d = tmpdir(self)
        write(os.path.join(d, "b.md"), "# Sec\n")
        write(os.path.join(d, "img", "here.png"), "")
        write(os.path.join(d, "docs", "a.md"), "\n".join([
            "[ok](../b.md#sec) [anchor](#top) [web](https://example.org/x.md) [mail](mailto:a@b.c)",
            "[root](/b.md) ![shown](../img/here.png)",
            "[missing](missing.md) and [wrapped",
            "text](../gone.md#x)",
            "![pic](../img/none.png)",
            '<img src="../img/lost.png" alt="lost"> <a href="nope.md">a</a>',
            "[out](../../outside.md)",
            "[r]: ../ref.md",
            "`[code](nowhere.md)`",
            "```",
            "[fenced](nowhere.md)",
            "```",
            ""]))
        found = handout.unresolved_links(d)
        self.assertEqual([f.split(": link to ")[0] + " " + f.split(": link to ")[1].split(":")[0] for f in found], [
            "docs/a.md:3 missing.md", "docs/a.md:4 ../gone.md#x", "docs/a.md:5 ../img/none.png",
            "docs/a.md:6 ../img/lost.png", "docs/a.md:6 nope.md", "docs/a.md:7 ../../outside.md",
            "docs/a.md:8 ../ref.md"])
        self.assertTrue(found[5].endswith("outside the repository"), found[5])

    def test_check_handout_fails_on_a_planted_link(self):
        out = os.path.join(tmpdir(self), "h")
        self.assertEqual(cli("handout", "--rungs", "03", "--out", out).returncode, 0)
        chapter = os.path.join(out, "stages/03_shared_tree/README.md")
        with open(chapter, encoding="utf-8") as f:
            text = f.read()
        write(chapter, text + "\nSee [the answers](../../docs/answers.md#stage-03).\n")
        p = cli("check-handout", out)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("LINK: stages/03_shared_tree/README.md:", p.stdout)
        self.assertIn("../../docs/answers.md#stage-03: not in the handout", p.stdout)

    def test_edit_links(self):
        text = "[a](x.md#s) ![b](y.png) [c](keep.md) <a href='z.md'>d</a> [e][r]\n\n[r]: w.md\n"
        drop = handout.edit_links(text, lambda t, _: t if t == "keep.md" else None)
        self.assertEqual(drop, "a b [c](keep.md) d e\n\n\n")
        moved = handout.edit_links(text, lambda t, _: "https://h/" + t)
        self.assertEqual(moved, "[a](https://h/x.md#s) ![b](https://h/y.png) [c](https://h/keep.md) "
                                "<a href='https://h/z.md'>d</a> [e][r]\n\n[r]: https://h/w.md\n")
        self.assertEqual(handout.link_path("stages/03_x/README.md", "../../docs/a%20b.md#s"), ("docs/a b.md", "s"))


class LaterRungTest(unittest.TestCase):
    """A later rung ships complete only in a track's handout; its regions must not exempt a copy of
    the assigned rung's lines from the leak check."""

    def test_a_later_region_exempts_nothing(self):
        d = tmpdir(self)
        line = "partial[threadIdx.x] = partial[threadIdx.x] + other_value;"
        region = "  // BEGIN SOLUTION\n  // STUB: return v;\n  {}\n  // END SOLUTION\n"
        write(os.path.join(d, "grader", "rungs.json"), "{}\n")
        write(os.path.join(d, "tracks/p99_demo/rungs/02_first/first.cu"), region.format("int earlier_line_of_rung_two = 0;"))
        write(os.path.join(d, "tracks/p99_demo/rungs/03_tree/tree.cu"), region.format(line))
        write(os.path.join(d, "tracks/p99_demo/rungs/04_later/later.cu"), region.format(line))
        shipped = set(handout.repo_files(d))
        self.assertIn(line, handout.solution_lines(d, {"p99-03"}, shipped))
        # An earlier rung's region quoting a line still exempts it (rung 02 before rung 03).
        write(os.path.join(d, "tracks/p99_demo/rungs/02_first/first.cu"), region.format(line))
        self.assertNotIn(line, handout.solution_lines(d, {"p99-03"}, shipped))

    def test_no_later_stage_folder_ships(self):
        folders = handout.stage_folders(ROOT)
        for r in ("03", "11"):
            ship = handout.plan(ROOT, [r])[0]
            later = {p.split("/")[1] for p in ship if p.startswith("stages/") and p.split("/")[1][:2].isdigit()
                     and p.split("/")[1][:2] > r}
            self.assertEqual(later, set(), r)
            # Rung 11's handout ships stage 10 (an earlier rung) complete: TF32 tensor-core code.
            self.assertEqual(r == "11", f"stages/{folders['10']}/tensor_cores.cu" in ship)


class GradeArgumentsTest(unittest.TestCase):
    """grade's arguments: one line on stderr, exit 2 (argument) or 3 (tool), never a traceback."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="thl_")
        cls.out = os.path.join(cls.tmp, "h")
        cls.made = cli("handout", "--rungs", "03,04", "--out", cls.out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def refused(self, p, status, message):
        self.assertEqual(p.returncode, status, p.stdout + p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn(message, p.stderr)

    def test_bad_arguments(self):
        self.assertEqual(self.made.returncode, 0, self.made.stderr)
        work = os.path.join(self.tmp, "work")
        for args, message in (
                (["--rungs", "05"], "rung 05 is not in this handout: it hands out 03, 04"),
                (["--rungs", "p38-03"], "rung p38-03 is not in this handout"),
                (["--rungs", "3,04"], "--rungs: rungs are two-digit numbers"),
                (["--rungs", ","], "--rungs: rungs are two-digit numbers"),
                (["--rungs", "03", "--cuda-architectures", "50"], "sm_50 is too old: the minimum is sm_75"),
                (["--rungs", "03", "--cuda-architectures", "sm_90"], "'sm_90' is not an architecture"),
                (["--rungs", "03", "--jobs", "0"], "--jobs must be 1 or more"),
                (["--rungs", "03", "--submission", os.path.join(self.tmp, "none")], "no such folder"),
                (["--rungs", "03", "--secret-file", os.path.join(self.tmp, "none")], "not a readable file")):
            with self.subTest(args):
                self.refused(cli("grade", "--skip-gpu", "--work", work, *args, root=self.out), 2, message)
        self.assertFalse(os.path.exists(work), "a refused grading must not start")
        self.refused(cli("grade", "--rungs", "42", "--skip-gpu", "--work", work), 2, "no rung 42")

    def test_missing_tool(self):
        bin_dir = os.path.join(self.tmp, "bin")
        os.makedirs(bin_dir, exist_ok=True)
        for tool in ("bash", "git", "sed", "head"):
            if shutil.which(tool) and not os.path.exists(os.path.join(bin_dir, tool)):
                os.symlink(shutil.which(tool), os.path.join(bin_dir, tool))
        env = dict(ENV, PATH=bin_dir)
        p = cli("grade", "--rungs", "03", "--skip-gpu", "--work", os.path.join(self.tmp, "w"), root=self.out, env=env)
        self.refused(p, 3, "cmake not found")
        args = argparse.Namespace(submission=self.out, rungs="04,03", secret_file="", work="", out="", jobs=1,
                                  timeout=5, cuda_architectures="")
        with mock.patch.object(handout, "find_nvcc", return_value=""), \
                mock.patch.object(handout.shutil, "which", return_value="/usr/bin/true"):
            with self.assertRaisesRegex(handout.ToolError, "^nvcc not found"):
                handout.validate_grade_args(self.out, args)

    def test_normalized_per_call(self):
        def args(archs):
            return argparse.Namespace(submission=self.out, rungs="04, 03", secret_file="", work="", out="", jobs=1,
                                      timeout=5, cuda_architectures=archs)
        a, b = args("75,90a"), args("")
        handout.validate_grade_args(self.out, a, tools=False)
        handout.validate_grade_args(self.out, b, tools=False)
        self.assertEqual((a.rungs, a.cuda_architectures), ("03,04", "75;90a"))
        self.assertEqual(b.cuda_architectures, "")  # nothing carried over from the call before
        for good in ("native", "all-major", "75;86", "90-real", "100f"):
            self.assertTrue(handout.cuda_architectures(good))
        for bad in ("74", "native;75", "75;;90", "sm75"):
            with self.assertRaises(handout.UsageError, msg=bad):
                handout.cuda_architectures(bad)


if __name__ == "__main__":
    unittest.main()
