"""The ladder's and the tracks' GPU code side by side with PyTorch, one program for the three problems:

    python3 -m tooling.checks.compare --problem 42 --json results/pytorch_h200.json  # the main ladder (stages/)
    python3 -m tooling.checks.compare --problem 38 --selfcheck        # tracks/p38_spatial_softmax
    python3 -m tooling.checks.compare --problem 74 --reps 5           # tracks/p74_backward, forward and backward
    python3 scripts/compare.py --problem 38 --help                    # the same; --help lists that problem's options

What every problem shares is here and in compare_common.py: the options below, the skip without
PyTorch or a GPU (a message, exit status 0, {"skipped": true, ...} in --json), the build of the
extension, and for a track the choice between --selfcheck and the comparison. What a problem
checks, times and prints is its own module's (compare_p42.py, compare_p38.py, compare_p74.py,
each docstring says it in full), behind the same small interface:

    SCRIPT, TITLE        the log's name and --help's line;
    REPS, WARMUP         the defaults of --reps and --warmup;
    MINIMUMS             {option dest: smallest value} of its own options, checked here;
    add_args(parser)     its own options;
    TRACK                "p38" / "p74": built with load_extension(with_<track>=True), then
                         selfcheck(torch, module, args, rungs) or compare(torch, module, args, rungs);
                         None (problem 42): run(torch, args) builds the stages it needs.

Exit status 1 where a gating check fails or the extension does not build. The older entry
points (scripts/compare_pytorch.py, compare_p38.py, compare_p74.py and their ladder-compare-*
console scripts) are this program with --problem set.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import compare_common as cc

PROBLEMS = {"42": "compare_p42", "38": "compare_p38", "74": "compare_p74"}
DEFAULT_PROBLEM = "42"


def problem_module(problem: str):
    """The module of a problem ("42", "38" or "74")."""
    return importlib.import_module(f"{__package__}.{PROBLEMS[problem]}")


def parse_args(argv=None):
    """The options shared by every problem and those of the problem --problem names; argparse's
    error (exit status 2) for an option of another problem or a value below its minimum."""
    argv = sys.argv[1:] if argv is None else list(argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--problem", choices=tuple(PROBLEMS), default=DEFAULT_PROBLEM)
    problem = pre.parse_known_args(argv)[0].problem  # its options depend on it: read it first
    mod = problem_module(problem)
    p = argparse.ArgumentParser(prog="compare", description=f"Problem {problem}: {mod.TITLE} (module docstring "
                                f"of tooling/checks/{PROBLEMS[problem]}.py). --problem N --help: that problem's options.")
    p.add_argument("--problem", choices=tuple(PROBLEMS), default=DEFAULT_PROBLEM,
                   help=f"KernelBench level 2 problem (default {DEFAULT_PROBLEM}: the main ladder)")
    p.add_argument("--json", metavar="PATH", help="write every result as JSON")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reps", type=int, default=mod.REPS, help="timed repetitions per variant (median reported)")
    p.add_argument("--warmup", type=int, default=mod.WARMUP, help="untimed calls first (after torch.compile's)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--compile-mode", default="default", help="torch.compile mode (default: 'default')")
    p.add_argument("--verbose-build", action="store_true", help="show the extension's ninja/nvcc build output")
    if mod.TRACK:
        p.add_argument("--selfcheck", action="store_true",
                       help="small problems, every rung against float64; exit 1 on any failure (run this first)")
    mod.add_args(p)
    args = p.parse_args(argv)
    for dest, least in {"reps": 1, "warmup": 0, **mod.MINIMUMS}.items():
        if getattr(args, dest) < least:
            p.error(f"--{dest.replace('_', '-')} must be >= {least}")
    return args


def run_track(torch, mod, args) -> int:
    """A track's run: builds or loads the extension with the track (conv_pool_ladder.<track>),
    then mod.selfcheck or mod.compare; exit status 1 where the build fails."""
    script = mod.SCRIPT
    cpl = cc.ladder_package()
    track = importlib.import_module(f"conv_pool_ladder.{mod.TRACK}")
    try:
        script.log("building the extension (first build: a few minutes)")
        cpl.load_extension([], verbose=args.verbose_build, **{f"with_{mod.TRACK}": True})
        rungs = track.list_rungs()
    except Exception as e:
        print(f"{script.name}: FAILED to build or load the problem-{args.problem} operators:\n{e}", file=sys.stderr)
        script.write_json(args.json, {"skipped": False, "build_error": str(e)})
        return 1
    return (mod.selfcheck if args.selfcheck else mod.compare)(torch, track, args, rungs)


def main(argv=None) -> int:
    """The program: parse, skip without torch or a GPU, run the problem."""
    args = parse_args(argv)
    mod = problem_module(args.problem)
    torch, skipped = cc.cuda_torch(mod.SCRIPT, args)
    if torch is None:
        return skipped
    return run_track(torch, mod, args) if mod.TRACK else mod.run(torch, args)


def alias(problem: str):
    """main with --problem set: the older entry points (ladder-compare-pytorch, ...)."""
    return lambda argv=None: main(["--problem", problem, *(sys.argv[1:] if argv is None else argv)])


main_p42, main_p38, main_p74 = alias("42"), alias("38"), alias("74")

if __name__ == "__main__":
    sys.exit(main())
