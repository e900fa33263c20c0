#!/usr/bin/env python3
"""The ladder's stages side by side with PyTorch, in one run on a GPU.

    python3 scripts/compare_pytorch.py                      # KernelBench sizes, stages 04, 05, 06
    python3 scripts/compare_pytorch.py --small --stages 01,06 --json /tmp/cmp.json

1. Builds the reference Model exactly as in the brief (nn.ConvTranspose2d, mean, + bias,
   logsumexp, sum, * 10) at KernelBench's sizes (batch 16, 64 -> 128 channels, 512x512,
   kernel 3, x = torch.rand; --small: batch 128, 3 -> 16, 32x32, x = torch.randn), seeded.
2. JIT-builds the stages (python/conv_pool_ladder, torch.utils.cpp_extension) and runs each
   on the Model's own weight, conv bias and bias tensors, outputs poisoned with NaN first.
3. Checks each stage against the Model computed in float64 on the same weights and input
   (a deep copy in double: the truth for these fp32 inputs, up to ~1e-16):
     y:      |y - y64| <= 1e-4 (KernelBench's absolute tolerance);
     pooled: |pooled - pooled64| <= lambda*sqrt(n)*u*magnitude + u*|pooled64|, the bound of
             common/tolerance.hpp: u = 2^-24, lambda = 8 (Higham & Mary's probabilistic bound,
             failure probability < 1e-8 per element), n = K + Hout*Wout + H*W + K with
             K = Cin/groups*kH*kW (the longest fp32 addition chain any stage forms), and
             magnitude[n,co] = |cb[co]| + sum_{ci in group(co)} sum_taps |w[ci,co',:,:]| * mean|x[n,ci]|,
             an upper bound of the mean of |terms| that the rounding errors scale with.
   and against the fp32 eager Model: with TF32 off, y within 1e-4 (KernelBench's check; gating)
   and pooled as a multiple of twice the bound above (both sides fp32; reported, not gating,
   since cuDNN's algorithm is not one whose error the bound was derived for); with TF32 on
   (PyTorch's default for convolutions), both reported only: TF32 rounds the convolution's
   inputs to 10 mantissa bits, so the eager result itself can be 1e-4 away from the truth.
   Where stage 06 is built, ModelNew (state_dict copied from the Model) is checked the same way.
   The autograd.Function's backward (first derivatives, and second ones through a gradient
   penalty) is checked against fp64 autograd on small random problems (stride, padding,
   output_padding, dilation, groups).
4. Times, with CUDA events around each call, L2 flushed before each repetition (a write of twice
   the L2 size), after warm-up, median of --reps, all under torch.no_grad(): eager (TF32 conv,
   the default), eager with TF32 off, torch.compile (failures are reported, the run goes on),
   each stage, and ModelNew. Prints a table with the ratios and writes --json.

Skips (message, exit 0) where PyTorch is not importable or no CUDA device exists. Exit 1 when a
gating check fails or the extension does not build. Progress goes to stderr, results to stdout.
The JIT build lands under /tmp (LADDER_TORCH_BUILD_DIR overrides); no network is needed.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import platform
import random
import statistics
import sys
import time
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FP32_U = 2.0 ** -24
LAMBDA = 8.0
Y_ATOL = 1e-4  # KernelBench's absolute tolerance on the output
_T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[compare_pytorch {time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Checks and times the ladder's stages against the PyTorch model (KernelBench L2 P42).")
    p.add_argument("--stages", default="04,05,06",
                   help="stage numbers, comma-separated, or 'all' (default 04,05,06; those without a folder are skipped)")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per variant; the median is reported")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first (after torch.compile's compilation)")
    p.add_argument("--small", action="store_true",
                   help="the first KernelBench sizes: batch 128, 3 -> 16, 32x32, x = torch.randn")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--compile-mode", default="default", help="torch.compile mode (default: 'default')")
    p.add_argument("--no-grad-check", action="store_true", help="skip ModelNew's backward check")
    p.add_argument("--graph", action="store_true", help="also time each stage replayed from a CUDA graph")
    p.add_argument("--verbose-build", action="store_true", help="show the ninja/nvcc build output")
    args = p.parse_args(argv)
    if args.reps < 1 or args.warmup < 0:
        p.error("--reps must be >= 1 and --warmup >= 0")
    return args


def write_json(path, data) -> None:
    if path:
        Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")
        log(f"wrote {path}")


def skip(args, reason: str) -> int:
    print(f"compare_pytorch: SKIPPED: {reason}")
    write_json(args.json, {"skipped": True, "reason": reason})
    return 0


# ---- the reference, split where the stages report pooled ----------------------------------------

def model_parts(model, x):
    """(pooled (N, Cout), y (N, 1)) by the Model's own steps: its forward, read out after the pool."""
    import torch

    out = model.conv_transpose(x)
    pooled = torch.mean(out, dim=(2, 3), keepdim=True)
    del out
    t = pooled + model.bias
    t = torch.logsumexp(t, dim=1, keepdim=True)
    y = torch.sum(t, dim=(2, 3)) * 10.0
    return pooled.flatten(1), y


@contextlib.contextmanager
def cudnn_tf32(enabled: bool):
    """cuDNN's TF32 switch (the legacy flag only: mixing it with fp32_precision can raise)."""
    import torch

    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = old


def pooled_bound(x, weight, conv_bias, pooled64, groups, hout, wout):
    """The fp32 bound of common/tolerance.hpp, per pooled element (see the module docstring)."""
    import torch

    n, cin, h, w = x.shape
    _, cout_g, kh, kw = weight.shape
    cin_g = cin // groups
    k = cin_g * kh * kw
    chain = k + hout * wout + h * w + k
    rel = LAMBDA * math.sqrt(chain) * FP32_U
    abs_mean = x.abs().mean(dim=(2, 3), dtype=torch.float64)  # (N, Cin)
    wsum = weight.detach().double().abs().sum(dim=(2, 3))  # (Cin, Cout/g)
    mag = torch.einsum("ngc,gcj->ngj", abs_mean.reshape(n, groups, cin_g),
                       wsum.reshape(groups, cin_g, cout_g)).reshape(n, groups * cout_g)
    mag = mag + conv_bias.detach().double().abs().reshape(1, -1)
    return rel * mag + FP32_U * pooled64.abs(), chain


def abs_error(got, ref):
    """|got - ref| in double; equal values (infinities too) and NaN in both give 0; a NaN on one
    side only gives inf (it must fail). Returns (err, count of NaN mismatches)."""
    import torch

    got, ref = got.detach().double(), ref.detach().double()
    got_nan, ref_nan = torch.isnan(got), torch.isnan(ref)
    err = (got - ref).abs()
    err = torch.where((got == ref) | (got_nan & ref_nan), torch.zeros_like(err), err)
    err = torch.where(torch.isnan(err), torch.full_like(err, math.inf), err)
    return err, int((got_nan != ref_nan).sum())


def compare(name, against, pooled, y, ref_pooled, ref_y, pooled_tol, gating, pooled_gating=True):
    ep, nan_p = abs_error(pooled, ref_pooled)
    ey, nan_y = abs_error(y, ref_y)
    ratio = float((ep / pooled_tol).max()) if ep.numel() else 0.0
    max_p, max_y = float(ep.max()), float(ey.max())
    ok_p = nan_p == 0 and ratio <= 1.0
    ok_y = nan_y == 0 and max_y <= Y_ATOL
    passed = ok_y and (ok_p or not pooled_gating)
    return {
        "variant": name, "against": against, "max_abs_pooled": max_p, "pooled_worst_ratio_to_bound": ratio,
        "max_abs_y": max_y, "nan_mismatches": nan_p + nan_y, "pooled_within_bound": ok_p,
        "y_within_1e-4": ok_y, "pass": passed, "gating": gating,
    }


# ---- timing ----------------------------------------------------------------------------------------

class Timer:
    """CUDA events around each call; before each repetition a write of 2x the L2 size evicts it."""

    def __init__(self, torch, warmup, reps):
        self.torch, self.warmup, self.reps = torch, warmup, reps
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
        self.flush = torch.empty(2 * self.l2_bytes, dtype=torch.uint8, device="cuda")

    def __call__(self, fn):
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        start = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        end = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        for i in range(self.reps):
            self.flush.zero_()
            start[i].record()
            fn()
            end[i].record()
            end[i].synchronize()  # one call at a time: the next flush waits for this one
        ms = [s.elapsed_time(e) for s, e in zip(start, end)]
        return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "reps": self.reps}


def graph_of(torch, fn):
    """A CUDA graph of one call of fn (warmed up on a side stream first, as PyTorch asks)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


# ---- ModelNew's backward against fp64 autograd ------------------------------------------------------

def random_geometry(rng):
    """A small valid ConvTranspose2d problem with random parameters."""
    while True:
        groups = rng.choice([1, 1, 2, 3])
        g = {
            "batch": rng.randint(1, 3), "groups": groups,
            "in_channels": groups * rng.randint(1, 3), "out_channels": groups * rng.randint(1, 3),
            "h": rng.randint(3, 11), "w": rng.randint(3, 11),
            "kernel": (rng.randint(1, 4), rng.randint(1, 4)),
            "stride": (rng.randint(1, 3), rng.randint(1, 3)),
            "padding": (rng.randint(0, 2), rng.randint(0, 2)),
            "dilation": (rng.randint(1, 3), rng.randint(1, 3)),
        }
        g["output_padding"] = tuple(rng.randint(0, max(s, d) - 1) for s, d in zip(g["stride"], g["dilation"]))
        outs = [(size - 1) * s - 2 * p + d * (k - 1) + op + 1 for size, k, s, p, d, op in zip(
            (g["h"], g["w"]), g["kernel"], g["stride"], g["padding"], g["dilation"], g["output_padding"])]
        if min(outs) > 0:
            return g


def _reference_y(torch, F, t, geo):
    out = F.conv_transpose2d(t["x"], t["weight"], t["conv_bias"], **geo)
    pooled = torch.mean(out, dim=(2, 3), keepdim=True)
    return torch.sum(torch.logsumexp(pooled + t["bias"], dim=1, keepdim=True), dim=(2, 3)) * 10.0


def _grads_close(t32, t64, names, out, prefix):
    """fp32 gradients against fp64 ones: within 1e-4 of the largest reference entry (loose for
    rounding through a few fp32 reductions; a wrong formula misses by orders of magnitude)."""
    ok = True
    for k in names:
        ref, got = t64[k].grad, t32[k].grad
        if got is None or ref is None:
            out[f"{prefix}{k}"] = "missing"
            ok = False
            continue
        err, scale = float((got.double() - ref).abs().max()), float(ref.abs().max())
        out[f"{prefix}{k}_max_abs"], out[f"{prefix}{k}_max_ref"] = err, scale
        ok = ok and err <= 1e-4 * scale + 1e-7
    return ok


def grad_check(torch, stage, seed, cases=8):
    """stage_forward's y, gradients and gradients of a gradient penalty (fp32: the stage plus the
    autograd.Function's backward) against autograd through F.conv_transpose2d -> mean -> + bias
    -> logsumexp -> sum -> * 10 in float64, on small problems with random parameters."""
    import torch.nn.functional as F
    from conv_pool_ladder.ops import stage_forward

    rng = random.Random(seed)
    results = []
    geometries = [{"batch": 2, "groups": 1, "in_channels": 3, "out_channels": 4, "h": 8, "w": 7,
                   "kernel": (3, 3), "stride": (1, 1), "padding": (0, 0), "dilation": (1, 1),
                   "output_padding": (0, 0)}]
    geometries += [random_geometry(rng) for _ in range(cases - 1)]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    names = ("x", "weight", "conv_bias", "bias")
    for g in geometries:
        cin, cout, groups = g["in_channels"], g["out_channels"], g["groups"]
        shapes = {"x": (g["batch"], cin, g["h"], g["w"]), "weight": (cin, cout // groups, *g["kernel"]),
                  "conv_bias": (cout,), "bias": (cout, 1, 1)}
        base = {k: torch.randn(s, device="cuda", generator=gen, dtype=torch.float32) for k, s in shapes.items()}
        grad_out = torch.randn(g["batch"], 1, device="cuda", generator=gen)
        geo = dict(stride=g["stride"], padding=g["padding"], output_padding=g["output_padding"],
                   dilation=g["dilation"], groups=groups)
        case = {"geometry": g}

        # First order: dL/d(x, w, cb, bias) of L = sum(y * grad_out).
        t32 = {k: v.clone().requires_grad_(True) for k, v in base.items()}
        t64 = {k: v.double().requires_grad_(True) for k, v in base.items()}
        y32 = stage_forward(t32["x"], t32["weight"], t32["conv_bias"], t32["bias"], scale=10.0, stage=stage, **geo)
        y64 = _reference_y(torch, F, t64, geo)
        (y32 * grad_out).sum().backward()
        (y64 * grad_out.double()).sum().backward()
        case["max_abs_y"] = float((y32.detach().double() - y64.detach()).abs().max())
        ok = case["max_abs_y"] <= Y_ATOL and _grads_close(t32, t64, names, case, "grad_")

        # Second order: a gradient penalty, sum((dL/dx)^2), differentiated again.
        t32 = {k: v.clone().requires_grad_(True) for k, v in base.items()}
        t64 = {k: v.double().requires_grad_(True) for k, v in base.items()}
        for t, dtype in ((t32, torch.float32), (t64, torch.float64)):
            if dtype == torch.float32:
                yy = stage_forward(t["x"], t["weight"], t["conv_bias"], t["bias"], scale=10.0, stage=stage, **geo)
            else:
                yy = _reference_y(torch, F, t, geo)
            (gx,) = torch.autograd.grad((yy * grad_out.to(dtype)).sum(), t["x"], create_graph=True)
            (gx * gx).sum().backward()
        ok = _grads_close(t32, t64, names, case, "penalty_grad_") and ok
        case["pass"] = ok
        results.append(case)
    return results


# ---- main --------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install (OSError from a shared library)
        return skip(args, f"PyTorch is not importable ({type(e).__name__}: {e})")
    if not torch.cuda.is_available():
        return skip(args, "no CUDA device (torch.cuda.is_available() is False)")

    sys.path.insert(0, str(REPO_ROOT / "python"))
    import conv_pool_ladder as cpl
    from conv_pool_ladder.models import Model, ModelNew
    from conv_pool_ladder.ops import run_stage

    props = torch.cuda.get_device_properties(0)
    meta = {
        "device": props.name, "capability": list(torch.cuda.get_device_capability()),
        "sm_count": props.multi_processor_count, "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
        "cudnn_allow_tf32_default": bool(torch.backends.cudnn.allow_tf32),
        "reps": args.reps, "warmup": args.warmup, "seed": args.seed,
    }
    result = {"skipped": False, "meta": meta, "checks": [], "grad_checks": [], "timings": [], "notes": []}

    # Stages: the requested ones that have a GPU folder; the others are named and skipped.
    gpu_ids = [s.id for s in cpl.gpu_stages()]
    if args.stages.strip() == "all":
        stages = gpu_ids
    else:
        requested = [cpl.normalize_stage_id(s) for s in args.stages.split(",") if s.strip()]
        stages = [s for s in requested if s in gpu_ids]
        for s in requested:
            if s not in gpu_ids:
                note = f"stage {s}: no GPU stage folder under stages/ (yet): skipped"
                log(note)
                result["notes"].append(note)
    meta["stages"] = stages
    ext = None
    if stages:
        log(f"building the extension for stages {', '.join(stages)} (first build: a minute or two)")
        try:
            ext = cpl.load_extension(stages, verbose=args.verbose_build)
        except Exception as e:
            print(f"compare_pytorch: FAILED to build the extension:\n{e}", file=sys.stderr)
            result["build_error"] = str(e)
            write_json(args.json, result)
            return 1
        meta["stage_names"] = {d["id"]: d["name"] for d in ext.list_stages()}
        log(f"built: {', '.join(d['id'] + '_' + d['name'] for d in ext.list_stages())}")
    else:
        log("no stage to run: timing PyTorch only")

    # The problem and the reference model.
    if args.small:
        n, cin, cout, h, w, k, dist = 128, 3, 16, 32, 32, 3, "randn"
    else:
        n, cin, cout, h, w, k, dist = 16, 64, 128, 512, 512, 3, "rand"
    bias_shape = (cout, 1, 1)
    meta["problem"] = {"batch": n, "in_channels": cin, "out_channels": cout, "height": h, "width": w,
                       "kernel_size": k, "bias_shape": list(bias_shape), "x": f"torch.{dist}"}
    torch.manual_seed(args.seed)
    model = Model(cin, cout, k, bias_shape).cuda()
    x = (torch.rand if dist == "rand" else torch.randn)(n, cin, h, w, device="cuda")
    ct = model.conv_transpose
    hout, wout = (h - 1) + (k - 1) + 1, (w - 1) + (k - 1) + 1  # stride 1, padding 0, dilation 1
    log(f"problem: {meta['problem']}, convT output {n}x{cout}x{hout}x{wout}, device {props.name}")

    with torch.no_grad():
        log("reference: the Model in float64")
        m64 = copy.deepcopy(model).double()
        pooled64, y64 = model_parts(m64, x.double())
        del m64
        torch.cuda.empty_cache()
        tol, chain = pooled_bound(x, ct.weight, ct.bias, pooled64, 1, hout, wout)
        meta["pooled_bound"] = {"u": FP32_U, "lambda": LAMBDA, "chain_length": chain,
                                "min": float(tol.min()), "max": float(tol.max())}
        meta["y_atol"] = Y_ATOL
        log("reference: the Model in float32 (TF32 conv, the default; then TF32 off)")
        pooled_tf32, y_tf32 = model_parts(model, x)
        forward_diff = float((model(x) - y_tf32).abs().max())
        meta["model_forward_vs_split_max_abs_y"] = forward_diff
        with cudnn_tf32(False):
            pooled_fp32, y_fp32 = model_parts(model, x)

        checks = result["checks"]
        # PyTorch itself against the truth, for context (not gating).
        checks.append(compare("eager (TF32 conv)", "fp64 Model", pooled_tf32, y_tf32, pooled64, y64, tol, False))
        checks.append(compare("eager (TF32 off)", "fp64 Model", pooled_fp32, y_fp32, pooled64, y64, tol, False))

        def check_outputs(name, pooled, y):
            checks.append(compare(name, "fp64 Model", pooled, y, pooled64, y64, tol, True))
            checks.append(compare(name, "eager fp32 (TF32 off)", pooled, y, pooled_fp32, y_fp32, 2 * tol,
                                  True, pooled_gating=False))
            checks.append(compare(name, "eager (TF32 conv)", pooled, y, pooled_tf32, y_tf32, 2 * tol, False))

        for s in stages:
            log(f"checking stage {s}")
            pooled = torch.full((n, cout), math.nan, device="cuda")
            y = torch.full((n, 1), math.nan, device="cuda")
            try:
                run_stage(s, x, ct.weight, ct.bias, model.bias, pooled=pooled, y=y)
                torch.cuda.synchronize()
            except Exception as e:
                log(f"stage {s} raised: {e}")
                checks.append({"variant": f"stage {s}", "against": "-", "pass": False, "gating": True,
                               "error": f"{type(e).__name__}: {e}"})
                continue
            check_outputs(f"stage {s}", pooled, y)

        model_new = None
        if "06" in stages:
            model_new = ModelNew(cin, cout, k, bias_shape).cuda()
            model_new.load_state_dict(model.state_dict())
            y_new = model_new(x)
            torch.cuda.synchronize()
            # ModelNew returns y only; its pooled is stage 06's, checked above.
            c = compare("ModelNew (06)", "fp64 Model", pooled64, y_new, pooled64, y64, tol, True)
            c["note"] = "y only (ModelNew returns y)"
            checks.append(c)
        del pooled_tf32, pooled_fp32
        torch.cuda.empty_cache()

    if stages and not args.no_grad_check:
        grad_stage = "06" if "06" in stages else stages[-1]
        log(f"checking the autograd backward (stage {grad_stage}) against fp64 autograd")
        try:
            result["grad_checks"] = grad_check(torch, grad_stage, args.seed)
            meta["grad_check_stage"] = grad_stage
        except Exception as e:
            result["grad_checks"] = [{"pass": False, "error": f"{type(e).__name__}: {e}",
                                      "traceback": traceback.format_exc()}]

    # Timing.
    timer = Timer(torch, args.warmup, args.reps)
    meta["l2_bytes"] = timer.l2_bytes
    timings = result["timings"]

    def timed(name, fn, kind):
        log(f"timing {name}")
        try:
            t = timer(fn)
        except Exception as e:
            log(f"{name} failed: {type(e).__name__}: {e}")
            timings.append({"variant": name, "kind": kind, "error": f"{type(e).__name__}: {e}"})
            return
        t.update(variant=name, kind=kind)
        timings.append(t)

    with torch.no_grad():
        timed("PyTorch eager (TF32 conv, default)", lambda: model(x), "eager")
        with cudnn_tf32(False):
            timed("PyTorch eager, TF32 off", lambda: model(x), "eager_fp32")
        if not args.no_compile:
            log(f"torch.compile (mode={args.compile_mode}): compiling")
            try:
                compiled = torch.compile(model, mode=args.compile_mode)
                t0 = time.monotonic()
                compiled(x)
                torch.cuda.synchronize()
                meta["compile_seconds"] = time.monotonic() - t0
                timed("torch.compile", lambda: compiled(x), "compile")
            except Exception as e:
                msg = f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                log(msg)
                result["notes"].append(msg)
                timings.append({"variant": "torch.compile", "kind": "compile", "error": msg})
        for s in stages:
            name = f"stage {s} {meta['stage_names'].get(s, '')}".rstrip()
            timed(name, lambda s=s: run_stage(s, x, ct.weight, ct.bias, model.bias), "stage")
            if args.graph:
                try:
                    g = graph_of(torch, lambda s=s: run_stage(s, x, ct.weight, ct.bias, model.bias))
                    timed(name + " (CUDA graph)", g.replay, "stage_graph")
                except Exception as e:
                    timings.append({"variant": name + " (CUDA graph)", "kind": "stage_graph",
                                    "error": f"{type(e).__name__}: {e}"})
        if model_new is not None:
            timed("ModelNew (06, autograd.Function)", lambda: model_new(x), "model_new")

    # Ratios: speedup = reference median / this median.
    ref = {t["kind"]: t["median_ms"] for t in timings if "median_ms" in t and t["kind"] in ("eager", "eager_fp32", "compile")}
    for t in timings:
        if "median_ms" in t:
            for kind in ("eager", "eager_fp32", "compile"):
                if kind in ref:
                    t[f"speedup_vs_{kind}"] = ref[kind] / t["median_ms"]

    gating = [c for c in result["checks"] if c.get("gating")] + result["grad_checks"]
    result["passed"] = all(c.get("pass") for c in gating)
    print_report(result)
    write_json(args.json, result)
    return 0 if result["passed"] else 1


def print_report(result) -> None:
    meta = result["meta"]
    p = meta["problem"]
    print(f"PyTorch side by side: {meta['device']} (sm_{''.join(map(str, meta['capability']))}, "
          f"{meta['sm_count']} SMs), torch {meta['torch']}, CUDA {meta['cuda']}, cuDNN {meta['cudnn']}")
    print(f"problem: batch {p['batch']}, {p['in_channels']} -> {p['out_channels']} channels, "
          f"{p['height']}x{p['width']}, kernel {p['kernel_size']}, x = {p['x']}")
    b = meta["pooled_bound"]
    print(f"tolerances: y {meta['y_atol']:g} absolute (KernelBench); pooled fp32 bound "
          f"8*sqrt({b['chain_length']})*2^-24*magnitude + 2^-24*|pooled|, here {b['min']:.2e} .. {b['max']:.2e}")
    for note in result["notes"]:
        print(f"note: {note}")
    print()
    print("Correctness (max |error|; pooled also as a multiple of its bound, 2x the bound against eager)")
    hdr = f"{'variant':<26} {'against':<24} {'pooled':>10} {'x bound':>8} {'y':>10}  result"
    print(hdr)
    print("-" * len(hdr))
    for c in result["checks"]:
        if "error" in c:
            print(f"{c['variant']:<26} {'-':<24} {'':>10} {'':>8} {'':>10}  FAIL ({c['error']})")
            continue
        verdict = ("PASS" if c["pass"] else "FAIL") if c["gating"] else (
            "info" + ("" if c["y_within_1e-4"] else ": y off by more than 1e-4"))
        if c["gating"] and not c["pooled_within_bound"] and c["pass"]:
            verdict += " (pooled over bound: reported only)"
        if c["nan_mismatches"]:
            verdict += f" ({c['nan_mismatches']} NaN)"
        print(f"{c['variant']:<26} {c['against']:<24} {c['max_abs_pooled']:>10.2e} "
              f"{c['pooled_worst_ratio_to_bound']:>8.3f} {c['max_abs_y']:>10.2e}  {verdict}")
    if result["grad_checks"]:
        gc = result["grad_checks"]
        bad = [g for g in gc if not g.get("pass")]
        print(f"ModelNew backward (1st and 2nd order) vs fp64 autograd (stage {meta.get('grad_check_stage', '?')}), "
              f"{len(gc)} problems: {'PASS' if not bad else 'FAIL'}")
        for g in bad:
            print(f"  FAIL: {json.dumps({k: v for k, v in g.items() if k != 'traceback'}, default=str)}")
    print()
    print(f"Timing: median of {meta['reps']} calls after {meta['warmup']} warm-up, CUDA events, L2 "
          f"({meta['l2_bytes'] / 1e6:.0f} MB) flushed before each, torch.no_grad()")
    hdr = f"{'variant':<40} {'median ms':>10} {'min ms':>9} {'vs eager':>9} {'vs TF32 off':>12} {'vs compile':>11}"
    print(hdr)
    print("-" * len(hdr))
    for t in result["timings"]:
        if "error" in t:
            print(f"{t['variant']:<40} {'failed':>10}  {t['error'][:80]}")
            continue

        def ratio(kind):
            v = t.get(f"speedup_vs_{kind}")
            return f"{v:.2f}x" if v is not None else "-"

        print(f"{t['variant']:<40} {t['median_ms']:>10.4f} {t['min_ms']:>9.4f} {ratio('eager'):>9} "
              f"{ratio('eager_fp32'):>12} {ratio('compile'):>11}")
    print("(ratios are speedups: the reference's median over this row's median)")
    print()
    print("RESULT:", "PASS" if result["passed"] else "FAIL")


if __name__ == "__main__":
    sys.exit(main())
