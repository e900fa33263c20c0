"""How the grader drives a rung's program, per kind of rung (KINDS): a stage's programs
(stage_NN_name and grade_timing_NN, run by runs.py) and a track's one program (p38_ladder,
p74_ladder, run by track.py). Both kinds answer the same steps, so grade.grade_rung walks one
path for every rung: integrity, technique, probe, run_case, sanitize, untimed, performance.

A kind is built per rung with the grading's context `ctx` (grade.grade): the build folders
("build" as the grader sees it, "run_build" inside the jail), "reference" (this tree, or "" for
a handout graded locally), "reference_dir" and "references" (build.reference), "config".
"""
import os

from tooling.checks import check_program  # compute-sanitizer's location

from . import integrity, runs, technique, track


def reference_integrity(build, reference_dir, r):
    """The integrity check of stage rung r's objects in the student's build (runs.integrity), with
    rule 2e comparing their weak symbols with the reference solution's own objects of the rung:
    those of the reference build (reference_dir/CMakeFiles/stage_NN.dir), read here by the
    grader, outside the sandbox, where the student's build and programs never see them. Without a
    reference (reference_dir "": a handout graded locally), or where the reference build has no
    objects of the rung, runs.integrity's own check (weak symbols against the ladder libraries)."""
    if not reference_dir:
        return runs.integrity(build, r)
    listed = integrity.ninja_objects(build)
    report = integrity.Report()
    report.objects = integrity.target_objects(build, f"CMakeFiles/stage_{r}.dir", listed)
    references = integrity.target_objects(reference_dir, f"CMakeFiles/stage_{r}.dir",
                                          integrity.ninja_objects(reference_dir))
    if not report.objects or not references:
        return runs.integrity(build, r)
    report.reference = True
    for folder in integrity.REFERENCE_TARGETS:  # the ladder libraries, as the student's build compiled them
        if not folder.startswith("grader/"):
            references += integrity.target_objects(build, folder.format(id=r), listed)
    return integrity.check_objects(report, r, references)


def score_ratio(part, ratio, pts, perf):
    """Scores `part` on its time's ratio to the reference's or the floor (runs.score_perf)."""
    part.ratio = ratio
    part.score = round(pts["performance"] * runs.score_perf(ratio, perf), 2)


class _Program:
    """A rung's program in the student's build (as the jail sees it) and, in an official run,
    its reference (build.reference: (path, "") or (None, why); None without a reference)."""

    def __init__(self, args, rung, ctx):
        self.args, self.rung, self.ctx = args, rung, ctx
        self.program = os.path.join(ctx["run_build"], rung.program)
        self.reference = ctx["references"].get(rung.id, (None, "")) if ctx["reference"] else None


class Stage(_Program):
    """A stage rung: its program stage_NN_name (cases, sanitizers), its grade_timing_NN (timing)."""

    def integrity(self):
        """The integrity check of the stage's objects (reference_integrity): an integrity.Report."""
        return reference_integrity(self.ctx["build"], self.ctx["reference_dir"] if self.ctx["reference"] else "",
                                   self.rung.id)

    def technique(self):
        """(passed, lines) of scripts/check_sass.sh on the stage's machine code."""
        r = self.rung
        ok, lines = runs.technique(self.ctx["root"], self.ctx["build"], r.id)
        if r.todos:  # the failures below are the stub's own (its TODO printf uses local memory)
            lines.insert(0, f"NOTE: rung {r.id} still holds {len(r.todos)} stub(s) of the handout (the TODO "
                            "lines of the public part): the checks below judge the stub's code, not yours")
        return ok, lines

    def probe(self):
        """(True, "") if the program runs the stage on a GPU here, else (False, why)."""
        return runs.gpu_available(self.program, self.rung.id)

    def run_case(self, case, seed, public):
        """(status, detail) of one correctness case; public: the detail may quote the program."""
        return runs.run_case(self.program, self.rung.id, case, seed, self.args.timeout, self.rung.rules,
                             show_output=public)

    def sanitize(self, tool):
        """The report keeps the last lines of a failure, the reason of a skip."""
        status, out = runs.sanitizer(self.program, self.rung.id, tool, self.args.timeout, self.rung.rules)
        if status in ("fail", "wrong"):
            return status, "\n".join(out.splitlines()[-12:])
        if status == "skipped":
            return status, out.splitlines()[-1] if out else ""
        return status, out

    def untimed(self):
        """Why the rung is not timed at all ("": it is)."""
        return f"rung {self.rung.id} has no timing entry (\"grader\" in its rung.json)" if self.rung.timing is None else ""

    def performance(self, P, pts):
        """runs.timing of the student's grade_timing_NN and, in an official run, the reference
        build's, in separate processes, in perf["rounds"] rounds (default 3)."""
        r, timing, perf = self.rung.id, self.rung.timing, self.rung.performance
        runs.log(f"rung {r}: timing ({timing['mode']} mode)")
        part = P("performance", score=0, output="")
        if self.reference and self.reference[0] is None:
            part.skipped = True
            part.output = "not scored: the reference solution's timing program did not build (the grading log says why)"
            return part
        status, data = runs.timing(self.ctx["build"], r, timing["mode"], timing.get("args", []), perf["reps"],
                                   perf["warmup"], self.args.timeout, reference=self.reference and self.reference[0],
                                   rounds=perf.get("rounds", 3))
        if status != "ok":
            part.output = f"timing {status}: {data.get('first_mismatch') or data.get('error', '')}"
            part.skipped = status == "skipped"
            return part
        s, fl = data["student"]["median_ms"], data["floor"]["median_ms"]
        lines = [f"problem: {data.get('problem', '')}",
                 f"your rung: {s:.4g} ms (median of {data['reps']} repetitions x {data['rounds']} round(s))",
                 f"streaming-read floor: {fl:.4g} ms"]
        if "uncovered_ms" in data:
            lines.append(f"host wall time beyond the CUDA events: {data['uncovered_ms']:.3f} ms "
                         f"(allowed {data['uncovered_allowance_ms']:.3f} ms)")
        if s < perf["floor_slack"] * fl:
            lines.append(f"VOID: faster than {perf['floor_slack']}x the memory floor allows: the rung cannot have read its input")
        elif data.get("reference"):
            ratio = data["ratio_to_reference"]
            score_ratio(part, ratio, pts, perf)
            lines.append(f"reference solution: {data['reference']['median_ms']:.4g} ms, in processes of its own; "
                         f"ratio {ratio:.3g} (full credit at <= {perf['full_at']}x, none at >= {perf['zero_at']}x)")
        else:
            part.skipped = True
            lines.append(f"not scored here: the reference solution is timed at official grading "
                         f"({s / fl:.3g}x the floor now)")
        part.output = "\n".join(lines)
        return part


class Track(_Program):
    """A track's rung: the track's one program, asked for the rung with --rungs NN."""

    def integrity(self):
        """integrity.check_track of the rung's object; rule 2e against the instructor's build where
        there is one (official grading): a declared shared header would otherwise be compared
        with objects compiled from the submission's copy."""
        r, t = self.rung, self.rung.settings
        trusted = self.ctx["reference_dir"] if self.reference and self.reference[0] else None
        return integrity.check_track(self.ctx["build"], r.id, r.source, t["library"], t["host_library"],
                                     t.get("needs", []), reference_build=trusted)

    def technique(self):
        """(passed, lines) of the rung's technique rules (technique.TRACK_RULES) on its object."""
        return technique.check_track(os.path.join(self.ctx["build"], self.rung.compile[0]), self.rung.id)

    def probe(self):
        """(True, "") if the track's program runs the rung on a GPU here, else (False, why)."""
        return track.gpu_available(self.program, self.rung.number, self.rung.settings["probe"])

    def run_case(self, case, seed, public):
        """One case; the carrier rungs (rungs.carriers) run and are checked with it."""
        r = self.rung
        return track.run_case(self.program, r.number, case, seed, self.args.timeout, r.report, public, r.carriers)

    def sanitize(self, tool):
        """(status, output) of compute-sanitizer `tool` on the track's sanitizer_problems."""
        exe = check_program.find_sanitizer(None)
        return track.sanitizer(exe, self.program, self.rung.number, tool, self.rung.settings["sanitizer_problems"],
                               self.args.timeout)

    def untimed(self):
        return ""  # a rung without a timing entry says so in performance(), once it is clean

    def performance(self, P, pts):
        """The rung against the reference's program (official runs) or, with "score_against":
        "floor", against the floors its program measures."""
        r, perf = self.rung, self.rung.performance
        if r.timing is None:
            return P("performance", score=0, skipped=True,
                     output=f"rung {r.id} has no timing entry (\"grader\" in its folder's rung.json)")
        runs.log(f"rung {r.id}: timing")
        progs = [("student", self.program)]
        if self.reference and self.reference[0] is None:
            status, data = "error", {"error": self.reference[1]}
        else:
            progs += [("reference", self.reference[0])] if self.reference else []
            status, data = track.timing(self.args, progs, r.report, r.number, perf, r.timing)
        part = P("performance", score=0, output="")
        if status != "ok":
            part.output = f"timing {status}: {data.get('error', '')}"
            part.skipped = status == "skipped"
            return part
        s, mem, comp = data["student_ms"], data["memory_floor_ms"], data["compute_floor_ms"]
        floor = max(mem, comp)
        about = r.report["floors_about"]
        lines = [f"problem: {data['problem']}",
                 f"your rung: {s:.4g} ms (median of {data['reps']}, {data['rounds']} round(s)); "
                 f"{s / floor:.3g}x the floor" if floor > 0 else f"your rung: {s:.4g} ms",
                 f"floors: memory {mem:.4g} ms ({about['memory']}), compute {comp:.4g} ms ({about['compute']})"]
        mode = perf.get("score_against", "reference")
        if s < perf["floor_slack"] * mem:
            lines.append(f"VOID: faster than {perf['floor_slack']}x the memory floor allows: the rung cannot have "
                         "written its output")
        elif mode == "floor" and floor > 0:
            score_ratio(part, s / floor, pts, perf)
            lines.append(f"full credit at <= {perf['full_at']}x the floor, none at >= {perf['zero_at']}x")
        elif "reference_ms" in data:
            score_ratio(part, s / data["reference_ms"], pts, perf)
            lines.append(f"reference solution: {data['reference_ms']:.4g} ms; ratio {part.ratio:.3g} "
                         f"(full credit at <= {perf['full_at']}x, none at >= {perf['zero_at']}x)")
        else:
            part.skipped = True
            lines.append("not scored here: the reference solution is timed at official grading")
        part.output = "\n".join(lines)
        return part


KINDS = {"stage": Stage, "track": Track}  # rungs.Rung.kind -> how its program is driven
