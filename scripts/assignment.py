#!/usr/bin/env python3
"""Entry point of grader/assignment.py, the same as `python3 -m grader` from the repository root:
handouts for students and the autograder (--help). Python puts scripts/ on sys.path, not the
root that holds the packages, so this file adds it: the only place such a line may be."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    from grader.assignment import main  # noqa: E402
except ImportError as e:  # one line, not a traceback: a file of grader/ or a Python module is missing
    print(f"error: Python module '{e.name}' not found ({e}): run this script from a complete copy of the repository",
          file=sys.stderr)
    sys.exit(3)

if __name__ == "__main__":
    sys.exit(main())
