"""Expected ladder times on the GPU classes a course may have, scaled from a committed run.

    python3 scripts/estimate_gpu_classes.py                      # print the Markdown tables
    python3 scripts/estimate_gpu_classes.py --update docs/teaching.md   # rewrite its block
    python3 scripts/estimate_gpu_classes.py --check docs/teaching.md    # exit 1 if it is stale
    python3 scripts/estimate_gpu_classes.py --gpus t4,a100-80gb,h100-pcie   # other columns

Reads results/ladder_h200.json (the KernelBench problem), results/pool_only_h200.json and
results/pytorch_h200.json (or the files named by --ladder, --pool-only, --pytorch). The column
of the GPU that ran those files is the measurement itself; every other column is an estimate:

    estimate(phase, gpu) = measured(phase) x r(bound of the phase, gpu)
      DRAM    r = DRAM GB/s of the measured GPU / DRAM GB/s of gpu
      FP32    r = FP32 peak of the measured GPU / FP32 peak of gpu,
                  FP32 peak = SMs x FP32 lanes per SM x boost clock x 2
      issue   r = (SMs x boost clock) of the measured GPU / (SMs x boost clock) of gpu
      latency r = 1      launch  r = 1

and a stage's time is the sum of its phases' estimates. The bound of a phase comes from the
measured run itself (the roofline): DRAM if the phase moved its must-move bytes (the JSON's
"cost") at >= 50% of the DRAM peak, FP32 if it did its flops at >= 25% of the FP32 peak;
otherwise it is near neither roof, and then launch if it took under 0.05 ms, latency for the
phases named in LATENCY_BOUND (few threads waiting on memory, or atomics on one address), and
issue (instruction issue or the LSU pipe, both per SM per clock) for the rest. Standard library
only; the test is scripts/test_estimate_gpu_classes.py.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- estimates:begin -->", "<!-- estimates:end -->"


@dataclass(frozen=True)
class Gpu:
    """One GPU class: vendor figures at the maximum boost clock (sources in SPECS' comments)."""
    key: str
    name: str
    sm: int                  # compute capability x 10
    sms: int
    boost_ghz: float
    fp32_lanes: int          # FP32 FMA lanes per SM: 64 on sm_75 and sm_80, 128 on sm_86 and newer
    dram_gbps: float
    memory_gb: float         # as sold (decimal GB)
    l2_mib: float
    smem_block_kib: int      # shared memory per block with the opt-in (cudaFuncSetAttribute)
    smem_sm_kib: int         # shared memory per SM; the difference is the 1 KiB per block the
                             # runtime reserves from sm_80 on
    max_threads_sm: int
    max_blocks_sm: int
    fp32_tflops_quoted: float  # the vendor's FP32 figure, to check the formula against

    @property
    def fp32_tflops(self) -> float:
        return self.sms * self.fp32_lanes * self.boost_ghz * 2 / 1e3

    @property
    def sm_clock(self) -> float:
        """SMs x GHz: what an issue-bound kernel scales with (4 warp instructions per SM per clock
        on every architecture here)."""
        return self.sms * self.boost_ghz


# Sources (public): NVIDIA's product datasheets (T4, A100, L4, H100, H200: FP32 TFLOP/s, memory
# size and bandwidth, and clocks where given); NVIDIA's architecture whitepapers (Turing: T4 and
# the GeForce RTX 2080 reference board, TU104; Ampere: the A100's GA100; Hopper: H100) for SM
# counts, boost clocks and L2 sizes; the CUDA C++ Programming Guide's table "Technical
# Specifications per Compute Capability" for shared memory per block (opt-in) and per SM, and
# resident threads and blocks per SM. fp32_tflops_quoted is the datasheet's figure; the test
# checks SMs x lanes x clock x 2 against it.
SPECS = {
    # T4 datasheet: 8.1 TFLOP/s FP32, 320 GB/s GDDR6, 16 GB, 70 W. Turing whitepaper: 40 SMs
    # (2,560 CUDA cores), 1,590 MHz boost, 4 MB L2.
    "t4": Gpu("t4", "T4", 75, 40, 1.59, 64, 320, 16, 4, 64, 64, 1024, 16, 8.1),
    # Turing whitepaper, GeForce RTX 2080 reference board: 46 SMs (2,944 CUDA cores), 1,710 MHz
    # boost (Founders Edition: 1,800), 14 Gbps GDDR6 on 256 bits = 448 GB/s, 8 GB, 4 MB L2.
    "rtx2080": Gpu("rtx2080", "RTX 2080", 75, 46, 1.71, 64, 448, 8, 4, 64, 64, 1024, 16, 10.1),
    # A100 datasheet and Ampere whitepaper: 108 SMs, 1,410 MHz boost, 19.5 TFLOP/s FP32, 40 MB L2;
    # 40GB SXM4: 1,555 GB/s HBM2; 80GB SXM4: 2,039 GB/s HBM2e.
    "a100-40gb": Gpu("a100-40gb", "A100 40GB", 80, 108, 1.41, 64, 1555, 40, 40, 163, 164, 2048, 32, 19.5),
    "a100-80gb": Gpu("a100-80gb", "A100 80GB SXM", 80, 108, 1.41, 64, 2039, 80, 40, 163, 164, 2048, 32, 19.5),
    # L4 datasheet: 30.3 TFLOP/s FP32, 300 GB/s GDDR6, 24 GB, 72 W. 58 SMs (7,424 CUDA cores, AD104)
    # at 2,040 MHz, the boost clock the datasheet's FP32 figure implies (58 x 128 x 2.04 x 2);
    # 48 MB L2.
    "l4": Gpu("l4", "L4", 89, 58, 2.04, 128, 300, 24, 48, 99, 100, 1536, 24, 30.3),
    # H100 datasheet and Hopper whitepaper: SXM5 132 SMs, 1,980 MHz, 67 TFLOP/s FP32, 3.35 TB/s
    # HBM3, 80 GB, 50 MB L2; PCIe 114 SMs, 1,755 MHz, 51 TFLOP/s, 2.0 TB/s HBM2e.
    "h100-sxm": Gpu("h100-sxm", "H100 SXM", 90, 132, 1.98, 128, 3350, 80, 50, 227, 228, 2048, 32, 67.0),
    "h100-pcie": Gpu("h100-pcie", "H100 PCIe", 90, 114, 1.755, 128, 2000, 80, 50, 227, 228, 2048, 32, 51.0),
    # H200 datasheet: the H100 SXM's GH100 with 141 GB of HBM3e at 4.8 TB/s, 67 TFLOP/s FP32;
    # 60 MB L2 (the ladder's JSON records 60 MiB and 4,814 GB/s from the memory clock and bus).
    "h200": Gpu("h200", "H200", 90, 132, 1.98, 128, 4800, 141, 60, 227, 228, 2048, 32, 67.0),
}
DEFAULT_GPUS = ("t4", "rtx2080", "a100-40gb", "l4", "h100-sxm", "h200")

DRAM_ROOF = 0.50    # share of the DRAM peak above which a phase counts as bandwidth-bound
FP32_ROOF = 0.25    # share of the FP32 peak above which a phase counts as FMA-bound
LAUNCH_MS = 0.05    # below this, a phase near neither roof is a launch or two: kept as measured
# Near neither roof, and not issue-bound either (kept as measured; stage name, phase):
#   per_thread_loop pool: 2048 threads on 16 SMs wait on DRAM latency (its chapter's profile);
#   atomics pool: atomics on one address per plane, applied one after another in L2.
# An H100 80GB run with 1.43x less bandwidth and the same SMs and clock took the same time for
# both (results/history/ladder_h100_seven_stage_ladder.json: 32.26 and 923.2 ms).
LATENCY_BOUND = {("per_thread_loop", "pool"), ("atomics", "pool")}

# The shared-memory plans of the tiled stages (stages/NN/*.cu constants; the test compares them
# with the sources): tile rows, row pitch (floats), output channels per block, buffers, input
# channels per step at most, the stage's own budget, registers per thread (the chapters: sm_90,
# nvcc 13.0), threads per block.
TILED = {
    "shared_memory_tiling": dict(tile_rows=1, pitch=36, co_tile=8, buffers=1, max_ci=8,
                                 budget=96 * 1024, regs=40, threads=256),
    "register_tiling": dict(tile_rows=16, pitch=20, co_tile=64, buffers=1, max_ci=8,
                            budget=96 * 1024, regs=128, threads=256),
    "async_copy": dict(tile_rows=16, pitch=20, co_tile=64, buffers=2, max_ci=8,
                       budget=96 * 1024, regs=127, threads=256),
}
NEEDS_SM80 = {"async_copy"}  # cp.async: below sm_80 the stage runs synchronous copies
# The stages whose rung.json says "build": {"sm_90a": true} (the test compares them): wgmma and the
# bulk copy exist only in sm_90a code, which runs only on sm_90 (H100, H200). On every other GPU,
# sm_80 and newer included, the stage runs the general FP32 path, not tensor cores.
NEEDS_SM90A = {"wgmma", "three_tf32_wgmma", "warp_specialized"}

# The one other GPU with a committed run: an H100 80GB (SXM, HBM3) run of an earlier, seven-stage
# ladder. Its stages 01-03 ran the same kernels as today's (chapters 02 and 03 say so); the rest
# differ, so only those are compared.
VALIDATION = (Path("results") / "history" / "ladder_h100_seven_stage_ladder.json", "h100-sxm",
              ("per_thread_loop", "atomics", "shared_tree"))


# ---- reading the measured run ----------------------------------------------------------------

def load(path: Path) -> dict:
    """The JSON file at `path`, parsed."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def reference_gpu(run: dict) -> Gpu:
    """The SPECS entry of the GPU that measured `run`, checked against what the run recorded."""
    device = run["device"]
    name = device.split(",")[0].replace("NVIDIA ", "").strip()
    matches = [g for g in SPECS.values() if g.name == name or name.startswith(g.name + " ")]
    if not matches:
        raise SystemExit(f"error: no SPECS entry for the measured GPU '{device}'; add one")
    g = matches[0]
    sms = re.search(r"(\d+) SMs", device)
    if sms and int(sms.group(1)) != g.sms:
        raise SystemExit(f"error: SPECS says {g.name} has {g.sms} SMs, the run recorded '{device}'")
    for what, ours, theirs in (("FP32 peak", g.fp32_tflops, run.get("fp32_peak_tflops")),
                               ("DRAM peak", g.dram_gbps, run.get("dram_peak_gbps"))):
        if theirs and abs(ours / theirs - 1) > 0.02:
            raise SystemExit(f"error: SPECS' {what} of {g.name} ({ours:.4g}) differs from the run's "
                             f"({theirs:.4g}) by more than 2%")
    return g


def phase_work(cost: dict, phase: str, computes_conv: bool) -> tuple[float, float]:
    """(bytes, flops) a phase must move and do, from the run's cost model. A stage that skips the
    convolution's arithmetic (12, 13) reads x once in its pool or fused phase and does no conv
    flops; its conv phase is a contraction of sums (counted as nothing)."""
    if phase == "epilogue":
        return cost["epilogue"]["bytes"], cost["epilogue"]["flops"]
    if computes_conv:
        c = cost["fused" if phase == "fused" else phase]
        return c["bytes"], c["flops"]
    if phase in ("pool", "fused"):
        return cost["fused"]["bytes"], 0.0
    return 0.0, 0.0


def classify(ms: float, work: tuple[float, float], ref: Gpu, name: str = "", phase: str = "") -> str:
    """The bound of one measured phase: DRAM, FP32, launch, latency or issue (module doc)."""
    nbytes, flops = work
    dram_share = nbytes / (ms * 1e-3) / (ref.dram_gbps * 1e9) if ms > 0 else 0.0
    fp32_share = flops / (ms * 1e-3) / (ref.fp32_tflops * 1e12) if ms > 0 else 0.0
    if dram_share >= DRAM_ROOF or fp32_share >= FP32_ROOF:
        return "DRAM" if dram_share / DRAM_ROOF >= fp32_share / FP32_ROOF else "FP32"
    if ms < LAUNCH_MS:
        return "launch"
    if (name, phase) in LATENCY_BOUND:
        return "latency"
    return "issue"


def ratio(bound: str, ref: Gpu, g: Gpu) -> float:
    """r: the factor that turns a phase of this bound measured on `ref` into an estimate for `g`."""
    if bound == "DRAM":
        return ref.dram_gbps / g.dram_gbps
    if bound == "FP32":
        return ref.fp32_tflops / g.fp32_tflops
    if bound == "issue":
        return ref.sm_clock / g.sm_clock
    return 1.0


# ---- shared memory and occupancy of the tiled stages -----------------------------------------

def tiled_smem_bytes(name: str, problem: dict, limit: int) -> tuple[int, int]:
    """(bytes per block, input channels per step) of stage `name`'s tiled plan under a per-block
    limit of `limit` bytes, as its make_plan computes it; (0, 0): the general path."""
    t = TILED[name]
    kh, kw = problem["kernel_size"]
    rows = t["tile_rows"] + (kh - 1) * problem["dilation"][0]
    per_ci = 4 * (rows * t["pitch"] + kh * kw * t["co_tile"])
    budget = min(t["budget"], limit)
    if t["buffers"] * per_ci > budget:
        return 0, 0
    ci = min(t["max_ci"], problem["in_channels"] // problem["groups"], budget // (t["buffers"] * per_ci))
    return t["buffers"] * ci * per_ci, ci


def blocks_per_sm(name: str, problem: dict, g: Gpu) -> tuple[int, str]:
    """Resident blocks per SM of a tiled stage on `g`, and what limits them."""
    t = TILED[name]
    smem, _ = tiled_smem_bytes(name, problem, g.smem_block_kib * 1024)
    reserved = (g.smem_sm_kib - g.smem_block_kib) * 1024
    limits = {
        "threads": g.max_threads_sm // t["threads"],
        "registers": 65536 // (t["regs"] * t["threads"]),
        "blocks": g.max_blocks_sm,
        "shared memory": (g.smem_sm_kib * 1024) // (smem + reserved) if smem else g.max_blocks_sm,
    }
    n = min(limits.values())
    return n, min(limits, key=lambda k: (limits[k], k != "shared memory"))


# ---- the estimates ---------------------------------------------------------------------------

@dataclass
class Row:
    label: str
    bounds: str
    cells: dict          # gpu key -> text
    notes: list


def fmt(ms: float) -> str:
    """3 significant digits, thousands separated."""
    if ms >= 100:
        return f"{ms:,.0f}"
    digits = max(0, 2 - int(math.floor(math.log10(ms)))) if ms > 0 else 0
    return f"{ms:.{digits}f}"


def stage_phases(stage: dict) -> list[tuple[str, float]]:
    """(phase name, measured ms) of each phase a stage of the run recorded, in order."""
    return [(p["phase"], p["ms"]) for p in stage.get("phases", [])]


def estimate_stage(stage: dict, cost: dict, ref: Gpu, g: Gpu) -> tuple[float, list[str]]:
    """(estimated total ms on g, the bound of each phase)."""
    total, bounds = 0.0, []
    for phase, ms in stage_phases(stage):
        b = classify(ms, phase_work(cost, phase, stage.get("computes_conv", True)), ref, stage["name"], phase)
        total += ms * ratio(b, ref, g)
        if stage.get("tensor_cores") and b == "FP32":
            b = "tensor pipe"  # its flops ran on tensor cores: the FP32 share says only "compute"
        bounds.append(f"{phase} {b}")
    return total, bounds


def ladder_rows(run: dict, gpus: list[Gpu], ref: Gpu) -> tuple[list[Row], dict]:
    """Rows of the KernelBench table, and per GPU the summed one-repetition time."""
    cost, problem = run["cost"], run["problem"]
    rows, one_rep = [], {g.key: 0.0 for g in gpus}

    def simple(label: str, ms: float, work: tuple[float, float]) -> Row:
        b = classify(ms, work, ref)
        cells = {}
        for g in gpus:
            v = ms * ratio(b, ref, g)
            cells[g.key] = fmt(v)
            one_rep[g.key] += v
        return Row(label, b, cells, [])

    x_bytes = cost["fused"]["bytes"]
    rows.append(simple("floor: streaming read of x", run["floor_ms"], (x_bytes, 0.0)))
    if run.get("cub_pool_ms"):
        rows.append(simple("CUB segmented sum (pool phase only)", run["cub_pool_ms"],
                           (cost["pool"]["bytes"], 0.0)))
    by_name = {s["name"]: s for s in run["stages"]}
    for s in run["stages"]:
        label = f"{s['id']} {s['name']}"
        if not s.get("ran") or not s.get("gpu", True) or not s.get("phases"):
            rows.append(Row(label, "-", {g.key: "not run" for g in gpus}, []))
            continue
        cells, notes, bounds = {}, [], []
        for g in gpus:
            est, bounds = estimate_stage(s, cost, ref, g)
            text = fmt(s["total_ms"]) if g.key == ref.key else fmt(est)
            value = s["total_ms"] if g.key == ref.key else est
            if g.key != ref.key and s["name"] in NEEDS_SM80 and g.sm < 80 and "register_tiling" in by_name:
                # No cp.async: the copies do not overlap, so at best the synchronous rung's time.
                sync, _ = estimate_stage(by_name["register_tiling"], cost, ref, g)
                value = max(est, sync)
                text = "≥ " + fmt(value)
                notes.append(f"{g.name}: no cp.async below sm_80; the stage runs synchronous copies, "
                             f"so at best stage 08's time")
            if g.key != ref.key and s.get("tensor_cores"):
                # The tensor pipe's rate does not follow the FP32 or DRAM ratios, and mma.sync's
                # share of it differs by architecture: nothing here would be a fair estimate.
                if s["name"] in NEEDS_SM90A and g.sm != 90:
                    text = "general path"
                    notes.append(f"{g.name}: wgmma exists only in sm_90a code, which runs only on sm_90 "
                                 f"(H100, H200); here the stage runs the general FP32 path "
                                 f"(lib/conv_pool_general.cuh), not tensor cores: much slower, not timed here")
                elif g.sm < 80:
                    text = "general path"
                    notes.append(f"{g.name}: no TF32 mma below sm_80; the stage runs the general FP32 "
                                 f"path (lib/conv_pool_general.cuh), not timed here")
                else:
                    text = "not estimated"
                    notes.append(f"{g.name}: a tensor-core stage; its time is not a ratio of the H200's: "
                                 f"measure it (build/{'wgmma' if s['name'] in NEEDS_SM90A else 'mma'}_peak gives the GPU's ceiling)")
                value = est  # the class-time sum keeps an FP32-scaled stand-in
            if s["name"] in TILED and g.key != ref.key:
                n, why = blocks_per_sm(s["name"], problem, g)
                n_ref, _ = blocks_per_sm(s["name"], problem, ref)
                if n < n_ref and why == "shared memory":
                    text += " ‡"
                    smem, _ = tiled_smem_bytes(s["name"], problem, g.smem_block_kib * 1024)
                    notes.append(f"{g.name}: {'one block' if n == 1 else f'{n} blocks'} of {smem:,} B "
                                 f"shared memory per SM "
                                 f"({g.smem_sm_kib} KiB per SM) against {n_ref} on the {ref.name}: "
                                 f"fewer warps to hide latency than the estimate assumes")
            cells[g.key] = text
            one_rep[g.key] += value
        rows.append(Row(label, ", ".join(bounds), cells, notes))
    return rows, one_rep


def pool_only_rows(run: dict, gpus: list[Gpu], ref: Gpu) -> tuple[list[Row], dict]:
    """Rows of the pool-only table (the floor, CUB, every pool stage), and per GPU the summed time."""
    nbytes = run["tensor"]["bytes"]
    rows, one_rep = [], {g.key: 0.0 for g in gpus}

    def add(label: str, ms: float, name: str = "") -> None:
        b = classify(ms, (nbytes, 0.0), ref, name, "pool")
        cells = {}
        for g in gpus:
            v = ms * ratio(b, ref, g)
            cells[g.key] = fmt(v)
            one_rep[g.key] += v
        rows.append(Row(label, b, cells, []))

    add("streaming read of the tensor", run["floor_ms"])
    if run.get("cub_pool_ms"):
        add("CUB segmented sum", run["cub_pool_ms"])
    for s in run["stages"]:
        if s.get("ran") and s.get("pool_ms"):
            add(f"{s['id']} {s['name']}", s["pool_ms"], s["name"])
    return rows, one_rep


def validation_rows(run: dict, ref: Gpu) -> list[str]:
    """The estimates for VALIDATION's GPU against its committed run, phase by phase."""
    path, key, names = VALIDATION
    if not (REPO / path).exists():
        return []
    other, g = load(REPO / path), SPECS[key]
    ours = {s["name"]: dict(stage_phases(s)) for s in run["stages"] if s.get("phases")}
    out = [f"| stage, phase | bound | {g.name}: estimated ms | measured ms (`{path.as_posix()}`) "
           "| estimated / measured |",
           "|---|---|--:|--:|--:|"]
    for s in other["stages"]:
        if s["name"] not in names or s["name"] not in ours:
            continue
        for phase, ms in stage_phases(s):
            if phase not in ours[s["name"]] or phase == "epilogue":
                continue
            here = ours[s["name"]][phase]
            b = classify(here, phase_work(run["cost"], phase, True), ref, s["name"], phase)
            est = here * ratio(b, ref, g)
            out.append(f"| {s['id']} {s['name']}, {phase} | {b} | {fmt(est)} | {fmt(ms)} | {est / ms:.2f} |")
    return out


def render_table(title_col: str, rows: list[Row], gpus: list[Gpu], ref: Gpu) -> list[str]:
    """Markdown lines of a time table, one column per GPU, with each row's notes as a list below."""
    head = [title_col, "bound (per phase)"] + [
        f"{g.name} sm_{g.sm} ({'measured' if g.key == ref.key else 'estimated'})" for g in gpus]
    out = ["| " + " | ".join(head) + " |", "|---|---|" + "--:|" * len(gpus)]
    for r in rows:
        out.append("| " + " | ".join([r.label, r.bounds] + [r.cells[g.key] for g in gpus]) + " |")
    notes = [n for r in rows for n in r.notes]
    if notes:
        out.append("")
        out += [f"- {r.label.split(' ')[0]} on {n}" for r in rows for n in r.notes]
    return out


def spec_table(gpus: list[Gpu]) -> list[str]:
    """Markdown lines of the spec sheet the estimates use, one row per GPU."""
    out = ["| GPU | sm | SMs | boost GHz | FP32 lanes/SM | FP32 TFLOP/s (SMs × lanes × GHz × 2) | "
           "vendor's FP32 TFLOP/s | DRAM GB/s | memory GB | L2 MB | "
           "shared memory per block (opt-in) / per SM, KiB |",
           "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for g in gpus:
        out.append(f"| {g.name} | {g.sm} | {g.sms} | {g.boost_ghz} | {g.fp32_lanes} | {g.fp32_tflops:.1f} | "
                   f"{g.fp32_tflops_quoted} | {g.dram_gbps:,.0f} | {g.memory_gb:g} | {g.l2_mib:g} | "
                   f"{g.smem_block_kib} / {g.smem_sm_kib} |")
    return out


# ---- device memory -----------------------------------------------------------------------------

def memory_rows(problem: dict, gpus: list[Gpu]) -> list[str]:
    """Device memory the programs allocate at the run's problem (decimal GB), per GPU: the L2
    flush buffer (twice the L2) is the only part that depends on the GPU."""
    n, cin, cout = problem["batch"], problem["in_channels"], problem["out_channels"]
    h, w = problem["in_h"], problem["in_w"]
    kh, kw = problem["kernel_size"]
    x = 4 * n * cin * h * w
    conv_out = 4 * n * cout * problem["out_h"] * problem["out_w"]
    small = 4 * (cin * (cout // problem["groups"]) * kh * kw + 2 * cout + n * cout + n)
    base = x + small
    mib = 1024 * 1024
    # The >2^31-element test: batch 1, 1 -> 8200 channels, 512x512, kernel 3 (tests/test_gpu_stages.cpp
    # skips it, naming the need, when inputs + workspace + its 512 MiB margin exceed what is free).
    big_out = 4 * 1 * 8200 * 514 * 514
    big_base = 4 * (512 * 512 + 8200 * 9 + 2 * 8200 + 8200 + 1) + 512 * mib
    items = [
        ("`ladder` (every stage): inputs + the convT output of stages 01-05 (or CUB's copy of it)",
         base + conv_out + 4 * n * cout),
        ("`ladder --stages 06,07,08,09,12,13 --no-cub`: inputs + at most about 1 MiB of workspace",
         base + mib),
        ("`ladder --pool-only`: the convT-shaped tensor + plane sums", conv_out + 2 * 4 * n * cout),
        ("grader timing, pool mode (rungs 03-05): fresh convT-shaped input + 2 workspaces",
         conv_out + 2 * 4 * n * cout),
        ("grader timing, stage mode (rungs 08-13): inputs + 2 workspaces of 1 to 2.3 MiB",
         base + 2 * 2.3 * mib),
        ("GPU test `OutputBeyond2To31Elements`, stages 01-05 (skipped when it does not fit)",
         big_out + big_base),
    ]
    out = ["| what (device memory, GB) | without the flush buffer | " +
           " | ".join(f"{g.name} ({g.memory_gb:g} GB)" for g in gpus) + " |",
           "|---|--:|" + ":-:|" * len(gpus)]
    for what, b in items:
        cells = []
        for g in gpus:
            total = b + 2 * g.l2_mib * mib
            cells.append(f"{total / 1e9:.2f} {'fits' if total < g.memory_gb * 1e9 else '**no**'}")
        out.append(f"| {what} | {b / 1e9:.2f} | " + " | ".join(cells) + " |")
    return out


# ---- the whole block -----------------------------------------------------------------------------

def rel(p: Path) -> str:
    """`p` relative to the repository root, or its file name when it lies outside."""
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return p.name


def render(ladder_path: Path, pool_path: Path | None, pytorch_path: Path | None, keys: list[str]) -> str:
    """The whole generated Markdown block, from the result files and the GPU classes named by `keys`."""
    run = load(ladder_path)
    ref = reference_gpu(run)
    unknown = [k for k in keys if k not in SPECS]
    if unknown:
        raise SystemExit(f"error: unknown GPU class(es) {', '.join(unknown)}; known: {', '.join(SPECS)}")
    if ref.key not in keys:
        keys = keys + [ref.key]
    gpus = [SPECS[k] for k in keys]
    prov = run.get("provenance", {})
    p = run["problem"]
    timing = run.get("timing", {})
    runs_per_stage = timing.get("warmup", 2) + timing.get("reps", 10)
    out = [f"<!-- generated by scripts/estimate_gpu_classes.py from {rel(ladder_path)}"
           + (f", {rel(pool_path)}" if pool_path else "") + (f", {rel(pytorch_path)}" if pytorch_path else "")
           + "; do not edit by hand -->", ""]
    out.append(f"Measured: {run['device']}, commit {prov.get('git_commit', 'not recorded')}, "
               f"{timing.get('reps', '?')} repetitions after {timing.get('warmup', '?')} warm-ups, medians "
               f"(`{rel(ladder_path)}`). Problem: batch {p['batch']}, {p['in_channels']} -> {p['out_channels']} "
               f"channels, {p['in_h']}x{p['in_w']}, kernel {p['kernel_size'][0]}. Every other column is an "
               "estimate: measured ms × r, with r per phase as below; a stage is the sum of its phases.")
    out.append("")
    r = ref.name
    out += ["| bound of a phase (from the measured run) | r for GPU g | rule |", "|---|---|---|",
            f"| DRAM | DRAM GB/s of the {r} / DRAM GB/s of g | must-move bytes at ≥ {DRAM_ROOF:.0%} of the DRAM peak |",
            f"| FP32 | FP32 peak of the {r} / FP32 peak of g | flops at ≥ {FP32_ROOF:.0%} of the FP32 peak |",
            f"| issue | (SMs × GHz) of the {r} / (SMs × GHz) of g | near neither roof, ≥ {LAUNCH_MS} ms |",
            "| latency | 1 (kept as measured) | near neither roof: few threads waiting on memory (01's pool), "
            "atomics on one address (02's pool) |",
            f"| launch | 1 (kept as measured) | near neither roof, < {LAUNCH_MS} ms |"]
    out.append("")
    out += spec_table(gpus)
    out.append("")
    out.append(f"**Time per stage at the KernelBench size, ms** (total of one repetition; {ref.name}: measured medians).")
    out.append("")
    rows, one_rep = ladder_rows(run, gpus, ref)
    if pytorch_path:
        py = load(pytorch_path)
        for t in py.get("timings", []):
            if t.get("kind") in ("eager", "eager_fp32", "compile"):
                cells = {g.key: (fmt(t["median_ms"]) if g.key == ref.key else "not estimated") for g in gpus}
                rows.append(Row(t["variant"], "cuDNN picks per GPU", cells, []))
    out += render_table("stage", rows, gpus, ref)
    out.append("")
    out.append("‡ the tiled plan fits, but shared memory allows fewer resident blocks per SM than on the "
               f"{ref.name}. ≥: a lower bound. general path: the GPU lacks the stage's instructions (TF32 "
               "`mma.sync` below sm_80; `wgmma` and the bulk copy on anything but sm_90 with sm_90a code), "
               "so the stage runs the FP32 kernel of the fused rungs, not tensor cores.")
    out.append("")
    if pool_path:
        pool = load(pool_path)
        prow, pool_rep = pool_only_rows(pool, gpus, ref)
        out.append(f"**Pool phase alone (`ladder --pool-only`), ms**, from `{rel(pool_path)}` "
                   f"(commit {pool.get('provenance', {}).get('git_commit', 'not recorded')}).")
        out.append("")
        out += render_table("pool phase", prow, gpus, ref)
        out.append("")
    out.append(f"**GPU time of the timed loops of a default `ladder` run** ({runs_per_stage} runs per row: "
               f"{timing.get('warmup', 2)} warm-ups + {timing.get('reps', 10)} repetitions; the floor, CUB and "
               "every GPU stage, a tensor-core stage at its FP32-scaled stand-in, though on the general path it takes "
               "longer; not counted: input generation, the oracle, uploads, L2 flushes, start-up), seconds:")
    out.append("")
    out.append("| | " + " | ".join(g.name for g in gpus) + " |")
    out.append("|---|" + "--:|" * len(gpus))
    out.append("| `ladder` | " + " | ".join(f"{runs_per_stage * one_rep[g.key] / 1e3:,.0f}" for g in gpus) + " |")
    if pool_path:
        out.append("| `ladder --pool-only` | " + " | ".join(
            f"{runs_per_stage * pool_rep[g.key] / 1e3:,.1f}" for g in gpus) + " |")
    out.append("")
    check = validation_rows(run, ref)
    if check:
        out.append(f"**The formula against the one other GPU measured** ({SPECS[VALIDATION[1]].name}: the same "
                   f"SMs and clock as the {ref.name}, {ref.dram_gbps / SPECS[VALIDATION[1]].dram_gbps:.2f}x less "
                   "DRAM bandwidth; an earlier ladder whose stages 01-03 ran today's kernels):")
        out.append("")
        out += check
        out.append("")
    out.append("**Device memory at the KernelBench size** (decimal GB, from the problem's sizes; each "
               "column adds the GPU's L2 flush buffer, twice its L2; not counted: the CUDA context, "
               "CUB's temporary storage):")
    out.append("")
    out += memory_rows(p, gpus)
    out.append("")
    smem = ", ".join(f"{TILED_LABEL[n]} {tiled_smem_bytes(n, p, 1 << 30)[0]:,} B" for n in TILED)
    fits = all(tiled_smem_bytes(n, p, g.smem_block_kib * 1024) == tiled_smem_bytes(n, p, 1 << 30)
               for n in TILED for g in gpus)
    out.append(f"Shared memory per block of the tiled plans at this problem: {smem}; "
               + ("the same plan fits every GPU above." if fits else
                  "some GPUs above take a smaller plan (fewer input channels per step)."))
    return "\n".join(out) + "\n"


TILED_LABEL = {"shared_memory_tiling": "07", "register_tiling": "08", "async_copy": "09"}


def replace_block(text: str, block: str, path: Path) -> str:
    """`text` with what lies between its BEGIN and END markers replaced by `block`; exits if not one block."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise SystemExit(f"error: {path} needs exactly one {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + block + END + tail


def main(argv: list[str] | None = None) -> int:
    """Prints the block, or --update rewrites it in a file, or --check compares (exit 1: stale)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ladder", type=Path, default=REPO / "results" / "ladder_h200.json")
    ap.add_argument("--pool-only", type=Path, default=REPO / "results" / "pool_only_h200.json",
                    help="a `ladder --pool-only --json` file; 'none' to leave it out")
    ap.add_argument("--pytorch", type=Path, default=REPO / "results" / "pytorch_h200.json",
                    help="a scripts/compare.py --problem 42 --json file; 'none' to leave it out")
    ap.add_argument("--gpus", default=",".join(DEFAULT_GPUS),
                    help=f"comma-separated GPU classes (known: {', '.join(SPECS)})")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--update", type=Path, metavar="FILE", help="rewrite FILE's estimates block")
    mode.add_argument("--check", type=Path, metavar="FILE", help="exit 1 if FILE's estimates block is stale")
    a = ap.parse_args(argv)
    pool = None if str(a.pool_only) == "none" else a.pool_only
    pytorch = None if str(a.pytorch) == "none" else a.pytorch
    block = render(a.ladder, pool, pytorch, [k.strip() for k in a.gpus.split(",") if k.strip()])
    if not (a.update or a.check):
        sys.stdout.write(block)
        return 0
    path = a.update or a.check
    text = path.read_text(encoding="utf-8")
    new = replace_block(text, block, path)
    if a.check:
        if new != text:
            print(f"{path}: the estimates block is out of date; run "
                  f"python3 scripts/estimate_gpu_classes.py --update {path}", file=sys.stderr)
            return 1
        print(f"{path}: the estimates block is up to date")
        return 0
    path.write_text(new, encoding="utf-8")
    print(f"{path}: estimates block written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
