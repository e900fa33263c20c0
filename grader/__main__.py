"""python3 -m grader: the same command as scripts/assignment.py (handouts and the autograder)."""
import sys

from .assignment import main

sys.exit(main(prog="python3 -m grader"))
