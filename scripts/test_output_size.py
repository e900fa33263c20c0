#!/usr/bin/env python3
"""The repository's two statements of the transposed-convolution output size, the C++ one
(common/toolkit/conv_shape.hpp, through tests/output_size_probe.cpp) and the Python one
(tooling/checks/compare_common.conv_transpose_out_size), against each other on a grid of
parameters, and both against PyTorch's own shapes where torch is installed (meta tensors: no
memory, no GPU). Without torch that comparison is skipped, visibly.

    python3 scripts/test_output_size.py PROBE    # PROBE: the built output_size_probe (CTest output_size_formula)
"""
import itertools
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # entry point: the repository root

from tooling.checks.compare_common import conv_transpose_out_size  # noqa: E402

PROBE = None


def grid():
    """(in, kernel_size, stride, padding, output_padding, dilation) that PyTorch accepts
    (output_padding < max(stride, dilation)) with a positive output."""
    for n, k, s, p, d in itertools.product((1, 2, 5, 32, 513), (1, 2, 3, 5), (1, 2, 3), (0, 1, 2), (1, 2, 3)):
        for op in range(max(s, d)):
            if conv_transpose_out_size(n, k, s, p, op, d) > 0:
                yield n, k, s, p, op, d


def cpp(cases):
    text = "".join(" ".join(map(str, c)) + "\n" for c in cases)
    p = subprocess.run([PROBE], input=text, capture_output=True, text=True, check=True)
    return [None if v == "overflow" else int(v) for v in p.stdout.split()]


class OutputSize(unittest.TestCase):
    def test_cpp_and_python_agree(self):
        cases = list(grid())
        self.assertGreater(len(cases), 500)
        self.assertEqual(cpp(cases), [conv_transpose_out_size(*c) for c in cases])

    def test_kernelbench_problem(self):
        """Problem 42: 512 x 512 inputs, kernel 3, stride 1, no padding: 514."""
        self.assertEqual(conv_transpose_out_size(512, 3, 1, 0, 0, 1), 514)
        self.assertEqual(cpp([(512, 3, 1, 0, 0, 1)]), [514])

    def test_cpp_reports_overflow(self):
        self.assertEqual(cpp([(2**62, 3, 4, 0, 0, 1)]), [None])

    def test_against_pytorch(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed: PyTorch's shapes not compared")
        cases = list(grid())
        theirs = []
        for n, k, s, p, op, d in cases:
            x = torch.empty(1, 1, n, device="meta")
            w = torch.empty(1, 1, k, device="meta")
            y = torch.nn.functional.conv_transpose1d(x, w, stride=s, padding=p, output_padding=op, dilation=d)
            theirs.append(y.shape[-1])
        self.assertEqual([conv_transpose_out_size(*c) for c in cases], theirs)
        self.assertEqual(cpp(cases), theirs)


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: test_output_size.py PROBE (the built tests/output_size_probe)")
    PROBE = sys.argv.pop(1)
    unittest.main(verbosity=2)
