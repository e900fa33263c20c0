"""Loading and deriving numbers from committed ladder results (standard library only).

Shared by scripts/update_results.py, the plot scripts in this folder and notebooks/ladder.ipynb.

Inputs (all in one results directory, default results/, or $LADDER_RESULTS_DIR):
  * `build/ladder --json FILE` outputs (one per GPU, e.g. results/ladder_h200.json): recognised by
    their "stages" and "floor_ms" keys. Schema: ladder/report.cpp, write_json().
  * optionally scripts/compare_pytorch.py --json outputs (e.g. results/pytorch_h200.json):
    recognised by "timings" and "meta" keys; a skipped run ({"skipped": true}) is ignored.
Other JSON files, unknown keys and missing optional keys are tolerated.

Every number this module returns is read from those files or computed from them; the only
constants are the FP32 peak table below, used for the roofline and for "% of FP32 peak".
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PHASES = ("conv", "pool", "epilogue", "fused")

# FP32 peak = SMs x FP32 lanes per SM x clock x 2 (an FMA counts 2 flops). Newer ladder JSONs
# record it ("fp32_peak_tflops", from the device's SM count and maximum SM clock, common/device.cpp)
# and that value is used first. For JSONs without it, this table: Hopper (sm_90) has 128
# FP32 lanes per SM. Clocks are the maximum boost clocks of NVIDIA's H100/H200 product specs; the
# formula reproduces their FP32 figures (H100 SXM and H200 SXM: 132 x 128 x 1.98 GHz x 2 = 66.9
# TFLOP/s; H100 PCIe: 114 x 128 x 1.755 GHz x 2 = 51.2 TFLOP/s). Under a long load the clock can sit
# below the maximum boost, so this is an upper bound on what a kernel can reach.
# Matched in order against the GPU name (the part of the ladder's "device" before the first comma).
FP32_LANES_PER_SM = 128
BOOST_CLOCK_GHZ = (
    ("H100 PCIe", 1.755),
    ("H100 NVL", 1.785),
    ("H200 NVL", 1.785),
    ("H100", 1.98),
    ("H200", 1.98),
)
# Only to decide whether a fused stage could have done the literal convolution's arithmetic when
# the GPU is not in the table: no NVIDIA GPU to date runs FP32 FMA lanes above 3 GHz.
_CLOCK_UPPER_BOUND_GHZ = 3.0


def results_dir(arg: str | os.PathLike | None = None) -> Path:
    """The results directory: the argument, else $LADDER_RESULTS_DIR, else <repo>/results."""
    if arg:
        return Path(arg)
    env = os.environ.get("LADDER_RESULTS_DIR")
    return Path(env) if env else REPO_ROOT / "results"


def _num(v, default=None):
    """A finite float, or `default` (None, NaN, strings and missing keys are all 'no number')."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return f if math.isfinite(f) else default


@dataclass
class Stage:
    id: str
    name: str
    idea: str = ""
    gpu: bool = False
    ran: bool = False
    note: str = ""
    phases: dict = field(default_factory=dict)  # phase name -> ms, summed over repeated marks
    total_ms: float | None = None
    passed: bool | None = None  # against the fp64 oracle
    passed_previous: bool | None = None
    max_abs_pooled: float | None = None
    max_abs_y: float | None = None

    @property
    def label(self) -> str:
        return f"{self.id} {self.name}"

    def ms(self, phase: str) -> float | None:
        return self.phases.get(phase)

    @property
    def fused(self) -> bool:
        return "fused" in self.phases and "conv" not in self.phases and "pool" not in self.phases


@dataclass
class PyTorchRun:
    path: Path
    device: str
    meta: dict
    timings: list  # dicts with at least "variant", "kind", "median_ms"

    def median(self, kind: str) -> float | None:
        for t in self.timings:
            if t.get("kind") == kind and _num(t.get("median_ms")) is not None:
                return float(t["median_ms"])
        return None

    def stage_timing(self, stage_id: str) -> dict | None:
        """compare_pytorch.py's own timing of a stage (kind "stage", variant "stage NN ...")."""
        for t in self.timings:
            if t.get("kind") == "stage" and re.match(rf"stage {re.escape(stage_id)}\b", str(t.get("variant", ""))):
                if _num(t.get("median_ms")) is not None:
                    return t
        return None


@dataclass
class LadderRun:
    path: Path
    data: dict
    stages: list
    pytorch: PyTorchRun | None = None

    # --- identity -------------------------------------------------------------------------------
    @property
    def tag(self) -> str:
        """File stem without a leading 'ladder_': results/ladder_h200.json -> 'h200'."""
        stem = self.path.stem
        return stem[len("ladder_"):] if stem.startswith("ladder_") else stem

    @property
    def device(self) -> str:
        return str(self.data.get("device") or "")

    @property
    def gpu_name(self) -> str:
        return self.device.split(",")[0].strip() or "(no GPU)"

    @property
    def sm_count(self) -> int | None:
        m = re.search(r"(\d+)\s*SMs", self.device)
        return int(m.group(1)) if m else None

    @property
    def problem(self) -> dict:
        return self.data.get("problem") or {}

    def problem_summary(self) -> str:
        p = self.problem
        if not p:
            return "problem not recorded"

        def pair(k):
            v = p.get(k)
            if isinstance(v, (list, tuple)) and len(v) == 2:
                return str(v[0]) if v[0] == v[1] else f"{v[0]}x{v[1]}"
            return str(v)

        s = (f"batch {p.get('batch')}, {p.get('in_channels')} -> {p.get('out_channels')} channels, "
             f"{p.get('in_h')}x{p.get('in_w')} input, kernel {pair('kernel_size')}, stride {pair('stride')}, "
             f"padding {pair('padding')}, output_padding {pair('output_padding')}, dilation {pair('dilation')}, "
             f"groups {p.get('groups')}, x ~ {p.get('distribution')}, seed {p.get('seed')}")
        if p.get("out_h") is not None:
            s += f"; convT output {p.get('out_h')}x{p.get('out_w')}"
        return s

    # --- costs and baselines --------------------------------------------------------------------
    def cost(self, phase: str, what: str) -> float | None:
        return _num(((self.data.get("cost") or {}).get(phase) or {}).get(what))

    @property
    def floor_ms(self) -> float | None:
        v = _num(self.data.get("floor_ms"))
        return v if v and v > 0 else None

    @property
    def floor_gbps(self) -> float | None:
        v = _num(self.data.get("floor_gbps"))
        return v if v and v > 0 else None

    @property
    def cub_pool_ms(self) -> float | None:
        v = _num(self.data.get("cub_pool_ms"))
        return v if v and v > 0 else None

    def cub_gbps(self) -> float | None:
        b = self.cost("pool", "bytes")
        return b / self.cub_pool_ms / 1e6 if b and self.cub_pool_ms else None

    # --- peak -----------------------------------------------------------------------------------
    def fp32_peak_tflops(self, override: float | None = None) -> tuple[float | None, str]:
        """(peak TFLOP/s, how it was obtained); (None, reason) where the GPU is not in the table."""
        if override:
            return override, "given on the command line or in LADDER_PEAK_TFLOPS"
        env = _num(os.environ.get("LADDER_PEAK_TFLOPS"))
        if env:
            return env, "LADDER_PEAK_TFLOPS"
        recorded = _num(self.data.get("fp32_peak_tflops"))
        if recorded and recorded > 0:  # written by the ladder from the device's own attributes
            how = str(self.data.get("fp32_peak_formula") or "recorded by the ladder")
            return recorded, how.split(" = ")[0]
        sms = self.sm_count
        for key, ghz in BOOST_CLOCK_GHZ:
            if key in self.gpu_name and sms:
                return (sms * FP32_LANES_PER_SM * ghz * 1e9 * 2 / 1e12,
                        f"{sms} SMs x {FP32_LANES_PER_SM} FP32 lanes x {ghz} GHz x 2")
        return None, f"FP32 peak of '{self.gpu_name}' unknown (set LADDER_PEAK_TFLOPS)"

    # --- per-stage derived numbers --------------------------------------------------------------
    def ran_stages(self):
        return [s for s in self.stages if s.ran and s.total_ms]

    def conv_tflops(self, s: Stage) -> float | None:
        f, ms = self.cost("conv", "flops"), s.ms("conv")
        return f / ms / 1e9 if f and ms else None

    def pool_gbps(self, s: Stage) -> float | None:
        b, ms = self.cost("pool", "bytes"), s.ms("pool")
        return b / ms / 1e6 if b and ms else None

    def fused_kind(self, s: Stage) -> str | None:
        """For a fused stage: 'compute' if doing the literal convolution's flops in its time is
        physically possible on this GPU, else 'memory' (it changed the algorithm: fewer flops).
        None for stages that report separate phases."""
        if not s.fused or not s.total_ms:
            return None
        flops = self.cost("fused", "flops") or self.cost("conv", "flops")
        if not flops:
            return "memory"
        implied = flops / s.total_ms / 1e9  # TFLOP/s if it had done the literal arithmetic
        peak, _ = self.fp32_peak_tflops()
        if peak is None:
            sms = self.sm_count or 1000
            peak = sms * FP32_LANES_PER_SM * _CLOCK_UPPER_BOUND_GHZ * 1e9 * 2 / 1e12
        return "compute" if implied <= peak else "memory"

    def fused_tflops(self, s: Stage) -> float | None:
        if self.fused_kind(s) != "compute":
            return None
        flops = self.cost("fused", "flops")
        return flops / s.total_ms / 1e9 if flops else None

    def fused_gbps(self, s: Stage) -> float | None:
        """Bytes that must move for the whole pipeline (x read once, ...) over the stage's time."""
        b = self.cost("fused", "bytes")
        return b / s.total_ms / 1e6 if b and s.total_ms and s.fused else None

    def tflops(self, s: Stage) -> float | None:
        """The stage's convolution throughput: conv phase, or a compute-bound fused stage."""
        return self.conv_tflops(s) if not s.fused else self.fused_tflops(s)

    def gbps(self, s: Stage) -> float | None:
        """The stage's memory-bound throughput: pool phase, or a memory-bound fused stage."""
        if not s.fused:
            return self.pool_gbps(s)
        return self.fused_gbps(s) if self.fused_kind(s) == "memory" else None

    def multiple_of_floor(self, s: Stage) -> float | None:
        for st in self.data.get("stages") or []:
            if str(st.get("id")) == s.id and _num(st.get("multiple_of_floor")) is not None:
                return float(st["multiple_of_floor"])
        return s.total_ms / self.floor_ms if s.gpu and s.total_ms and self.floor_ms else None

    def speedups_over_previous(self) -> dict:
        """stage id -> previous ran stage's total / this total (the ladder's own definition)."""
        out, prev = {}, None
        for s in self.ran_stages():
            out[s.id] = prev.total_ms / s.total_ms if prev else None
            prev = s
        return out

    def vs_pytorch(self, s: Stage, kind: str) -> tuple[float | None, bool]:
        """(speedup over PyTorch `kind` ('eager' or 'compile'), same_run). same_run is True when
        compare_pytorch.py timed this stage itself; otherwise PyTorch's median from its run is
        divided by this ladder run's total."""
        if not self.pytorch or not s.total_ms:
            return None, False
        t = self.pytorch.stage_timing(s.id)
        if t is not None and _num(t.get(f"speedup_vs_{kind}")) is not None:
            return float(t[f"speedup_vs_{kind}"]), True
        ref = self.pytorch.median(kind)
        if t is not None and ref:
            return ref / float(t["median_ms"]), True
        return (ref / s.total_ms, False) if ref else (None, False)


def _stage_from_json(st: dict) -> Stage:
    phases: dict = {}
    for ph in st.get("phases") or []:
        name, ms = str(ph.get("phase", "?")), _num(ph.get("ms"))
        if ms is not None:
            phases[name] = phases.get(name, 0.0) + ms
    vo = st.get("vs_oracle") or {}
    vp = st.get("vs_previous") or {}
    return Stage(
        id=str(st.get("id", "?")), name=str(st.get("name", "")), idea=str(st.get("idea", "")),
        gpu=bool(st.get("gpu")), ran=bool(st.get("ran")), note=str(st.get("note", "") or ""),
        phases=phases, total_ms=_num(st.get("total_ms")),
        passed=vo.get("pass") if "pass" in vo else None,
        passed_previous=vp.get("pass") if "pass" in vp else None,
        max_abs_pooled=_num(vo.get("max_abs_pooled")), max_abs_y=_num(vo.get("max_abs_y")),
    )


def _same_problem(ladder: dict, torch_meta: dict) -> bool:
    lp, tp = ladder.get("problem") or {}, torch_meta.get("problem") or {}
    if not lp or not tp:
        return True  # nothing to compare: trust the device match
    ks = lp.get("kernel_size")
    k = ks[0] if isinstance(ks, list) and ks and all(v == ks[0] for v in ks) else ks
    pairs = [("batch", "batch"), ("in_channels", "in_channels"), ("out_channels", "out_channels"),
             ("in_h", "height"), ("in_w", "width")]
    return all(lp.get(a) == tp.get(b) for a, b in pairs) and (tp.get("kernel_size") in (None, k))


def load(directory=None, warn=True):
    """All ladder runs in `directory` (sorted by file name), each with its matching PyTorch run
    (same GPU name and problem) attached where one exists."""
    d = results_dir(directory)
    ladders, torches = [], []
    for path in sorted(d.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            if warn:
                print(f"warning: {path}: not readable JSON ({e}); skipped", file=sys.stderr)
            continue
        if not isinstance(data, dict):
            continue
        if "stages" in data and "floor_ms" in data:
            ladders.append(LadderRun(path, data, [_stage_from_json(s) for s in data.get("stages") or []]))
        elif "timings" in data and isinstance(data.get("meta"), dict) and not data.get("skipped"):
            torches.append(PyTorchRun(path, str(data["meta"].get("device", "")), data["meta"],
                                      [t for t in data.get("timings") or [] if isinstance(t, dict)]))
        elif warn and not data.get("skipped"):
            print(f"warning: {path}: neither a ladder nor a compare_pytorch.py result; skipped", file=sys.stderr)
    for run in ladders:
        for t in torches:
            if t.device and t.device.strip() == run.gpu_name and _same_problem(run.data, t.meta):
                run.pytorch = t
                break
    return ladders


# --- formatting shared by the README table and the notebook ----------------------------------------

def fmt_ms(v) -> str:
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}" if v >= 0.01 else f"{v:.2g}"


def fmt_ratio(v) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:,.0f}\u00d7"
    if v >= 10:
        return f"{v:.1f}\u00d7"
    return f"{v:.2f}\u00d7" if v >= 0.1 else f"{v:.2g}\u00d7"


def fmt_rate(v) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 100 else (f"{v:.1f}" if v >= 10 else f"{v:.3g}")


def stage_rows(run: LadderRun) -> list:
    """One dict per stage (ran or not) with the table's numbers; None where there is no number."""
    prev = run.speedups_over_previous()
    peak, _ = run.fp32_peak_tflops()
    rows = []
    for s in run.stages:
        r = {"stage": s.label, "id": s.id, "ran": s.ran, "note": s.note, "gpu": s.gpu}
        if s.ran:
            tf = run.tflops(s)
            eager, eager_same = run.vs_pytorch(s, "eager")
            comp, comp_same = run.vs_pytorch(s, "compile")
            r.update({
                **{f"{ph}_ms": s.ms(ph) for ph in PHASES},
                "total_ms": s.total_ms, "tflops": tf,
                "pct_fp32_peak": 100 * tf / peak if tf and peak else None,
                "gbps": run.gbps(s), "x_floor": run.multiple_of_floor(s) if s.gpu else None,
                "vs_previous": prev.get(s.id), "vs_eager": eager, "vs_eager_same_run": eager_same,
                "vs_compile": comp, "vs_compile_same_run": comp_same,
                "oracle": None if s.passed is None else ("PASS" if s.passed else "FAIL"),
                "max_abs_pooled": s.max_abs_pooled, "max_abs_y": s.max_abs_y,
            })
        rows.append(r)
    return rows
