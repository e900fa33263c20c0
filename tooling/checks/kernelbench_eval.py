"""This repository's ModelNew for KernelBench level 2 problems 42, 38 and 74, evaluated the way
KernelBench evaluates a submission, plus each output's error against float64.

    python3 scripts/kernelbench_eval.py --json results/kernelbench/kernelbench_h200.json
    python3 scripts/kernelbench_eval.py --problems 74 --quick          # a few minutes
    python3 scripts/kernelbench_eval.py --problems 38 --json f.json --append   # add to a file
    python3 scripts/kernelbench_eval.py --problems 38,74 --rung 38=06 --rung 74=04:08   # other rungs

KernelBench's procedure, as read in ScalingIntelligence/KernelBench at commit 423217d (March
2026: src/kernelbench/eval.py, src/kernelbench/timing.py, scripts/run_and_check.py); this script
re-implements it, it does not import KernelBench:

  * Weights. Model and ModelNew are each built (on the CPU) right after seeding torch with the
    same seed (42), so a ModelNew that creates the same parameters in the same order gets the
    same weights. Here too; whether the two state_dicts came out equal is recorded
    (weights_equal_from_seed), and ModelNew then gets Model's state_dict anyway.
  * Correctness. From the seed, one random 32-bit seed per trial (5 trials in its scripts); per
    trial, torch and CUDA are seeded with it, get_inputs() draws fresh inputs on the CPU, they
    move to the GPU, and under torch.no_grad() the fp32 outputs must pass
    torch.allclose(ref, new, atol=1e-4, rtol=1e-4), i.e. |ref - new| <= 1e-4 + 1e-4*|new|
    everywhere (1e-4 is its fp32 tolerance; its first versions used 1e-2). Every trial must
    pass. KernelBench records the largest difference only for a failing trial; here every
    trial's is recorded, with the worst ratio of |ref - new| to the allowed difference.
    KernelBench leaves PyTorch's TF32 switches alone: cuDNN convolutions run in TF32 (PyTorch's
    default), matmuls in FP32.
  * Timing. CUDA events around one call, after `warmup` untimed calls (each followed by a
    synchronize) and torch.cuda.empty_cache(); before each timed call a synchronize and an L2
    flush (a 256 MiB int64 tensor filled with a constant); after it a synchronize. 100 calls
    plus one discarded first call; the mean, as KernelBench reports it, rounded to 3
    significant digits. ModelNew is timed with grad mode on (warm-up 3). The speedups it
    prints come from the reference timed separately under torch.no_grad() (warm-up 5), eager
    and torch.compile (inductor, mode "default", after torch._dynamo.reset()):
    speedup = reference mean / ModelNew mean.
  * Excessive-speedup guard. Its eval function also times the eager reference itself, with
    the same timing function and grad mode on, and flags a speedup above 10x (a warning and
    metadata["excessive_speedup"] = True; the result still counts as correct).

Beyond KernelBench, per trial: the float64 truth (a double copy of Model on the same weights and
inputs, on the GPU; problem 74's LeakyReLU slope rounded to fp32 first, as PyTorch applies it
to fp32 tensors) and the max |error| against it of the reference at PyTorch's defaults (TF32
convolutions), the reference with TF32 off (torch.backends.cudnn.allow_tf32 and
torch.backends.cuda.matmul.allow_tf32 False) and ModelNew; ModelNew checked against the TF32-off
reference at 1e-4 (a working choice for problem 74); whether an all-zero output would pass
(zeros_pass: problem 38's outputs are ~1e-5, below atol). Problem 42: a second float64 oracle,
the linearity identity (pooled = conv_bias + plane sums of x times tap-summed weights /
(Hout*Wout); docs/problem.md), against the literal one and ModelNew. Problem 74: ModelNew on
operands rounded to TF32 (round half away from zero, "rna", and truncation, "trunc"), checked
against the default reference: whether matching the reference's precision class passes.
Timings add eager with grad mode on (the guard's reference), eager and torch.compile with TF32
off, and the TF32-rounded variants (problem 74).

Skips (one line, exit 0) without PyTorch or a CUDA device. Exit 1 when the extension does not
build or an evaluation raises. Failed correctness checks are results, not errors (exit 0).
Progress on stderr, a summary on stdout, everything in --json.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import json
import math
import statistics
import sys
import traceback
from pathlib import Path

from . import compare_common as cc

REPO = Path(__file__).resolve().parents[2]

SCRIPT = cc.Script("kernelbench_eval")
log = SCRIPT.log

# ---- KernelBench's procedure: constants (commit 423217d) ---------------------------------------------

KB_COMMIT = "423217d9fda91e0c2d67e4a43bf62f96f6d104f1"
KB_ATOL = KB_RTOL = 1e-4           # fp32 tolerance of torch.allclose
KB_CORRECT_TRIALS = 5              # its scripts' num_correct_trials
KB_PERF_TRIALS = 100               # its scripts' num_perf_trials
KB_WARMUP_NEW = 3                  # ModelNew (and the guard's reference): the timing function's default
KB_WARMUP_REF = 5                  # the reference timed for the reported speedups
KB_DISCARD_FIRST = 1               # timed calls dropped before the statistics
KB_SEED = 42
KB_EXCESSIVE = 10.0                # flag a speedup above this over eager (grad mode on)
KB_FLUSH_BYTES = 32 * 1024 * 1024 * 8  # the L2 flush: a (32, 1024, 1024) int64 tensor
QUICK_PERF_TRIALS = 10

# KernelBench's problems (KernelBench/level2/<file>.py): sizes as in its get_inputs / get_init_inputs.
PROBLEMS = {
    "42": {"file": "42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply",
           "module": "conv_pool_ladder.models", "stages": ["single_launch"], "track": None,
           "x_shape": (16, 64, 512, 512), "init_inputs": [64, 128, 3, (128, 1, 1)],
           "model_new": "conv_pool_ladder.models.ModelNew: stage 13 single_launch"},
    "38": {"file": "38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply",
           "module": "conv_pool_ladder.p38", "stages": [], "track": "p38",
           "x_shape": (32, 32, 32, 64, 64), "init_inputs": [32, 64, 3, 2, 1, 1, 2, 0.0, 1.0],
           "model_new": "conv_pool_ladder.p38.ModelNew: rung 08 tensor_cores"},
    "74": {"file": "74_ConvTranspose3d_LeakyReLU_Multiply_LeakyReLU_Max",
           "module": "conv_pool_ladder.p74", "stages": [], "track": "p74",
           "x_shape": (16, 16, 16, 32, 32), "init_inputs": [16, 32, 3, 2, 1, 1, (32, 1, 1, 1)],
           "model_new": "conv_pool_ladder.p74.ModelNew: forward rung 10 tensor_cores, backward rung 09"},
}
TF32_MODES = ("rna", "trunc")  # problem 74's TF32-operand variants


# ---- plain Python: verdicts, statistics, the JSON record (scripts/test_kernelbench_eval.py) ----------

def allowed_diff(new_abs, atol=KB_ATOL, rtol=KB_RTOL):
    """torch.allclose(ref, new)'s bound at one element: atol + rtol*|new| (the second argument's
    magnitude: the check is not symmetric). Works on floats and on tensors."""
    return atol + rtol * new_abs


def within(ref, new, atol=KB_ATOL, rtol=KB_RTOL) -> bool:
    """torch.allclose's verdict for two floats (equal_nan=False: a NaN never passes; equal
    infinities do)."""
    if math.isnan(ref) or math.isnan(new):
        return False
    if ref == new:
        return True
    if math.isinf(ref) or math.isinf(new):  # unequal, one of them infinite
        return False
    return abs(ref - new) <= allowed_diff(abs(new), atol, rtol)


def kb_round(v):
    """v to 3 significant digits, as KernelBench stores its timing statistics; None stays None."""
    return None if v is None else float(f"{v:.3g}")


def timing_stats(times_ms) -> dict:
    """The statistics of the kept calls (milliseconds): mean, KernelBench's rounded mean, median,
    std (population, as numpy's), min, max, count."""
    t = list(times_ms)
    if not t:
        raise ValueError("no timed calls")
    mean = statistics.fmean(t)
    return {"mean_ms": mean, "kb_mean_ms": kb_round(mean), "median_ms": statistics.median(t),
            "std_ms": statistics.pstdev(t), "min_ms": min(t), "max_ms": max(t), "trials": len(t)}


def speedup(ref_ms, new_ms):
    """ref_ms / new_ms, or None when either is missing or not positive."""
    if ref_ms is None or new_ms is None or ref_ms <= 0 or new_ms <= 0:
        return None
    return ref_ms / new_ms


def excessive(s, threshold=KB_EXCESSIVE):
    """KernelBench's guard: a speedup strictly above the threshold is flagged; None if unknown."""
    return None if s is None else bool(s > threshold)


def max_or_none(values):
    """The largest of the values that are not None (NaN counts as infinite), or None."""
    vals = [math.inf if isinstance(v, float) and math.isnan(v) else v for v in values if v is not None]
    return max(vals) if vals else None


def summarize_check(per_trial) -> dict:
    """One correctness check over the trials, from per-trial {pass, max_abs_diff, worst_ratio}:
    passed, trials, all_passed, KernelBench's "(passed / trials)", every trial's max |diff|,
    their max, the worst ratio to the allowed difference."""
    diffs = [t["max_abs_diff"] for t in per_trial]
    passed = sum(1 for t in per_trial if t["pass"])
    return {"passed": passed, "trials": len(per_trial), "all_passed": bool(per_trial) and passed == len(per_trial),
            "correctness_trials": f"({passed} / {len(per_trial)})", "max_abs_diff": diffs,
            "max_abs_diff_max": max_or_none(diffs),
            "worst_ratio_max": max_or_none([t.get("worst_ratio") for t in per_trial])}


# (key, reference timing, candidate timing): the speedups recorded when both were timed.
SPEEDUPS = (("eager", "eager", "model_new"), ("compile", "compile", "model_new"),
            ("guard", "eager_grad", "model_new"), ("eager_tf32_off", "eager_tf32_off", "model_new"),
            ("compile_tf32_off", "compile_tf32_off", "model_new"),
            *((f"tf32_{m}_vs_eager", "eager", f"model_new_tf32_{m}") for m in TF32_MODES),
            *((f"tf32_{m}_vs_compile", "compile", f"model_new_tf32_{m}") for m in TF32_MODES))
CORE_SPEEDUPS = ("eager", "compile", "guard", "eager_tf32_off", "compile_tf32_off")


def speedups(timing) -> dict:
    """The speedups of SPEEDUPS from KernelBench's rounded means (timing: name -> timing_stats,
    or {"error": ...}); the core ones always present (None when not measured)."""
    out = {}
    for key, ref, new in SPEEDUPS:
        r, n = timing.get(ref) or {}, timing.get(new) or {}
        if key in CORE_SPEEDUPS or (r.get("kb_mean_ms") and n.get("kb_mean_ms")):
            out[key] = speedup(r.get("kb_mean_ms"), n.get("kb_mean_ms"))
    return out


def problem_record(pid, trials, timing, extra=None) -> dict:
    """Problem pid's JSON record from its trials (each {seed, checks: {name: {pass, max_abs_diff,
    worst_ratio}}, vs_fp64: {name: max |err|}, zeros_pass, output_abs_max[, oracles: {name:
    value}]}) and timings (name -> timing_stats). Keys: see docs/kernelbench.md."""
    spec = PROBLEMS[pid]
    names = list(dict.fromkeys(k for t in trials for k in t["checks"]))
    fp64 = list(dict.fromkeys(k for t in trials for k in t["vs_fp64"]))
    rec = {"problem": int(pid), "name": spec["file"], "model_new": spec["model_new"],
           "x_shape": list(spec["x_shape"]), "init_inputs": spec["init_inputs"],
           "trial_seeds": [t["seed"] for t in trials],
           "output_abs_max": max_or_none([t["output_abs_max"] for t in trials]),
           "zeros_pass": sum(1 for t in trials if t["zeros_pass"]),
           "correctness": {k: summarize_check([t["checks"][k] for t in trials if k in t["checks"]]) for k in names},
           "vs_fp64": {k: {"per_trial": [t["vs_fp64"].get(k) for t in trials],
                           "max": max_or_none([t["vs_fp64"].get(k) for t in trials])} for k in fp64},
           "timing": timing, "speedup": speedups(timing), "excessive_speedup_threshold": KB_EXCESSIVE}
    oracles = list(dict.fromkeys(k for t in trials for k in t.get("oracles", {})))
    if oracles:
        rec["oracles"] = {k: max_or_none([t.get("oracles", {}).get(k) for t in trials]) for k in oracles}
    rec["excessive_speedup"] = excessive(rec["speedup"]["guard"])
    # KernelBench times a kernel (and prints speedups) only when every correctness trial passed
    rec["kb_speedup_reported"] = bool(rec["correctness"].get("default", {}).get("all_passed"))
    rec.update(extra or {})
    return rec


def rung_choices(specs) -> dict:
    """--rung values ("38=08", "74=10", "74=10:09") as ModelNew keyword arguments per problem:
    {"38": {"rung": "08"}, "74": {"forward_rung": "10", "backward_rung": "09"}}. ValueError naming
    the value: no "=", a problem without rungs (42: ModelNew is stage 13), an empty rung, a
    backward rung for 38, or a problem given twice. Whether the rung exists is the extension's
    check, when ModelNew runs."""
    out = {}
    for spec in specs:
        pid, sep, rung = (v.strip() for v in spec.partition("="))
        if not sep or not rung:
            raise ValueError(f"{spec!r}: expected PID=RUNG, e.g. 38=06 or 74=04:08")
        if pid not in ("38", "74"):
            raise ValueError(f"{spec!r}: only the track problems 38 and 74 have rungs to choose")
        if pid in out:
            raise ValueError(f"{spec!r}: problem {pid} given twice")
        fwd, colon, bwd = (v.strip() for v in rung.partition(":"))
        if pid == "38":
            if colon:
                raise ValueError(f"{spec!r}: problem 38 has no backward rung")
            out[pid] = {"rung": fwd}
        else:
            if not fwd or (colon and not bwd):
                raise ValueError(f"{spec!r}: expected 74=FORWARD or 74=FORWARD:BACKWARD")
            out[pid] = {"forward_rung": fwd, **({"backward_rung": bwd} if bwd else {})}
    return out


def model_new_name(pid, kwargs) -> str:
    """The record's model_new: the default's description, or the module's ModelNew and the rungs chosen."""
    if not kwargs:
        return PROBLEMS[pid]["model_new"]
    chosen = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{PROBLEMS[pid]['module']}.ModelNew({chosen}) (--rung)"


def procedure() -> dict:
    """KernelBench's constants as this script applies them (the JSON's "procedure")."""
    return {"kernelbench_commit": KB_COMMIT, "atol": KB_ATOL, "rtol": KB_RTOL,
            "correctness_trials": KB_CORRECT_TRIALS, "perf_trials": KB_PERF_TRIALS, "warmup_model_new": KB_WARMUP_NEW,
            "warmup_reference": KB_WARMUP_REF, "discard_first": KB_DISCARD_FIRST, "seed": KB_SEED,
            "excessive_speedup_threshold": KB_EXCESSIVE, "l2_flush_bytes": KB_FLUSH_BYTES,
            "compile": {"backend": "inductor", "mode": "default"}}


def merge(old, new) -> dict:
    """new, with the problems of old that new lacks kept (--append)."""
    if not isinstance(old, dict) or old.get("skipped") or "problems" not in old:
        return new
    return {**new, "problems": {**old["problems"], **new["problems"]}}


def fmt(v, spec=".3g", none="-"):
    return none if v is None else format(v, spec)


def summary_lines(rec) -> list:
    """A problem's record as a few lines of text (stdout)."""
    c, e, t, s = rec["correctness"], rec["vs_fp64"], rec["timing"], rec["speedup"]
    out = [f"problem {rec['problem']} ({rec['name']}): {rec['model_new']}",
           f"  weights equal from the seed: {rec.get('weights_equal_from_seed')}; max |output| "
           f"{fmt(rec['output_abs_max'])}; an all-zero output would pass {rec['zeros_pass']}/{len(rec['trial_seeds'])}"]
    for k, v in c.items():
        out.append(f"  allclose vs {k:<16} {v['correctness_trials']:>8}  max |diff| {fmt(v['max_abs_diff_max'], '.2e')}"
                   f"  worst {fmt(v['worst_ratio_max'])} x allowed")
    out.append("  max |error| vs float64: " + ", ".join(f"{k} {fmt(v['max'], '.2e')}" for k, v in e.items()))
    for k, v in (rec.get("oracles") or {}).items():
        out.append(f"  oracle {k}: {fmt(v, '.2e')}")
    out.append("  mean ms (KernelBench's rounding): " + ", ".join(
        f"{k} {fmt(v.get('kb_mean_ms'))}" if "error" not in v else f"{k} failed" for k, v in t.items()))
    out.append("  speedup: " + ", ".join(f"{k} {fmt(v, '.2f')}x" for k, v in s.items())
               + f"; guard > {rec['excessive_speedup_threshold']:g}x: "
               + {True: "FLAGGED", False: "not flagged", None: "not measured"}[rec["excessive_speedup"]])
    return out


# ---- torch: seeding, TF32, timing, checks ------------------------------------------------------------

def set_seed(torch, seed):
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)


def trial_seeds(torch, seed, n):
    """One seed per correctness trial, drawn from torch's generator seeded with `seed`."""
    torch.manual_seed(seed)
    return [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(n)]


@contextlib.contextmanager
def tf32(torch, enabled):
    """cuDNN's and cuBLAS's TF32 switches (the legacy flags) set to `enabled`, restored after;
    None: untouched. A flag already at `enabled` is not written (PyTorch 2.9+ can raise when the
    legacy flags and the newer fp32_precision settings are mixed; the matmul flag is off by
    default, so the usual write is cuDNN's alone, as compare_common.cudnn_tf32 does)."""
    if enabled is None:
        yield
        return
    flags = [(torch.backends.cudnn, "allow_tf32"), (torch.backends.cuda.matmul, "allow_tf32")]
    changed = [(obj, name, getattr(obj, name)) for obj, name in flags if bool(getattr(obj, name)) != enabled]
    for obj, name, _ in changed:
        setattr(obj, name, enabled)
    try:
        yield
    finally:
        for obj, name, old in changed:
            setattr(obj, name, old)


def flush_l2(torch):
    buf = torch.empty(KB_FLUSH_BYTES // 8, dtype=torch.int64, device="cuda")
    buf.fill_(42)
    del buf


def kb_time(torch, fn, inputs, warmup, trials, discard_first=KB_DISCARD_FIRST):
    """fn(*inputs) timed as KernelBench's CUDA-event method does (module docstring): timing_stats
    of the kept calls."""
    for _ in range(warmup):
        fn(*inputs)
        torch.cuda.synchronize()
    torch.cuda.empty_cache()
    times = []
    for i in range(trials + discard_first):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush_l2(torch)
        start.record()
        fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        if i >= discard_first:
            times.append(start.elapsed_time(end))
    return timing_stats(times)


def check(torch, ref, new) -> dict:
    """KernelBench's verdict torch.allclose(ref, new, 1e-4, 1e-4), with max |ref - new| and the
    worst ratio of |ref - new| to atol + rtol*|new| (inf where a NaN or a shape differs)."""
    if ref.shape != new.shape:
        return {"pass": False, "max_abs_diff": math.inf, "worst_ratio": math.inf,
                "error": f"shape {tuple(new.shape)}, expected {tuple(ref.shape)}"}
    ok = bool(torch.allclose(ref, new, atol=KB_ATOL, rtol=KB_RTOL))
    diff = (ref.double() - new.double()).abs()
    diff = torch.where(ref == new, torch.zeros_like(diff), diff)  # equal infinities: no difference
    ratio = diff / allowed_diff(new.double().abs())
    finite = lambda v: math.inf if math.isnan(v) else v  # noqa: E731
    return {"pass": ok, "max_abs_diff": finite(float(diff.max())), "worst_ratio": finite(float(ratio.max()))}


def err64(got, truth) -> float:
    """max |got - truth| in double (inf for a NaN)."""
    v = float((got.double() - truth).abs().max())
    return math.inf if math.isnan(v) else v


def tf32_round(torch, t, mode):
    """t's float32 values rounded to TF32 (10 mantissa bits): "rna" rounds half away from zero
    (cvt.rna.tf32.f32), "trunc" drops the 13 low bits (what an mma does with raw fp32 bits)."""
    b = t.detach().contiguous().view(torch.int32)
    if mode == "rna":
        b = b + 0x1000
    return (b & -8192).view(torch.float32)  # -8192 = 0xFFFFE000


def tf32_variant(torch, new, mode):
    """A callable: ModelNew on TF32-rounded x and conv weight (a deep copy; bias, multiplier fp32)."""
    emu = copy.deepcopy(new)
    with torch.no_grad():
        emu.conv_transpose.weight.copy_(tf32_round(torch, emu.conv_transpose.weight, mode))
    return lambda x: emu(tf32_round(torch, x, mode))


def fp64_model(torch, model, pid):
    m64 = copy.deepcopy(model).double()
    if pid == "74":
        m64.leaky_relu.negative_slope = cc.fp32_round(model.leaky_relu.negative_slope)
    return m64


def identity_oracle_42(torch, model, x64):
    """Problem 42 in float64 by the linearity identity (no padding: every tap sees the whole
    plane): pooled = cb + S @ (taps summed w) / (Hout*Wout), then + bias, logsumexp, *10."""
    ct = model.conv_transpose
    assert tuple(ct.padding) == (0, 0) and tuple(ct.stride) == (1, 1) and ct.groups == 1
    w, cb = ct.weight.detach().double(), ct.bias.detach().double()
    hout = (x64.shape[2] - 1) * ct.stride[0] + ct.dilation[0] * (ct.kernel_size[0] - 1) + ct.output_padding[0] + 1
    wout = (x64.shape[3] - 1) * ct.stride[1] + ct.dilation[1] * (ct.kernel_size[1] - 1) + ct.output_padding[1] + 1
    pooled = cb + x64.sum(dim=(2, 3)) @ w.sum(dim=(2, 3)) / (hout * wout)
    z = pooled + model.bias.detach().double().view(1, -1)
    return 10.0 * torch.logsumexp(z, dim=1, keepdim=True)


# ---- one problem --------------------------------------------------------------------------------------

def build(torch, pids, verbose):
    """One extension module with what the problems need (stage 13, the p38 and p74 tracks)."""
    import conv_pool_ladder as cpl

    stages = sorted({s for p in pids for s in PROBLEMS[p]["stages"]})
    tracks = {f"with_{PROBLEMS[p]['track']}": True for p in pids if PROBLEMS[p]["track"]}
    log(f"building the extension: stages {stages or 'none'}, {', '.join(tracks) or 'no track'} (first build: minutes)")
    return cpl.load_extension(stages, verbose=verbose, **tracks)


def problem_io(pid):
    """(Model, ModelNew, get_inputs, init_inputs) of problem pid."""
    spec = PROBLEMS[pid]
    mod = importlib.import_module(spec["module"])
    if pid == "42":
        import torch

        return mod.Model, mod.ModelNew, (lambda: [torch.rand(*spec["x_shape"])]), list(spec["init_inputs"])
    init = mod.get_init_inputs()
    if [tuple(v) if isinstance(v, (list, tuple)) else v for v in init] != spec["init_inputs"]:
        raise RuntimeError(f"problem {pid}: {spec['module']}.get_init_inputs() = {init}, KernelBench's is "
                           f"{spec['init_inputs']}")
    return mod.Model, mod.ModelNew, mod.get_inputs, init


def evaluate(torch, pid, args) -> dict:
    """Problem pid evaluated as the module docstring says; its problem_record."""
    Model, ModelNew, get_inputs, init = problem_io(pid)
    kwargs = args.model_kwargs.get(pid, {})
    with torch.no_grad():
        set_seed(torch, args.seed)
        model = Model(*init)
        set_seed(torch, args.seed)
        new = ModelNew(*init, **kwargs)
    a, b = model.state_dict(), new.state_dict()
    same = list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    new.load_state_dict(a)
    model, new = model.cuda(), new.cuda()
    m64 = fp64_model(torch, model, pid)
    variants = {m: tf32_variant(torch, new, m) for m in TF32_MODES} if pid == "74" else {}

    trials = []
    for i, seed in enumerate(trial_seeds(torch, args.seed, args.trials)):
        set_seed(torch, seed)
        x = [t.cuda() for t in get_inputs()]
        if tuple(x[0].shape) != PROBLEMS[pid]["x_shape"]:
            raise RuntimeError(f"problem {pid}: get_inputs() gave {tuple(x[0].shape)}")
        with torch.no_grad():
            ref = model(*x)
            out = new(*x)
            with tf32(torch, False):
                ref32 = model(*x)
            torch.cuda.synchronize()
            t = {"seed": seed, "checks": {"default": check(torch, ref, out), "tf32_off": check(torch, ref32, out)},
                 "zeros_pass": bool(torch.allclose(ref, torch.zeros_like(ref), atol=KB_ATOL, rtol=KB_RTOL))}
            x64 = [v.double() for v in x]
            truth = m64(*x64)
            t["output_abs_max"] = float(truth.abs().max())
            t["vs_fp64"] = {"reference_tf32": err64(ref, truth), "reference_fp32": err64(ref32, truth),
                            "model_new": err64(out, truth)}
            for m, fn in variants.items():
                o = fn(*x)
                t["checks"][f"tf32_{m}"] = check(torch, ref, o)
                t["vs_fp64"][f"model_new_tf32_{m}"] = err64(o, truth)
            if pid == "42":
                ident = identity_oracle_42(torch, model, x64[0])
                t["oracles"] = {"literal_vs_identity": err64(truth, ident), "model_new_vs_identity": err64(out, ident),
                                "reference_tf32_vs_identity": err64(ref, ident)}
        c = t["checks"]
        log(f"problem {pid} trial {i + 1}/{args.trials}: default {'pass' if c['default']['pass'] else 'FAIL'} "
            f"(max |diff| {c['default']['max_abs_diff']:.2e}), TF32 off {'pass' if c['tf32_off']['pass'] else 'FAIL'}; "
            f"vs fp64: ref {t['vs_fp64']['reference_tf32']:.2e}, ref TF32 off {t['vs_fp64']['reference_fp32']:.2e}, "
            f"ModelNew {t['vs_fp64']['model_new']:.2e}")
        trials.append(t)
        del x, ref, out, ref32, truth, x64
        torch.cuda.empty_cache()
    del m64

    set_seed(torch, args.seed)
    x = [t.cuda() for t in get_inputs()]
    timing = {}

    def timed(name, fn, warmup, grad, flags=None, compile_it=False):
        log(f"problem {pid}: timing {name}")
        try:
            with (contextlib.nullcontext() if grad else torch.no_grad()), tf32(torch, flags):
                if compile_it:
                    torch._dynamo.reset()
                    fn = torch.compile(fn, backend="inductor", mode="default")
                timing[name] = kb_time(torch, fn, x, warmup, args.reps)
        except Exception as e:  # a failed variant (torch.compile, say) is recorded, the run goes on
            first = str(e).splitlines()[0] if str(e) else ""
            log(f"problem {pid}: {name} failed: {type(e).__name__}: {first}")
            timing[name] = {"error": f"{type(e).__name__}: {first}"}

    timed("model_new", new, KB_WARMUP_NEW, grad=True)
    timed("eager_grad", model, KB_WARMUP_NEW, grad=True)
    timed("eager", model, KB_WARMUP_REF, grad=False)
    timed("compile", model, KB_WARMUP_REF, grad=False, compile_it=True)
    timed("eager_tf32_off", model, KB_WARMUP_REF, grad=False, flags=False)
    timed("compile_tf32_off", model, KB_WARMUP_REF, grad=False, flags=False, compile_it=True)
    for m, fn in variants.items():
        timed(f"model_new_tf32_{m}", fn, KB_WARMUP_NEW, grad=True)
    torch._dynamo.reset()
    meta = {"device": torch.cuda.get_device_name(), "date_utc": cc.utc_now(), "weights_equal_from_seed": same,
            "model_new": model_new_name(pid, kwargs)}
    return problem_record(pid, trials, timing, meta)


# ---- main -------------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description="This repository's ModelNew for KernelBench L2 problems 42, 38 and 74, "
                                            "evaluated KernelBench's way, with errors against float64.")
    p.add_argument("--problems", default="42,38,74", help="comma-separated, of 42, 38, 74 (default all)")
    p.add_argument("--trials", type=int, default=KB_CORRECT_TRIALS, help="correctness trials (KernelBench: 5)")
    p.add_argument("--reps", type=int, default=None,
                   help=f"timed calls per variant (KernelBench: {KB_PERF_TRIALS}; --quick: {QUICK_PERF_TRIALS})")
    p.add_argument("--quick", action="store_true", help=f"{QUICK_PERF_TRIALS} timed calls per variant")
    p.add_argument("--seed", type=int, default=KB_SEED, help="KernelBench's seed (42)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON")
    p.add_argument("--append", action="store_true",
                   help="with --json: keep the problems of an existing file that this run does not evaluate")
    p.add_argument("--verbose-build", action="store_true", help="show the extension's build output")
    p.add_argument("--rung", action="append", default=[], metavar="PID=RUNG",
                   help="ModelNew's rung for a track problem instead of its default: 38=06 (rung), 74=04 "
                        "(forward rung) or 74=04:08 (forward:backward); repeatable")
    args = p.parse_args(argv)
    args.problems = [s.strip() for s in args.problems.split(",") if s.strip()]
    bad = [s for s in args.problems if s not in PROBLEMS]
    if bad or not args.problems:
        p.error(f"--problems: unknown {bad}; choose among {', '.join(PROBLEMS)}")
    try:
        args.model_kwargs = rung_choices(args.rung)
    except ValueError as e:
        p.error(f"--rung: {e}")
    unused = sorted(set(args.model_kwargs) - set(args.problems))
    if unused:
        p.error(f"--rung names problem {', '.join(unused)}, which --problems does not evaluate")
    if args.reps is None:
        args.reps = QUICK_PERF_TRIALS if args.quick else KB_PERF_TRIALS
    if args.trials < 1 or args.reps < 1:
        p.error("--trials and --reps must be >= 1")
    if args.append and not args.json:
        p.error("--append needs --json")
    return args


def write(args, result):
    if not args.json:
        return
    path = Path(args.json)
    if args.append and path.is_file():
        result = merge(json.loads(path.read_text()), result)
    path.parent.mkdir(parents=True, exist_ok=True)
    SCRIPT.write_json(path, result)


def skip(args, reason) -> int:
    """No torch or no GPU: one line, exit 0; a --json file records the skip unless --append."""
    print(f"kernelbench_eval: SKIPPED: {reason}")
    if args.json and not args.append:
        Path(args.json).write_text(json.dumps({"skipped": True, "reason": reason}) + "\n")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        return skip(args, f"PyTorch is not importable ({type(e).__name__}: {e})")
    if not torch.cuda.is_available():
        return skip(args, "no CUDA device (torch.cuda.is_available() is False)")

    cc.ladder_package()
    meta = {**cc.device_meta(torch), "date_utc": cc.utc_now(), "provenance": cc.provenance(), "argv": sys.argv[1:],
            "seed": args.seed, "trials": args.trials, "reps": args.reps,
            "tf32_defaults": {"cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
                              "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32)}}
    result = {"skipped": False, "meta": meta, "procedure": procedure(), "problems": {}}
    log(f"{cc.env_line(meta)}; problems {', '.join(args.problems)}, {args.trials} trials, {args.reps} timed calls")
    try:
        build(torch, args.problems, args.verbose_build)
    except Exception as e:
        print(f"kernelbench_eval: FAILED to build or load the extension:\n{e}", file=sys.stderr)
        result["build_error"] = str(e)
        write(args, result)
        return 1

    status = 0
    for pid in args.problems:
        try:
            rec = evaluate(torch, pid, args)
        except Exception as e:
            print(f"kernelbench_eval: problem {pid} FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            traceback.print_exc()
            rec, status = {"problem": int(pid), "error": f"{type(e).__name__}: {e}"}, 1
        result["problems"][f"p{pid}"] = rec
        torch.cuda.empty_cache()
        if "error" not in rec:
            print("\n".join(summary_lines(rec)), flush=True)
    write(args, result)
    return status


if __name__ == "__main__":
    sys.exit(main())
