"""Grading: student handouts, the autograder and its self-test (python3 -m grader, or
scripts/assignment.py). A package so that its modules import one another by relative imports,
never through sys.path; of the rest of the tooling it uses only tooling.checks (problem lists,
compute-sanitizer), which ships with it in every handout."""
