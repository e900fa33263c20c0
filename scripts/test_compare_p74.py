#!/usr/bin/env python3
"""Tests of what scripts/compare_p74.py and the extension build compute without torch or a GPU:
sizes and conv_macs (a hand count at KernelBench's sizes, a brute-force count on random
problems), MaxPool3d's output size, the default run as a selfcheck case, the fast rungs'
family, the targets' logic, rung selection and argument parsing, the selfcheck cases,
KernelBench's constants in python/conv_pool_ladder/p74.py (read with ast: no torch), and which sources
python/conv_pool_ladder/_build.py compiles for problem 74 with and without the track.

    python3 scripts/test_compare_p74.py        # unittest; exit 0 when all pass

The _build tests need cmake on PATH (the stage list comes from cmake/Stages.cmake); they skip
without it.
"""

from __future__ import annotations

import ast
import contextlib
import io
import itertools
import random
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # the packages' root: this test is an entry point
from test_compare_p38 import brute_force_macs  # noqa: E402  (its folder is on sys.path: it is the script's)
from tooling.checks import compare_p74 as c  # noqa: E402


class KernelBenchSizes(unittest.TestCase):
    def test_sizes(self):
        s = c.problem_sizes(c.KERNELBENCH)
        self.assertEqual(s["conv_size"], (32, 64, 64))  # (16-1)*2 - 2 + 2 + 1 + 1 = 32
        self.assertEqual(s["out_size"], (16, 32, 32))   # MaxPool3d(2) halves it
        self.assertEqual(s["x_bytes"], 16 * 16 * 16 * 32 * 32 * 4)      # 16 MiB
        self.assertEqual(s["conv_bytes"], 16 * 32 * 32 * 64 * 64 * 4)   # 256 MiB per conv-sized fp32 tensor
        self.assertEqual(s["out_bytes"], 16 * 32 * 16 * 32 * 32 * 4)    # 32 MiB
        self.assertEqual(s["weight_elems"], 16 * 32 * 27)
        self.assertEqual(s["pool_window"], 8)

    def test_conv_macs_kernelbench(self):
        # 47 * 95 * 95 taps summed over positions (the per-axis sums: scripts/test_compare_p38.py,
        # the same geometry), times batch 16, out 32, in 16.
        self.assertEqual(c.problem_sizes(c.KERNELBENCH)["conv_macs"], 47 * 95 * 95 * 16 * 32 * 16)
        self.assertEqual(c.problem_sizes(c.KERNELBENCH)["conv_macs"], 3_474_841_600)

    def test_p74_py_constants(self):
        """python/conv_pool_ladder/p74.py's module constants, read without importing torch."""
        tree = ast.parse((REPO / "python" / "conv_pool_ladder" / "p74.py").read_text())
        consts = {}
        for node in tree.body:
            if isinstance(node, ast.Assign):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        consts[target.id] = value
                    elif isinstance(target, ast.Tuple):
                        for t, v in zip(target.elts, value):
                            consts[t.id] = v
        for key in ("batch_size", "in_channels", "out_channels", "depth", "height", "width", "kernel_size",
                    "stride", "padding", "output_padding"):
            self.assertEqual(consts[key], c.KERNELBENCH["batch" if key == "batch_size" else key], key)
        self.assertEqual(consts["DEFAULT_FORWARD_RUNG"], "04")
        self.assertEqual(consts["DEFAULT_BACKWARD_RUNG"], "09")


class Sizes(unittest.TestCase):
    def test_conv_macs_against_brute_force(self):
        rng = random.Random(74)
        checked = 0
        while checked < 60:
            groups = rng.choice([1, 2, 3])
            p = {"batch": rng.randint(1, 3), "in_channels": groups * rng.randint(1, 2),
                 "out_channels": groups * rng.randint(1, 3), "groups": groups,
                 "depth": rng.randint(1, 6), "height": rng.randint(1, 6), "width": rng.randint(1, 6),
                 "kernel_size": tuple(rng.randint(1, 4) for _ in range(3)),
                 "stride": tuple(rng.randint(1, 3) for _ in range(3)),
                 "padding": tuple(rng.randint(0, 2) for _ in range(3)),
                 "dilation": tuple(rng.randint(1, 3) for _ in range(3)), "pool_kernel_size": 1}
            p["output_padding"] = tuple(rng.randint(0, max(s, d) - 1) for s, d in zip(p["stride"], p["dilation"]))
            s = c.problem_sizes(p)
            if min(s["conv_size"]) < 1:
                continue
            self.assertEqual(s["conv_macs"], brute_force_macs(p, s["in_size"], s["conv_size"]), p)
            checked += 1

    def test_max_pool_out_size(self):
        self.assertEqual(c.max_pool_out_size(64, 2, 2, 0), 32)
        self.assertEqual(c.max_pool_out_size(5, 2, 2, 0), 2)                  # floor drops the last element
        self.assertEqual(c.max_pool_out_size(5, 2, 2, 0, ceil_mode=True), 3)  # ceil keeps a partial window
        self.assertEqual(c.max_pool_out_size(5, 3, 2, 1, ceil_mode=True), 3)  # (5+2-2-1+1)//2 + 1
        # ceil_mode's extra window would start in the right padding: (3-1)*2 = 4 >= 3 + 1, dropped
        self.assertEqual(c.max_pool_out_size(3, 2, 2, 1, ceil_mode=True), 2)
        self.assertEqual(c.max_pool_out_size(15, 3, 2, 1, dilation=2, ceil_mode=True), 7)  # effective kernel 5
        self.assertEqual(c.max_pool_out_size(15, 3, 2, 1, dilation=2), 7)                  # (15+2-4-1)//2 + 1

    def test_max_pool_out_size_by_windows(self):
        # floor mode: the windows that lie inside the padded input; ceil mode: those that end at
        # most stride - 1 past it (the rounding up) and start inside the input or the left padding.
        for size, k, s, p, d in itertools.product(range(1, 9), range(1, 4), range(1, 4), range(0, 2), range(1, 3)):
            if p > ((k - 1) * d + 1) // 2 or size + 2 * p < d * (k - 1) + 1:
                continue
            floor = sum(1 for q in range(50) if q * s - p + d * (k - 1) <= size - 1 + p)
            ceil = sum(1 for q in range(50) if q * s - p < size and q * s - p + d * (k - 1) <= size - 1 + p + s - 1)
            self.assertEqual(c.max_pool_out_size(size, k, s, p, d), floor, (size, k, s, p, d))
            self.assertEqual(c.max_pool_out_size(size, k, s, p, d, True), ceil, (size, k, s, p, d, "ceil"))

    def test_problem_case(self):
        """A default-mode problem as a selfcheck case keeps its sizes (the pool's too)."""
        for pool in (2, 3):
            p = {**c.KERNELBENCH, "pool_kernel_size": pool, "output_padding": 0}
            case_p = c.case_problem(c.problem_case(p))
            self.assertEqual(c.problem_sizes(case_p), c.problem_sizes(p))
            self.assertEqual(c.in_family(case_p), pool == 2)

    def test_fp32_round(self):
        self.assertEqual(c.fp32_round(0.2), 0.20000000298023224)
        self.assertEqual(c.fp32_round(0.5), 0.5)


class Family(unittest.TestCase):
    def test_in_family(self):
        self.assertTrue(c.in_family(c.KERNELBENCH))
        self.assertTrue(c.in_family({**c.KERNELBENCH, "output_padding": 0}))
        for change in ({"groups": 2}, {"stride": 1}, {"kernel_size": 2}, {"padding": (1, 0, 1)}, {"dilation": 2},
                       {"pool_kernel_size": 3}, {"pool_stride": 1}, {"pool_padding": 1}, {"ceil_mode": True},
                       {"pool_dilation": 2}):
            self.assertFalse(c.in_family({**c.KERNELBENCH, **change}), change)

    def test_selfcheck_cases(self):
        for case in c.SELFCHECK_CASES + (c.KERNELBENCH_CASE,) + c.GRADCHECK_CASES:
            p = c.case_problem(case)
            s = c.problem_sizes(p)
            self.assertGreaterEqual(min(s["out_size"]), 1, case["name"])
            groups = p["groups"]
            self.assertEqual(p["in_channels"] % groups, 0)
            self.assertEqual(p["out_channels"] % groups, 0)
            # PyTorch: output_padding < stride or < dilation
            for op, st, d in zip(c.triple(p["output_padding"]), c.triple(p["stride"]), c.triple(p["dilation"])):
                self.assertTrue(op < st or op < d, case["name"])
        self.assertTrue(c.in_family(c.case_problem(c.SELFCHECK_CASES[0])))
        self.assertTrue(c.in_family(c.case_problem(c.SELFCHECK_CASES[1])))
        self.assertFalse(c.in_family(c.case_problem(c.SELFCHECK_CASES[2])))
        self.assertTrue(c.in_family(c.case_problem(c.KERNELBENCH_CASE)))
        self.assertEqual(c.problem_sizes(c.case_problem(c.KERNELBENCH_CASE))["conv_macs"],
                         c.problem_sizes(c.KERNELBENCH)["conv_macs"])
        for case in c.GRADCHECK_CASES:  # few windows, so that a seed away from every kink is found fast
            self.assertLessEqual(c.problem_sizes(c.case_problem(case))["out_elems"], 16, case["name"])
        self.assertTrue(c.in_family(c.case_problem(c.GRADCHECK_CASES[0])))
        self.assertFalse(c.in_family(c.case_problem(c.GRADCHECK_CASES[1])))


def variant(kind, fwd=None, train=None, peak=None, passed=True, name=None):
    return {"variant": name or kind, "kind": kind, "forward": None if fwd is None else {"median_ms": fwd},
            "train": None if train is None else {"median_ms": train}, "peak_train_bytes": peak,
            "check": {"pass": passed}}


class Targets(unittest.TestCase):
    def test_fastest_skips_failed_and_untimed(self):
        vs = [variant("forward", fwd=0.5, passed=False, name="f03"), variant("forward", fwd=1.0, name="f04"),
              variant("forward", name="f01"), variant("eager", fwd=0.1)]
        self.assertEqual(c.fastest(vs, "forward", "forward")["variant"], "f04")
        self.assertIsNone(c.fastest([variant("forward", fwd=0.5, passed=False)], "forward", "forward"))
        self.assertIsNone(c.fastest(vs, "pair", "train"))

    def test_met_and_not_met(self):
        vs = [variant("eager", fwd=3.0, train=9.0, peak=4000), variant("compile", fwd=2.0, train=6.0, peak=3000),
              variant("forward", fwd=0.9, name="f04"), variant("forward", fwd=1.2, name="f03"),
              variant("pair", train=4.0, peak=900, name="p09"), variant("pair", train=5.0, peak=800, name="p08")]
        t = c.evaluate_targets(vs)
        self.assertEqual([x["status"] for x in t], ["met", "met", "met"])
        self.assertAlmostEqual(t[0]["value"], 0.9 / 2.0)
        self.assertAlmostEqual(t[1]["value"], 4.0 / 6.0)
        self.assertAlmostEqual(t[2]["value"], 900 / 4000)  # the fastest pair's peak, not the smallest
        self.assertIn("f04", t[0]["name"])
        self.assertIn("p09", t[1]["name"])
        vs = [variant("eager", train=9.0, peak=3000), variant("compile", fwd=1.0, train=5.0),
              variant("forward", fwd=0.6), variant("pair", train=3.6, peak=900)]
        self.assertEqual([x["status"] for x in c.evaluate_targets(vs)], ["not met"] * 3)  # .6 .72 .3

    def test_boundaries_are_met(self):
        vs = [variant("eager", peak=4000), variant("compile", fwd=2.0, train=10.0), variant("forward", fwd=1.0),
              variant("pair", train=7.0, peak=1000)]
        self.assertEqual([x["met"] for x in c.evaluate_targets(vs)], [True, True, True])

    def test_not_measured(self):
        t = c.evaluate_targets([variant("forward", fwd=1.0), variant("pair", train=2.0, peak=10)])
        self.assertEqual([x["status"] for x in t], ["not measured"] * 3)
        t = c.evaluate_targets([variant("compile", fwd=1.0, train=2.0), variant("eager", peak=10)])
        self.assertEqual([x["status"] for x in t], ["not measured"] * 3)
        self.assertIn("none passed", t[0]["name"])


RUNGS = [{"id": "00", "name": "cpu_reference", "forward": False, "backward": False},
         {"id": "03", "name": "fused_forward", "forward": True, "backward": False},
         {"id": "04", "name": "subpixel_forward", "forward": True, "backward": False},
         {"id": "08", "name": "two_level", "forward": False, "backward": True},
         {"id": "09", "name": "tiled_grads", "forward": False, "backward": True}]


class Arguments(unittest.TestCase):
    def test_resolve_rungs(self):
        self.assertEqual(c.resolve_rungs("all", RUNGS, "forward"), ["03", "04"])
        self.assertEqual(c.resolve_rungs("all", RUNGS, "backward"), ["08", "09"])
        self.assertEqual(c.resolve_rungs("4, fused_forward", RUNGS, "forward"), ["04", "03"])
        self.assertEqual(c.resolve_rungs("09_tiled_grads", RUNGS, "backward"), ["09"])
        with self.assertRaisesRegex(ValueError, "no rung '08' with a GPU forward pass"):
            c.resolve_rungs("08", RUNGS, "forward")
        with self.assertRaisesRegex(ValueError, "'00'"):
            c.resolve_rungs("00", RUNGS, "backward")

    def test_defaults(self):
        a = c.parse_args([])
        self.assertFalse(a.selfcheck)
        self.assertEqual((a.reps, a.flush_mb, a.forward_rungs, a.backward_rungs), (20, 256, "all", "all"))
        self.assertEqual(c.problem_of(a), c.KERNELBENCH)
        a = c.parse_args(["--selfcheck", "--batch", "4", "--forward-rungs", "03", "--json", "/tmp/x.json"])
        self.assertTrue(a.selfcheck)
        self.assertEqual(c.problem_of(a)["batch"], 4)
        self.assertEqual(a.json, "/tmp/x.json")

    def test_rejects(self):
        for bad in (["--reps", "0"], ["--warmup", "-1"], ["--flush-mb", "-1"], ["--batch", "x"]):
            with self.assertRaises(SystemExit, msg=bad), contextlib.redirect_stderr(io.StringIO()):
                c.parse_args(bad)


@unittest.skipUnless(shutil.which("cmake"), "cmake is not on PATH (cmake/Stages.cmake writes the registry)")
class BuildSources(unittest.TestCase):
    def setUp(self):
        c.cc.ladder_package()  # python/'s package, loaded by its path
        from conv_pool_ladder import _build

        self.b = _build
        self.tmp = Path(tempfile.mkdtemp(prefix="test_compare_p74_"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    @unittest.skipUnless((REPO / "tracks" / "p74_backward" / "problem.cpp").is_file()
                         and (REPO / "tracks" / "p38_spatial_softmax" / "problem.cpp").is_file(), "no track here")
    def test_with_the_track(self):
        track = self.b.p74_track_dir()
        names = {p.relative_to(track).as_posix() for p in self.b.p74_sources()}
        self.assertTrue({"problem.cpp", "oracle.cpp", "tolerance.cpp", "registry.cpp", "device/geometry.cpp",
                         "rungs/00_cpu_reference/cpu_reference.cpp"} <= names, names)
        self.assertFalse({"runner.cu", "main.cpp"} & names)
        self.assertFalse([n for n in names if n.startswith("runner")])
        plain = self.b.wrapper_sources([], self.tmp / "plain")
        self.assertNotIn(str(self.b.CSRC / "p74_call.cpp"), plain)
        self.assertFalse([s for s in plain if Path(s).name.startswith("p74")])
        self.assertEqual(self.b.extension_name([], with_p74=True), "conv_pool_ladder_p74")
        self.assertEqual(self.b.extension_name([], with_p38=True, with_p74=True), "conv_pool_ladder_p38_p74")
        self.assertEqual(self.b.extension_name([], with_p38=True), "conv_pool_ladder_p38")  # unchanged
        sources = self.b.wrapper_sources([], self.tmp / "build", with_p74=True)
        base = [Path(s).name for s in sources]
        self.assertIn("p74_call.cpp", base)
        self.assertNotIn("p38_call.cpp", base)
        self.assertEqual(len(base), len(set(base)), "object files are named after the sources' base names")
        # what the tracks share (CMake's tracks_shared), and nothing of problem 38's track
        self.assertTrue({"tracks_shared__geometry3d.cpp", "tracks_shared__agreement.cpp"} <= set(base))
        self.assertFalse([n for n in base if n.startswith("p38")])
        self.assertIn("p74__problem.cpp", base)
        self.assertIn("p74_device__geometry.cpp", base)
        self.assertIn("p74_rungs_00_cpu_reference__cpu_reference.cpp", base)
        wrapper = (self.tmp / "build" / "src" / "p74_device__geometry.cpp").read_text()
        self.assertIn(f'#include "{track / "device" / "geometry.cpp"}"', wrapper)
        both = [Path(s).name for s in self.b.wrapper_sources([], self.tmp / "both", with_p38=True, with_p74=True)]
        self.assertEqual(len(both), len(set(both)), "tracks/shared once, with both tracks")
        self.assertTrue({"p38_call.cpp", "p74_call.cpp", "p38__registry.cpp", "p74__registry.cpp"} <= set(both))

    def test_without_the_track(self):
        root = self.tmp / "handout"  # a checkout without tracks/
        root.mkdir()
        for d in ("stages", "cmake", "common"):
            (root / d).symlink_to(REPO / d, target_is_directory=True)
        self.assertIsNone(self.b.p74_track_dir(root))
        self.assertEqual(self.b.p74_sources(root), [])
        sources = self.b.wrapper_sources([], self.tmp / "build", root)
        self.assertNotIn(str(self.b.CSRC / "p74_call.cpp"), sources)
        with self.assertRaisesRegex(RuntimeError, "not in this checkout"):
            self.b.wrapper_sources([], self.tmp / "build_p74", root, with_p74=True)

    @unittest.skipUnless((REPO / "tracks" / "p74_backward" / "problem.cpp").is_file(), "no p74 track here")
    def test_p74_without_p38(self):
        root = self.tmp / "only74"  # the p74 track builds without the p38 one: it needs tracks/shared only
        (root / "tracks").mkdir(parents=True)
        for d in ("stages", "cmake", "common"):
            (root / d).symlink_to(REPO / d, target_is_directory=True)
        for d in ("p74_backward", "shared"):
            (root / "tracks" / d).symlink_to(REPO / "tracks" / d, target_is_directory=True)
        self.assertIsNotNone(self.b.p74_track_dir(root))
        base = [Path(s).name for s in self.b.wrapper_sources([], self.tmp / "build", root, with_p74=True)]
        self.assertIn("tracks_shared__geometry3d.cpp", base)
        self.assertFalse([n for n in base if n.startswith("p38")])


if __name__ == "__main__":
    unittest.main()
