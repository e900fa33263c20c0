#!/usr/bin/env python3
"""Tests of tooling/results/update_results.py and ladder_results.py on synthetic results
(no GPU, no committed data): the speedup over the previous stage on the phases a stage changes,
the results table's pool column and "vs previous" cell, its notes as a wrapped bullet list, the
block's page (docs/results.md), and the chapters' gain blocks with --check.

    python3 scripts/test_update_results.py        # unittest; exit 0 when all pass
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the packages' root: this test is an entry point
from tooling.results import ladder_results as lr  # noqa: E402
from tooling.results import update_results as ur  # noqa: E402

PROBLEM = {"batch": 2, "in_channels": 3, "out_channels": 4, "in_h": 8, "in_w": 8, "out_h": 10, "out_w": 10,
           "kernel_size": [3, 3], "stride": [1, 1], "padding": [0, 0], "output_padding": [0, 0],
           "dilation": [1, 1], "groups": 1, "distribution": "uniform", "seed": 1}


def stage(sid, name, phases, idea="", changes=None, speedup=None, ran=True):
    """A ladder JSON stage; phases: {phase: ms}; total = their sum; changes None: the field is absent."""
    st = {"id": sid, "name": name, "idea": idea, "gpu": True, "ran": ran, "note": "" if ran else "skipped"}
    if ran:
        st["phases"] = [{"phase": k, "ms": v} for k, v in phases.items()]
        st["total_ms"] = sum(phases.values())
    if changes is not None:
        st["changes"] = changes
    if speedup is not None:
        st["speedup_vs_previous"] = speedup
    return st


def ladder(stages):
    return {"device": "Test GPU, 2 SMs", "problem": PROBLEM, "floor_ms": 0.1, "stages": stages}


def old_file():
    """Predates "changes": speedups compare totals."""
    return ladder([stage("01", "loop", {"conv": 10.0, "pool": 2.0}, idea="loop idea"),
                   stage("02", "atomics", {"conv": 10.0, "pool": 4.0}, idea="atomics idea")])


def new_file():
    return ladder([
        stage("01", "loop", {"conv": 10.0, "pool": 2.0}, idea="loop idea", changes=[]),
        stage("02", "atomics", {"conv": 10.0, "pool": 4.0}, idea="atomics idea", changes=["pool"], speedup=0.45),
        # (02's speedup above is not 2/4 on purpose: the JSON's value wins over a recomputed one)
        # no speedup_vs_previous in the JSON: computed from "changes" (pool 4 / pool 1)
        stage("03", "tree", {"conv": 10.0, "pool": 1.0}, idea="tree idea", changes=["pool"]),
        # a fused stage against a split one: conv + pool of 03 (11) over its fused launch (0.5)
        stage("04", "fused", {"fused": 0.5, "epilogue": 0.01}, idea="fused idea", changes=["conv", "pool", "fused"]),
        # changes a phase it does not have: no value
        stage("05", "odd", {"fused": 0.4}, idea="odd idea", changes=["pool"]),
    ])


def pool_only():
    return {"mode": "pool_only", "device": "Test GPU, 2 SMs", "problem": PROBLEM, "stages": [
        {"id": "01", "name": "loop", "idea": "loop idea", "ran": True, "pool_ms": 2.0},
        {"id": "02", "name": "atomics", "idea": "atomics idea", "ran": True, "pool_ms": 5.0,
         "speedup_vs_previous": 0.4},
        {"id": "03", "name": "renamed", "idea": "tree idea", "ran": True, "pool_ms": 1.0,
         "speedup_vs_previous": 5.0}]}


def run_main(*args) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = ur.main(list(args))
    return rc, err.getvalue()


class Speedups(unittest.TestCase):
    def load(self, data):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "ladder_x.json").write_text(json.dumps(data))
            return lr.load(d, warn=False)[0]

    def test_new_fields(self):
        c = self.load(new_file()).comparisons()
        self.assertIsNone(c["01"].ratio)
        self.assertEqual((c["02"].ratio, c["02"].on), (0.45, "pool"))  # the JSON's value
        self.assertAlmostEqual(c["03"].ratio, 4.0)  # computed from "changes"
        self.assertAlmostEqual(c["04"].ratio, 11.0 / 0.5)
        self.assertEqual(c["04"].on, "conv + pool")
        self.assertIsNone(c["05"].ratio)

    def test_old_file_compares_totals(self):
        c = self.load(old_file()).comparisons()
        self.assertEqual(c["02"].on, "total")
        self.assertAlmostEqual(c["02"].ratio, 12.0 / 14.0)

    def test_labels(self):
        self.assertEqual(lr.changes_key(["conv", "pool", "fused"]), "conv+pool+fused")
        self.assertEqual(lr.changes_prose(["conv", "pool", "fused"]), "conv + pool")
        self.assertEqual(lr.changes_prose(["fused"]), "fused")
        self.assertEqual(lr.changes_prose([]), "total")
        self.assertEqual(lr.changes_prose(None), "total")


class Blocks(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        self.results, self.stages = root / "results", root / "stages"
        self.results_md = root / "docs" / "results.md"
        self.results.mkdir()
        self.results_md.parent.mkdir()
        (self.results / "ladder_new.json").write_text(json.dumps(new_file()))
        (self.results / "pool_only_x.json").write_text(json.dumps(pool_only()))
        self.results_md.write_text(f"# t\n{ur.BEGIN}\nold\n{ur.END}\nafter\n")
        for folder, idea, text in (
                ("02_atomics", "atomics idea", "intro\n<!-- gain:begin --><!-- gain:end -->\nafter\n"),
                ("03_tree", "tree idea", "<!-- gain:begin --><!-- gain:end -->\n"),
                ("04_fused", "a new idea", "<!-- gain:begin --><!-- gain:end -->\n"),  # idea changed
                ("06_unmeasured", "x", "<!-- gain:begin --><!-- gain:end -->\n"),
                ("05_odd", "odd idea", "no markers here\n")):
            (self.stages / folder).mkdir(parents=True)
            (self.stages / folder / "README.md").write_text(text)
            (self.stages / folder / "k.cu").write_text(f'LADDER_REGISTER_STAGE(d) {{\n  d.idea = "{idea}";\n}}\n')
        self.args = ["--results", str(self.results), "--stages", str(self.stages),
                     "--results-md", str(self.results_md)]

    def tearDown(self):
        self.tmp.cleanup()

    def chapter(self, folder):
        return (self.stages / folder / "README.md").read_text()

    def test_table_columns(self):
        block = ur.render(lr.load(self.results, warn=False))
        self.assertIn("| total ms | pool ms |", block)
        self.assertIn("0.45× (pool)", block)
        self.assertIn("4.00× (pool)", block)
        self.assertIn("22.0× (conv + pool)", block)

    def test_notes_are_a_wrapped_bullet_list(self):
        """The column notes: one bullet per column, no <sub> line; prose lines at most WRAP
        characters, and no continuation line that Markdown would read as a new block."""
        block = ur.render(lr.load(self.results, warn=False))
        self.assertNotIn("<sub>", block)
        for label in ("total ms", "pool ms", "conv TFLOP/s", "GB/s", "× floor", "vs previous",
                      "vs eager / vs torch.compile"):
            self.assertEqual(block.count(f"\n- **{label}**: "), 1, label)
        lines = block.split("\n")
        for i, line in enumerate(lines):
            if line.startswith("|"):
                continue  # table rows are not wrapped
            self.assertLessEqual(len(line), ur.WRAP, line)
            if line.startswith("  "):  # a bullet's continuation
                self.assertTrue(lines[i - 1].startswith(("- ", "  ")), line)
                self.assertIsNone(ur._BLOCK_START.match(line.strip()), line)

    def test_wrap(self):
        text = "a " * 48 + "q - + 1. b"
        lines = ur.wrap(text, "- ", "  ", width=100)
        self.assertEqual(lines, ["- " + "a " * 47 + "a", "  q - + 1. b"])  # "q" goes along with "- + 1."
        self.assertEqual(" ".join(ln.strip() for ln in lines).split(), ["-", *text.split()])
        self.assertEqual(ur.wrap("x" * 150), ["x" * 150])  # a long word stays whole
        self.assertEqual(ur.bullet("text", "label"), ["- **label**: text"])

    def test_block_lives_in_docs_results_md(self):
        """The default page is docs/results.md, which has the block; README.md has none."""
        self.assertEqual(ur.RESULTS_MD, lr.REPO_ROOT / "docs" / "results.md")
        text = ur.RESULTS_MD.read_text()
        self.assertEqual((text.count(ur.BEGIN), text.count(ur.END)), (1, 1))
        self.assertNotIn(ur.BEGIN, (lr.REPO_ROOT / "README.md").read_text())

    def test_missing_block_names_the_page(self):
        self.results_md.write_text("# no block\n")
        with self.assertRaises(SystemExit) as e:
            run_main(*self.args)
        self.assertIn(str(self.results_md), str(e.exception.code))

    def test_rewrite_then_check(self):
        rc, err = run_main("--check", *self.args)
        self.assertEqual(rc, 1)
        self.assertIn(str(self.stages / "02_atomics" / "README.md"), err)
        self.assertEqual(run_main(*self.args)[0], 0)
        self.assertEqual(run_main("--check", *self.args)[0], 0)

        a = self.chapter("02_atomics")
        self.assertTrue(a.startswith("intro\n<!-- gain:begin -->\n") and a.endswith("<!-- gain:end -->\nafter\n"))
        self.assertIn("| pool | 4 | 01 loop | 2 | 0.45×: slower, a negative result |", a)
        self.assertIn("pool phase alone (`--pool-only`) | 5 | 01 loop | 2 | 0.40×: slower, a negative result", a)
        t = self.chapter("03_tree")
        self.assertIn("| pool | 1 | 02 atomics | 4 | 4.00× |", t)
        self.assertIn("Not from [pool_only_x.json](", t)  # its 03 has another name: skipped
        self.assertIn("its 03 is renamed.", t)
        self.assertNotIn("pool phase alone", t)
        self.assertIn("has not been measured in the committed runs yet: in the results files, "
                      '04 fused is a different version ("fused idea")', self.chapter("04_fused"))
        self.assertIn("Stage 06 has not been measured in the committed runs yet.", self.chapter("06_unmeasured"))
        self.assertEqual(self.chapter("05_odd"), "no markers here\n")

        # a hand edit inside a block makes --check fail, naming that chapter only
        (self.stages / "03_tree" / "README.md").write_text(t.replace("4.00×", "4.10×"))
        rc, err = run_main("--check", *self.args)
        self.assertEqual(rc, 1)
        self.assertIn("03_tree", err)
        self.assertNotIn("02_atomics", err)

    def test_two_blocks_is_an_error(self):
        (self.stages / "03_tree" / "README.md").write_text("<!-- gain:begin --><!-- gain:end -->\n" * 2)
        with self.assertRaises(SystemExit) as e:
            run_main(*self.args)
        self.assertIn("03_tree", str(e.exception.code))


class Marks(unittest.TestCase):
    """<!-- num: EXPR fmt=SPEC -->TEXT<!-- /num --> markers in prose: --check and the rewrite."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        self.root = root
        (root / "results").mkdir()
        (root / "results" / "ladder_new.json").write_text(json.dumps(new_file()))
        (root / "prof.txt").write_text("gpu__time_duration.sum | 238.336000 | us\n"
                                       "gpu__time_duration.sum | 4.576 | us\ncount | 1,234,567\n")
        self.stages = root / "stages"
        self.stages.mkdir()
        self.results_md = root / "results.md"
        self.results_md.write_text(f"{ur.BEGIN}\n{ur.END}\n")
        self.base = ["--results", str(root / "results"), "--stages", str(self.stages),
                     "--results-md", str(self.results_md)]
        run_main(*self.base, "--marked")  # settle the results block: only markers are under test

    def tearDown(self):
        self.tmp.cleanup()

    def mark(self, spec, text="?"):
        return f"<!-- num: {spec} -->{text}<!-- /num -->"

    def test_synthetic_expressions(self):
        L = "results/ladder_new.json"
        doc = self.root / "doc.md"
        doc.write_text("\n".join([
            "pool " + self.mark(f"{L}#stages[id=03].phases[phase=pool].ms fmt=.2f") + " ms",
            "gain " + self.mark(f"{L}#stages[id=02].phases[phase=pool].ms / {L}#stages[id=03].phases[phase=pool].ms"
                                " fmt=.1f") + "x",
            "us " + self.mark(f"( {L}#floor_ms + 0.1 ) * 1000 fmt=.0f"),
            "sum " + self.mark(r"prof.txt#^gpu__time_duration\.sum\s.\s([\d.]+)@sum fmt=.1f"),
            "second " + self.mark(r"prof.txt#^gpu__time_duration\.sum\s.\s([\d.]+)@2 fmt=.2f"),
            "count " + self.mark(r"prof.txt#^count\s.\s([\d,]+) fmt=sig2"),
            "quoted " + self.mark(f'"{L}#stages[name=loop].total_ms" fmt=ms'), ""]))
        args = [*self.base, "--root", str(self.root), "--marked", str(doc)]
        self.assertEqual(run_main("--check", *args)[0], 1)
        self.assertEqual(run_main(*args)[0], 0)
        text = doc.read_text()
        for want in ("-->1.00<", "-->4.0<", "-->200<", "-->242.9<", "-->4.58<", "-->1,200,000<", "-->12<"):
            self.assertIn(want, text)
        self.assertEqual(run_main("--check", *args)[0], 0)

    def test_bad_reference_is_an_error(self):
        doc = self.root / "doc.md"
        doc.write_text("x " + self.mark("results/ladder_new.json#stages[id=99].total_ms fmt=.2f", "1.00") + "\n")
        rc, err = run_main("--check", *self.base, "--root", str(self.root), "--marked", str(doc))
        self.assertEqual(rc, 1)
        self.assertIn(f"{doc}:1: error:", err)
        self.assertIn("0 entries with id=99", err)

    def test_stale_number_in_a_copy_of_a_marked_chapter(self):
        """A real chapter, its markers read against the committed results/: planting a stale number
        fails --check naming the file, the line and the expected value; the rewrite fixes it."""
        src = lr.REPO_ROOT / "stages" / "13_single_launch" / "README.md"
        text = src.read_text()
        m = ur.NUM.search(text)
        self.assertIsNotNone(m, f"{src} has no <!-- num: --> marker")
        good = m.group("text")
        line = text.count("\n", 0, m.start()) + 1
        copy = self.root / "chapter.md"
        copy.write_text(text[: m.start("text")] + "9.999" + text[m.end("text"):])
        args = [*self.base, "--root", str(lr.REPO_ROOT), "--marked", str(copy)]
        rc, err = run_main("--check", *args)
        self.assertEqual(rc, 1)
        self.assertIn(f"{copy}:{line}: found '9.999', expected '{good}'", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)  # only the planted number is stale
        self.assertEqual(run_main(*args)[0], 0)
        self.assertEqual(copy.read_text(), text)
        self.assertEqual(run_main("--check", *args), (0, ""))


if __name__ == "__main__":
    unittest.main()
