#!/usr/bin/env python3
"""Tests of tooling/checks/compare.py, the PyTorch comparison of problems 42, 38 and 74, on what it
decides without torch or a GPU:
  * the one program: each problem's options and defaults, options of another problem and values
    below their minimum rejected, the skip (exit 0, {"skipped": true} in --json) without torch or
    a GPU through compare.py, its aliases and the older scripts;
  * problem 42: which profiled kernel is cuDNN's convolution (pick_conv_kernel, is_conv_kernel,
    short_kernel_name), step 6's targets (met, missed, not measured), the default stages by name;
  * the tracks' 3-D geometry (compare_common): sizes and conv_macs against a hand count at
    KernelBench's sizes and a brute-force count on random problems, pool output sizes against an
    enumeration of the windows, a planted wrong tap count caught; triple, fp32_round, target;
  * problem 38: the floors, the sample choice, rung selection, the targets;
  * problem 74: python/conv_pool_ladder/p74.py's constants (read with ast: no torch), the fast
    rungs' family, the selfcheck cases, rung selection, the targets, each forward rung judged at
    the bound of the precision it declares (fp32, tf32; another is an error);
  * which sources python/conv_pool_ladder/_build.py compiles for each track, with and without it
    (these need cmake on PATH, cmake/Stages.cmake writes the stage registry; skipped without it).

    python3 scripts/test_compare.py    # unittest; a one-line summary, exit 0 when all pass
"""

from __future__ import annotations

import ast
import contextlib
import io
import itertools
import json
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # the packages' root: this test is an entry point
from tooling.checks import compare  # noqa: E402
from tooling.checks import compare_common as cc  # noqa: E402
from tooling.checks import compare_p38 as p38  # noqa: E402
from tooling.checks import compare_p42 as p42  # noqa: E402
from tooling.checks import compare_p74 as p74  # noqa: E402


def has_gpu() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:  # no torch, or a broken one: compare skips
        return False


class Program(unittest.TestCase):
    def test_defaults_per_problem(self):
        a = compare.parse_args([])
        self.assertEqual((a.problem, a.reps, a.warmup, a.per_call_reps, a.stages), ("42", 20, 3, 100, p42.DEFAULT_STAGES))
        a = compare.parse_args(["--problem", "38"])
        self.assertEqual((a.reps, a.warmup, a.rungs, a.check_samples, a.selfcheck), (10, 2, "all", 2, False))
        self.assertEqual({k: getattr(a, k) for k in p38.KERNELBENCH}, p38.KERNELBENCH)
        a = compare.parse_args(["--problem", "74"])
        self.assertEqual((a.reps, a.warmup, a.flush_mb, a.forward_rungs, a.backward_rungs), (20, 3, 256, "all", "all"))
        self.assertEqual(p74.problem_of(a), p74.KERNELBENCH)
        a = compare.parse_args(["--problem", "74", "--selfcheck", "--batch", "4", "--forward-rungs", "03",
                                "--json", "/tmp/x.json"])
        self.assertEqual((a.selfcheck, p74.problem_of(a)["batch"], a.forward_rungs, a.json), (True, 4, "03", "/tmp/x.json"))

    def test_rejects(self):
        for bad in (["--reps", "0"], ["--warmup", "-1"], ["--per-call-reps", "0"], ["--per-call-warmup", "-1"],
                    ["--selfcheck"], ["--rungs", "05"], ["--problem", "43"],
                    ["--problem", "38", "--check-samples", "0"], ["--problem", "38", "--stages", "09"],
                    ["--problem", "38", "--flush-mb", "1"], ["--problem", "74", "--flush-mb", "-1"],
                    ["--problem", "74", "--batch", "x"], ["--problem", "74", "--rungs", "03"]):
            with self.assertRaises(SystemExit, msg=bad), contextlib.redirect_stderr(io.StringIO()):
                compare.parse_args(bad)

    @unittest.skipIf(has_gpu(), "torch sees a GPU here: compare would run, not skip")
    def test_skip_without_torch_or_gpu(self):
        with tempfile.TemporaryDirectory() as tmp:
            for problem, entry in (("42", compare.main_p42), ("38", compare.main_p38), ("74", compare.main_p74)):
                for call in (lambda: compare.main(["--problem", problem, "--json", f"{tmp}/{problem}.json"]),
                             lambda: entry(["--json", f"{tmp}/{problem}.json"])):
                    out = io.StringIO()
                    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                        self.assertEqual(call(), 0)
                    self.assertIn(f"compare_p{problem}: SKIPPED: ", out.getvalue())
                    data = json.loads(Path(f"{tmp}/{problem}.json").read_text())
                    self.assertEqual((data["skipped"], sorted(data)), (True, ["reason", "skipped"]))

    def test_entry_scripts(self):
        """scripts/compare.py and the older names run the one program with their problem's options."""
        for script, args, option in (("compare.py", ["--problem", "38"], "--clamp-min"), ("compare.py", [], "--stages"),
                                     ("compare_pytorch.py", [], "--per-call-reps"),
                                     ("compare_p38.py", [], "--check-samples"), ("compare_p74.py", [], "--forward-rungs")):
            got = subprocess.run([sys.executable, str(HERE / script), *args, "--help"], capture_output=True, text=True)
            self.assertEqual(got.returncode, 0, got.stderr)
            self.assertIn(option, got.stdout, script)


# Names as cuDNN 9, PyTorch and Inductor print them (shortened where the tail does not matter).
DGRAD = ("sm90_xmma_dgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_"
         "warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn")
SPLITK = "void xmma_cudnn::gemm::kernel<xmma_cudnn::implicit_gemm::dgrad::Kernel_traits<...>>(Params)"
CUTLASS = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nhwc_align4>(Params)"
FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
BIAS = "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<AddFunctor>>(int, Lambda)"
TO_NHWC = "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(...)"
CONVERT = "void cudnn::ops::convertTensor_kernel<float, float, float, (cudnnKernelDataType_t)2>(...)"
TRITON = "triton_poi_fused_convolution_0"
MEMSET = "Memset (Device)"


class P42ConvKernel(unittest.TestCase):
    def test_names(self):
        for name in (DGRAD, SPLITK, CUTLASS, "implicit_convolve_sgemm", "sm80_xmma_fprop_implicit_gemm_tf32"):
            self.assertTrue(p42.is_conv_kernel(name), name)
        for name in (FILL, BIAS, TO_NHWC, CONVERT, TRITON, MEMSET, "Memcpy DtoD (Device -> Device)",
                     "void at::native::reduce_kernel<512, 1>(...)"):
            self.assertFalse(p42.is_conv_kernel(name), name)

    def test_largest_conv_kernel_per_call_median_over_calls(self):
        # Three calls: the layout change (nchwToNhwc) takes longer than the conv kernel in call 0
        # and must still lose; a small split-K partner never wins; times in microseconds.
        events = [(TO_NHWC, 9000.0, 0), (DGRAD, 2000.0, 0), (SPLITK, 50.0, 0), (BIAS, 300.0, 0),
                  (DGRAD, 2400.0, 1), (SPLITK, 60.0, 1), (BIAS, 310.0, 1), (FILL, 5000.0, 1),
                  (DGRAD, 2100.0, 2), (SPLITK, 40.0, 2), (BIAS, 290.0, 2)]
        t = p42.pick_conv_kernel(events)
        self.assertEqual(t["kernel"], DGRAD)
        self.assertEqual((t["median_ms"], t["min_ms"], t["max_ms"]), (2.1, 2.0, 2.4))
        self.assertEqual((t["reps"], t["calls"], t["picks_other_kernel"]), (3, 3, 0))
        self.assertEqual((t["kernels_per_call"], t["kernels_per_call_max"]), (4, 4))  # 4, 4, 3 activities
        self.assertEqual(t["other_kernels"], sorted([TO_NHWC, SPLITK, BIAS, FILL]))

    def test_launches_of_one_name_add_up_within_a_call(self):
        # Two launches of the split-K kernel (2 x 1.5 ms) beat one 2.5 ms launch of another kernel.
        events = [(SPLITK, 1500.0, 0), (SPLITK, 1500.0, 0), (CUTLASS, 2500.0, 0)]
        t = p42.pick_conv_kernel(events)
        self.assertEqual((t["kernel"], t["median_ms"], t["kernels_per_call"]), (SPLITK, 3.0, 3))

    def test_most_frequent_pick_and_calls_without_activity(self):
        # CUTLASS wins calls 0 and 2, DGRAD call 1; call 3 recorded nothing (calls=4).
        events = [(CUTLASS, 1000.0, 0), (DGRAD, 900.0, 0), (DGRAD, 5000.0, 1), (CUTLASS, 1200.0, 2)]
        t = p42.pick_conv_kernel(events, calls=4)
        self.assertEqual(t["kernel"], CUTLASS)
        self.assertEqual((t["median_ms"], t["reps"], t["calls"], t["picks_other_kernel"]), (1.1, 2, 4, 1))
        self.assertEqual((t["kernels_per_call"], t["kernels_per_call_max"]), (1, 2))  # 2, 1, 1, 0

    def test_nothing_matches(self):
        with self.assertRaisesRegex(LookupError, r"no convolution-like kernel .* 3 GPU activities of 2 calls: "):
            p42.pick_conv_kernel([(FILL, 10.0, 0), (TRITON, 500.0, 0), (TO_NHWC, 20.0, 1)])
        with self.assertRaisesRegex(LookupError, "the profiler recorded none"):
            p42.pick_conv_kernel([], calls=5)

    def test_short_names(self):
        self.assertEqual(p42.short_kernel_name(CUTLASS, 80),
                         "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nhwc_align4>")
        self.assertEqual(len(p42.short_kernel_name(CUTLASS)), 64)  # the default width
        self.assertEqual(p42.short_kernel_name(TO_NHWC, 200),
                         "cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>")
        short = p42.short_kernel_name(DGRAD, 40)
        self.assertEqual((len(short), short), (40, DGRAD[:37] + "..."))
        self.assertEqual(p42.short_kernel_name("k"), "k")


STAGE_NAMES = {"09": "async_copy", "10": "tensor_cores", "11": "three_tf32", "14": "multistage_mma",
               "15": "wgmma", "16": "three_tf32_wgmma", "17": "warp_specialized", "18": "three_tf32_warp_specialized"}


def timing42(kind, ms, stage=None):
    t = {"variant": f"{kind} {stage or ''}".strip(), "kind": kind, "median_ms": ms}
    if stage:
        t["stage"] = stage
    return t


def run42(convt_fp32=10.0, compile_ms=4.0, cudnn_kernel=2.5, stages=None):
    """Timings of a run; None leaves a kind out (cudnn_kernel: an error record in its place)."""
    ts = [timing42("eager", 12.0), timing42("eager_fp32", 15.0), timing42("convt_tf32", 5.0)]
    if convt_fp32 is not None:
        ts.append(timing42("convt_fp32", convt_fp32))
    if compile_ms is not None:
        ts.append(timing42("compile", compile_ms))
    ts.append(timing42("cudnn_kernel", cudnn_kernel) if cudnn_kernel is not None else
              {"variant": "cuDNN's conv kernel", "kind": "cudnn_kernel", "error": "LookupError: ..."})
    for sid, ms in (stages or {}).items():
        ts.append(timing42("stage", ms, sid))
    return ts


class P42Targets(unittest.TestCase):
    def by_name(self, ts, names=STAGE_NAMES):
        return {t["name"]: t for t in p42.targets(ts, names)}

    def test_table(self):
        self.assertEqual(len(p42.TARGETS), 14)
        self.assertEqual([t[:4] for t in p42.TARGETS[4:]], [
            ("wgmma", "kind:compile", 0.7, "<="), ("wgmma", "kind:cudnn_kernel", 1.13, "<="),
            ("three_tf32_wgmma", "stage:wgmma", 2.6, "<="), ("three_tf32_wgmma", "kind:convt_fp32", 0.4, "<="),
            ("multistage_mma", "stage:async_copy", 1.0, "<"),
            ("warp_specialized", "kind:cudnn_kernel", 1.0, "<="), ("warp_specialized", "kind:cudnn_kernel", 0.85, "<="),
            ("warp_specialized", "stage:wgmma", 1.0, "<"),
            ("three_tf32_warp_specialized", "stage:warp_specialized", 2.2, "<="),
            ("three_tf32_warp_specialized", "kind:convt_fp32", 0.35, "<=")])
        for _, ref, _, _, _ in p42.TARGETS:
            what, key = ref.split(":")
            self.assertTrue(what == "stage" or key in p42.REFERENCE_LABELS, ref)

    def test_all_met(self):
        # wgmma 2.5: 0.625 x compile, 1.0 x the kernel; 16: 3.8 = 1.52 x wgmma, 0.38 x convt_fp32;
        # 14: 3.0 < 09 at 6.0; the first four met too.
        # 18: 3.4 = 1.7 x 17, 0.34 x convt_fp32.
        ts = run42(stages={"09": 6.0, "10": 1.6, "11": 5.0, "14": 3.0, "15": 2.5, "16": 3.8, "17": 2.0, "18": 3.4})
        t = self.by_name(ts)
        self.assertEqual(len(t), 14)
        self.assertTrue(all(x["met"] is True and x["status"] == "met" for x in t.values()), t)
        expect = {
            "stage 15 wgmma <= 0.7 x torch.compile": (0.625, 2.5, 4.0),
            "stage 15 wgmma <= 1.13 x cuDNN's conv kernel alone (TF32, channels_last)": (1.0, 2.5, 2.5),
            "stage 16 three_tf32_wgmma <= 2.6 x stage 15 wgmma": (1.52, 3.8, 2.5),
            "stage 16 three_tf32_wgmma <= 0.4 x cuDNN ConvTranspose2d alone (FP32)": (0.38, 3.8, 10.0),
            "stage 14 multistage_mma < stage 09 async_copy": (0.5, 3.0, 6.0),
            "stage 10 tensor_cores <= 0.8 x torch.compile": (0.4, 1.6, 4.0),
            "stage 17 warp_specialized <= cuDNN's conv kernel alone (TF32, channels_last)": (0.8, 2.0, 2.5),
            "stage 17 warp_specialized <= 0.85 x cuDNN's conv kernel alone (TF32, channels_last)": (0.8, 2.0, 2.5),
            "stage 17 warp_specialized < stage 15 wgmma": (0.8, 2.0, 2.5),
            "stage 18 three_tf32_warp_specialized <= 2.2 x stage 17 warp_specialized": (1.7, 3.4, 2.0),
            "stage 18 three_tf32_warp_specialized <= 0.35 x cuDNN ConvTranspose2d alone (FP32)": (0.34, 3.4, 10.0),
        }
        for name, (value, ms, ref) in expect.items():
            self.assertIn(name, t)
            self.assertAlmostEqual(t[name]["value"], value, places=12)
            self.assertEqual((t[name]["ms"], t[name]["reference_ms"]), (ms, ref))
        self.assertEqual(t["stage 14 multistage_mma < stage 09 async_copy"]["note"], "meant for the --small run")
        self.assertNotIn("note", t["stage 15 wgmma <= 0.7 x torch.compile"])
        self.assertEqual(t["stage 17 warp_specialized <= 0.85 x cuDNN's conv kernel alone (TF32, channels_last)"]
                         ["note"], "stretch")

    def test_warp_specialized_between_target_and_stretch(self):
        # 17 at 2.3 against the kernel's 2.5: 0.92, met at 1.0, missed at the 0.85 stretch; 2.5 is not
        # strictly below stage 15's 2.5.
        t = self.by_name(run42(stages={"15": 2.5, "17": 2.3}))
        self.assertIs(t["stage 17 warp_specialized <= cuDNN's conv kernel alone (TF32, channels_last)"]["met"], True)
        self.assertIs(t["stage 17 warp_specialized <= 0.85 x cuDNN's conv kernel alone (TF32, channels_last)"]
                      ["met"], False)
        t = self.by_name(run42(stages={"15": 2.5, "17": 2.5}))
        self.assertIs(t["stage 17 warp_specialized < stage 15 wgmma"]["met"], False)

    def test_missed(self):
        # wgmma 3.0: 0.75 x compile (> 0.7), 1.2 x the kernel (> 1.13); 16: 8.0 = 2.667 x wgmma
        # (> 2.6), 0.8 x convt_fp32 (> 0.4); 14 equal to 09: not strictly below.
        ts = run42(stages={"09": 6.0, "14": 6.0, "15": 3.0, "16": 8.0})
        t = self.by_name(ts)
        new = {n: x for n, x in t.items() if n.startswith(("stage 14", "stage 15", "stage 16"))}
        self.assertEqual(len(new), 5)
        self.assertTrue(all(x["met"] is False and x["status"] == "not met" for x in new.values()), new)
        self.assertAlmostEqual(t["stage 15 wgmma <= 0.7 x torch.compile"]["value"], 0.75)
        self.assertAlmostEqual(t["stage 15 wgmma <= 1.13 x cuDNN's conv kernel alone (TF32, channels_last)"]
                               ["value"], 1.2)
        self.assertAlmostEqual(t["stage 16 three_tf32_wgmma <= 2.6 x stage 15 wgmma"]["value"], 8.0 / 3.0)
        self.assertAlmostEqual(t["stage 16 three_tf32_wgmma <= 0.4 x cuDNN ConvTranspose2d alone (FP32)"]["value"],
                               0.8)
        self.assertEqual(t["stage 14 multistage_mma < stage 09 async_copy"]["value"], 1.0)

    def test_limits_are_inclusive_where_op_is_le(self):
        # A ratio exactly at the limit is met with "<=": IEEE division rounds correctly, so 13/5 and
        # 13/32.5 are the doubles nearest 2.6 and 0.4, the limits' own.
        t = self.by_name(run42(convt_fp32=32.5, stages={"15": 5.0, "16": 13.0}))
        for name in ("stage 16 three_tf32_wgmma <= 2.6 x stage 15 wgmma",
                     "stage 16 three_tf32_wgmma <= 0.4 x cuDNN ConvTranspose2d alone (FP32)"):
            self.assertEqual(t[name]["value"], t[name]["limit"])
            self.assertIs(t[name]["met"], True)

    def test_not_measured(self):
        # No stage 16 or 18 folder (names without them), the profiler failed, no torch.compile; 10,
        # 11 and 17 untimed: only 14 < 09 is measured.
        names = {k: v for k, v in STAGE_NAMES.items() if k not in ("16", "18")}
        t = self.by_name(run42(compile_ms=None, cudnn_kernel=None, stages={"09": 6.0, "14": 5.0, "15": 2.5}), names)
        self.assertEqual(len(t), 14)
        nm = {n: x for n, x in t.items() if x["status"] == "not measured"}
        self.assertEqual(len(nm), 13)
        self.assertEqual(nm["stage three_tf32_warp_specialized <= 2.2 x stage 17 warp_specialized"]["missing"],
                         ["stage three_tf32_warp_specialized", "stage 17 warp_specialized"])
        self.assertTrue(all(x["met"] is None and x["value"] is None for x in nm.values()))
        self.assertIs(t["stage 14 multistage_mma < stage 09 async_copy"]["met"], True)
        self.assertEqual(nm["stage 15 wgmma <= 0.7 x torch.compile"]["missing"], ["torch.compile"])
        self.assertEqual(nm["stage 15 wgmma <= 1.13 x cuDNN's conv kernel alone (TF32, channels_last)"]["missing"],
                         ["cuDNN's conv kernel alone (TF32, channels_last)"])
        self.assertEqual(nm["stage three_tf32_wgmma <= 2.6 x stage 15 wgmma"]["missing"],
                         ["stage three_tf32_wgmma"])
        self.assertEqual(nm["stage three_tf32_wgmma <= 0.4 x cuDNN ConvTranspose2d alone (FP32)"]["ms"], None)
        self.assertEqual(nm["stage 10 tensor_cores <= 0.5 x cuDNN ConvTranspose2d alone (TF32)"]["missing"],
                         ["stage 10 tensor_cores"])


class P42Defaults(unittest.TestCase):
    def test_hopper_rungs_by_name(self):
        names = p42.DEFAULT_STAGES.split(",")
        self.assertEqual(names[-5:], ["multistage_mma", "wgmma", "three_tf32_wgmma", "warp_specialized",
                                      "three_tf32_warp_specialized"])
        self.assertFalse([n for n in names if n[:1].isdigit()], "default stages are named, not numbered")
        self.assertEqual(len(names), len(set(names)))
        # the names are the folders' (stages 16 and 17 may not have their folders: skipped by the script)
        folders = {p.name[3:]: p.name[:2] for p in (REPO / "stages").glob("[0-9][0-9]_*") if p.is_dir()}
        self.assertEqual((folders.get("multistage_mma"), folders.get("wgmma")), ("14", "15"))
        self.assertEqual(folders.get("three_tf32_wgmma", "16"), "16")
        self.assertEqual(folders.get("warp_specialized"), "17")
        self.assertEqual(folders.get("three_tf32_warp_specialized", "18"), "18")  # a draft until it runs on a GPU
        self.assertTrue(all(n in folders for n in names
                            if n not in ("three_tf32_wgmma", "warp_specialized", "three_tf32_warp_specialized")), names)


# ---- the tracks' 3-D geometry ------------------------------------------------------------------------

def brute_force_macs(p, in_size, out_size):
    """ConvTranspose3d's MACs from input in_size to output out_size for the problem dict p, in
    scatter form over every (input position, tap) pair of a tiny problem: batch * out_channels *
    (in_channels/groups) * #{(i, k) in 3-D: i*stride - padding + k*dilation lands inside the
    output}. Independent of the per-axis factorization that compare_common.conv_macs uses."""
    k, st, pad, dil = (cc.triple(p[key]) for key in ("kernel_size", "stride", "padding", "dilation"))
    count = 0
    for i in itertools.product(*(range(n) for n in in_size)):
        for t in itertools.product(*(range(n) for n in k)):
            o = [i[a] * st[a] - pad[a] + t[a] * dil[a] for a in range(3)]
            count += all(0 <= o[a] < out_size[a] for a in range(3))
    return p["batch"] * p["out_channels"] * (p["in_channels"] // p["groups"]) * count


def random_problems(rng, count):
    """`count` random small problem dicts, each with its sizes for both orders (pool first: problem
    38's; pool last: 74's), every size at least 1."""
    out = []
    while len(out) < count:
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
        first, last = p38.problem_sizes(p), p74.problem_sizes(p)
        if min(first["pooled_size"] + first["out_size"] + last["conv_size"] + last["out_size"]) >= 1:
            out.append((p, first, last))
    return out


class P42GradCheckStage(unittest.TestCase):
    """The C++ backward check runs an FP32 stage's forward: its y allowance (Y_ATOL) is FP32's."""
    def precisions(self):
        return p42.stage_precisions({p.name[:2]: p for p in (REPO / "stages").glob("[0-9][0-9]_*") if p.is_dir()})

    def test_precision_from_rung_json(self):
        p = self.precisions()
        self.assertEqual((p["15"], p["17"]), ("tf32", "tf32"))
        self.assertEqual((p["16"], p["13"]), ("fp32", "fp32"))  # 16: 3xTF32, FP32-accurate

    def test_model_new_first_then_the_last_fp32_stage(self):
        p = self.precisions()
        self.assertEqual(p42.grad_check_stage(["15", "13", "17"], "13", p), "13")
        self.assertEqual(p42.grad_check_stage(["09", "15", "17"], "13", p), "09")
        self.assertEqual(p42.grad_check_stage(["16", "17"], "13", p), "16")
        self.assertIsNone(p42.grad_check_stage(["15", "17"], "13", p))


class Geometry(unittest.TestCase):
    def test_kernelbench_sizes(self):
        s = p38.problem_sizes(p38.KERNELBENCH)
        self.assertEqual(s["pooled_size"], (16, 32, 32))  # AvgPool3d(2) halves 32x64x64
        self.assertEqual(s["out_size"], (32, 64, 64))     # (16-1)*2 - 2 + 2 + 1 + 1 = 32
        self.assertEqual(s["spatial"], 131072)
        self.assertEqual(s["x_bytes"], 32 * 32 * 32 * 64 * 64 * 4)   # 512 MiB
        self.assertEqual(s["out_bytes"], 32 * 64 * 32 * 64 * 64 * 4)  # 1 GiB
        s = p74.problem_sizes(p74.KERNELBENCH)
        self.assertEqual(s["conv_size"], (32, 64, 64))  # (16-1)*2 - 2 + 2 + 1 + 1 = 32
        self.assertEqual(s["out_size"], (16, 32, 32))   # MaxPool3d(2) halves it
        self.assertEqual(s["x_bytes"], 16 * 16 * 16 * 32 * 32 * 4)      # 16 MiB
        self.assertEqual(s["conv_bytes"], 16 * 32 * 32 * 64 * 64 * 4)   # 256 MiB per conv-sized fp32 tensor
        self.assertEqual(s["out_bytes"], 16 * 32 * 16 * 32 * 32 * 4)    # 32 MiB
        self.assertEqual((s["weight_elems"], s["pool_window"]), (16 * 32 * 27, 8))

    def test_per_axis_taps_by_hand(self):
        # Depth: pooled 16 -> 32, kernel 3, stride 2, padding 1. Output o reads input (o + 1 - k)/2:
        # even o: only k = 1 (i = o/2); odd o: k = 0 (i = (o+1)/2) and k = 2 (i = (o-1)/2), except
        # o = 31, where k = 0 would read i = 16, outside. 16*1 + 15*2 + 1 = 47.
        d = cc.taps_per_output(16, 32, 3, 2, 1)
        self.assertEqual((d[:4], d[-1], sum(d)), ([1, 2, 1, 2], 1, 47))
        self.assertEqual(sum(cc.taps_per_output(32, 64, 3, 2, 1)), 95)  # 32*1 + 31*2 + 1

    def test_conv_macs_kernelbench(self):
        # 47 * 95 * 95 taps summed over positions (both problems have that geometry), times batch,
        # out and in channels: 32, 64, 32 for problem 38; 16, 32, 16 for problem 74.
        self.assertEqual(47 * 95 * 95, 424175)
        self.assertEqual(p38.problem_sizes(p38.KERNELBENCH)["conv_macs"], 424175 * 32 * 64 * 32)
        self.assertEqual(p38.problem_sizes(p38.KERNELBENCH)["conv_macs"], 27_798_732_800)
        self.assertEqual(p74.problem_sizes(p74.KERNELBENCH)["conv_macs"], 3_474_841_600)

    def test_conv_macs_against_brute_force(self):
        for p, first, last in random_problems(random.Random(38), 60):
            self.assertEqual(first["conv_macs"], brute_force_macs(p, first["pooled_size"], first["out_size"]), p)
            self.assertEqual(last["conv_macs"], brute_force_macs(p, last["in_size"], last["conv_size"]), p)

    def test_a_wrong_tap_count_is_caught(self):
        """The brute-force count rejects a planted mistake: every tap counted, border or not."""
        def every_tap(in_size, out_size, kernel, *rest):
            return [kernel] * out_size

        caught = 0
        with mock.patch.object(cc, "taps_per_output", every_tap):
            for p, first, _ in random_problems(random.Random(38), 20):
                caught += first["conv_macs"] != brute_force_macs(p, first["pooled_size"], first["out_size"])
        self.assertGreater(caught, 0)

    def test_border_taps_reach_no_input(self):
        # Input 2, kernel 3, stride 1, padding 0: output 4; output o reads input o - k, so o = 0
        # has one tap (k = 0), o = 1 and o = 2 two, o = 3 one: 6 per axis, not 4 * 3 = 12.
        p = {"batch": 1, "in_channels": 1, "out_channels": 1, "groups": 1, "depth": 2, "height": 2, "width": 2,
             "pool_kernel_size": 1, "kernel_size": 3, "stride": 1, "padding": 0, "output_padding": 0,
             "dilation": 1}
        s = p38.problem_sizes(p)
        self.assertEqual((s["out_size"], s["conv_macs"]), ((4, 4, 4), 6 ** 3))
        self.assertEqual(cc.taps_per_output(2, 4, 3, 1, 0), [1, 2, 2, 1])
        self.assertEqual(s["conv_macs"], brute_force_macs(p, s["pooled_size"], s["out_size"]))

    def test_pool_out_size(self):
        pool = cc.pool_out_size
        self.assertEqual((pool(5, 2, 2, 1), pool(64, 2, 2, 0), pool(5, 2, 2, 0)), (3, 32, 2))  # floor drops the last
        self.assertEqual(pool(5, 2, 2, 0, ceil_mode=True), 3)  # ceil keeps a partial window
        # ceil_mode's extra window would start in the right padding: (4-1)*2 = 6 >= 5 + 1, dropped
        self.assertEqual(pool(5, 2, 2, 1, ceil_mode=True), 3)
        self.assertEqual(pool(3, 2, 2, 1, ceil_mode=True), 2)  # likewise (3-1)*2 = 4 >= 3 + 1
        self.assertEqual((pool(7, 3, 2, 1, ceil_mode=True), pool(5, 3, 2, 1, ceil_mode=True)), (4, 3))
        self.assertEqual(pool(15, 3, 2, 1, dilation=2, ceil_mode=True), 7)  # effective kernel 5
        self.assertEqual(pool(15, 3, 2, 1, dilation=2), 7)                  # (15+2-4-1)//2 + 1

    def test_pool_out_size_by_windows(self):
        # floor mode: the windows that lie inside the padded input; ceil mode: those that end at
        # most stride - 1 past it (the rounding up) and start inside the input or the left padding.
        for size, k, s, p, d in itertools.product(range(1, 9), range(1, 4), range(1, 4), range(0, 2), range(1, 3)):
            if p > ((k - 1) * d + 1) // 2 or size + 2 * p < d * (k - 1) + 1:
                continue
            floor = sum(1 for q in range(50) if q * s - p + d * (k - 1) <= size - 1 + p)
            ceil = sum(1 for q in range(50) if q * s - p < size and q * s - p + d * (k - 1) <= size - 1 + p + s - 1)
            self.assertEqual(cc.pool_out_size(size, k, s, p, d), floor, (size, k, s, p, d))
            self.assertEqual(cc.pool_out_size(size, k, s, p, d, True), ceil, (size, k, s, p, d, "ceil"))

    def test_helpers(self):
        self.assertEqual((cc.triple(2), cc.triple([1, 2, 3])), ((2, 2, 2), (1, 2, 3)))
        with self.assertRaises(ValueError):
            cc.triple((1, 2))
        self.assertEqual((cc.fp32_round(0.2), cc.fp32_round(0.5)), (0.20000000298023224, 0.5))
        self.assertEqual((cc.fp32_round(-100.0), cc.fp32_round(None)), (-100.0, None))
        self.assertEqual((cc.fp32_round(1e39), cc.fp32_round(-1e39)), (float("inf"), float("-inf")))  # as torch
        self.assertEqual(cc.target("t", 0.5, 0.5)["status"], "met")
        self.assertEqual(cc.target("t", 0.5, 0.5, "<")["status"], "not met")
        self.assertEqual(cc.target("t", 0.6, 0.5)["status"], "not met")
        t = cc.target("t", None, 0.5, ms=None)
        self.assertEqual((t["status"], t["met"], t["ms"]), ("not measured", None, None))


# ---- problem 38 -------------------------------------------------------------------------------------------

def variant38(kind, ms, peak=None, passed=True, rung=None):
    v = {"variant": f"{kind} {rung or ''}".strip(), "kind": kind, "median_ms": ms, "peak_bytes": peak,
         "check": {"pass": passed}}
    if rung:
        v["rung"] = rung
    return v


class P38(unittest.TestCase):
    FLOORS = {"memory_floor_ms": 0.4, "compute_floor_ms": 0.8}

    def test_compute_floor_and_peak(self):
        tflops, formula = p38.fp32_peak_from_properties(132, 9, 0, 1_980_000)  # an H200 SXM's properties
        self.assertAlmostEqual(tflops, 132 * 128 * 1.98e9 * 2 / 1e12)
        self.assertIn("132 SMs x 128 FP32 lanes", formula)
        self.assertEqual(p38.fp32_peak_from_properties(80, 7, 0, 1_530_000)[0], 80 * 64 * 1.53e9 * 2 / 1e12)
        self.assertAlmostEqual(p38.compute_floor_ms(27_798_732_800, 66.9), 2 * 27_798_732_800 / 66.9e12 * 1e3)
        self.assertIsNone(p38.compute_floor_ms(1e9, None))

    def test_check_samples(self):
        self.assertEqual([p38.check_samples(32, n) for n in (2, 1, 3)], [[0, 31], [0], [0, 16, 31]])
        self.assertEqual((p38.check_samples(3, 10), p38.check_samples(1, 2)), ([0, 1, 2], [0]))

    def test_resolve_rungs(self):
        rungs = [{"id": "00", "name": "cpu_reference", "gpu": False}, {"id": "05", "name": "fused", "gpu": True},
                 {"id": "07", "name": "subpixel_tiled", "gpu": True}]
        self.assertEqual(p38.resolve_rungs("all", rungs), ["05", "07"])
        self.assertEqual(p38.resolve_rungs("7, fused", rungs), ["07", "05"])
        self.assertEqual(p38.resolve_rungs("07_subpixel_tiled", rungs), ["07"])
        with self.assertRaisesRegex(ValueError, r"no GPU rung '00' \(GPU rungs: 05_fused, 07_subpixel_tiled\)"):
            p38.resolve_rungs("00", rungs)

    def test_p38_tolerance_follows_the_rung_precision(self):
        # tolerance.cpp's z_error_bound: fp32 sums at u; TF32 sums at 2u plus each product's operand
        # rounding 2u_t + u_t^2 (u_t = 2^-11); anything else is refused rather than checked at fp32.
        self.assertEqual(p38.z_unit_and_rounding("fp32"), (2.0 ** -24, 0.0))
        self.assertEqual(p38.z_unit_and_rounding("tf32"), (2.0 ** -23, 2.0 ** -10 + 2.0 ** -22))
        with self.assertRaisesRegex(ValueError, r"unknown precision 'bf16'"):
            p38.z_unit_and_rounding("bf16")

    def test_fastest_rung_skips_failed_and_untimed(self):
        vs = [variant38("rung", 0.5, passed=False, rung="06"), variant38("rung", 1.0, rung="07"),
              variant38("rung", None, rung="05"), variant38("eager", 0.1)]
        self.assertEqual(p38.fastest_rung(vs)["rung"], "07")
        self.assertIsNone(p38.fastest_rung([variant38("rung", 0.5, passed=False, rung="06")]))

    def test_targets_met_and_not_met(self):
        vs = [variant38("eager", 5.0, peak=4000), variant38("compile", 2.5), variant38("rung", 0.7, peak=1500, rung="08")]
        t = p38.evaluate_targets(vs, self.FLOORS)
        self.assertEqual([x["status"] for x in t], ["met", "met", "not met"])
        self.assertAlmostEqual(t[0]["value"], 0.7 / 2.5)
        self.assertAlmostEqual(t[1]["value"], 0.7 / self.FLOORS["memory_floor_ms"])  # the memory floor, not the FP32 one
        self.assertAlmostEqual(t[2]["value"], 1500 / 4000)
        t = p38.evaluate_targets([variant38("compile", 2.0), variant38("rung", 1.1, peak=900, rung="08"),
                                  variant38("eager", 5.0, peak=4000)], {"memory_floor_ms": 0.5, "compute_floor_ms": 0.7})
        self.assertEqual([x["status"] for x in t], ["not met", "not met", "met"])  # 0.55, 2.2, 0.225
        t = p38.evaluate_targets([variant38("compile", 2.5), variant38("rung", 1.0, rung="08")],
                                 {"memory_floor_ms": 0.5, "compute_floor_ms": None})
        self.assertEqual([x["met"] for x in t[:2]], [True, True])  # 0.4 and 2.0 exactly: the boundaries are met

    def test_targets_not_measured(self):
        t = p38.evaluate_targets([variant38("rung", 1.0, rung="07")], {"memory_floor_ms": None, "compute_floor_ms": None})
        self.assertEqual([(x["status"], x["met"]) for x in t], [("not measured", None)] * 3)
        t = p38.evaluate_targets([variant38("rung", 1.0, rung="07")], {"memory_floor_ms": 0.5, "compute_floor_ms": None})
        self.assertEqual(t[1]["value"], 2.0)


# ---- problem 74 -------------------------------------------------------------------------------------------

def variant74(kind, fwd=None, train=None, peak=None, passed=True, name=None):
    return {"variant": name or kind, "kind": kind, "forward": None if fwd is None else {"median_ms": fwd},
            "train": None if train is None else {"median_ms": train}, "peak_train_bytes": peak,
            "check": {"pass": passed}}


RUNGS74 = [{"id": "00", "name": "cpu_reference", "forward": False, "backward": False, "precision": "fp32"},
           {"id": "03", "name": "fused_forward", "forward": True, "backward": False, "precision": "fp32"},
           {"id": "04", "name": "subpixel_forward", "forward": True, "backward": False, "precision": "fp32"},
           {"id": "08", "name": "two_level", "forward": False, "backward": True, "precision": "fp32"},
           {"id": "09", "name": "tiled_grads", "forward": False, "backward": True, "precision": "fp32"}]
# list_rungs' entry of the tensor-core rung (python/conv_pool_ladder/csrc/p74_call.cpp)
RUNG74_TF32 = {"id": "10", "name": "tensor_cores", "forward": True, "backward": False, "precision": "tf32"}


class P74(unittest.TestCase):
    def test_p74_py_constants(self):
        """python/conv_pool_ladder/p74.py's module constants, read without importing torch."""
        consts = {}
        for node in ast.parse((REPO / "python" / "conv_pool_ladder" / "p74.py").read_text()).body:
            if isinstance(node, ast.Assign):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                for target in node.targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    values = value if isinstance(target, ast.Tuple) else [value]
                    consts.update({t.id: v for t, v in zip(names, values) if isinstance(t, ast.Name)})
        for key in ("batch_size", "in_channels", "out_channels", "depth", "height", "width", "kernel_size",
                    "stride", "padding", "output_padding"):
            self.assertEqual(consts[key], p74.KERNELBENCH["batch" if key == "batch_size" else key], key)
        self.assertEqual((consts["DEFAULT_FORWARD_RUNG"], consts["DEFAULT_BACKWARD_RUNG"]), ("10", "09"))

    def test_problem_case(self):
        """A default-mode problem as a selfcheck case keeps its sizes (the pool's too)."""
        for pool in (2, 3):
            p = {**p74.KERNELBENCH, "pool_kernel_size": pool, "output_padding": 0}
            case_p = p74.case_problem(p74.problem_case(p))
            self.assertEqual(p74.problem_sizes(case_p), p74.problem_sizes(p))
            self.assertEqual(p74.in_family(case_p), pool == 2)

    def test_in_family(self):
        self.assertTrue(p74.in_family(p74.KERNELBENCH))
        self.assertTrue(p74.in_family({**p74.KERNELBENCH, "output_padding": 0}))
        for change in ({"groups": 2}, {"stride": 1}, {"kernel_size": 2}, {"padding": (1, 0, 1)}, {"dilation": 2},
                       {"pool_kernel_size": 3}, {"pool_stride": 1}, {"pool_padding": 1}, {"ceil_mode": True},
                       {"pool_dilation": 2}):
            self.assertFalse(p74.in_family({**p74.KERNELBENCH, **change}), change)

    def test_selfcheck_cases(self):
        for case in p74.SELFCHECK_CASES + (p74.KERNELBENCH_CASE,) + p74.GRADCHECK_CASES:
            p = p74.case_problem(case)
            self.assertGreaterEqual(min(p74.problem_sizes(p)["out_size"]), 1, case["name"])
            self.assertEqual((p["in_channels"] % p["groups"], p["out_channels"] % p["groups"]), (0, 0))
            # PyTorch: output_padding < stride or < dilation
            for op, st, d in zip(cc.triple(p["output_padding"]), cc.triple(p["stride"]), cc.triple(p["dilation"])):
                self.assertTrue(op < st or op < d, case["name"])
        family = [p74.in_family(p74.case_problem(c)) for c in p74.SELFCHECK_CASES + (p74.KERNELBENCH_CASE,)]
        self.assertEqual(family, [True, True, False, True])
        self.assertEqual(p74.problem_sizes(p74.case_problem(p74.KERNELBENCH_CASE))["conv_macs"],
                         p74.problem_sizes(p74.KERNELBENCH)["conv_macs"])
        for case in p74.GRADCHECK_CASES:  # few windows, so that a seed away from every kink is found fast
            self.assertLessEqual(p74.problem_sizes(p74.case_problem(case))["out_elems"], 16, case["name"])
        self.assertEqual([p74.in_family(p74.case_problem(c)) for c in p74.GRADCHECK_CASES], [True, False])

    def test_resolve_rungs(self):
        self.assertEqual(p74.resolve_rungs("all", RUNGS74, "forward"), ["03", "04"])
        self.assertEqual(p74.resolve_rungs("all", RUNGS74, "backward"), ["08", "09"])
        self.assertEqual(p74.resolve_rungs("4, fused_forward", RUNGS74, "forward"), ["04", "03"])
        self.assertEqual(p74.resolve_rungs("09_tiled_grads", RUNGS74, "backward"), ["09"])
        with self.assertRaisesRegex(ValueError, "no rung '08' with a GPU forward pass"):
            p74.resolve_rungs("08", RUNGS74, "forward")
        with self.assertRaisesRegex(ValueError, "'00'"):
            p74.resolve_rungs("00", RUNGS74, "backward")

    def test_each_rung_at_its_precisions_bound(self):
        """y's bound: tolerance.cpp's forward_tolerance for each precision, chosen by the rung's
        declared precision; an error between the two bounds passes a TF32 rung, fails an FP32 one."""
        prec = p74.rung_precisions(RUNGS74 + [RUNG74_TF32])
        self.assertEqual((prec["03"], prec["04"], prec["10"]), ("fp32", "fp32", "tf32"))
        u, ut, floor = 2.0 ** -24, 2.0 ** -11, 2.0 ** -126
        for k, mag in ((16, 3.0), (128, 20.0), (8, 2.0 ** -120)):  # phase-0 and phase-1 cells; a tiny one
            fp32 = (8 * (k + 1) ** 0.5 + 2) * u * mag + (k + 1) * floor  # the bound FP32 rungs always had
            rel = 2 * ut + ut * ut
            tf32 = rel * mag + (8 * (k + 1) ** 0.5 + 2) * 2 * u * (1 + rel) * mag + 2 * (k + 1) * floor
            self.assertEqual(p74.y_bound(prec["04"], float(k), mag), fp32)
            self.assertAlmostEqual(p74.y_bound(prec["10"], float(k), mag) / tf32, 1.0, places=14)
        k, mag = 128.0, 20.0
        b04, b10 = p74.y_bound(prec["04"], k, mag), p74.y_bound(prec["10"], k, mag)
        self.assertGreater(b10, 100 * b04)  # 2^-10 of M against ~90u of M
        err = 10 * b04  # far outside FP32's bound, well inside TF32's
        self.assertEqual([err <= p74.y_bound(prec[r], k, mag) for r in ("03", "04", "10")], [False, False, True])
        err = 1.01 * b10  # outside both
        self.assertEqual([err <= p74.y_bound(prec[r], k, mag) for r in ("04", "10")], [False, False])

    def test_unknown_precision_is_an_error(self):
        for bad in ({**RUNG74_TF32, "precision": "bf16"}, {k: v for k, v in RUNG74_TF32.items() if k != "precision"}):
            with self.assertRaisesRegex(ValueError, r"rung 10 tensor_cores declares precision .*fp32, tf32"):
                p74.rung_precisions(RUNGS74 + [bad])
        with self.assertRaisesRegex(ValueError, "no bound for precision 'fp16'"):
            p74.y_bound("fp16", 16.0, 1.0)
        # a reference built without a rung's precision never lends it another one's bound
        ref = {"bounds": {"fp32": {"e_y": 1.0, "e_z": 1.0, "tol_out": 1.0}}}
        self.assertIs(p74.reference_bounds(ref, "fp32"), ref["bounds"]["fp32"])
        with self.assertRaisesRegex(ValueError, "no 'tf32' bound"):
            p74.reference_bounds(ref, "tf32")

    def test_gradient_bound_by_precision(self):
        import math
        import types
        t = types.SimpleNamespace(sqrt=math.sqrt)  # _sum_bound on plain floats
        mag, n = 3.0, 400.0
        fp32, tf32 = p74._sum_bound(t, mag, n), p74._sum_bound(t, mag, n, "tf32")
        self.assertEqual(fp32, (8.0 * 20.0 + 6.0) * 2.0 ** -24 * mag + n * 2.0 ** -120)
        rel = 2 * 2.0 ** -11 + 2.0 ** -22
        self.assertAlmostEqual(tf32 / (rel * mag + 166.0 * 2.0 ** -23 * (1 + rel) * mag + 2 * n * 2.0 ** -120), 1.0,
                               places=14)
        self.assertGreater(tf32, 50 * fp32)  # the operands' rounding, 2u_t, against (8 sqrt(n) + 6) u
        # grad_x and grad_weight have a bound per precision; grad_bias and grad_multiplier one (FP32 sums)
        bref = {"tol_grad_x_fp32": 1.0, "tol_grad_x_tf32": 2.0, "tol_grad_bias": 3.0}
        self.assertEqual([p74.grad_tolerance(bref, "grad_x", pr) for pr in ("fp32", "tf32")], [1.0, 2.0])
        self.assertEqual(p74.grad_tolerance(bref, "grad_bias", "tf32"), 3.0)
        with self.assertRaisesRegex(ValueError, "no gradient bound for precision 'bf16'"):
            p74.grad_tolerance(bref, "grad_x", "bf16")

    def test_fastest_skips_failed_and_untimed(self):
        vs = [variant74("forward", fwd=0.5, passed=False, name="f03"), variant74("forward", fwd=1.0, name="f04"),
              variant74("forward", name="f01"), variant74("eager", fwd=0.1)]
        self.assertEqual(p74.fastest(vs, "forward", "forward")["variant"], "f04")
        self.assertIsNone(p74.fastest([variant74("forward", fwd=0.5, passed=False)], "forward", "forward"))
        self.assertIsNone(p74.fastest(vs, "pair", "train"))

    def test_targets(self):
        vs = [variant74("eager", fwd=3.0, train=9.0, peak=4000), variant74("compile", fwd=2.0, train=6.0, peak=3000),
              variant74("forward", fwd=0.45, name="f10"), variant74("forward", fwd=1.2, name="f03"),
              variant74("pair", train=1.5, peak=500, name="p09"), variant74("pair", train=5.0, peak=400, name="p08")]
        t = p74.evaluate_targets(vs)
        self.assertEqual([x["status"] for x in t], ["met", "met", "met"])
        self.assertEqual([round(x["value"], 12) for x in t], [0.225, 0.25, 0.125])  # the fastest pair's peak
        self.assertTrue("f10" in t[0]["name"] and "p09" in t[1]["name"])
        vs = [variant74("eager", train=9.0, peak=3000), variant74("compile", fwd=1.0, train=5.0),
              variant74("forward", fwd=0.3), variant74("pair", train=1.6, peak=480)]
        self.assertEqual([x["status"] for x in p74.evaluate_targets(vs)], ["not met"] * 3)  # .3 .32 .16
        vs = [variant74("eager", peak=4000), variant74("compile", fwd=2.0, train=10.0), variant74("forward", fwd=0.5),
              variant74("pair", train=3.0, peak=600)]
        self.assertEqual([x["met"] for x in p74.evaluate_targets(vs)], [True, True, True])  # boundaries are met
        for vs in ([variant74("forward", fwd=1.0), variant74("pair", train=2.0, peak=10)],
                   [variant74("compile", fwd=1.0, train=2.0), variant74("eager", peak=10)]):
            t = p74.evaluate_targets(vs)
            self.assertEqual([x["status"] for x in t], ["not measured"] * 3)
        self.assertIn("none passed", t[0]["name"])


# ---- the tracks' sources in the extension build -----------------------------------------------------------

@unittest.skipUnless(shutil.which("cmake"), "cmake is not on PATH (cmake/Stages.cmake writes the registry)")
class BuildSources(unittest.TestCase):
    def setUp(self):
        cc.ladder_package()  # python/'s package, loaded by its path
        from conv_pool_ladder import _build

        self.b = _build
        self.tmp = Path(tempfile.mkdtemp(prefix="test_compare_"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def handout(self, name, tracks=()):
        """A checkout holding stages, cmake, common and the given tracks/ folders (links)."""
        root = self.tmp / name
        (root / "tracks" if tracks else root).mkdir(parents=True)
        for d in ("stages", "cmake", "common"):
            (root / d).symlink_to(REPO / d, target_is_directory=True)
        for d in tracks:
            (root / "tracks" / d).symlink_to(REPO / "tracks" / d, target_is_directory=True)
        return root

    @unittest.skipUnless((REPO / "tracks" / "p74_backward" / "problem.cpp").is_file()
                         and (REPO / "tracks" / "p38_spatial_softmax" / "problem.cpp").is_file(), "no tracks here")
    def test_with_the_tracks(self):
        b = self.b
        plain = b.wrapper_sources([], self.tmp / "plain")  # the first track's modules: unchanged
        self.assertEqual(b.extension_name([]), "conv_pool_ladder_none")
        self.assertEqual([b.extension_name([], **kw) for kw in ({"with_p38": True}, {"with_p74": True},
                                                                 {"with_p38": True, "with_p74": True})],
                         ["conv_pool_ladder_p38", "conv_pool_ladder_p74", "conv_pool_ladder_p38_p74"])
        for track, other, extra in (("p38", "p74", {"rows.cpp", "rungs/07_subpixel_tiled/subpixel_tiled.cu"}), ("p74", "p38", set())):
            folder = getattr(b, f"{track}_track_dir")()
            names = {p.relative_to(folder).as_posix() for p in getattr(b, f"{track}_sources")()}
            self.assertTrue({"problem.cpp", "oracle.cpp", "tolerance.cpp", "registry.cpp", "device/geometry.cpp",
                             "rungs/00_cpu_reference/cpu_reference.cpp"} | extra <= names, names)
            self.assertFalse([n for n in names if n.startswith("runner") or n == "main.cpp"])
            self.assertNotIn(str(b.CSRC / f"{track}_call.cpp"), plain)
            self.assertFalse([s for s in plain if Path(s).name.startswith(track)])
            sources = b.wrapper_sources([], self.tmp / f"build_{track}", **{f"with_{track}": True})
            base = [Path(s).name for s in sources]
            self.assertEqual(len(base), len(set(base)), "object files are named after the sources' base names")
            # the rest as before, plus what the tracks share (tracks/shared), nothing of the other track
            self.assertEqual({n for n in set(base) - {Path(s).name for s in plain} if not n.startswith(track)},
                             {"tracks_shared__geometry3d.cpp", "tracks_shared__agreement.cpp"})
            self.assertTrue({f"{track}_call.cpp", f"{track}__problem.cpp", f"{track}_device__geometry.cpp",
                             f"{track}_rungs_00_cpu_reference__cpu_reference.cpp"} <= set(base))
            self.assertFalse([n for n in base if n.startswith(other)])
            wrapper = (self.tmp / f"build_{track}" / "src" / f"{track}_device__geometry.cpp").read_text()
            self.assertIn(f'#include "{folder / "device" / "geometry.cpp"}"', wrapper)
        self.assertIn("p38_rungs_07_subpixel_tiled__subpixel_tiled.cu", [Path(s).name for s in b.wrapper_sources(
            [], self.tmp / "build_p38", with_p38=True)])
        both = [Path(s).name for s in b.wrapper_sources([], self.tmp / "both", with_p38=True, with_p74=True)]
        self.assertEqual(len(both), len(set(both)), "tracks/shared once, with both tracks")
        self.assertTrue({"p38_call.cpp", "p74_call.cpp", "p38__registry.cpp", "p74__registry.cpp"} <= set(both))

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

    def test_without_the_tracks(self):
        root = self.handout("handout")  # a checkout without the tracks, as a student handout
        sources = self.b.wrapper_sources([], self.tmp / "build", root)
        self.assertIn(str(self.b.CSRC / "stage_op.cpp"), sources)  # the rest unchanged
        for track in ("p38", "p74"):
            self.assertIsNone(getattr(self.b, f"{track}_track_dir")(root))
            self.assertEqual(getattr(self.b, f"{track}_sources")(root), [])
            self.assertNotIn(str(self.b.CSRC / f"{track}_call.cpp"), sources)
            self.assertFalse([s for s in sources if Path(s).name.startswith(track)])
            with self.assertRaisesRegex(RuntimeError, "not in this checkout"):
                self.b.wrapper_sources([], self.tmp / f"build_{track}", root, **{f"with_{track}": True})

    @unittest.skipUnless((REPO / "tracks" / "p74_backward" / "problem.cpp").is_file(), "no p74 track here")
    def test_p74_without_p38(self):
        root = self.handout("only74", ("p74_backward", "shared"))  # p74 needs tracks/shared only
        self.assertIsNotNone(self.b.p74_track_dir(root))
        base = [Path(s).name for s in self.b.wrapper_sources([], self.tmp / "build", root, with_p74=True)]
        self.assertIn("tracks_shared__geometry3d.cpp", base)
        self.assertFalse([n for n in base if n.startswith("p38")])


if __name__ == "__main__":
    outcome = unittest.main(exit=False).result
    bad = len(outcome.failures) + len(outcome.errors)
    ok = outcome.testsRun > 0 and outcome.wasSuccessful()
    print(f"test_compare: {outcome.testsRun} tests, "
          + ("all passed" if ok else f"{bad} failed" if bad else "none ran"))
    sys.exit(0 if ok else 1)
