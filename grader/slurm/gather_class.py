#!/usr/bin/env python3
"""The class table and the Gradescope upload of a class graded by grader/slurm/grade_class_slurm.sh.

  gather OUT        reads OUT/students.tsv (student id, submission folder: one line per array
                    task) and OUT/results/<student>/results.json (and the grader's instructor.json
                    where an official run wrote it: the whole total, hidden parts included,
                    whether or not results.json counts them); writes OUT/class.csv,
                    OUT/class.md, OUT/gradescope/ (one <student>/results.json each and
                    scores.csv) and OUT/gradescope.zip. A student whose results.json is missing
                    or unreadable (the task was killed, never ran) gets one saying so, with 0
                    points: no student is ever dropped from the table.
  fail DIR          writes DIR/results.json for a grading that failed: 0 points and the reason
                    (--reason), in Gradescope's format; the array task calls it.

Standard library only. Exit status: 0 done, 2 a bad argument (a missing OUT or students.tsv).
"""
import argparse
import csv
import io
import json
import os
import sys
import zipfile

# The part titles of grader/reports.py (PART_TITLES), back to their short names; a title not
# listed here keeps its own text as the column's name.
PART_KEYS = {"public tests": "public", "hidden tests": "hidden", "memory safety and races": "sanitizer",
             "technique (machine code) and integrity": "technique", "performance": "performance"}
FAILED_KEY = "grading_failed"  # extra_data flag of a results.json that fail() wrote


def failure_doc(student, reason):
    """A results.json in Gradescope's format for a grading that produced none."""
    return {"score": 0, "output": f"Grading failed, 0 points: {reason}\nTell the course staff.",
            "visibility": "visible", "stdout_visibility": "hidden", "tests": [],
            "extra_data": {FAILED_KEY: True, "student": student, "reason": reason}}


def write_json(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def read_results(path):
    """(doc, None) for a readable results.json with a numeric score, else (None, why)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return None, "no results.json"
    except (OSError, ValueError) as e:
        return None, f"results.json unreadable ({e.__class__.__name__}: {e})"
    if not isinstance(doc, dict) or not isinstance(doc.get("score"), (int, float)) or \
            not isinstance(doc.get("tests", []), list):
        return None, "results.json has no numeric score"
    return doc, None


def read_instructor(path):
    """The grader's instructor.json (an official run's every part and whole total), or None."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    ok = isinstance(doc, dict) and isinstance(doc.get("total"), (int, float)) and isinstance(doc.get("parts"), list)
    return doc if ok else None


def column(test_name):
    """'03 shared_tree: public tests' -> '03 public' (the rung's id and the part's short name)."""
    rung, _, title = test_name.partition(": ")
    if not title:
        return test_name
    return f"{rung.split()[0] if rung.split() else rung} {PART_KEYS.get(title, title)}"


def read_roster(out):
    """[(student, submission)] from OUT/students.tsv, in array-task order."""
    path = os.path.join(out, "students.tsv")
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return [(r[0], r[1] if len(r) > 1 else "") for r in rows]


def number(x):
    return int(x) if float(x).is_integer() else round(float(x), 2)


def gather(out, roster, logs_hint="logs/"):
    """Reads every student's results.json (writing a failure one where it is missing); returns
    (rows, columns, docs): rows are dicts with student, total, max_total, status, reason, one key
    per column, skipped, gradescope_score and submission_id; docs, each student's results.json."""
    docs, parts = {}, {}
    for student, _ in roster:
        path = os.path.join(out, "results", student, "results.json")
        doc, why = read_results(path)
        if doc is None:
            doc = failure_doc(student, f"{why}: the grading task did not finish (time limit, memory, a node "
                                       f"failure or cancelled); see {logs_hint}")
            write_json(path, doc)
        docs[student] = doc
        mine = read_instructor(os.path.join(out, "results", student, "instructor.json"))
        if (doc.get("extra_data") or {}).get(FAILED_KEY):
            mine = None
        # Every part with its score: the instructor's copy, else results.json's tests (which hold
        # the hidden parts too; only its score may leave them out).
        parts[student] = (mine["parts"], mine["total"], mine.get("submission_id", "")) if mine else \
            (doc.get("tests", []), doc["score"], "")
    columns, most = [], {}
    for student, _ in roster:
        for t in parts[student][0]:
            c = column(str(t.get("name", "")))
            if c not in columns:
                columns.append(c)
            most[c] = t.get("max_score", 0)
    max_total = sum(most.values())
    rows = []
    for student, _ in roster:
        doc, (tests, total, submission_id) = docs[student], parts[student]
        extra = doc.get("extra_data") or {}
        failed = bool(extra.get(FAILED_KEY))
        row = {"student": student, "total": number(total), "max_total": number(max_total),
               "status": "failed" if failed else "graded",
               "reason": extra.get("reason", "") if failed else "",
               "skipped": " ".join(column(str(t.get("name", ""))) for t in tests if skipped(t)),
               "submission_id": submission_id, "gradescope_score": number(doc["score"])}
        for c in columns:
            row[c] = ""
        for t in tests:
            row[column(str(t.get("name", "")))] = number(t.get("score", 0))
        rows.append(row)
    return rows, columns, docs


def skipped(t):
    """A part that could not run: instructor.json says so; in results.json, a test without a
    status (reports.py gives every part that ran one)."""
    if "skipped" in t:
        return bool(t["skipped"])
    return "status" not in t and t.get("score", 0) == 0 and bool(t.get("max_score"))


def csv_text(rows, columns):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["student", "total", "max_total", "status", "reason", *columns, "skipped",
                                        "gradescope_score", "submission_id"],
                       lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def markdown(rows, columns, meta):
    rungs = list(dict.fromkeys(c.split()[0] for c in columns))
    head = ["student", "total", *[f"rung {r}" for r in rungs], "status"]
    lines = [f"# Class results: rungs {meta.get('rungs', '?')}", "",
             f"{len(rows)} student(s), {sum(r['status'] == 'failed' for r in rows)} failed grading(s). "
             "Per-part scores: class.csv.", ""]
    if meta.get("skip_gpu"):
        lines += ["Graded with --skip-gpu: only the build and static checks (technique and integrity) scored.", ""]
    if any(r["gradescope_score"] != r["total"] for r in rows if r["status"] == "graded"):
        lines += ["The totals count every part; the students' results.json (gradescope_score in class.csv) "
                  "leaves out the hidden parts (graded without --reveal).", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        per_rung = [number(sum(r[c] for c in columns if c.split()[0] == g and r[c] != "")) for g in rungs]
        status = r["status"] + (f": {r['reason']}" if r["reason"] else "")
        cells = [r["student"], f"{r['total']} / {r['max_total']}", *map(str, per_rung), status.replace("|", "/")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def write_gradescope(out, rows, docs):
    """OUT/gradescope/<student>/results.json, OUT/gradescope/scores.csv and OUT/gradescope.zip
    (the same files under gradescope/)."""
    gs = os.path.join(out, "gradescope")
    files = {}
    for r in rows:
        files[f"{r['student']}/results.json"] = json.dumps(docs[r["student"]], indent=2) + "\n"
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student", "score"])
    for r in rows:
        w.writerow([r["student"], r["total"]])
    files["scores.csv"] = buf.getvalue()
    for name, text in files.items():
        path = os.path.join(gs, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    with zipfile.ZipFile(os.path.join(out, "gradescope.zip"), "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in sorted(files.items()):
            z.writestr("gradescope/" + name, text)
    return gs


def cmd_gather(args):
    out = os.path.abspath(args.out)
    if not os.path.isfile(os.path.join(out, "students.tsv")):
        print(f"error: {out}/students.tsv not found: OUT must be the folder grader/slurm/grade_class_slurm.sh wrote",
              file=sys.stderr)
        return 2
    roster = read_roster(out)
    meta = {}
    if os.path.isfile(os.path.join(out, "class.json")):
        with open(os.path.join(out, "class.json"), encoding="utf-8") as f:
            meta = json.load(f)
    rows, columns, docs = gather(out, roster, logs_hint=os.path.join(out, "logs") + "/")
    with open(os.path.join(out, "class.csv"), "w", encoding="utf-8", newline="") as f:
        f.write(csv_text(rows, columns))
    with open(os.path.join(out, "class.md"), "w", encoding="utf-8") as f:
        f.write(markdown(rows, columns, meta))
    gs = write_gradescope(out, rows, docs)
    failed = [r["student"] for r in rows if r["status"] == "failed"]
    print(f"{len(rows)} student(s) gathered into {out}/class.csv and {out}/class.md")
    print(f"Gradescope: {gs}/ (one results.json per student, scores.csv) and {out}/gradescope.zip")
    if failed:
        print(f"{len(failed)} grading(s) failed (0 points, reason in class.csv): {' '.join(failed)}")
    return 0


def cmd_fail(args):
    write_json(os.path.join(args.dir, "results.json"), failure_doc(args.student, args.reason))
    print(f"{args.dir}/results.json: grading of {args.student} failed: {args.reason}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("gather", help="class.csv, class.md and the Gradescope upload from OUT/results")
    g.add_argument("out", help="the output folder of grader/slurm/grade_class_slurm.sh")
    g.set_defaults(run=cmd_gather)
    f = sub.add_parser("fail", help="a results.json for a failed grading (0 points, the reason)")
    f.add_argument("dir", help="the student's results folder")
    f.add_argument("--student", required=True)
    f.add_argument("--reason", required=True)
    f.set_defaults(run=cmd_fail)
    args = ap.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
