#!/usr/bin/env python3
"""Tests of scripts/check_bare_numbers.py: a planted bare number fails, the same number in a
marker, a code span, a fenced block, a generated block or an allow-listed line passes.

    python3 scripts/test_check_bare_numbers.py
"""

from __future__ import annotations

import io
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]  # the lint; the packages
import check_bare_numbers as cbn  # noqa: E402


class Lint(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        self.allow = self.root / "allow.txt"
        self.allow.write_text("")

    def tearDown(self):
        self.tmp.cleanup()

    def run_on(self, text: str, allow: str = "") -> tuple[int, str]:
        doc = self.root / "doc.md"
        doc.write_text(text)
        self.allow.write_text(allow)
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = cbn.main([str(doc), "--root", str(self.root), "--allow", str(self.allow)])
        return rc, out.getvalue()

    def assertFails(self, text: str, found: str, allow: str = ""):
        rc, out = self.run_on(text, allow)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"doc.md:", out)
        self.assertIn(f": {found}: ", out)

    def assertPasses(self, text: str, allow: str = ""):
        rc, out = self.run_on(text, allow)
        self.assertEqual(rc, 0, out)

    def test_planted_bare_number_fails(self):
        self.assertFails("Intro.\n\nThe kernel took 3.14 ms on the H200.\n", "3.14 ms")
        rc, out = self.run_on("a\nb\nThe kernel took 3.14 ms.\n")
        self.assertTrue(out.startswith("doc.md:3: 3.14 ms: "), out)

    def test_units(self):
        for text, found in (("ran at 4,814 GB/s", "4,814 GB/s"), ("reached 312.8 TFLOP/s", "312.8 TFLOP/s"),
                            ("busy 85.5% of", "85.5%"), ("about 11 us", "11 us"), ("took 1.2 µs", "1.2 µs"),
                            ("4.8 TB/s", "4.8 TB/s")):
            with self.subTest(text=text):
                self.assertFails(text + "\n", found)

    def test_ratio_is_caught(self):
        self.assertFails("Stage 05 is 2.5x faster.\n", "2.5x")
        self.assertFails("Stage 05 is 2.5× faster.\n", "2.5×")
        self.assertFails("a speedup of ×2.5 over eager\n", "×2.5")

    def test_shapes_and_products_are_not_ratios(self):
        self.assertPasses("16x16 tiles, a 3 × 3 kernel, 64 × N tiles, 8 × R × 72 bytes, 128×128 blocks\n")

    def test_marker_passes(self):
        self.assertPasses("took <!-- num: ladder#stages[id=05].total_ms fmt=.2f -->3.14<!-- /num --> ms\n")
        self.assertPasses("took <!-- num: ladder#stages[id=05].total_ms fmt=.2f -->3.14 ms<!-- /num -->\n")

    def test_code_span_passes(self):
        self.assertPasses("the log says `took 3.14 ms` and ``2.5x``\n")

    def test_fenced_block_passes(self):
        self.assertPasses("Before.\n\n```\ntook 3.14 ms, 2.5x faster\n```\n\n~~~text\n3.14 ms\n~~~\nAfter.\n")
        self.assertFails("```\n3.14 ms\n```\ntook 2.72 ms\n", "2.72 ms")

    def test_comment_generated_block_and_link_pass(self):
        self.assertPasses("<!-- an old 3.14 ms -->\n<!-- gain:begin -->\n| 05 | 3.14 ms | 2.5× |\n"
                          "<!-- gain:end -->\nsee [the run](results/3.14%20ms.json)\n")

    def test_allow_listed_line_passes(self):
        text = "Target: the pool phase within 1.05× of the floor; it took 3.14 ms.\n"
        allow = "doc.md:within 1\\.05× of  # a target stated as a target\n"
        rc, out = self.run_on(text, allow)
        self.assertEqual(rc, 1)  # the 3.14 ms on the same line is still caught
        self.assertNotIn(": 1.05×: ", out)
        self.assertIn(": 3.14 ms: ", out)
        self.assertPasses("Target: the pool phase within 1.05× of the floor.\n", allow)
        self.assertPasses("took 3.14 ms\n", "*.md:3\\.14 ms  # a glob for the path\n")
        self.assertFails("took 3.14 ms\n", "3.14 ms", "other.md:3\\.14 ms  # another file\n")

    def test_allow_list_needs_a_reason(self):
        with self.assertRaises(SystemExit):
            self.run_on("took 3.14 ms\n", "doc.md:3\\.14 ms\n")

    def test_the_repository_passes(self):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = cbn.main([])
        self.assertEqual(rc, 0, out.getvalue()[:2000])

    def test_every_marked_page_is_linted(self):
        """The pages whose <!-- num: --> markers update_results.py checks are all linted: a page
        that may hold markers may not hold bare numbers either."""
        from tooling.results import update_results
        linted = set(cbn.prose_files(cbn.REPO))
        marked = set(update_results.marked_files(cbn.REPO))
        self.assertEqual(sorted(str(p) for p in marked - linted), [])


if __name__ == "__main__":
    unittest.main()
