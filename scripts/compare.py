#!/usr/bin/env python3
"""Entry point of tooling/checks/compare.py, the PyTorch comparison of the three problems
(--problem 42, 38 or 74); from the repository root `python3 -m tooling.checks.compare` is the
same (--help). Python puts this file's folder on sys.path, not the root that holds the packages,
so this file adds it: the only place such a line may be."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tooling.checks.compare import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
