"""The project's tooling besides grading (which is the package grader): checks, and results and
plots. Import it from the repository root (`python3 -m tooling.results.update_results`); the files
of scripts/ are thin entry points with the old commands' names."""
