#!/usr/bin/env python3
"""The older name of `scripts/compare.py --problem 38`: the same program and options."""
import runpy
import sys
from pathlib import Path

sys.argv[1:1] = ["--problem", "38"]
runpy.run_path(str(Path(__file__).with_name("compare.py")), run_name="__main__")
