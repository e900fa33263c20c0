#!/usr/bin/env python3
"""CPU tests of scripts/kernelbench_eval.py: KernelBench's allclose verdict (its asymmetry, NaN,
the all-zero output), timing statistics and KernelBench's rounding, speedups and the
excessive-speedup guard, the JSON record's shape, --append, argument parsing, the problems'
sizes against python/conv_pool_ladder (read with ast: no torch), the skip paths without torch
or without a GPU (exit 0), and docs/kernelbench.md's number markers against a sample record.

    python3 scripts/test_kernelbench_eval.py          # unittest; or: python3 -m pytest scripts/test_kernelbench_eval.py
    python3 scripts/test_kernelbench_eval.py --sample /tmp/kernelbench_sample.json   # writes a sample result, no tests
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # the packages' root: this test is an entry point
from tooling.checks import kernelbench_eval as kb  # noqa: E402
from tooling.results import update_results  # noqa: E402

DOC = REPO / "docs" / "kernelbench.md"
COMMITTED_JSON = "results/kernelbench/kernelbench_h200.json"  # the doc's num-src alias "kb"
# The tensor-core rungs as ModelNew (docs/kernelbench.md), one committed run a card, by the doc's num-src alias
TC_JSONS = {"kbt": "results/kernelbench/kernelbench_tc_h100.json",
            "kbt2": "results/kernelbench/kernelbench_tc_h200.json"}


# ---- a plausible result, built by the script's own functions ----------------------------------------

def _check(diff, ok):
    return {"pass": ok, "max_abs_diff": diff, "worst_ratio": diff / 1e-4}


def _timing(ms):
    return kb.timing_stats([ms * f for f in (0.99, 1.0, 1.01)])


def sample_trials(pid, n=5):
    """Synthetic trials of problem pid with the keys evaluate() produces (numbers made up)."""
    out = []
    for i in range(n):
        t = {"seed": 1000 + i, "zeros_pass": pid == "38", "output_abs_max": {"42": 55.6, "38": 2.2e-5, "74": 1.9}[pid]}
        if pid == "74":
            t["checks"] = {"default": _check(2.8e-4 - i * 1e-5, False), "tf32_off": _check(1.2e-6, True),
                           "tf32_rna": _check(3.0e-6, True), "tf32_trunc": _check(3.1e-4, False)}
            t["vs_fp64"] = {"reference_tf32": 2.8e-4, "reference_fp32": 8.0e-7, "model_new": 6.0e-7,
                            "model_new_tf32_rna": 2.8e-4, "model_new_tf32_trunc": 3.5e-4}
        else:
            d = 1.5e-5 if pid == "42" else 1.3e-9
            t["checks"] = {"default": _check(d, True), "tf32_off": _check(d / 3, True)}
            t["vs_fp64"] = {"reference_tf32": d, "reference_fp32": d / 3, "model_new": d / 4}
        if pid == "42":
            t["oracles"] = {"literal_vs_identity": 1.4e-11, "model_new_vs_identity": 4.0e-6,
                            "reference_tf32_vs_identity": 1.6e-5}
        out.append(t)
    return out


SAMPLE_MS = {"42": {"model_new": 0.258, "eager_grad": 6.03, "eager": 6.01, "compile": 3.15, "eager_tf32_off": 15.6,
                    "compile_tf32_off": 12.1},
             "38": {"model_new": 3.61, "eager_grad": 4.7, "eager": 4.58, "compile": 2.06, "eager_tf32_off": 12.4,
                    "compile_tf32_off": 10.2},
             "74": {"model_new": 0.452, "eager_grad": 1.31, "eager": 1.26, "compile": 0.647, "eager_tf32_off": 2.98,
                    "compile_tf32_off": 2.61, "model_new_tf32_rna": 0.47, "model_new_tf32_trunc": 0.469}}


def sample_result():
    """A whole result as main() writes it, from synthetic trials and timings."""
    problems = {}
    for pid in kb.PROBLEMS:
        timing = {k: _timing(v) for k, v in SAMPLE_MS[pid].items()}
        problems[f"p{pid}"] = kb.problem_record(pid, sample_trials(pid), timing,
                                                {"device": "NVIDIA H200", "date_utc": "2026-01-01T00:00:00Z",
                                                 "weights_equal_from_seed": True})
    meta = {"device": "NVIDIA H200", "capability": [9, 0], "sm_count": 132, "torch": "2.11.0+cu130", "cuda": "13.0",
            "cudnn": 91900, "python": "3.12.3", "date_utc": "2026-01-01T00:00:00Z", "seed": 42, "trials": 5,
            "reps": 100, "tf32_defaults": {"cudnn_allow_tf32": True, "cuda_matmul_allow_tf32": False}}
    return {"skipped": False, "meta": meta, "procedure": kb.procedure(), "problems": problems}


# ---- the verdict, statistics, speedups -----------------------------------------------------------------

class AllcloseVerdict(unittest.TestCase):
    def test_bound_uses_the_second_argument(self):
        # torch.allclose(ref, new): |ref - new| <= atol + rtol*|new|. With ref 0 and new just
        # above atol the order decides: the bound grows with |new| only.
        new = 1.00005e-4
        self.assertTrue(kb.within(0.0, new))
        self.assertFalse(kb.within(new, 0.0))

    def test_tolerance_values(self):
        self.assertEqual((kb.KB_ATOL, kb.KB_RTOL), (1e-4, 1e-4))
        self.assertAlmostEqual(kb.allowed_diff(50.0), 1e-4 + 5e-3)
        self.assertTrue(kb.within(55.0, 55.0 + 5.0e-3))   # |y| ~ 55 (problem 42): 5.6e-3 allowed
        self.assertFalse(kb.within(55.0, 55.0 + 6.0e-3))

    def test_problem74_scale(self):
        # outputs of order 1: a difference of 2.8e-4 fails, 1e-6 passes
        self.assertFalse(kb.within(1.0, 1.0 + 2.8e-4))
        self.assertTrue(kb.within(1.0, 1.0 + 1e-6))

    def test_zero_output_passes_when_reference_is_small(self):
        # problem 38's outputs are ~1e-5: an all-zero "kernel" would pass
        self.assertTrue(kb.within(2.2e-5, 0.0))
        self.assertFalse(kb.within(2.2e-4, 0.0))

    def test_nan_and_inf(self):
        self.assertFalse(kb.within(math.nan, math.nan))
        self.assertFalse(kb.within(1.0, math.nan))
        self.assertTrue(kb.within(math.inf, math.inf))
        self.assertFalse(kb.within(math.inf, -math.inf))


class TimingAndGuard(unittest.TestCase):
    def test_kb_round(self):
        self.assertEqual(kb.kb_round(0.25821), 0.258)
        self.assertEqual(kb.kb_round(23.349), 23.3)
        self.assertEqual(kb.kb_round(6019.2), 6020.0)
        self.assertIsNone(kb.kb_round(None))

    def test_timing_stats(self):
        s = kb.timing_stats([1.0, 2.0, 6.0])
        self.assertEqual(s["mean_ms"], 3.0)
        self.assertEqual(s["median_ms"], 2.0)
        self.assertAlmostEqual(s["std_ms"], math.sqrt(14 / 3))  # population std, as numpy's
        self.assertEqual((s["min_ms"], s["max_ms"], s["trials"]), (1.0, 6.0, 3))
        self.assertEqual(kb.timing_stats([0.25821] * 4)["kb_mean_ms"], 0.258)
        with self.assertRaises(ValueError):
            kb.timing_stats([])

    def test_speedup(self):
        self.assertAlmostEqual(kb.speedup(6.02, 0.258), 23.33, places=2)
        self.assertIsNone(kb.speedup(None, 1.0))
        self.assertIsNone(kb.speedup(1.0, 0.0))
        self.assertIsNone(kb.speedup(-1.0, 1.0))  # KernelBench's runtime -1: not timed

    def test_guard_is_strict(self):
        self.assertFalse(kb.excessive(10.0))
        self.assertTrue(kb.excessive(10.01))
        self.assertFalse(kb.excessive(1.27))
        self.assertIsNone(kb.excessive(None))
        self.assertEqual(kb.KB_EXCESSIVE, 10.0)

    def test_speedups_from_rounded_means(self):
        t = {"model_new": {"kb_mean_ms": 0.258}, "eager": {"kb_mean_ms": 6.02}, "eager_grad": {"kb_mean_ms": 6.03},
             "compile": {"error": "RuntimeError: x"}}
        s = kb.speedups(t)
        self.assertAlmostEqual(s["eager"], 6.02 / 0.258)
        self.assertAlmostEqual(s["guard"], 6.03 / 0.258)
        self.assertIsNone(s["compile"])  # failed: present, None
        self.assertIsNone(s["eager_tf32_off"])  # not timed: present, None
        self.assertNotIn("tf32_rna_vs_eager", s)  # optional ones only when timed

    def test_constants(self):
        self.assertEqual(kb.KB_FLUSH_BYTES, 256 * 2**20)
        self.assertEqual((kb.KB_CORRECT_TRIALS, kb.KB_PERF_TRIALS, kb.KB_SEED), (5, 100, 42))
        self.assertEqual((kb.KB_WARMUP_NEW, kb.KB_WARMUP_REF, kb.KB_DISCARD_FIRST), (3, 5, 1))


class Records(unittest.TestCase):
    def test_summarize_check(self):
        s = kb.summarize_check([_check(1e-5, True), _check(2.8e-4, False), _check(math.nan, False)])
        self.assertEqual((s["passed"], s["trials"], s["all_passed"]), (1, 3, False))
        self.assertEqual(s["correctness_trials"], "(1 / 3)")
        self.assertEqual(s["max_abs_diff_max"], math.inf)  # a NaN counts as the worst
        self.assertTrue(kb.summarize_check([_check(1e-5, True)] * 5)["all_passed"])
        self.assertFalse(kb.summarize_check([])["all_passed"])

    def test_problem_record_shape(self):
        r = sample_result()["problems"]
        p74, p42, p38 = r["p74"], r["p42"], r["p38"]
        self.assertEqual(p74["correctness"]["default"]["passed"], 0)
        self.assertEqual(p74["correctness"]["tf32_off"]["passed"], 5)
        self.assertEqual(p74["correctness"]["default"]["correctness_trials"], "(0 / 5)")
        self.assertEqual(len(p74["correctness"]["default"]["max_abs_diff"]), 5)
        self.assertAlmostEqual(p74["correctness"]["default"]["max_abs_diff_max"], 2.8e-4)
        self.assertEqual(set(p74["vs_fp64"]), {"reference_tf32", "reference_fp32", "model_new", "model_new_tf32_rna",
                                               "model_new_tf32_trunc"})
        self.assertIn("tf32_rna_vs_eager", p74["speedup"])
        self.assertNotIn("oracles", p74)
        self.assertIn("literal_vs_identity", p42["oracles"])
        self.assertEqual(p38["zeros_pass"], 5)
        self.assertEqual(p42["zeros_pass"], 0)
        for p in (p42, p38, p74):
            self.assertEqual(set(kb.CORE_SPEEDUPS) - set(p["speedup"]), set())
            self.assertEqual(p["excessive_speedup"], p["speedup"]["guard"] > 10)
            self.assertTrue(p["weights_equal_from_seed"])
        self.assertTrue(p42["excessive_speedup"])
        self.assertFalse(p74["excessive_speedup"])
        self.assertFalse(p74["kb_speedup_reported"])  # KernelBench times only a correct kernel
        self.assertTrue(p42["kb_speedup_reported"])

    def test_json_round_trip(self):
        res = sample_result()
        back = json.loads(json.dumps(res))
        self.assertEqual(back["problems"]["p42"]["x_shape"], [16, 64, 512, 512])
        self.assertEqual(back["procedure"]["kernelbench_commit"], kb.KB_COMMIT)

    def test_merge(self):
        old = {"skipped": False, "meta": {"a": 1}, "problems": {"p42": {"x": 1}, "p38": {"x": 2}}}
        new = {"skipped": False, "meta": {"a": 2}, "problems": {"p38": {"x": 3}}}
        m = kb.merge(old, new)
        self.assertEqual(m["problems"], {"p42": {"x": 1}, "p38": {"x": 3}})
        self.assertEqual(m["meta"], {"a": 2})
        self.assertIs(kb.merge({"skipped": True}, new), new)

    def test_summary_lines(self):
        text = "\n".join(kb.summary_lines(sample_result()["problems"]["p42"]))
        self.assertIn("FLAGGED", text)
        self.assertIn("(5 / 5)", text)


class Arguments(unittest.TestCase):
    def test_defaults_and_quick(self):
        a = kb.parse_args([])
        self.assertEqual((a.problems, a.trials, a.reps, a.seed), (["42", "38", "74"], 5, 100, 42))
        self.assertEqual(kb.parse_args(["--quick"]).reps, 10)
        self.assertEqual(kb.parse_args(["--quick", "--reps", "7"]).reps, 7)
        self.assertEqual(kb.parse_args(["--problems", "74, 42"]).problems, ["74", "42"])

    def test_rung_choices(self):
        self.assertEqual(kb.parse_args([]).model_kwargs, {})
        a = kb.parse_args(["--problems", "38,74", "--rung", "38=08", "--rung", "74 = 10:09"])
        self.assertEqual(a.model_kwargs, {"38": {"rung": "08"}, "74": {"forward_rung": "10", "backward_rung": "09"}})
        self.assertEqual(kb.rung_choices(["74=10"]), {"74": {"forward_rung": "10"}})
        self.assertEqual(kb.model_new_name("38", {}), kb.PROBLEMS["38"]["model_new"])
        self.assertEqual(kb.model_new_name("38", {"rung": "08"}), "conv_pool_ladder.p38.ModelNew(rung='08') (--rung)")
        for bad in (["38"], ["38="], ["42=13"], ["38=08:09"], ["74=:09"], ["74=10:"], ["38=07", "38=08"]):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                kb.rung_choices(bad)

    def test_errors(self):
        import contextlib
        import io

        for argv in (["--problems", "43"], ["--problems", ""], ["--trials", "0"], ["--append"], ["--rung", "42=13"],
                     ["--problems", "74", "--rung", "38=08"]):
            with self.subTest(argv=argv), contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
                kb.parse_args(argv)


class ProblemSizes(unittest.TestCase):
    def constants(self, name):
        """A module's plain constants, read without importing it (torch): literals, and tuples of
        constants read before them (multiplier_shape = (out_channels, 1, 1, 1))."""
        tree = ast.parse((REPO / "python" / "conv_pool_ladder" / name).read_text())
        out = {}
        for node in tree.body:
            if not isinstance(node, ast.Assign):
                continue
            try:
                value = eval(compile(ast.Expression(node.value), name, "eval"), {"__builtins__": {}}, dict(out))
            except Exception:  # a call, a class, a name not read yet: not a constant
                continue
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = value
                elif isinstance(t, ast.Tuple):
                    out.update({e.id: v for e, v in zip(t.elts, value)})
        return out

    def test_p38(self):
        c = self.constants("p38.py")
        s = kb.PROBLEMS["38"]
        self.assertEqual(s["x_shape"], (c["batch_size"], c["in_channels"], c["depth"], c["height"], c["width"]))
        self.assertEqual(s["init_inputs"], [c["in_channels"], c["out_channels"], c["kernel_size"], c["stride"],
                                            c["padding"], c["output_padding"], c["pool_kernel_size"], c["clamp_min"],
                                            c["clamp_max"]])

    def test_p74(self):
        c = self.constants("p74.py")
        s = kb.PROBLEMS["74"]
        self.assertEqual(s["x_shape"], (c["batch_size"], c["in_channels"], c["depth"], c["height"], c["width"]))
        self.assertEqual(s["init_inputs"], [c["in_channels"], c["out_channels"], c["kernel_size"], c["stride"],
                                            c["padding"], c["output_padding"], c["multiplier_shape"]])

    def test_p42(self):
        # KernelBench's sizes (its level2 file for problem 42; docs/problem.md)
        self.assertEqual(kb.PROBLEMS["42"]["x_shape"], (16, 64, 512, 512))
        self.assertEqual(kb.PROBLEMS["42"]["init_inputs"], [64, 128, 3, (128, 1, 1)])


# ---- the skip paths (subprocess, fake torch) -------------------------------------------------------------

FAKE_NO_GPU = "class _C:\n    @staticmethod\n    def is_available():\n        return False\ncuda = _C()\n"
FAKE_BROKEN = "raise ImportError('libcudart.so: cannot open shared object file')\n"


class SkipPaths(unittest.TestCase):
    def run_with(self, torch_src, *args):
        d = tempfile.mkdtemp(prefix="kbe_")
        self.addCleanup(lambda: __import__("shutil").rmtree(d))
        (Path(d) / "torch").mkdir()
        (Path(d) / "torch" / "__init__.py").write_text(torch_src)
        env = dict(os.environ, PYTHONPATH=d, PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.run([sys.executable, str(HERE / "kernelbench_eval.py"), *args], capture_output=True, text=True,
                           env=env, timeout=60, cwd=d)
        return p, Path(d)

    def test_no_gpu(self):
        p, d = self.run_with(FAKE_NO_GPU, "--json", "out.json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip().splitlines(), ["kernelbench_eval: SKIPPED: no CUDA device "
                                                         "(torch.cuda.is_available() is False)"])
        self.assertEqual(json.loads((d / "out.json").read_text())["skipped"], True)

    def test_no_torch(self):
        p, _ = self.run_with(FAKE_BROKEN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("SKIPPED: PyTorch is not importable (ImportError", p.stdout)

    def test_append_keeps_an_existing_file(self):
        d = tempfile.mkdtemp(prefix="kbe_")
        self.addCleanup(lambda: __import__("shutil").rmtree(d))
        target = Path(d) / "kb.json"
        target.write_text('{"skipped": false, "problems": {"p42": {}}}\n')
        p, _ = self.run_with(FAKE_NO_GPU, "--json", str(target), "--append")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("p42", json.loads(target.read_text())["problems"])


# ---- docs/kernelbench.md's markers -------------------------------------------------------------------------

@unittest.skipUnless(DOC.is_file(), "docs/kernelbench.md is not in this checkout")
class DocMarkers(unittest.TestCase):
    def test_alias_names_the_committed_path(self):
        self.assertRegex(DOC.read_text(), rf"<!-- num-src: kb={re.escape(COMMITTED_JSON)}[ >]")

    def test_aliases_name_the_tensor_core_runs(self):
        text = DOC.read_text()
        for alias, rel in TC_JSONS.items():
            with self.subTest(rel=rel):
                self.assertRegex(text, rf"<!-- num-src: [^>]*\b{alias}={re.escape(rel)}[ >]")

    def test_every_marker_resolves_against_a_sample(self):
        text = DOC.read_text()
        self.assertGreater(len(update_results.NUM.findall(text)), 20)
        with tempfile.TemporaryDirectory(prefix="kbe_") as d:
            root = Path(d)
            (root / COMMITTED_JSON).parent.mkdir(parents=True)
            # the default ModelNews' run and the tensor-core rungs' runs
            for rel in (COMMITTED_JSON, *TC_JSONS.values()):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(json.dumps(sample_result()))
            for rel in ("results/ladder_h200.json", "results/p74/pytorch_h200.txt"):  # other files the doc quotes
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text((REPO / rel).read_text())
            new, stale, errors = update_results.update_marks(text, root)
            self.assertEqual(errors, [])
            self.assertNotIn("?", "".join(m.group("text") for m in update_results.NUM.finditer(new)))

    def test_doc_is_in_the_marked_list(self):
        self.assertIn(DOC, update_results.marked_files(REPO))


# ---- the committed tensor-core runs: each file consistent with itself (not the targets: a card may miss them) ----

class CommittedTensorCoreRuns(unittest.TestCase):
    RUNGS = {"p38": "rung='08'", "p74": "forward_rung='10', backward_rung='11'"}  # --rung 38=08 --rung 74=10:11

    def test_each_run(self):
        for rel in TC_JSONS.values():
            path = REPO / rel
            with self.subTest(rel=rel):
                if not path.is_file():
                    self.skipTest(f"{rel} is not in this checkout")
                res = json.loads(path.read_text())
                self.assertFalse(res["skipped"])
                self.assertEqual(res["meta"]["argv"][:6],
                                 ["--problems", "38,74", "--rung", "38=08", "--rung", "74=10:11"])
                self.assertEqual(set(res["problems"]), set(self.RUNGS))
                for pid, rung in self.RUNGS.items():
                    p = res["problems"][pid]
                    self.assertIn(rung, p["model_new"])
                    self.assertEqual(p["device"], res["meta"]["device"])
                    for check in p["correctness"].values():  # the counts agree with the per-trial diffs
                        self.assertEqual(check["trials"], kb.KB_CORRECT_TRIALS)
                        self.assertLessEqual(check["passed"], check["trials"])
                        self.assertEqual(check["all_passed"], check["passed"] == check["trials"])
                        self.assertEqual(check["max_abs_diff_max"], max(check["max_abs_diff"]))
                    # the speedups are the script's own, from the rounded means it stored
                    for name, value in kb.speedups(p["timing"]).items():
                        self.assertAlmostEqual(p["speedup"][name], value, places=12, msg=f"{pid} {name}")
                    self.assertEqual(p["excessive_speedup"], kb.excessive(p["speedup"]["guard"]))
                    self.assertTrue(p["weights_equal_from_seed"])
                    # the tensor-core rungs pass at PyTorch's defaults: the record's reason to exist
                    self.assertEqual(p["correctness"]["default"]["passed"], kb.KB_CORRECT_TRIALS)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sample":
        Path(sys.argv[2]).write_text(json.dumps(sample_result(), indent=2) + "\n")
        print(f"wrote {sys.argv[2]}")
        sys.exit(0)
    unittest.main()
