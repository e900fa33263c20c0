"""Loading and deriving numbers from committed ladder results (standard library only).

Shared by update_results.py, the plots (plots/) and notebooks/ladder.ipynb.

Inputs (all in one results directory, default results/, or $LADDER_RESULTS_DIR):
  * `build/ladder --json FILE` outputs (one per GPU, e.g. results/ladder_h200.json): recognised by
    their "stages" and "floor_ms" keys. Schema: ladder/report.cpp, write_json().
  * optionally scripts/compare.py --problem 42 --json outputs (e.g. results/pytorch_h200.json):
    recognised by "timings" and "meta" keys; a skipped run ({"skipped": true}) is ignored.
  * optionally ladder/floor_sweep.cu outputs (results/floor_sweep_<gpu>.txt: "key: value" lines,
    then a table, per section) and the Nsight Compute metrics of the floor kernel
    (profiles/data/floor_streaming_read.txt: "# device: ..." and CSV rows from ncu --csv), matched
    to a ladder run by GPU name.
  * optionally `build/ladder --pool-only --json FILE` outputs (results/pool_only_<gpu>.json,
    "mode": "pool_only"): the reduction stages' pool phase alone; load_pool_only() reads them,
    load() skips them. Schema: ladder/report.cpp, write_pool_only_json().
Other JSON files, unknown keys and missing optional keys are tolerated. Older ladder JSONs lack
"provenance", "timing", the *_min / *_max spreads, "computes_conv", "tensor_cores", "changes" and
"speedup_vs_previous"; each is optional here ("tensor_cores" absent = False).

A stage with "tensor_cores": true does its convolution on tensor cores (TF32 mma.sync): the FP32
FMA peak is not its ceiling, so no "% of FP32 peak" is computed for it (stage_rows) and the
roofline does not place it under the FP32 roof (plot_roofline.py).

Every number this module returns is read from those files or computed from them; the only
constants are the FP32 peak table below, used for the roofline and for "% of FP32 peak".
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PHASES = ("conv", "pool", "epilogue", "fused")
TOTAL = ()  # "changes" naming no phase: a stage's speedup compares the whole run


def changes_key(changes) -> str:
    """What a speedup compares, as the ladder prints it: "pool", "conv+pool+fused", "total"."""
    return "+".join(changes) if changes else "total"


def changes_prose(changes) -> str:
    """What a speedup compares, for prose: "pool", "conv + pool", "total". "fused" (the conv and
    pool in one launch) is left out where conv or pool is named too: it is the same work."""
    if not changes:
        return "total"
    shown = [c for c in changes if not (c == "fused" and ({"conv", "pool"} & set(changes)))]
    return " + ".join(shown)

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


def _rel(path: Path) -> str:
    """`path` relative to the repository where it lies inside it, else its name."""
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return Path(path).name


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
    # Whether the stage does the convolution's arithmetic (the JSON's "computes_conv", a fact of
    # the stage); None where the file does not say (load() then borrows it from another file).
    computes_conv: bool | None = None
    # Whether the stage's convolution runs on tensor cores (the JSON's "tensor_cores"; absent = False).
    tensor_cores: bool = False
    total_min: float | None = None  # spread of the total over the timed repetitions
    total_max: float | None = None
    phase_spread: dict = field(default_factory=dict)  # phase name -> (min, max), phases marked once
    # The phases this stage changes from the one before it (the JSON's "changes"; [] = the whole
    # run), None where the file predates the field; and the ladder's own speedup over the previous
    # ran stage on those phases ("speedup_vs_previous"), None where absent.
    changes: list | None = None
    speedup_vs_previous: float | None = None

    @property
    def label(self) -> str:
        return f"{self.id} {self.name}"

    def ms(self, phase: str) -> float | None:
        return self.phases.get(phase)

    def changed_ms(self, changes) -> float | None:
        """Time on `changes` (summed; a phase this stage lacks counts 0; None if it has none of
        them), or the total where `changes` is empty: the ladder's changed_time()."""
        if not changes:
            return self.total_ms
        found = [self.phases[c] for c in changes if c in self.phases]
        return sum(found) if found else None

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
        """compare.py --problem 42's own timing of a stage (kind "stage", variant "stage NN ...")."""
        for t in self.timings:
            if t.get("kind") == "stage" and re.match(rf"stage {re.escape(stage_id)}\b", str(t.get("variant", ""))):
                if _num(t.get("median_ms")) is not None:
                    return t
        return None


@dataclass
class FloorSweep:
    """One section of a floor_sweep output: the device, its DRAM peak, and the best launch."""
    path: Path
    info: dict  # the section's "key: value" lines (device, dram_peak_gbps, l2_flush, best, ...)

    @property
    def gpu_name(self) -> str:
        return str(self.info.get("device", "")).split(",")[0].strip()

    def num(self, key: str) -> float | None:
        """The value's leading number ("bytes: 1073741824 (268435456 floats)" -> 1073741824.0)."""
        return _num(str(self.info.get(key, "")).split(" ")[0])


@dataclass
class NcuFloor:
    """Nsight Compute metrics of the floor kernel: metric name -> median over the profiled launches."""
    path: Path
    device: str
    config: str
    metrics: dict


def problem_summary(p: dict) -> str:
    """Every ConvTranspose2d parameter and the inputs of a JSON's "problem", in one line."""
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


def problem_short(p: dict) -> str:
    """The sizes that tell the problems apart: "batch 16, 64 -> 128 channels, 512x512"."""
    if not p:
        return "problem not recorded"
    return (f"batch {p.get('batch')}, {p.get('in_channels')} -> {p.get('out_channels')} channels, "
            f"{p.get('in_h')}x{p.get('in_w')}")


@dataclass
class Comparison:
    """A ran stage against the previous ran stage of the same run, on the phases it changes."""
    stage: Stage
    previous: Stage | None
    changes: tuple  # the phases compared; () = the total (also for files without "changes")
    this_ms: float | None
    previous_ms: float | None
    ratio: float | None  # previous_ms / this_ms: above 1 is a gain; the JSON's value where it has one

    @property
    def on(self) -> str:
        return changes_prose(self.changes)


def compare(stage: Stage, previous: Stage | None) -> Comparison:
    """`stage` against `previous`: the JSON's speedup_vs_previous when present, else the same
    ratio computed from the stage's "changes", else (files without it) of the totals."""
    ch = tuple(stage.changes) if stage.changes else TOTAL
    this = stage.changed_ms(ch)
    prev = previous.changed_ms(ch) if previous else None
    ratio = stage.speedup_vs_previous if previous else None
    if ratio is None and this and prev:
        ratio = prev / this
    return Comparison(stage, previous, ch, this, prev, ratio)


class _RecordedDevice:
    """device and gpu_name of a run whose JSON (self.data) records its device."""

    @property
    def device(self) -> str:
        return str(self.data.get("device") or "")

    @property
    def gpu_name(self) -> str:
        return self.device.split(",")[0].strip() or "(no GPU)"


@dataclass
class LadderRun(_RecordedDevice):
    path: Path
    data: dict
    stages: list
    pytorch: PyTorchRun | None = None
    floor_sweeps: list = field(default_factory=list)  # FloorSweep sections for this GPU
    ncu_floor: NcuFloor | None = None

    # --- identity -------------------------------------------------------------------------------
    @property
    def tag(self) -> str:
        """File stem without a leading 'ladder_': results/ladder_h200.json -> 'h200'."""
        stem = self.path.stem
        return stem[len("ladder_"):] if stem.startswith("ladder_") else stem


    @property
    def sm_count(self) -> int | None:
        m = re.search(r"(\d+)\s*SMs", self.device)
        return int(m.group(1)) if m else None

    @property
    def problem(self) -> dict:
        return self.data.get("problem") or {}

    def problem_summary(self) -> str:
        return problem_summary(self.problem)

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

    def spread(self, key: str) -> tuple[float | None, float | None]:
        """(min, max) of a top-level timed figure ("floor_ms", "cub_pool_ms") where recorded."""
        return _num(self.data.get(key + "_min")), _num(self.data.get(key + "_max"))

    @property
    def x_bytes(self) -> float | None:
        p = self.problem
        try:
            return 4.0 * p["batch"] * p["in_channels"] * p["in_h"] * p["in_w"]
        except (KeyError, TypeError):
            return None

    # --- provenance -----------------------------------------------------------------------------
    @property
    def provenance(self) -> dict:
        return self.data.get("provenance") or {}

    @property
    def timing(self) -> dict:
        return self.data.get("timing") or {}

    def provenance_line(self) -> str:
        """One line: commit, driver, CUDA, nvcc, CPU, repetitions; says so where not recorded."""
        pv, tm = self.provenance, self.timing
        if not pv and not tm:
            return "Provenance not recorded (this file predates the ladder's provenance fields)."
        parts = []
        commit = str(pv.get("git_commit") or "")
        if commit:
            dirty = pv.get("git_dirty")
            parts.append(f"commit {commit[:12]}" + (" with uncommitted changes" if dirty == "yes" else
                                                    " (clean)" if dirty == "no" else ""))
        if pv.get("driver_release"):
            parts.append(f"driver {pv['driver_release']}"
                         + (f" (CUDA {pv['driver_cuda_version']})" if pv.get("driver_cuda_version") else ""))
        if pv.get("cuda_runtime_version"):
            parts.append(f"CUDA runtime {pv['cuda_runtime_version']}")
        if pv.get("nvcc_version"):
            parts.append(f"nvcc {pv['nvcc_version']}")
        if pv.get("host_cpu"):
            parts.append(f"CPU {pv['host_cpu']}")
        if tm.get("reps") is not None:
            rep = f"{tm['reps']} timed repetitions after {tm.get('warmup', '?')} warm-up"
            if "flush_l2" in tm:
                rep += ", L2 flushed before each" if tm["flush_l2"] else ", L2 not flushed (warm cache)"
            parts.append(rep)
        if pv.get("date_utc"):
            parts.append(f"run {pv['date_utc']}")
        missing = [k for k in ("git_commit", "driver_release", "nvcc_version", "host_cpu") if not pv.get(k)]
        line = "Provenance: " + "; ".join(parts) + "."
        return line + (f" Not recorded: {', '.join(missing)}." if missing else "")

    # --- DRAM peak and what the floor reached -----------------------------------------------------
    def dram_peak(self) -> tuple[float | None, str]:
        """(specified DRAM GB/s, how it was obtained): the ladder's own record if the JSON has one,
        else a floor_sweep output for this GPU; (None, reason) otherwise."""
        v = _num(self.data.get("dram_peak_gbps"))
        if v and v > 0:
            return v, str(self.data.get("dram_peak_formula") or "recorded by the ladder").split(" = ")[0]
        for fs in self.floor_sweeps:
            v = fs.num("dram_peak_gbps")
            if v and v > 0:
                how = str(fs.info.get("dram_peak_formula") or "").split(" = ")[0]
                where = _rel(fs.path)
                return v, f"{how}, from {where}" if how else f"from {where}"
        return None, "DRAM peak not recorded for this GPU"

    def sweep_for_this_size(self, flush: str) -> FloorSweep | None:
        """The floor_sweep section timed with this L2 flush over as many bytes as this run's x."""
        for fs in self.floor_sweeps:
            if str(fs.info.get("l2_flush", "")).split(" ")[0] == flush and fs.num("bytes") == self.x_bytes:
                return fs
        return None

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
        if s.computes_conv is False:  # its "conv" phase is a contraction of sums, not the convolution
            return None
        f, ms = self.cost("conv", "flops"), s.ms("conv")
        return f / ms / 1e9 if f and ms else None

    def pool_gbps(self, s: Stage) -> float | None:
        # The pool phase reads the convT output, or x in a stage that pools before convolving.
        b = self.x_bytes if s.computes_conv is False else self.cost("pool", "bytes")
        ms = s.ms("pool")
        return b / ms / 1e6 if b and ms else None

    def fused_kind(self, s: Stage) -> str | None:
        """For a fused stage: 'compute' if doing the literal convolution's flops in its time is
        physically possible on this GPU, else 'memory' (it changed the algorithm: fewer flops).
        The JSON's computes_conv decides where known; the physical test is the fallback for files
        that lack it. None for stages that report separate phases."""
        if not s.fused or not s.total_ms:
            return None
        if s.computes_conv is not None:
            return "compute" if s.computes_conv else "memory"
        if s.tensor_cores:  # its arithmetic may exceed the FP32 peak: the physical test below does not apply
            return "compute"
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
        """The stage's convolution throughput: conv phase, or a compute-bound fused stage. None
        for a stage that does not do the convolution's arithmetic (computes_conv false)."""
        if s.computes_conv is False:
            return None
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

    def comparisons(self) -> dict:
        """stage id -> Comparison with the previous ran stage (see compare()), for ran stages."""
        out, prev = {}, None
        for s in self.ran_stages():
            out[s.id] = compare(s, prev)
            prev = s
        return out

    def speedups_over_previous(self) -> dict:
        """stage id -> the previous ran stage's time over this one's, on the phases this stage
        changes (the ladder's "speedup_vs_previous"); for files without "changes", of the totals."""
        return {k: c.ratio for k, c in self.comparisons().items()}

    def vs_pytorch(self, s: Stage, kind: str) -> tuple[float | None, bool]:
        """(speedup over PyTorch `kind` ('eager' or 'compile'), same_run). same_run is True when
        compare.py --problem 42 timed this stage itself; otherwise PyTorch's median from its run is
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


@dataclass
class PoolOnlyStage:
    """One stage of a `ladder --pool-only` run: its pool phase alone on a generated tensor."""
    id: str
    name: str
    idea: str = ""
    ran: bool = False
    note: str = ""
    pool_ms: float | None = None
    pool_min: float | None = None
    pool_max: float | None = None
    speedup_vs_previous: float | None = None  # the previous ran stage's pool ms / this one's
    passed: bool | None = None  # against the tensor's fp64 plane means

    @property
    def label(self) -> str:
        return f"{self.id} {self.name}"


@dataclass
class PoolOnlyRun(_RecordedDevice):
    path: Path
    data: dict
    stages: list


    @property
    def problem(self) -> dict:
        return self.data.get("problem") or {}

    def previous_of(self, stage_id: str) -> PoolOnlyStage | None:
        """The ran stage before `stage_id` in this run (what its speedup_vs_previous compares)."""
        prev = None
        for s in self.stages:
            if s.id == stage_id:
                return prev
            if s.ran and s.pool_ms:
                prev = s
        return None


def load_pool_only(directory=None) -> list:
    """Every `ladder --pool-only --json` output ("mode": "pool_only") in the results directory."""
    out = []
    for path in sorted(results_dir(directory).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # load() warns about unreadable files
        if not isinstance(data, dict) or data.get("mode") != "pool_only":
            continue
        stages = []
        for st in data.get("stages") or []:
            ck = st.get("check") or {}
            stages.append(PoolOnlyStage(
                id=str(st.get("id", "?")), name=str(st.get("name", "")), idea=str(st.get("idea", "")),
                ran=bool(st.get("ran")), note=str(st.get("note", "") or ""), pool_ms=_num(st.get("pool_ms")),
                pool_min=_num(st.get("pool_ms_min")), pool_max=_num(st.get("pool_ms_max")),
                speedup_vs_previous=_num(st.get("speedup_vs_previous")),
                passed=ck.get("pass") if "pass" in ck else None))
        out.append(PoolOnlyRun(path, data, stages))
    return out


def _stage_from_json(st: dict) -> Stage:
    phases: dict = {}
    spread: dict = {}
    marks: dict = {}
    for ph in st.get("phases") or []:
        name, ms = str(ph.get("phase", "?")), _num(ph.get("ms"))
        if ms is not None:
            phases[name] = phases.get(name, 0.0) + ms
            marks[name] = marks.get(name, 0) + 1
            lo, hi = _num(ph.get("ms_min")), _num(ph.get("ms_max"))
            if lo is not None and hi is not None:
                spread[name] = (lo, hi)
    # A phase marked several times has a summed median; the sum of its minima is no minimum.
    spread = {k: v for k, v in spread.items() if marks.get(k) == 1}
    cc = st.get("computes_conv")
    ch = st.get("changes")
    vo = st.get("vs_oracle") or {}
    vp = st.get("vs_previous") or {}
    return Stage(
        id=str(st.get("id", "?")), name=str(st.get("name", "")), idea=str(st.get("idea", "")),
        gpu=bool(st.get("gpu")), ran=bool(st.get("ran")), note=str(st.get("note", "") or ""),
        phases=phases, total_ms=_num(st.get("total_ms")),
        passed=vo.get("pass") if "pass" in vo else None,
        passed_previous=vp.get("pass") if "pass" in vp else None,
        max_abs_pooled=_num(vo.get("max_abs_pooled")), max_abs_y=_num(vo.get("max_abs_y")),
        computes_conv=cc if isinstance(cc, bool) else None,
        tensor_cores=st.get("tensor_cores") is True,
        total_min=_num(st.get("total_ms_min")), total_max=_num(st.get("total_ms_max")), phase_spread=spread,
        changes=[str(c) for c in ch] if isinstance(ch, list) else None,
        speedup_vs_previous=_num(st.get("speedup_vs_previous")),
    )


def _fill_computes_conv(ladders: list) -> None:
    """Stages of files without "computes_conv" borrow it, by stage id, from the newest file that
    records it (newest by provenance date, then file name): it is a fact of the stage."""
    def newest_first(run):
        return (str(run.provenance.get("date_utc") or ""), run.path.name)

    known: dict = {}
    for run in sorted(ladders, key=newest_first):  # oldest first: newer files overwrite
        for s in run.stages:
            if s.computes_conv is not None:
                known[s.id] = s.computes_conv
    for run in ladders:
        for s in run.stages:
            if s.computes_conv is None and s.id in known:
                s.computes_conv = known[s.id]


def load_floor_sweeps(directory) -> list:
    """Every section of results/floor_sweep_*.txt as a FloorSweep (its "key: value" lines)."""
    out = []
    for path in sorted(Path(directory).glob("floor_sweep_*.txt")):
        try:
            text = path.read_text()
        except OSError:
            continue
        info: dict = {}
        for line in text.splitlines() + ["## end"]:
            if line.startswith("## "):
                if info.get("device"):
                    out.append(FloorSweep(path, info))
                info = {}
            m = re.match(r"^([a-z_0-9]+): (.*)$", line)
            if m:
                info[m.group(1)] = m.group(2).strip()
    return out


def load_ncu_floor(path: Path | None = None) -> NcuFloor | None:
    """The first configuration's metrics in profiles/data/floor_streaming_read.txt (medians over
    the profiled launches), or None if the file is missing or unreadable."""
    path = path or REPO_ROOT / "profiles" / "data" / "floor_streaming_read.txt"
    try:
        text = path.read_text()
    except OSError:
        return None
    device, config, rows = "", "", []
    for line in text.splitlines():
        if line.startswith("# device:"):
            device = line.split(":", 1)[1].strip()
        elif line.startswith("## config"):
            if config:
                break
            config = line[len("## config"):].strip()
        elif line.startswith('"') and config:
            rows.append(line)
    values: dict = {}
    for r in csv.DictReader(io.StringIO("\n".join(rows))):  # rows[0] is the block's CSV header
        v = _num(str(r.get("Metric Value", "")).replace(",", ""))
        if v is not None:
            values.setdefault(r.get("Metric Name"), []).append(v)
    if not device or not values:
        return None
    med = {k: sorted(v)[len(v) // 2] for k, v in values.items()}
    return NcuFloor(path, device, config, med)


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
        if data.get("mode") == "pool_only":
            continue  # `ladder --pool-only`: the pool phase alone, not a ladder run
        if "stages" in data and "floor_ms" in data:
            ladders.append(LadderRun(path, data, [_stage_from_json(s) for s in data.get("stages") or []]))
        elif "timings" in data and isinstance(data.get("meta"), dict) and not data.get("skipped"):
            torches.append(PyTorchRun(path, str(data["meta"].get("device", "")), data["meta"],
                                      [t for t in data.get("timings") or [] if isinstance(t, dict)]))
        elif warn and not data.get("skipped"):
            print(f"warning: {path}: neither a ladder nor a compare.py --problem 42 result; skipped", file=sys.stderr)
    for run in ladders:
        for t in torches:
            if t.device and t.device.strip() == run.gpu_name and _same_problem(run.data, t.meta):
                run.pytorch = t
                break
    _fill_computes_conv(ladders)
    sweeps = load_floor_sweeps(d)
    ncu = load_ncu_floor()
    for run in ladders:
        run.floor_sweeps = [fs for fs in sweeps if fs.gpu_name == run.gpu_name]
        if ncu and ncu.device == run.gpu_name:
            run.ncu_floor = ncu
    return ladders


# --- formatting shared by the results table (docs/results.md) and the notebook ----------------------------------------

def fmt_ms(v) -> str:
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}" if v >= 0.01 else f"{v:.2g}"


def fmt_spread(v, lo, hi) -> str:
    """ "0.2501 (0.249-0.253)": a median with its min-max where both are known and differ."""
    if v is None:
        return "-"
    if lo is None or hi is None or fmt_ms(lo) == fmt_ms(hi):
        return fmt_ms(v)
    return f"{fmt_ms(v)} ({fmt_ms(lo)}-{fmt_ms(hi)})"


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
    prev = run.comparisons()
    peak, _ = run.fp32_peak_tflops()
    rows = []
    for s in run.stages:
        r = {"stage": s.label, "id": s.id, "ran": s.ran, "note": s.note, "gpu": s.gpu,
             "tensor_cores": s.tensor_cores}
        if s.ran:
            tf = run.tflops(s)
            eager, eager_same = run.vs_pytorch(s, "eager")
            comp, comp_same = run.vs_pytorch(s, "compile")
            r.update({
                **{f"{ph}_ms": s.ms(ph) for ph in PHASES},
                "total_ms": s.total_ms, "total_min": s.total_min, "total_max": s.total_max, "tflops": tf,
                # None on tensor cores: the FP32 FMA peak is not their ceiling
                "pct_fp32_peak": 100 * tf / peak if tf and peak and not s.tensor_cores else None,
                "gbps": run.gbps(s), "x_floor": run.multiple_of_floor(s) if s.gpu else None,
                "vs_previous": prev[s.id].ratio if s.id in prev else None,
                "vs_previous_on": prev[s.id].on if s.id in prev else None,
                "vs_eager": eager, "vs_eager_same_run": eager_same,
                "vs_compile": comp, "vs_compile_same_run": comp_same,
                "oracle": None if s.passed is None else ("PASS" if s.passed else "FAIL"),
                "max_abs_pooled": s.max_abs_pooled, "max_abs_y": s.max_abs_y,
            })
        rows.append(r)
    return rows
