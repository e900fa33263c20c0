"""The grader's three outputs: Gradescope's results.json, JUnit XML and a text report."""
import json
import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass

PART_TITLES = {"public": "public tests", "hidden": "hidden tests", "sanitizer": "memory safety and races",
               "technique": "technique (machine code) and integrity", "performance": "performance"}


@dataclass
class Part:
    rung: str            # "03 shared_tree"
    part: str            # public, hidden, sanitizer, technique, performance
    max_score: float
    score: float = 0.0
    output: str = ""
    hidden: bool = False     # Gradescope shows it after the due date
    skipped: bool = False    # could not run here (no GPU, no reference): the output says why
    ratio: float = None      # performance: the rung's time over the reference's

    @property
    def name(self):
        return f"{self.rung}: {PART_TITLES[self.part]}"


def results_json(parts, meta):
    """Gradescope's format: score, output, tests[] (name, score, max_score, output, visibility),
    leaderboard[] (name, value, order)."""
    ratios = [p.ratio for p in parts if p.ratio]
    doc = {
        "score": round(sum(p.score for p in counted(parts, meta)), 2),
        "output": summary(parts, meta),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [{"name": p.name, "score": p.score, "max_score": p.max_score, "output": p.output,
                   "visibility": "after_due_date" if p.hidden else "visible",
                   **({"status": "passed" if p.score >= p.max_score else "failed"} if not p.skipped else {})}
                  for p in parts],
    }
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        doc["leaderboard"] = [{"name": "time / reference (geometric mean)", "value": round(geomean, 4), "order": "asc"}]
    return doc


def counted(parts, meta):
    """The parts the visible total counts: all of them once the hidden results are revealed
    (--reveal, or a regrade after the due date), else the visible parts alone, so that the
    total minus the visible parts tells nothing of the hidden ones."""
    return list(parts) if meta.get("reveal") else [p for p in parts if not p.hidden]


def summary(parts, meta):
    mine = counted(parts, meta)
    total, most = sum(p.score for p in mine), sum(p.max_score for p in mine)
    withheld = sum(p.max_score for p in parts if p not in mine)
    lines = [f"rungs {', '.join(meta['rungs'])}: {total:.1f} / {most:.0f} points "
             f"({'official run' if meta['official'] else 'local run: practice shapes, public seeds'})"]
    if withheld:
        lines.append(f"the hidden tests ({withheld:.0f} points) are scored after the due date, and not counted here")
    if meta.get("isolation_note"):
        lines.append(f"isolation: {meta['isolation_note']}")
    if not meta["gpu"]:
        lines.append(f"GPU parts skipped: {meta['gpu_why'] or 'no CUDA device'}")
    if not meta["reference"]:
        lines.append("performance is not scored without the instructor's reference solution")
    return "\n".join(lines)


def junit_xml(parts, meta):
    suites = ET.Element("testsuites", name="assignment")
    for rung in dict.fromkeys(p.rung for p in parts):
        mine = [p for p in parts if p.rung == rung]
        suite = ET.SubElement(suites, "testsuite", name=rung, tests=str(len(mine)),
                              failures=str(sum(1 for p in mine if not p.skipped and p.score < p.max_score)),
                              skipped=str(sum(1 for p in mine if p.skipped)))
        for p in mine:
            case = ET.SubElement(suite, "testcase", classname=rung, name=PART_TITLES[p.part])
            if p.skipped:
                ET.SubElement(case, "skipped", message=p.output.splitlines()[0] if p.output else "skipped")
            elif p.score < p.max_score:
                f = ET.SubElement(case, "failure", message=f"{p.score} of {p.max_score} points")
                f.text = "" if p.hidden and not meta.get("reveal") else p.output
            ET.SubElement(case, "system-out").text = f"{p.score} / {p.max_score}\n{p.output}"
    return ET.tostring(suites, encoding="unicode")


def text_report(parts, meta):
    out = [summary(parts, meta), ""]
    for rung in dict.fromkeys(p.rung for p in parts):
        mine = [p for p in parts if p.rung == rung]
        out.append(f"== rung {rung}: {sum(p.score for p in mine):.1f} / {sum(p.max_score for p in mine):.0f}")
        for p in mine:
            mark = "SKIP" if p.skipped else ("PASS" if p.score >= p.max_score else "FAIL")
            out.append(f"  [{mark}] {PART_TITLES[p.part]}: {p.score:g} / {p.max_score:g}")
            out.extend("      " + line for line in p.output.splitlines())
        out.append("")
    return "\n".join(out)


def instructor_copy(parts, meta):
    """The instructor's record of an official run: every part with its score (hidden ones
    included), the whole total, and the submission identity that reproduces the hidden seeds
    (grade --submission-id)."""
    return {"submission_id": meta.get("submission_id", ""), "official": meta["official"], "date": meta.get("date"),
            "isolation": meta.get("isolation"), "rungs": meta["rungs"],
            "total": round(sum(p.score for p in parts), 2), "max_total": sum(p.max_score for p in parts),
            "visible_total": round(sum(p.score for p in parts if not p.hidden), 2),
            "parts": [{"name": p.name, "score": p.score, "max_score": p.max_score, "hidden": p.hidden,
                       "skipped": p.skipped, "output": p.output} for p in parts],
            "regrade": f"grade --rungs {','.join(meta['rungs'])} --submission-id {meta.get('submission_id', '')} "
                       "--secret-file SECRET [--reveal]"}


def write_all(parts, meta, out_dir):
    """Writes results.json, junit.xml and report.txt into out_dir, and for an official run the
    instructor's copy instructor.json (mode 0600); returns the text report."""
    if meta.get("official"):
        path = os.path.join(out_dir, "instructor.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(instructor_copy(parts, meta), f, indent=2)
            f.write("\n")
    with open(os.path.join(out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results_json(parts, meta), f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "junit.xml"), "w", encoding="utf-8") as f:
        f.write(junit_xml(parts, meta))
    text = text_report(parts, meta)
    with open(os.path.join(out_dir, "report.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    return text
