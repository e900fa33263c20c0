#!/usr/bin/env python3
"""Tests of what scripts/compare_pytorch.py decides without torch or a GPU: which profiled kernel
is cuDNN's convolution (pick_conv_kernel, is_conv_kernel, short_kernel_name), the targets of step
6 from a run's timings (the four of the first ladder and issue 26's: met, missed, not measured),
and that the default stages name the Hopper rungs 14, 15 and 16 by name.

    python3 scripts/test_compare_pytorch.py    # unittest; a one-line summary, exit 0 when all pass
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # the packages' root: this test is an entry point
from tooling.checks import compare_pytorch as cp  # noqa: E402

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


class ConvKernel(unittest.TestCase):
    def test_names(self):
        for name in (DGRAD, SPLITK, CUTLASS, "implicit_convolve_sgemm", "sm80_xmma_fprop_implicit_gemm_tf32"):
            self.assertTrue(cp.is_conv_kernel(name), name)
        for name in (FILL, BIAS, TO_NHWC, CONVERT, TRITON, MEMSET, "Memcpy DtoD (Device -> Device)",
                     "void at::native::reduce_kernel<512, 1>(...)"):
            self.assertFalse(cp.is_conv_kernel(name), name)

    def test_largest_conv_kernel_per_call_median_over_calls(self):
        # Three calls: the layout change (nchwToNhwc) takes longer than the conv kernel in call 0
        # and must still lose; a small split-K partner never wins; times in microseconds.
        events = [(TO_NHWC, 9000.0, 0), (DGRAD, 2000.0, 0), (SPLITK, 50.0, 0), (BIAS, 300.0, 0),
                  (DGRAD, 2400.0, 1), (SPLITK, 60.0, 1), (BIAS, 310.0, 1), (FILL, 5000.0, 1),
                  (DGRAD, 2100.0, 2), (SPLITK, 40.0, 2), (BIAS, 290.0, 2)]
        t = cp.pick_conv_kernel(events)
        self.assertEqual(t["kernel"], DGRAD)
        self.assertEqual((t["median_ms"], t["min_ms"], t["max_ms"]), (2.1, 2.0, 2.4))
        self.assertEqual((t["reps"], t["calls"], t["picks_other_kernel"]), (3, 3, 0))
        self.assertEqual((t["kernels_per_call"], t["kernels_per_call_max"]), (4, 4))  # 4, 4, 3 activities
        self.assertEqual(t["other_kernels"], sorted([TO_NHWC, SPLITK, BIAS, FILL]))

    def test_launches_of_one_name_add_up_within_a_call(self):
        # Two launches of the split-K kernel (2 x 1.5 ms) beat one 2.5 ms launch of another kernel.
        events = [(SPLITK, 1500.0, 0), (SPLITK, 1500.0, 0), (CUTLASS, 2500.0, 0)]
        t = cp.pick_conv_kernel(events)
        self.assertEqual((t["kernel"], t["median_ms"], t["kernels_per_call"]), (SPLITK, 3.0, 3))

    def test_most_frequent_pick_and_calls_without_activity(self):
        # CUTLASS wins calls 0 and 2, DGRAD call 1; call 3 recorded nothing (calls=4).
        events = [(CUTLASS, 1000.0, 0), (DGRAD, 900.0, 0), (DGRAD, 5000.0, 1), (CUTLASS, 1200.0, 2)]
        t = cp.pick_conv_kernel(events, calls=4)
        self.assertEqual(t["kernel"], CUTLASS)
        self.assertEqual((t["median_ms"], t["reps"], t["calls"], t["picks_other_kernel"]), (1.1, 2, 4, 1))
        self.assertEqual((t["kernels_per_call"], t["kernels_per_call_max"]), (1, 2))  # 2, 1, 1, 0

    def test_nothing_matches(self):
        with self.assertRaisesRegex(LookupError, r"no convolution-like kernel .* 3 GPU activities of 2 calls: "):
            cp.pick_conv_kernel([(FILL, 10.0, 0), (TRITON, 500.0, 0), (TO_NHWC, 20.0, 1)])
        with self.assertRaisesRegex(LookupError, "the profiler recorded none"):
            cp.pick_conv_kernel([], calls=5)

    def test_short_names(self):
        self.assertEqual(cp.short_kernel_name(CUTLASS, 80),
                         "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nhwc_align4>")
        self.assertEqual(len(cp.short_kernel_name(CUTLASS)), 64)  # the default width
        self.assertEqual(cp.short_kernel_name(TO_NHWC, 200),
                         "cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>")
        short = cp.short_kernel_name(DGRAD, 40)
        self.assertEqual((len(short), short), (40, DGRAD[:37] + "..."))
        self.assertEqual(cp.short_kernel_name("k"), "k")


STAGE_NAMES = {"09": "async_copy", "10": "tensor_cores", "11": "three_tf32", "14": "multistage_mma",
               "15": "wgmma", "16": "three_tf32_wgmma"}


def timing(kind, ms, stage=None):
    t = {"variant": f"{kind} {stage or ''}".strip(), "kind": kind, "median_ms": ms}
    if stage:
        t["stage"] = stage
    return t


def run(convt_fp32=10.0, compile_ms=4.0, cudnn_kernel=2.5, stages=None):
    """Timings of a run; None leaves a kind out (cudnn_kernel: an error record in its place)."""
    ts = [timing("eager", 12.0), timing("eager_fp32", 15.0), timing("convt_tf32", 5.0)]
    if convt_fp32 is not None:
        ts.append(timing("convt_fp32", convt_fp32))
    if compile_ms is not None:
        ts.append(timing("compile", compile_ms))
    ts.append(timing("cudnn_kernel", cudnn_kernel) if cudnn_kernel is not None else
              {"variant": "cuDNN's conv kernel", "kind": "cudnn_kernel", "error": "LookupError: ..."})
    for sid, ms in (stages or {}).items():
        ts.append(timing("stage", ms, sid))
    return ts


class Targets(unittest.TestCase):
    def by_name(self, ts, names=STAGE_NAMES):
        return {t["name"]: t for t in cp.targets(ts, names)}

    def test_table(self):
        self.assertEqual(len(cp.TARGETS), 9)
        self.assertEqual([t[:4] for t in cp.TARGETS[4:]], [
            ("wgmma", "kind:compile", 0.7, "<="), ("wgmma", "kind:cudnn_kernel", 1.13, "<="),
            ("three_tf32_wgmma", "stage:wgmma", 2.6, "<="), ("three_tf32_wgmma", "kind:convt_fp32", 0.4, "<="),
            ("multistage_mma", "stage:async_copy", 1.0, "<")])
        for _, ref, _, _, _ in cp.TARGETS:
            what, key = ref.split(":")
            self.assertTrue(what == "stage" or key in cp.REFERENCE_LABELS, ref)

    def test_all_met(self):
        # wgmma 2.5: 0.625 x compile, 1.0 x the kernel; 16: 3.8 = 1.52 x wgmma, 0.38 x convt_fp32;
        # 14: 3.0 < 09 at 6.0; the first four met too.
        ts = run(stages={"09": 6.0, "10": 1.6, "11": 5.0, "14": 3.0, "15": 2.5, "16": 3.8})
        t = self.by_name(ts)
        self.assertEqual(len(t), 9)
        self.assertTrue(all(x["met"] is True and x["status"] == "met" for x in t.values()), t)
        expect = {
            "stage 15 wgmma <= 0.7 x torch.compile": (0.625, 2.5, 4.0),
            "stage 15 wgmma <= 1.13 x cuDNN's conv kernel alone (TF32, channels_last)": (1.0, 2.5, 2.5),
            "stage 16 three_tf32_wgmma <= 2.6 x stage 15 wgmma": (1.52, 3.8, 2.5),
            "stage 16 three_tf32_wgmma <= 0.4 x cuDNN ConvTranspose2d alone (FP32)": (0.38, 3.8, 10.0),
            "stage 14 multistage_mma < stage 09 async_copy": (0.5, 3.0, 6.0),
            "stage 10 tensor_cores <= 0.8 x torch.compile": (0.4, 1.6, 4.0),
        }
        for name, (value, ms, ref) in expect.items():
            self.assertIn(name, t)
            self.assertAlmostEqual(t[name]["value"], value, places=12)
            self.assertEqual((t[name]["ms"], t[name]["reference_ms"]), (ms, ref))
        self.assertEqual(t["stage 14 multistage_mma < stage 09 async_copy"]["note"], "meant for the --small run")
        self.assertNotIn("note", t["stage 15 wgmma <= 0.7 x torch.compile"])

    def test_missed(self):
        # wgmma 3.0: 0.75 x compile (> 0.7), 1.2 x the kernel (> 1.13); 16: 8.0 = 2.667 x wgmma
        # (> 2.6), 0.8 x convt_fp32 (> 0.4); 14 equal to 09: not strictly below.
        ts = run(stages={"09": 6.0, "14": 6.0, "15": 3.0, "16": 8.0})
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
        t = self.by_name(run(convt_fp32=32.5, stages={"15": 5.0, "16": 13.0}))
        for name in ("stage 16 three_tf32_wgmma <= 2.6 x stage 15 wgmma",
                     "stage 16 three_tf32_wgmma <= 0.4 x cuDNN ConvTranspose2d alone (FP32)"):
            self.assertEqual(t[name]["value"], t[name]["limit"])
            self.assertIs(t[name]["met"], True)

    def test_not_measured(self):
        # No stage 16 folder (names without 16), the profiler failed, no torch.compile; 10 and 11
        # untimed: only 14 < 09 is measured.
        names = {k: v for k, v in STAGE_NAMES.items() if k != "16"}
        t = self.by_name(run(compile_ms=None, cudnn_kernel=None, stages={"09": 6.0, "14": 5.0, "15": 2.5}), names)
        self.assertEqual(len(t), 9)
        nm = {n: x for n, x in t.items() if x["status"] == "not measured"}
        self.assertEqual(len(nm), 8)
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


class Defaults(unittest.TestCase):
    def test_hopper_rungs_by_name(self):
        names = cp.DEFAULT_STAGES.split(",")
        self.assertEqual(names[-3:], ["multistage_mma", "wgmma", "three_tf32_wgmma"])
        self.assertFalse([n for n in names if n[:1].isdigit()], "default stages are named, not numbered")
        self.assertEqual(len(names), len(set(names)))
        # the names are the folders' (stage 16 may not have its folder yet: skipped by the script)
        folders = {p.name[3:]: p.name[:2] for p in (REPO / "stages").glob("[0-9][0-9]_*") if p.is_dir()}
        self.assertEqual((folders.get("multistage_mma"), folders.get("wgmma")), ("14", "15"))
        self.assertEqual(folders.get("three_tf32_wgmma", "16"), "16")
        self.assertTrue(all(n in folders for n in names if n != "three_tf32_wgmma"), names)


if __name__ == "__main__":
    outcome = unittest.main(exit=False).result
    bad = len(outcome.failures) + len(outcome.errors)
    ok = outcome.testsRun > 0 and outcome.wasSuccessful()
    print(f"test_compare_pytorch: {outcome.testsRun} tests, "
          + ("all passed" if ok else f"{bad} failed" if bad else "none ran"))
    sys.exit(0 if ok else 1)
