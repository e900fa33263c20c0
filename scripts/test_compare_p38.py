#!/usr/bin/env python3
"""Tests of what scripts/compare_p38.py and the extension build compute without torch or a GPU:
the sizes and conv_macs (against a hand count at KernelBench's sizes and a brute-force count on
random problems), the floors, the sample choice, the targets' logic, and which sources
python/conv_pool_ladder/_build.py compiles for problem 38 with and without the track; and the
plain-Python helpers of tooling/checks/compare_common.py that compare_p74.py shares (taps, fp32
rounding, rung selection, targets).

    python3 scripts/test_compare_p38.py        # unittest; exit 0 when all pass

The _build tests need cmake on PATH (the stage list comes from cmake/Stages.cmake); they skip
without it.
"""

from __future__ import annotations

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
from tooling.checks import compare_common as cc  # noqa: E402
from tooling.checks import compare_p38 as c  # noqa: E402


class KernelBenchSizes(unittest.TestCase):
    def test_sizes(self):
        s = c.problem_sizes(c.KERNELBENCH)
        self.assertEqual(s["pooled_size"], (16, 32, 32))  # AvgPool3d(2) halves 32x64x64
        self.assertEqual(s["out_size"], (32, 64, 64))     # (16-1)*2 - 2 + 2 + 1 + 1 = 32
        self.assertEqual(s["spatial"], 131072)
        self.assertEqual(s["x_bytes"], 32 * 32 * 32 * 64 * 64 * 4)   # 512 MiB
        self.assertEqual(s["out_bytes"], 32 * 64 * 32 * 64 * 64 * 4)  # 1 GiB

    def test_per_axis_taps_by_hand(self):
        # Depth: pooled 16 -> 32, kernel 3, stride 2, padding 1. Output o reads input (o + 1 - k)/2:
        # even o: only k = 1 (i = o/2); odd o: k = 0 (i = (o+1)/2) and k = 2 (i = (o-1)/2), except
        # o = 31, where k = 0 would read i = 16, outside. 16*1 + 15*2 + 1 = 47.
        d = cc.taps_per_output(16, 32, 3, 2, 1)
        self.assertEqual(d[:4], [1, 2, 1, 2])
        self.assertEqual(d[-1], 1)
        self.assertEqual(sum(d), 47)
        self.assertEqual(sum(cc.taps_per_output(32, 64, 3, 2, 1)), 95)  # 32*1 + 31*2 + 1

    def test_conv_macs_kernelbench(self):
        # 47 * 95 * 95 taps summed over positions, times batch 32, out 64, in 32.
        self.assertEqual(47 * 95 * 95, 424175)
        self.assertEqual(c.problem_sizes(c.KERNELBENCH)["conv_macs"], 424175 * 32 * 64 * 32)
        self.assertEqual(c.problem_sizes(c.KERNELBENCH)["conv_macs"], 27_798_732_800)

    def test_compute_floor_and_peak(self):
        tflops, formula = c.fp32_peak_from_properties(132, 9, 0, 1_980_000)  # an H200 SXM's properties
        self.assertAlmostEqual(tflops, 132 * 128 * 1.98e9 * 2 / 1e12)
        self.assertIn("132 SMs x 128 FP32 lanes", formula)
        self.assertEqual(c.fp32_peak_from_properties(80, 7, 0, 1_530_000)[0], 80 * 64 * 1.53e9 * 2 / 1e12)
        self.assertAlmostEqual(c.compute_floor_ms(27_798_732_800, 66.9), 2 * 27_798_732_800 / 66.9e12 * 1e3)
        self.assertIsNone(c.compute_floor_ms(1e9, None))


def brute_force_macs(p, in_size, out_size):
    """ConvTranspose3d's MACs from input in_size to output out_size for the problem dict p, in
    scatter form over every (input position, tap) pair of a tiny problem: batch * out_channels *
    (in_channels/groups) * #{(i, k) in 3-D: i*stride - padding + k*dilation lands inside the
    output}. Independent of the per-axis factorization (scripts/test_compare_p74.py uses it too)."""
    k, st, pad, dil = (cc.triple(p[key]) for key in ("kernel_size", "stride", "padding", "dilation"))
    count = 0
    for i in itertools.product(*(range(n) for n in in_size)):
        for t in itertools.product(*(range(n) for n in k)):
            o = [i[a] * st[a] - pad[a] + t[a] * dil[a] for a in range(3)]
            count += all(0 <= o[a] < out_size[a] for a in range(3))
    return p["batch"] * p["out_channels"] * (p["in_channels"] // p["groups"]) * count


class RandomProblems(unittest.TestCase):
    def test_conv_macs_against_brute_force(self):
        rng = random.Random(38)
        checked = 0
        while checked < 60:
            groups = rng.choice([1, 2, 3])
            p = {"batch": rng.randint(1, 3), "in_channels": groups * rng.randint(1, 2),
                 "out_channels": groups * rng.randint(1, 3), "groups": groups,
                 "depth": rng.randint(1, 7), "height": rng.randint(1, 7), "width": rng.randint(1, 7),
                 "pool_kernel_size": tuple(rng.randint(1, 2) for _ in range(3)),
                 "kernel_size": tuple(rng.randint(1, 4) for _ in range(3)),
                 "stride": tuple(rng.randint(1, 3) for _ in range(3)),
                 "padding": tuple(rng.randint(0, 2) for _ in range(3)),
                 "dilation": tuple(rng.randint(1, 3) for _ in range(3))}
            # output_padding must be smaller than stride or dilation (PyTorch's rule)
            p["output_padding"] = tuple(rng.randint(0, max(s, d) - 1) for s, d in zip(p["stride"], p["dilation"]))
            if any(n < k for n, k in zip((p["depth"], p["height"], p["width"]), p["pool_kernel_size"])):
                continue
            s = c.problem_sizes(p)
            if min(s["pooled_size"]) < 1 or min(s["out_size"]) < 1:
                continue
            self.assertEqual(s["conv_macs"], brute_force_macs(p, s["pooled_size"], s["out_size"]), p)
            checked += 1

    def test_border_taps_reach_no_input(self):
        # Input 2, kernel 3, stride 1, padding 0: output 4; output o reads input o - k, so o = 0
        # has one tap (k = 0), o = 1 and o = 2 two, o = 3 one: 6 per axis, not 4 * 3 = 12.
        p = {"batch": 1, "in_channels": 1, "out_channels": 1, "groups": 1, "depth": 2, "height": 2, "width": 2,
             "pool_kernel_size": 1, "kernel_size": 3, "stride": 1, "padding": 0, "output_padding": 0,
             "dilation": 1}
        s = c.problem_sizes(p)
        self.assertEqual(s["out_size"], (4, 4, 4))
        self.assertEqual(cc.taps_per_output(2, 4, 3, 1, 0), [1, 2, 2, 1])
        self.assertEqual(s["conv_macs"], 6 ** 3)
        self.assertEqual(s["conv_macs"], brute_force_macs(p, s["pooled_size"], s["out_size"]))


class PoolSizes(unittest.TestCase):
    def test_floor_and_ceil(self):
        self.assertEqual(c.pool_out_size(5, 2, 2, 1), 3)                  # (5 + 2 - 2)//2 + 1
        self.assertEqual(c.pool_out_size(5, 2, 2, 0, ceil_mode=True), 3)  # ceil(3/2) + 1
        # ceil_mode's extra window would start in the right padding: (4-1)*2 = 6 >= 5 + 1, dropped
        self.assertEqual(c.pool_out_size(5, 2, 2, 1, ceil_mode=True), 3)
        self.assertEqual(c.pool_out_size(7, 3, 2, 1, ceil_mode=True), 4)


class Helpers(unittest.TestCase):
    def test_check_samples(self):
        self.assertEqual(c.check_samples(32, 2), [0, 31])
        self.assertEqual(c.check_samples(32, 1), [0])
        self.assertEqual(c.check_samples(32, 3), [0, 16, 31])
        self.assertEqual(c.check_samples(3, 10), [0, 1, 2])
        self.assertEqual(c.check_samples(1, 2), [0])

    def test_triple(self):
        self.assertEqual(cc.triple(2), (2, 2, 2))
        self.assertEqual(cc.triple([1, 2, 3]), (1, 2, 3))
        with self.assertRaises(ValueError):
            cc.triple((1, 2))

    def test_fp32_round(self):
        self.assertEqual(cc.fp32_round(0.2), 0.20000000298023224)
        self.assertEqual(cc.fp32_round(-100.0), -100.0)
        self.assertIsNone(cc.fp32_round(None))
        self.assertEqual(cc.fp32_round(1e39), float("inf"))   # beyond float32: inf, as torch rounds it
        self.assertEqual(cc.fp32_round(-1e39), float("-inf"))

    def test_resolve_rungs(self):
        rungs = [{"id": "00", "name": "cpu_reference", "gpu": False}, {"id": "05", "name": "fused", "gpu": True},
                 {"id": "07", "name": "subpixel_tiled", "gpu": True}]
        self.assertEqual(c.resolve_rungs("all", rungs), ["05", "07"])
        self.assertEqual(c.resolve_rungs("7, fused", rungs), ["07", "05"])
        self.assertEqual(c.resolve_rungs("07_subpixel_tiled", rungs), ["07"])
        with self.assertRaisesRegex(ValueError, r"no GPU rung '00' \(GPU rungs: 05_fused, 07_subpixel_tiled\)"):
            c.resolve_rungs("00", rungs)

    def test_target(self):
        self.assertEqual(cc.target("t", 0.5, 0.5)["status"], "met")
        self.assertEqual(cc.target("t", 0.5, 0.5, "<")["status"], "not met")
        self.assertEqual(cc.target("t", 0.6, 0.5)["status"], "not met")
        t = cc.target("t", None, 0.5, ms=None)
        self.assertEqual((t["status"], t["met"], t["ms"]), ("not measured", None, None))


def variant(kind, ms, peak=None, passed=True, rung=None):
    v = {"variant": f"{kind} {rung or ''}".strip(), "kind": kind, "median_ms": ms, "peak_bytes": peak,
         "check": {"pass": passed}}
    if rung:
        v["rung"] = rung
    return v


class Targets(unittest.TestCase):
    FLOORS = {"memory_floor_ms": 0.4, "compute_floor_ms": 0.8}

    def test_fastest_rung_skips_failed_and_untimed(self):
        vs = [variant("rung", 0.5, passed=False, rung="06"), variant("rung", 1.0, rung="07"),
              variant("rung", None, rung="05"), variant("eager", 0.1)]
        self.assertEqual(c.fastest_rung(vs)["rung"], "07")
        self.assertIsNone(c.fastest_rung([variant("rung", 0.5, passed=False, rung="06")]))

    def test_met_and_not_met(self):
        vs = [variant("eager", 5.0, peak=4000), variant("compile", 2.5), variant("rung", 1.9, peak=1500, rung="07")]
        t = c.evaluate_targets(vs, self.FLOORS)
        self.assertEqual([x["status"] for x in t], ["met", "met", "not met"])
        self.assertAlmostEqual(t[0]["value"], 1.9 / 2.5)
        self.assertAlmostEqual(t[1]["value"], 1.9 / 0.8)  # the larger floor
        self.assertAlmostEqual(t[2]["value"], 1500 / 4000)
        t = c.evaluate_targets([variant("compile", 2.0), variant("rung", 1.9, peak=900, rung="07"),
                                variant("eager", 5.0, peak=4000)], {"memory_floor_ms": 0.5, "compute_floor_ms": 0.7})
        self.assertEqual([x["status"] for x in t], ["not met", "not met", "met"])  # 0.95, 2.71, 0.225

    def test_not_measured(self):
        t = c.evaluate_targets([variant("rung", 1.0, rung="07")], {"memory_floor_ms": None,
                                                                   "compute_floor_ms": None})
        self.assertEqual([x["status"] for x in t], ["not measured"] * 3)
        self.assertTrue(all(x["met"] is None for x in t))

    def test_memory_floor_alone_is_noted(self):
        t = c.evaluate_targets([variant("rung", 1.0, rung="07")], {"memory_floor_ms": 0.5, "compute_floor_ms": None})
        self.assertEqual(t[1]["value"], 2.0)
        self.assertIn("note", t[1])


@unittest.skipUnless(shutil.which("cmake"), "cmake is not on PATH (cmake/Stages.cmake writes the registry)")
class BuildSources(unittest.TestCase):
    def setUp(self):
        cc.ladder_package()  # python/'s package, loaded by its path
        from conv_pool_ladder import _build

        self.b = _build
        self.tmp = Path(tempfile.mkdtemp(prefix="test_compare_p38_"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    @unittest.skipUnless((REPO / "tracks" / "p38_spatial_softmax" / "problem.cpp").is_file(), "no track here")
    def test_with_the_track(self):
        track = self.b.p38_track_dir()
        names = {p.relative_to(track).as_posix() for p in self.b.p38_sources()}
        self.assertTrue({"problem.cpp", "oracle.cpp", "tolerance.cpp", "rows.cpp", "registry.cpp",
                         "device/geometry.cpp", "rungs/00_cpu_reference/cpu_reference.cpp",
                         "rungs/07_subpixel_tiled/subpixel_tiled.cu"} <= names)
        self.assertFalse({"runner.cu", "main.cpp"} & names)
        plain = self.b.wrapper_sources([], self.tmp / "plain")  # the first track's modules: unchanged
        self.assertNotIn(str(self.b.CSRC / "p38_call.cpp"), plain)
        self.assertFalse([s for s in plain if Path(s).name.startswith("p38")])
        self.assertEqual(self.b.extension_name([]), "conv_pool_ladder_none")
        self.assertEqual(self.b.extension_name([], with_p38=True), "conv_pool_ladder_p38")
        sources = self.b.wrapper_sources([], self.tmp / "build", with_p38=True)
        self.assertIn(str(self.b.CSRC / "p38_call.cpp"), sources)
        added = {Path(s).name for s in sources} - {Path(s).name for s in plain}
        self.assertIn("p38_call.cpp", added)
        # the rest as before, plus what the tracks share (tracks/shared)
        self.assertEqual({n for n in added if not n.startswith("p38")},
                         {"tracks_shared__geometry3d.cpp", "tracks_shared__agreement.cpp"})
        base = [Path(s).name for s in sources]
        self.assertEqual(len(base), len(set(base)), "object files are named after the sources' base names")
        self.assertIn("p38__problem.cpp", base)
        self.assertIn("p38_rungs_07_subpixel_tiled__subpixel_tiled.cu", base)
        wrapper = (self.tmp / "build" / "src" / "p38_device__geometry.cpp").read_text()
        self.assertIn(f'#include "{track / "device" / "geometry.cpp"}"', wrapper)

    def test_sm90a_where_a_stage_asks(self):
        """A stage whose rung.json says "build": {"sm_90a": true} gets the extension sm_90a in place of sm_90."""
        (self.tmp / "15_x").mkdir()
        (self.tmp / "15_x" / "rung.json").write_text('{"sass": [], "build": {"sm_90a": true}}')
        hopper = self.b.StageFolder("15", "15_x", self.tmp / "15_x", ())
        plain = self.b.StageFolder("14", "14_y", self.tmp / "14_y", ())  # no rung.json
        self.assertEqual([self.b.extension_arch(a, s) for a, s in (("90", [plain, hopper]), ("90", [plain]),
                                                                   ("80", [hopper]), ("90a", [plain]))],
                         ["90a", "90", "80", "90a"])
        self.assertEqual(self.b.torch_arch_list("90a"), "9.0a")

    def test_without_the_track(self):
        root = self.tmp / "handout"  # a checkout without tracks/, as a student handout
        root.mkdir()
        for d in ("stages", "cmake", "common"):
            (root / d).symlink_to(REPO / d, target_is_directory=True)
        self.assertIsNone(self.b.p38_track_dir(root))
        self.assertEqual(self.b.p38_sources(root), [])
        sources = self.b.wrapper_sources([], self.tmp / "build", root)
        self.assertNotIn(str(self.b.CSRC / "p38_call.cpp"), sources)
        self.assertFalse([s for s in sources if Path(s).name.startswith("p38")])
        self.assertIn(str(self.b.CSRC / "stage_op.cpp"), sources)  # the rest unchanged
        with self.assertRaisesRegex(RuntimeError, "not in this checkout"):
            self.b.wrapper_sources([], self.tmp / "build_p38", root, with_p38=True)


if __name__ == "__main__":
    unittest.main()
