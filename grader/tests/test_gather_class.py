#!/usr/bin/env python3
"""Tests of grader/slurm/gather_class.py (the class table and the Gradescope upload of
grader/slurm/grade_class_slurm.sh) on synthetic results; no Slurm, no GPU.

    python3 grader/tests/test_gather_class.py
"""
import contextlib
import csv
import importlib.util
import io
import json
import os
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("gather_class", os.path.join(HERE, os.pardir, "slurm", "gather_class.py"))
gc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gc)


def part(rung, title, score, most, skipped=False):
    t = {"name": f"{rung}: {title}", "score": score, "max_score": most, "output": "", "visibility": "visible"}
    if not skipped:
        t["status"] = "passed" if score >= most else "failed"
    return t


def results(parts):
    return {"score": sum(t["score"] for t in parts), "output": "", "tests": parts}


SKIP_GPU = [part("03 shared_tree", "technique (machine code) and integrity", 10, 10),
            part("03 shared_tree", "public tests", 0, 20, skipped=True),
            part("03 shared_tree", "performance", 0, 20, skipped=True)]


class GatherTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name
        self.roster = ["ann", "ben", "cat", "dan"]
        with open(os.path.join(self.out, "students.tsv"), "w", encoding="utf-8") as f:
            f.writelines(f"{s}\t/subs/{s}\n" for s in self.roster)
        with open(os.path.join(self.out, "class.json"), "w", encoding="utf-8") as f:
            json.dump({"rungs": "03", "skip_gpu": True}, f)
        self.write("ann", results(SKIP_GPU))
        stub = [dict(t) for t in SKIP_GPU]
        stub[0] = part("03 shared_tree", "technique (machine code) and integrity", 0, 10)
        self.write("ben", results(stub))
        with contextlib.redirect_stdout(io.StringIO()):  # cat: the task's grading failed
            gc.main(["fail", os.path.join(self.out, "results", "cat"), "--student", "cat",
                     "--reason", "the grader exited with status 2: bad"])
        # dan: no results.json at all (the task was killed)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, student, doc):
        os.makedirs(os.path.join(self.out, "results", student), exist_ok=True)
        with open(os.path.join(self.out, "results", student, "results.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f)

    def gather(self):
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(gc.main(["gather", self.out]), 0)
        with open(os.path.join(self.out, "class.csv"), encoding="utf-8") as f:
            return {r["student"]: r for r in csv.DictReader(f)}

    def test_every_student_has_a_row_in_roster_order(self):
        rows = self.gather()
        self.assertEqual(list(rows), self.roster)

    def test_columns_are_rung_and_part(self):
        rows = self.gather()
        self.assertEqual(rows["ann"]["03 technique"], "10")
        self.assertEqual(rows["ben"]["03 technique"], "0")
        self.assertEqual(rows["ann"]["total"], "10")
        self.assertEqual(rows["ann"]["max_total"], "50")
        self.assertEqual(rows["ann"]["skipped"], "03 public 03 performance")
        self.assertEqual(rows["ann"]["status"], "graded")

    def test_a_failed_and_a_missing_grading_count_zero_with_a_reason(self):
        rows = self.gather()
        self.assertEqual((rows["cat"]["status"], rows["cat"]["total"]), ("failed", "0"))
        self.assertIn("status 2: bad", rows["cat"]["reason"])
        self.assertEqual((rows["dan"]["status"], rows["dan"]["total"]), ("failed", "0"))
        self.assertIn("no results.json", rows["dan"]["reason"])
        self.assertEqual(rows["dan"]["03 technique"], "")
        # the missing one now has a results.json in Gradescope's format, with 0 points
        with open(os.path.join(self.out, "results", "dan", "results.json"), encoding="utf-8") as f:
            doc = json.load(f)
        self.assertEqual((doc["score"], doc["tests"]), (0, []))

    def test_the_instructor_copy_gives_the_whole_total(self):
        hidden = part("03 shared_tree", "hidden tests", 30, 40)
        doc = results(SKIP_GPU + [hidden])
        doc["score"] = 10  # without --reveal: the hidden part not counted
        self.write("ann", doc)
        with open(os.path.join(self.out, "results", "ann", "instructor.json"), "w", encoding="utf-8") as f:
            json.dump({"submission_id": "ann", "total": 40, "parts": [
                {"name": t["name"], "score": t["score"], "max_score": t["max_score"], "hidden": t is hidden,
                 "skipped": "status" not in t} for t in SKIP_GPU + [hidden]]}, f)
        rows = self.gather()
        self.assertEqual((rows["ann"]["total"], rows["ann"]["gradescope_score"]), ("40", "10"))
        self.assertEqual((rows["ann"]["03 hidden"], rows["ann"]["submission_id"]), ("30", "ann"))
        self.assertEqual(rows["ann"]["max_total"], "90")
        self.assertEqual(rows["ben"]["03 hidden"], "")
        with open(os.path.join(self.out, "gradescope", "scores.csv"), encoding="utf-8") as f:
            self.assertIn("ann,40\n", f.read())
        with open(os.path.join(self.out, "class.md"), encoding="utf-8") as f:
            self.assertIn("leaves out the hidden parts", f.read())

    def test_an_unreadable_results_json_is_a_failure(self):
        with open(os.path.join(self.out, "results", "ben", "results.json"), "w", encoding="utf-8") as f:
            f.write("{ half")
        rows = self.gather()
        self.assertEqual(rows["ben"]["status"], "failed")
        self.assertIn("unreadable", rows["ben"]["reason"])

    def test_gradescope_upload(self):
        self.gather()
        with zipfile.ZipFile(os.path.join(self.out, "gradescope.zip")) as z:
            names = set(z.namelist())
            scores = list(csv.reader(io.StringIO(z.read("gradescope/scores.csv").decode())))
        self.assertEqual(names, {f"gradescope/{s}/results.json" for s in self.roster} | {"gradescope/scores.csv"})
        self.assertEqual(scores, [["student", "score"], ["ann", "10"], ["ben", "0"], ["cat", "0"], ["dan", "0"]])
        self.assertTrue(os.path.isfile(os.path.join(self.out, "gradescope", "ann", "results.json")))

    def test_markdown_table(self):
        self.gather()
        with open(os.path.join(self.out, "class.md"), encoding="utf-8") as f:
            md = f.read()
        self.assertIn("| ann | 10 / 50 | 10 | graded |", md)
        self.assertIn("| dan | 0 / 50 | 0 | failed: no results.json", md)
        self.assertIn("--skip-gpu", md)

    def test_gather_again_is_stable(self):
        first = self.gather()
        self.assertEqual(self.gather(), first)

    def test_no_roster_is_a_usage_error(self):
        with tempfile.TemporaryDirectory() as empty, contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(gc.main(["gather", empty]), 2)
        self.assertIn("students.tsv", err.getvalue())

    def test_column_names(self):
        self.assertEqual(gc.column("03 shared_tree: memory safety and races"), "03 sanitizer")
        self.assertEqual(gc.column("p38-03 online_softmax: a new part"), "p38-03 a new part")
        self.assertEqual(gc.column("odd"), "odd")


if __name__ == "__main__":
    unittest.main()
