"""Classroom assignments from the ladder: handouts for students and the autograder.

  handout --rungs 03,04 --out DIR   a student repository: the chosen rungs' solutions become stubs
                                    (a track's rungs: --rungs p38-03,p38-04)
  check-handout DIR                 no solution, hidden test, secret or mutant in a handout
  grade [--submission DIR]          grades a submission (default: this tree) rung by rung
  markers                           checks every solution and instructor marker of this tree, and
                                    that each stub's hint id names a hint in its chapter
  selftest                          (instructor) references get full marks, stubs and fixtures lose

The same command grades a student's work locally and officially; the official run adds the
secret seed and the hidden shapes (docs/assignments.md). Exit status: 0 done, 1 a check found
problems, 2 a bad argument, 3 a missing tool.
"""
import argparse
import os
import sys

from . import grade, handout, markers, selftest, todo_hints

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rung_list(text):
    """Rungs: NN for a stage of the main ladder (03), TRACK-NN for a rung of a track (p38-03)."""
    rungs = [r.strip() for r in text.split(",") if r.strip()]
    for r in rungs:
        if not handout.RUNG_ID.match(r):
            raise argparse.ArgumentTypeError("rungs are two-digit numbers separated by commas (03,04), or a track's "
                                             f"rungs as TRACK-NN (p38-03,p38-04), got '{r}'")
    if not rungs:
        raise argparse.ArgumentTypeError("no rung given")
    return sorted(set(rungs))


def cmd_handout(args):
    m = handout.write_handout(ROOT, args.rungs, args.out, stub_needed=args.stub_needed, force=args.force,
                              repo_url=args.repo_url)
    print(f"wrote {args.out}: rungs {', '.join(m['rungs'])} stubbed; student files:")
    for rung, files in m["files"].items():
        print(f"  {rung}: {' '.join(files)}")
    print("checked: no solution line, marker, hidden test, secret or mutant in it; every relative link resolves")
    return 0


def cmd_check_handout(args):
    leaks, links = handout.check_handout(ROOT, args.dir), handout.unresolved_links(args.dir)
    for p in leaks:
        print(f"LEAK: {p}")
    for p in links:
        print(f"LINK: {p}")
    problems = len(leaks) + len(links)
    print(f"{args.dir}: " + ("clean" if not problems else f"{problems} problem(s)"))
    return 1 if problems else 0


def cmd_markers(_args):
    count, parsed_files = 0, []
    for path in handout.repo_files(ROOT):
        if handout.has_markers(path) and not path.startswith(("results/", "profiles/", "notebooks/")):
            try:
                parsed = handout.parse_file(ROOT, path)
            except UnicodeDecodeError:  # a binary file (compressed test data) holds no marker
                continue
            parsed_files.append((path, parsed))
            for region in parsed.regions():
                count += 1
                if not region.stub:
                    print(f"{path}:{region.begin_line}: region of rung(s) {' '.join(sorted(region.owners))} has no STUB line")
                    return 1
    problems = todo_hints.problems(ROOT, parsed_files)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"{count} solution regions, all well formed")
    print("every stub's hint id names a hint in its chapter, and every hint a stub")
    return 0


def main(argv=None, prog=None):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    h = sub.add_parser("handout", help="write a student repository for the chosen rungs")
    h.add_argument("--rungs", type=rung_list, required=True,
                   help="comma-separated rungs, e.g. 03,04, or a track's, e.g. p38-03,p38-04")
    h.add_argument("--out", required=True, help="the folder to write (new or empty)")
    h.add_argument("--stub-needed", action="store_true",
                   help="also stub the earlier rungs' code that the chosen rungs use through stages/lib")
    h.add_argument("--force", action="store_true", help="replace a non-empty --out")
    h.add_argument("--repo-url", default="",
                   help="where the whole repository is published, the prefix of a file's path "
                        "(e.g. https://github.com/ORG/REPO/blob/main): links to files the handout leaves out point "
                        "there (never to instructor-only files or a handed-out rung's solution); default: such links "
                        "become plain text")
    h.set_defaults(run=cmd_handout)
    c = sub.add_parser("check-handout", help="check a handout for leaked solutions")
    c.add_argument("dir")
    c.set_defaults(run=cmd_check_handout)
    k = sub.add_parser("markers", help="check the solution markers of this tree")
    k.set_defaults(run=cmd_markers)
    grade.add_parser(sub, ROOT)
    if os.path.isdir(os.path.join(ROOT, "grader", "fixtures")):  # the instructor's tree
        selftest.add_parser(sub, ROOT)
    args = ap.parse_args(argv)
    try:
        if args.command == "grade":  # one line and exit 2 or 3 before anything is copied or built
            handout.validate_grade_args(ROOT, args)
        return args.run(args)
    except (handout.HandoutError, markers.MarkerError, selftest.FixtureError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return getattr(e, "status", 2)
    except RuntimeError as e:  # grader/sandbox.py's SandboxError: official grading without a sandbox
        if type(e).__name__ != "SandboxError":
            raise
        print(f"error: {e}", file=sys.stderr)
        return 3
    except OSError as e:  # a file that cannot be read or written: its name and why, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
