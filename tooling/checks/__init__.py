"""Checks: the GPU check driver of CTest (check_program, whose problem lists and compute-sanitizer
lookup the grader shares), the comparisons with PyTorch and KernelBench's procedure (compare_*,
kernelbench_eval), and the notebook runner (run_notebook). Imports nothing of grader."""
