"""The grader's problems: the lists of cases (public.problems, practice.problems,
hidden/hidden.problems, a track's grader/TRACK_*.problems), one problem per line as options of
the ladder program, `#` comments, `@category NAME` lines that group the lines after them; seeds
are not written in the files: seed_for() derives each case's. And the per-track table
(track_settings, report_settings): which program a track's rungs run in, its libraries, problem
lists and how its JSON report is read. Everything per problem is data here, so the grading path
(grade.py) is one for every ladder."""
import hashlib
import shlex
from dataclasses import dataclass


@dataclass
class Case:
    category: str
    index: int        # within its category, from 0
    args: list        # ladder options, without --seed
    where: str        # file:line, for the instructor's eyes only

    def describe(self):
        return " ".join(self.args) or "(the KernelBench problem)"


def load(path):
    """The cases of a problem list. Raises ValueError naming the line for --seed in a line (seeds
    come from seed_for) or a problem line before any @category."""
    cases, category, counts = [], None, {}
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("@category"):
                parts = line.split()
                if len(parts) != 2:
                    raise ValueError(f"{path}:{number}: write '@category NAME'")
                category = parts[1]
                counts.setdefault(category, 0)
                continue
            if category is None:
                raise ValueError(f"{path}:{number}: a problem before the first @category line")
            args = shlex.split(line)
            if "--seed" in args:
                raise ValueError(f"{path}:{number}: no --seed here: the grader derives every case's seed")
            cases.append(Case(category, counts[category], args, f"{path}:{number}"))
            counts[category] += 1
    return cases


def seed_for(public_seed, secret, case):
    """The case's seed: the public seed alone for a student's local run (secret ""), mixed with the
    secret for the official one; 31 bits, as the ladder's --seed takes any unsigned value."""
    text = f"{public_seed}:{secret}:{case.category}:{case.index}"
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


# ---- a track's settings (grader/rungs.json "tracks") ---------------------------------------------
# What follows from a track's name unless rungs.json says otherwise ({t}: the track).
DEFAULTS = {"program": "{t}_ladder", "library": "{t}_track", "host_library": "{t}_host",
            "public": "grader/{t}_public.problems", "practice": "grader/{t}_practice.problems",
            "hidden": "grader/hidden/{t}_hidden.problems"}


def track_settings(config, track):
    """The track's section of rungs.json over DEFAULTS. Raises ValueError for a track without one."""
    tracks = config.get("tracks", {})
    if track not in tracks:
        raise ValueError(f"grader/rungs.json has no \"tracks\" entry for track {track}")
    return {**{k: v.format(t=track) for k, v in DEFAULTS.items()}, **tracks[track]}


def settings(config, rung):
    """(the track's settings (track_settings), the rung's number) for TRACK-NN."""
    track, number = rung.split("-")
    try:
        return track_settings(config, track), number
    except ValueError as e:
        raise ValueError(f"rung {rung}: {e}") from None


# What a rung's own settings (its rung.json "grader", merged under the track's "rungs") may replace
# of its track's: a rung that runs only a family of the track's problems (p74-10 to p74-12, the
# KernelBench geometry) has problem lists and sanitizer problems of its own.
RUNG_OVERRIDES = ("public", "practice", "hidden", "sanitizer_problems", "probe")


def rung_settings(t, number):
    """The track's settings t (track_settings) as rung `number` is graded: its own RUNG_OVERRIDES
    over the track's."""
    own = t.get("rungs", {}).get(number, {})
    return {**t, **{k: own[k] for k in RUNG_OVERRIDES if k in own}}


# How a track's program reports a rung: "check", the key of a rung entry's agreement with the
# oracle; "floors", the section of the report's "floors" timed against (None: flat floors);
# "direction", the entry taken where a rung reports two passes; "floors_about", the floors line.
DEFAULT_REPORT = {"check": "vs_oracle", "floors": None, "direction": None,
                  "floors_about": {"memory": "read x, write the output: measured",
                                   "compute": "the convolution at the FP32 peak"}}


def report_settings(t, number):
    """How the track's program reports rung `number`: DEFAULT_REPORT (p38_ladder's), updated by
    the track's "report" and then the rung's own."""
    return {**DEFAULT_REPORT, **t.get("report", {}), **t.get("rungs", {}).get(number, {}).get("report", {})}
