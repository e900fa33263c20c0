"""Problem lists of the grader (public.problems, practice.problems, hidden/hidden.problems): one
problem per line as options of the ladder program, `#` comments, `@category NAME` lines that
group the lines after them. Seeds are not written in the files: seed_for() derives each case's."""
import hashlib
import shlex
from dataclasses import dataclass

from tooling.checks.compare_common import conv_transpose_out_size


@dataclass
class Case:
    category: str
    index: int        # within its category, from 0
    args: list        # ladder options, without --seed
    where: str        # file:line, for the instructor's eyes only

    def describe(self):
        return " ".join(self.args) or "(the KernelBench problem)"

    def largest_tensor_bytes(self):
        """An estimate of the case's largest fp32 tensor, x or the ConvTranspose2d output (what a
        rung that writes the intermediate holds), in bytes: the options of a stage problem, with
        the ladder's defaults (the KernelBench sizes) for those not given. Track problems read
        the same options; only an order of magnitude is needed."""
        opts = {"--batch": [16], "--in-channels": [64], "--out-channels": [128], "--size": [512],
                "--kernel-size": [3], "--stride": [1], "--padding": [0], "--output-padding": [0], "--dilation": [1]}
        i = 0
        while i < len(self.args):
            key, vals = self.args[i], []
            i += 1
            while i < len(self.args) and self.args[i].lstrip("-").isdigit():
                vals.append(int(self.args[i]))
                i += 1
            if key == "--input-size":
                key = "--size"
            if key in opts and vals:
                opts[key] = vals
        if "--kernelbench-v1" in self.args:
            opts.update({"--batch": [128], "--in-channels": [3], "--out-channels": [16], "--size": [32]})

        def at(key, axis):
            v = opts[key]
            return v[axis] if axis < len(v) else v[-1]
        plane_in, plane_out = 1, 1
        for a in range(len(opts["--size"])):
            plane_in *= at("--size", a)
            plane_out *= conv_transpose_out_size(*(at(k, a) for k in ("--size", "--kernel-size", "--stride", "--padding",
                                                                       "--output-padding", "--dilation")))
        if len(opts["--size"]) == 1:  # one number is a square plane
            plane_in, plane_out = plane_in ** 2, plane_out ** 2
        batch = opts["--batch"][0]
        return 4 * batch * max(opts["--in-channels"][0] * plane_in, opts["--out-channels"][0] * plane_out)


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
