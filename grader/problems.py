"""Problem lists of the grader (public.problems, practice.problems, hidden/hidden.problems): one
problem per line as options of the ladder program, `#` comments, `@category NAME` lines that
group the lines after them. Seeds are not written in the files: seed_for() derives each case's."""
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
