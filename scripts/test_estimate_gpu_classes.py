#!/usr/bin/env python3
"""Tests of scripts/estimate_gpu_classes.py on the committed results and on synthetic runs.

    python3 scripts/test_estimate_gpu_classes.py
"""

from __future__ import annotations

import copy
import io
import re
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages' root: this test is an entry point
from tooling.results import estimate_gpu_classes as est  # noqa: E402

REPO = est.REPO
LADDER = REPO / "results" / "ladder_h200.json"
POOL = REPO / "results" / "pool_only_h200.json"
PYTORCH = REPO / "results" / "pytorch_h200.json"


def table_cells(block: str, label: str) -> list[str]:
    """The cells of the first table row whose first cell is `label`."""
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == label:
            return cells
    raise AssertionError(f"no row '{label}' in the block")


class Specs(unittest.TestCase):
    def test_formula_matches_the_vendors_fp32_figure(self):
        for g in est.SPECS.values():
            self.assertAlmostEqual(g.fp32_tflops / g.fp32_tflops_quoted, 1.0, delta=0.015, msg=g.name)

    def test_shared_memory_per_block_is_the_opt_in_limit_of_its_architecture(self):
        expected = {75: (64, 64), 80: (163, 164), 86: (99, 100), 89: (99, 100), 90: (227, 228)}
        for g in est.SPECS.values():
            self.assertEqual((g.smem_block_kib, g.smem_sm_kib), expected[g.sm], g.name)

    def test_fp32_lanes_follow_the_architecture(self):
        for g in est.SPECS.values():
            self.assertEqual(g.fp32_lanes, 64 if g.sm in (75, 80) else 128, g.name)

    def test_reference_gpu_is_checked_against_the_run(self):
        run = est.load(LADDER)
        self.assertEqual(est.reference_gpu(run).key, "h200")
        bad = copy.deepcopy(run)
        bad["fp32_peak_tflops"] = 40.0
        with self.assertRaises(SystemExit):
            est.reference_gpu(bad)
        bad = copy.deepcopy(run)
        bad["device"] = "NVIDIA Imaginary GPU, 10 SMs"
        with self.assertRaises(SystemExit):
            est.reference_gpu(bad)


class Classify(unittest.TestCase):
    ref = est.SPECS["h200"]

    def test_roofs_and_fallbacks(self):
        # 1 GB in 0.25 ms = 4 TB/s, 83% of 4.8 TB/s: DRAM
        self.assertEqual(est.classify(0.25, (1e9, 0.0), self.ref), "DRAM")
        # 6.2e11 flop in 18 ms = 34 TFLOP/s, 51% of 66.9: FP32
        self.assertEqual(est.classify(18.0, (1e9, 6.2e11), self.ref), "FP32")
        # near neither roof
        self.assertEqual(est.classify(188.0, (1e9, 6.2e11), self.ref), "issue")
        self.assertEqual(est.classify(0.01, (1e4, 1e4), self.ref), "launch")
        self.assertEqual(est.classify(33.0, (2.16e9, 5e8), self.ref, "per_thread_loop", "pool"), "latency")
        # a roof wins over the latency list: the list is for phases near neither roof
        self.assertEqual(est.classify(0.5, (2.16e9, 5e8), self.ref, "per_thread_loop", "pool"), "DRAM")

    def test_ratios(self):
        t4, h200 = est.SPECS["t4"], self.ref
        self.assertAlmostEqual(est.ratio("DRAM", h200, t4), 4800 / 320)
        self.assertAlmostEqual(est.ratio("FP32", h200, t4), h200.fp32_tflops / t4.fp32_tflops)
        self.assertAlmostEqual(est.ratio("issue", h200, t4), (132 * 1.98) / (40 * 1.59))
        self.assertEqual(est.ratio("latency", h200, t4), 1.0)
        self.assertEqual(est.ratio("launch", h200, t4), 1.0)
        self.assertEqual(est.ratio("FP32", h200, h200), 1.0)

    def test_committed_run_bounds(self):
        # The bound of every phase of the committed H200 run: if a new run changes one of these, the
        # estimates change meaning and docs/teaching.md must be read again.
        run = est.load(LADDER)
        got = {}
        for s in run["stages"]:
            if s.get("phases"):
                _, bounds = est.estimate_stage(s, run["cost"], self.ref, self.ref)
                got[s["id"]] = bounds
        conv_split = ["conv issue", "pool DRAM", "epilogue launch"]
        self.assertEqual(got["01"], ["conv issue", "pool latency", "epilogue launch"])
        self.assertEqual(got["02"], ["conv issue", "pool latency", "epilogue launch"])
        for sid in ("03", "04", "05"):
            self.assertEqual(got[sid], conv_split, sid)
        for sid in ("06", "07"):
            self.assertEqual(got[sid], ["fused issue", "epilogue launch"], sid)
        for sid in ("08", "09"):
            self.assertEqual(got[sid], ["fused FP32", "epilogue launch"], sid)
        self.assertEqual(got["12"], ["pool DRAM", "conv launch", "epilogue launch"])
        self.assertEqual(got["13"], ["fused DRAM"])

    def test_a_stage_is_the_sum_of_its_scaled_phases(self):
        stage = {"name": "x", "computes_conv": True,
                 "phases": [{"phase": "pool", "ms": 0.5}, {"phase": "epilogue", "ms": 0.01}]}
        cost = {"pool": {"bytes": 2e9, "flops": 0}, "epilogue": {"bytes": 1e4, "flops": 1e4}}
        total, bounds = est.estimate_stage(stage, cost, self.ref, est.SPECS["t4"])
        self.assertEqual(bounds, ["pool DRAM", "epilogue launch"])
        self.assertAlmostEqual(total, 0.5 * 4800 / 320 + 0.01)


class TiledPlans(unittest.TestCase):
    def constants(self, path: Path) -> dict:
        text = path.read_text(encoding="utf-8")
        vals = {}
        for name in ("kTileRows", "kTileCols", "kMaxKernelW", "kBuffers", "kMaxCiChunk", "kThreads"):
            m = re.search(rf"constexpr int {name} = (\d+);", text)
            self.assertIsNotNone(m, f"{name} in {path}")
            vals[name] = int(m.group(1))
        m = re.search(r"constexpr int kSmemBudget = (\d+) \* 1024;", text)
        self.assertIsNotNone(m, f"kSmemBudget in {path}")
        vals["budget"] = int(m.group(1)) * 1024
        # kCoTile is kWarps (07) or kWarps * kCo (08, 09): a product of named constants
        names = {"kWarps": vals["kThreads"] // 32}
        m = re.search(r"constexpr int kCo = (\d+);", text)
        if m:
            names["kCo"] = int(m.group(1))
        expr = re.search(r"constexpr int kCoTile = ([^;]+);", text).group(1)
        vals["co_tile"] = 1
        for factor in expr.split("*"):
            factor = factor.strip()
            vals["co_tile"] *= names[factor] if factor in names else int(factor)
        return vals

    def test_the_table_matches_the_stage_sources(self):
        for name, folder in (("shared_memory_tiling", "07_shared_memory_tiling"),
                             ("register_tiling", "08_register_tiling"), ("async_copy", "09_async_copy")):
            src = next((REPO / "stages" / folder).glob("*.cu"))
            c = self.constants(src)
            t = est.TILED[name]
            self.assertEqual(t["tile_rows"], c["kTileRows"], name)
            self.assertEqual(t["pitch"], c["kTileCols"] + c["kMaxKernelW"] - 1, name)
            self.assertEqual(t["co_tile"], c["co_tile"], name)
            self.assertEqual(t["buffers"], c["kBuffers"], name)
            self.assertEqual(t["max_ci"], c["kMaxCiChunk"], name)
            self.assertEqual(t["budget"], c["budget"], name)
            self.assertEqual(t["threads"], c["kThreads"], name)

    def test_kernelbench_plans_match_the_chapters(self):
        p = est.load(LADDER)["problem"]
        for name, folder, nbytes in (("shared_memory_tiling", "07_shared_memory_tiling", 5760),
                                     ("register_tiling", "08_register_tiling", 29952),
                                     ("async_copy", "09_async_copy", 59904)):
            got, ci = est.tiled_smem_bytes(name, p, 1 << 30)
            self.assertEqual((got, ci), (nbytes, 8), name)
            chapter = (REPO / "stages" / folder / "README.md").read_text(encoding="utf-8")
            self.assertIn(f"{nbytes:,} bytes", chapter, name)

    def test_a_smaller_limit_shrinks_the_chunk_or_takes_the_general_path(self):
        p = dict(est.load(LADDER)["problem"])
        smem, ci = est.tiled_smem_bytes("async_copy", p, 32 * 1024)   # 7,488 B per channel
        self.assertEqual((smem, ci), (4 * 7488, 4))
        self.assertEqual(est.tiled_smem_bytes("async_copy", p, 7000), (0, 0))

    def test_occupancy(self):
        p = est.load(LADDER)["problem"]
        self.assertEqual(est.blocks_per_sm("async_copy", p, est.SPECS["h200"]), (2, "registers"))
        self.assertEqual(est.blocks_per_sm("async_copy", p, est.SPECS["t4"]), (1, "shared memory"))
        self.assertEqual(est.blocks_per_sm("async_copy", p, est.SPECS["l4"]), (1, "shared memory"))
        self.assertEqual(est.blocks_per_sm("async_copy", p, est.SPECS["a100-40gb"])[0], 2)
        self.assertEqual(est.blocks_per_sm("shared_memory_tiling", p, est.SPECS["t4"]), (4, "threads"))


class Rendered(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.block = est.render(LADDER, POOL, PYTORCH, list(est.DEFAULT_GPUS))
        cls.data = est.load(LADDER)

    def test_measured_column_is_the_measurement(self):
        header = table_cells(self.block, "stage")
        col = header.index("H200 sm_90 (measured)")
        for s in self.data["stages"]:
            if s.get("phases"):
                cells = table_cells(self.block, f"{s['id']} {s['name']}")
                self.assertEqual(cells[col], est.fmt(s["total_ms"]), s["name"])

    def test_every_other_column_is_marked_estimated(self):
        header = table_cells(self.block, "stage")
        for g in est.DEFAULT_GPUS:
            if g != "h200":
                self.assertIn(f"{est.SPECS[g].name} sm_{est.SPECS[g].sm} (estimated)", header)

    def test_dram_bound_stage_scales_by_bandwidth(self):
        header = table_cells(self.block, "stage")
        cells = table_cells(self.block, "13 single_launch")
        t4 = cells[header.index("T4 sm_75 (estimated)")]
        stage13 = next(s for s in self.data["stages"] if s["id"] == "13")
        self.assertEqual(t4, est.fmt(stage13["total_ms"] * 4800 / 320))

    def test_async_copy_below_sm80_is_a_lower_bound_with_a_note(self):
        header = table_cells(self.block, "stage")
        cells = table_cells(self.block, "09 async_copy")
        self.assertTrue(cells[header.index("T4 sm_75 (estimated)")].startswith("≥ "))
        self.assertFalse(cells[header.index("A100 40GB sm_80 (estimated)")].startswith("≥"))
        self.assertIn("no cp.async below sm_80", self.block)

    def test_wgmma_stages_take_the_general_path_off_sm90(self):
        """15 and 16 need sm_90a code: on an A100 or L4 they run the FP32 general path, not tensor
        cores; only an sm_90 column (H100) is a tensor-core stage left to measure."""
        header = table_cells(self.block, "stage")
        for label in ("15 wgmma", "16 three_tf32_wgmma"):
            cells = table_cells(self.block, label)
            for g in ("t4", "rtx2080", "a100-40gb", "l4"):
                col = f"{est.SPECS[g].name} sm_{est.SPECS[g].sm} (estimated)"
                self.assertEqual(cells[header.index(col)], "general path", (label, g))
            self.assertEqual(cells[header.index("H100 SXM sm_90 (estimated)")], "not estimated", label)
            sid = label.split()[0]
            for name in ("A100 40GB", "L4", "T4"):
                self.assertIn(f"- {sid} on {name}: wgmma exists only in sm_90a code", self.block)
                self.assertNotIn(f"- {sid} on {name}: a tensor-core stage", self.block)
        # 14 is mma.sync: a tensor-core stage from sm_80 on
        cells = table_cells(self.block, "14 multistage_mma")
        self.assertEqual(cells[header.index("A100 40GB sm_80 (estimated)")], "not estimated")
        self.assertEqual(cells[header.index("T4 sm_75 (estimated)")], "general path")

    def test_sm90a_stages_are_the_rung_json_ones(self):
        import json
        built = set()
        for meta in (REPO / "stages").glob("*/rung.json"):
            if json.loads(meta.read_text(encoding="utf-8")).get("build", {}).get("sm_90a"):
                built.add(meta.parent.name.split("_", 1)[1])
        self.assertEqual(est.NEEDS_SM90A, built)

    def test_pytorch_is_not_estimated(self):
        cells = table_cells(self.block, "torch.compile")
        self.assertEqual(cells.count("not estimated"), len(est.DEFAULT_GPUS) - 1)

    def test_memory(self):
        cells = table_cells(self.block, "`ladder` (every stage): inputs + the convT output of stages 01-05 "
                                        "(or CUB's copy of it)")
        self.assertEqual(cells[1], "3.24")          # 1.074 GB of x + 2.164 GB of convT output
        big = table_cells(self.block, "GPU test `OutputBeyond2To31Elements`, stages 01-05 (skipped when it does not fit)")
        header = table_cells(self.block, "what (device memory, GB)")
        self.assertIn("**no**", big[header.index("RTX 2080 (8 GB)")])
        self.assertIn("fits", big[header.index("T4 (16 GB)")])

    def test_validation_against_the_h100_run(self):
        cells = table_cells(self.block, "01 per_thread_loop, conv")
        self.assertAlmostEqual(float(cells[-1]), 1.0, delta=0.02)


class UpdateAndCheck(unittest.TestCase):
    def test_update_then_check_then_stale(self):
        with tempfile.TemporaryDirectory() as d:
            doc = Path(d) / "doc.md"
            doc.write_text(f"# t\n\n{est.BEGIN}\nold\n{est.END}\n\nafter\n", encoding="utf-8")
            with redirect_stdout(io.StringIO()):
                self.assertEqual(est.main(["--update", str(doc)]), 0)
                self.assertEqual(est.main(["--check", str(doc)]), 0)
            text = doc.read_text(encoding="utf-8")
            self.assertTrue(text.endswith(f"{est.END}\n\nafter\n"))
            doc.write_text(text.replace("| 13 single_launch |", "| 13 single_launch (edited) |"), encoding="utf-8")
            with redirect_stderr(io.StringIO()) as err:
                self.assertEqual(est.main(["--check", str(doc)]), 1)
            self.assertIn("out of date", err.getvalue())

    def test_a_file_without_the_block_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            doc = Path(d) / "doc.md"
            doc.write_text("no block\n", encoding="utf-8")
            with self.assertRaises(SystemExit):
                est.main(["--check", str(doc)])

    def test_unknown_gpu_is_an_error(self):
        with self.assertRaises(SystemExit):
            est.render(LADDER, None, None, ["t4", "gtx480"])


if __name__ == "__main__":
    unittest.main()
