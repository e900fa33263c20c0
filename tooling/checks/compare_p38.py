"""Problem 38 (tracks/p38_spatial_softmax) side by side with PyTorch, in one run on one GPU.

    python3 scripts/compare.py --problem 38 --selfcheck                 # first: every rung, small problems
    python3 scripts/compare.py --problem 38 --reps 5 --json /tmp/p38.json   # KernelBench's sizes
    python3 scripts/compare.py --problem 38 --batch 4 --rungs 05,07         # smaller; some rungs

The problem: KernelBench level 2, problem 38 (python/conv_pool_ladder/p38.py: AvgPool3d ->
ConvTranspose3d -> clamp -> softmax over D*H*W per (sample, channel) -> * scale), at
KernelBench's sizes unless --batch, --depth, ... say otherwise; weights seeded, x = torch.rand.

What runs, on the same Model weights and the same x:
  eager                  the Model, cuDNN allowed TF32 (torch.backends.cudnn.allow_tf32 = True,
                         PyTorch's default for convolutions);
  eager_fp32             the Model with cudnn.allow_tf32 = False;
  compile                torch.compile(Model), --compile-mode (default "default"), the flags left
                         at their defaults (failures are reported; the run goes on);
  convt_tf32, convt_fp32 the Model's ConvTranspose3d alone on the pooled input (computed once,
                         outside the timing), TF32 allowed / not: what cuDNN does with the
                         convolution that every rung also computes;
  rung NN                ModelNew(..., rung="NN") (state_dict copied from the Model): the track's
                         GPU rung through the extension's operator (--rungs, default all).

Three phases, each variant in each:
  1. memory: one untimed call (warm-up; torch.compile compiles here), then one call between
     torch.cuda.reset_peak_memory_stats() and torch.cuda.max_memory_allocated(): peak_bytes, the
     most bytes PyTorch's caching allocator held during the call. Inputs and parameters are
     included: what is resident at the call (x, every model's parameters, for convt_* also the
     pooled input) counts, reported as baseline_bytes; peak_above_baseline_bytes is the call's
     own. Nothing else is resident in this phase (the references and the L2-flush buffer come
     later).
  2. correctness: the Model in float64 (a deep copy, .double(); its clamp bounds rounded to fp32
     first, as torch.clamp rounds them on an fp32 tensor) on --check-samples samples of x (first
     and last by default: every (n, c) row of those samples, each a whole softmax), on the GPU.
     Each variant's output on those samples against it: max |error| and the worst error as a
     multiple of its tolerance, the bound of tracks/p38_spatial_softmax/tolerance.hpp ported
     here (output_tolerance below: a probabilistic rounding bound for the pool and the
     convolution, carried through the clamp and the softmax, plus the fp32 softmax's own
     rounding), derived, not tuned. The convt_* variants are compared with the float64
     convolution at its own bound e_z. Rungs run here through the same operator with poison=True
     (output filled with NaN first, so an element a rung does not write fails). Gating for the
     rungs (exit 1 on failure); for PyTorch, reported (TF32 rounds the convolution's inputs to 10
     mantissa bits, far outside an fp32 bound).
  3. timing: CUDA events around each call, the L2 flushed before each repetition (a write of
     twice its size), after --warmup calls, median (min, max) of --reps, under torch.no_grad():
     compare_common.py's Timer. In the same phase, the two halves of the memory
     floor: read_x_ms, the time of x.sum() (PyTorch's reduction: reads x once, writes one float)
     and write_out_ms, the time of buf.fill_(0.0) on a preallocated float32 tensor of the
     output's size (writes it once, reads nothing).

Targets, from this run alone (reported, never gating). "The fastest rung" is the rung with the
smallest median among those that passed phase 2:
  fastest rung <= 0.4 x torch.compile;
  fastest rung <= 2 x the memory floor, read_x_ms + write_out_ms (measured above; bytes: x +
    output). The tensor-core rungs take the FP32 compute floor out of the way: it is printed
    beside, compute floor = 2 * conv_macs / FP32 FMA peak, conv_macs counting only the taps that
    land inside the output (conv_macs below; the C++ Problem38::conv_macs is printed beside it), the
    peak from --fp32-peak-tflops or else, as common/device.cpp computes it, SMs x FP32 lanes per SM
    x max SM clock x 2 from torch's device properties (the value and its source are stored);
  fastest rung's peak_bytes < 1/4 x eager's peak_bytes (both with inputs and parameters).

--selfcheck: instead of the above, small problems (KernelBench's parameters at small sizes, a
problem with groups, dilation, per-axis parameters and a padded ceil_mode pool, one wide clamp
that the fused rungs 05-07 must refuse with their reason, one with partial tiles), every GPU
rung against the float64 Model at the bound above (every row), error messages (a CPU, float64,
non-contiguous x, unknown and CPU rungs), no autograd on the output, determinism of the rungs
that claim it, ModelNew's output equal to the operator's, and conv_macs here equal to the C++
one. Exit 1 on any failure.

Skips (message, exit 0) where PyTorch is not importable or there is no CUDA device. Exit 1 when
the extension does not build, the track is not in this checkout, or a rung fails its check.
Progress on stderr, results on stdout; --json FILE writes everything (versions, GPU, date, git
commit among them).
"""

from __future__ import annotations

import copy
import math
import time

from . import compare_common as cc
from .compare_common import agreement, fp32_round, num as _num, peak_memory, triple
from .compare_common import FP32_U, LAMBDA, TF32_U

SCRIPT = cc.Script("compare_p38")
log, write_json = SCRIPT.log, SCRIPT.write_json
TITLE = "problem 38's GPU rungs against PyTorch (KernelBench L2 P38), one GPU"
REPS, WARMUP, TRACK, MINIMUMS = 10, 2, "p38", {"check_samples": 1}

KAPPA = 8.0                  # tolerance.hpp's kExpRelativeError
CLAMP_SHIFT_LIMIT = 87.0     # device/fused.cuh: the fused rungs need clamp_max - clamp_min <= 87

# KernelBench's sizes (python/conv_pool_ladder/p38.py holds the same; --selfcheck compares them).
KERNELBENCH = {"batch": 32, "in_channels": 32, "out_channels": 64, "depth": 32, "height": 64, "width": 64,
               "kernel_size": 3, "stride": 2, "padding": 1, "output_padding": 1, "pool_kernel_size": 2,
               "clamp_min": 0.0, "clamp_max": 1.0}


# ---- sizes and counts: plain Python, no torch (scripts/test_compare_p38.py tests them) -------------

def problem_sizes(p):
    """compare_common.problem_sizes with the pool first, as problem 38 computes."""
    return cc.problem_sizes(p, pool_first=True)


def compute_floor_ms(macs, peak_tflops):
    """2 flops per multiply-add at the FP32 FMA peak, in ms; None without a peak."""
    return None if not peak_tflops else 2.0 * macs / (peak_tflops * 1e12) * 1e3


def fp32_peak_from_properties(sms, major, minor, clock_khz):
    """(TFLOP/s, formula): common/device.cpp's FP32 FMA peak, SMs x lanes x clock x 2, with 64
    FP32 lanes per SM on sm_60, sm_7x and sm_80, else 128."""
    lanes = 64 if (major == 6 and minor == 0) or major == 7 or (major == 8 and minor == 0) else 128
    tflops = sms * lanes * clock_khz * 1e3 * 2.0 / 1e12
    return tflops, f"{sms} SMs x {lanes} FP32 lanes x {clock_khz / 1e6:.2f} GHz x 2 = {tflops:.1f} TFLOP/s"


def fastest_rung(variants):
    """The rung variant with the smallest median among those timed that passed their check."""
    ok = [v for v in variants if v.get("kind") == "rung" and v.get("median_ms") is not None
          and (v.get("check") or {}).get("pass")]
    return min(ok, key=lambda v: v["median_ms"], default=None)


def evaluate_targets(variants, floors):
    """The three targets of the module docstring from this run's variants (dicts with kind,
    median_ms, peak_bytes, check) and floors ({memory_floor_ms, compute_floor_ms}). A target
    whose numbers this run lacks is "not measured" (met None)."""
    best = fastest_rung(variants)
    label = best["variant"] if best else "fastest rung (none passed)"
    ms = best["median_ms"] if best else None

    def kind(k, field):
        return next((v.get(field) for v in variants if v.get("kind") == k and v.get(field) is not None), None)

    compile_ms = kind("compile", "median_ms")
    out = [cc.target(f"{label} <= 0.4 x torch.compile", ms / compile_ms if ms and compile_ms else None, 0.4, "<=",
                   ms=ms, reference_ms=compile_ms)]
    mem, comp = floors.get("memory_floor_ms"), floors.get("compute_floor_ms")
    out.append(cc.target(f"{label} <= 2 x the memory floor", ms / mem if ms and mem else None, 2.0, "<=", ms=ms,
                         reference_ms=mem, memory_floor_ms=mem, compute_floor_ms=comp))
    peak = best.get("peak_bytes") if best else None
    eager_peak = kind("eager", "peak_bytes")
    out.append(cc.target(f"{label} peak memory < 1/4 x eager's (inputs and parameters included)",
                       peak / eager_peak if peak and eager_peak else None, 0.25, "<", bytes=peak,
                       reference_bytes=eager_peak))
    return out


def check_samples(batch, count):
    """`count` sample indices spread evenly over the batch, the first and the last among them."""
    n = min(count, batch)
    if n <= 1:
        return [0]
    return sorted({round(i * (batch - 1) / (n - 1)) for i in range(n)})


# ---- the reference and its tolerance (torch) -------------------------------------------------------

def reference(model, xs, precision="fp32"):
    """(out64, conv64, tol, ez) on the samples xs (float64): the Model in float64 with its clamp
    bounds rounded to fp32; the float64 convolution before the clamp; the elementwise tolerance
    of an fp32 output at `precision` (output_tolerance) and the convolution's own bound e_z."""
    import torch

    m64 = copy.deepcopy(model).double()
    m64.clamp_min, m64.clamp_max = fp32_round(model.clamp_min), fp32_round(model.clamp_max)
    with torch.no_grad():
        out64 = m64(xs)
        conv64, tol, ez = output_tolerance(m64, xs, precision)
    return out64, conv64, tol, ez


def z_unit_and_rounding(precision):
    """(u of the sums' chain, relative rounding of each product) of e_z at a rung's precision, as
    tolerance.cpp's z_error_bound: fp32 (u, 0), tf32 (2u, 2u_t + u_t^2) with u_t = 2^-11 (each
    operand rounded to TF32; tensor cores may truncate when they add). ValueError otherwise."""
    if precision == "fp32":
        return FP32_U, 0.0
    if precision == "tf32":
        return 2.0 * FP32_U, 2.0 * TF32_U + TF32_U * TF32_U
    raise ValueError(f"unknown precision {precision!r} (the rungs declare fp32 or tf32)")


def output_tolerance(m64, xs, precision="fp32"):
    """tracks/p38_spatial_softmax/tolerance.hpp's elementwise bound for an fp32 output, ported
    (tolerance.cpp, output_tolerance and z_error_bound), for the float64 model m64 on xs:
      e_z = ((lambda*sqrt(n_z) + 4) * u_c + r) * M,  M = |bias| + sum |w| * avg_pool(|x|)  (conv's
            magnitude), n_z = max(2(K + P + 2), K*P + 2), K = in_channels/groups * taps here, P = pool
            window, (u_c, r) = z_unit_and_rounding(precision): (u, 0) for fp32, (2u, 2u_t + u_t^2) for tf32;
      e   = per row, the largest e_z where the clamp does not hide it (0 when clamp_min > clamp_max);
      tol = |scale| * s * expm1(2e + rho*(1 + 2^-10)) + 2^-125 * max(1, |scale|),
            rho = u*(|t| + A/sum + 2*kappa + 3) + lambda*sqrt(S)*(kappa + 2)*u,
            |t| = max(|z - max|, |z - clamp_max|), A = sum exp(z - max) * |t|.
    Returns (conv64 before the clamp, tol, e_z), conv64's shape."""
    import torch
    import torch.nn.functional as F

    ap, ct = m64.avg_pool, m64.conv_transpose
    pooled = ap(xs)
    pooled_abs = ap(xs.abs())
    conv = ct(pooled)
    kw = dict(stride=ct.stride, padding=ct.padding, output_padding=ct.output_padding, groups=ct.groups,
              dilation=ct.dilation)
    magnitude = F.conv_transpose3d(pooled_abs, ct.weight.abs(), ct.bias.abs(), **kw)
    ones = torch.ones((1, 1) + tuple(pooled.shape[2:]), dtype=torch.float64, device=xs.device)
    taps = F.conv_transpose3d(ones, torch.ones((1, 1) + tuple(ct.weight.shape[2:]), dtype=torch.float64,
                                               device=xs.device),
                              stride=ct.stride, padding=ct.padding, output_padding=ct.output_padding,
                              dilation=ct.dilation)  # (1, 1, D, H, W): taps per output position
    k_terms = (xs.shape[1] // ct.groups) * taps
    p_window = math.prod(triple(ap.kernel_size))
    n_z = torch.maximum(2.0 * (k_terms + p_window + 2), k_terms * p_window + 2.0)
    u_c, rounding = z_unit_and_rounding(precision)
    ez = ((LAMBDA * torch.sqrt(n_z) + 4.0) * u_c + rounding) * magnitude
    lo, hi = m64.clamp_min, m64.clamp_max
    lo_v = -math.inf if lo is None else lo
    hi_v = math.inf if hi is None else hi
    b, c = conv.shape[:2]
    if lo_v > hi_v:
        e = torch.zeros((b, c, 1), dtype=torch.float64, device=xs.device)
    else:
        visible = ~((conv + ez < lo_v) | (conv - ez > hi_v))
        e = torch.where(visible, ez, torch.zeros_like(ez)).flatten(2).amax(2, keepdim=True)
    z = torch.clamp(conv, lo, hi).flatten(2)
    m = z.amax(2, keepdim=True)
    t = z - m
    ex = torch.exp(t)
    total = ex.sum(2, keepdim=True)
    arg = t.abs()
    if math.isfinite(hi_v):
        arg = torch.maximum(arg, (z - hi_v).abs())
    a_sum = (ex * arg).sum(2, keepdim=True)
    s = ex / total
    spatial = z.shape[2]
    rho = FP32_U * (arg + a_sum / total + 2.0 * KAPPA + 3.0) + LAMBDA * math.sqrt(spatial) * (KAPPA + 2.0) * FP32_U
    scale = m64.scale.detach().reshape(1, -1, 1).abs()
    tol = scale * s * torch.expm1(2.0 * e + rho * (1.0 + 2.0 ** -10)) + 2.0 ** -125 * torch.clamp(scale, min=1.0)
    return conv, tol.view_as(conv), ez


# ---- the run --------------------------------------------------------------------------------------

def add_args(p) -> None:
    """Problem 38's options (compare.py adds the shared ones)."""
    p.add_argument("--rungs", default="all", help="GPU rungs by number or name, comma-separated (default: all)")
    cc.add_problem_args(p, KERNELBENCH)
    p.add_argument("--clamp-min", type=float, default=KERNELBENCH["clamp_min"])
    p.add_argument("--clamp-max", type=float, default=KERNELBENCH["clamp_max"])
    p.add_argument("--check-samples", type=int, default=2,
                   help="samples checked against float64 (every channel of each; default 2: first and last)")
    p.add_argument("--fp32-peak-tflops", type=float, default=None,
                   help="FP32 FMA peak for the compute floor (default: from the device's properties, "
                        "common/device.cpp's formula)")


def resolve_rungs(spec, rungs):
    """GPU rung ids for --rungs ("all", or ids / names, comma-separated); ValueError names the unknown."""
    gpu = [r for r in rungs if r["gpu"]]
    try:
        return cc.pick_rungs(spec, gpu)
    except LookupError as e:
        raise ValueError(f"--rungs: no GPU rung {e.args[0]!r} (GPU rungs: {cc.rung_names(gpu)})") from None


def make_models(torch, p38, problem, seed, rung_ids):
    """Model (seeded, CUDA) and one ModelNew per rung, state_dict copied; x = torch.rand."""
    init = [problem[k] for k in ("in_channels", "out_channels", "kernel_size", "stride", "padding",
                                 "output_padding", "pool_kernel_size", "clamp_min", "clamp_max")]
    torch.manual_seed(seed)
    model = p38.Model(*init).cuda()
    news = {}
    for r in rung_ids:
        news[r] = p38.ModelNew(*init, rung=r).cuda()
        news[r].load_state_dict(model.state_dict())
    x = torch.rand(problem["batch"], problem["in_channels"], problem["depth"], problem["height"], problem["width"],
                   device="cuda")
    return model, news, x


# ---- the comparison ------------------------------------------------------------------------------------

def compare(torch, p38, args, rungs) -> int:
    meta = cc.run_meta(torch, args)
    problem = {k: getattr(args, k) for k in KERNELBENCH}
    sizes = problem_sizes(problem)
    rung_ids = resolve_rungs(args.rungs, rungs)
    names = {r["id"]: r["name"] for r in rungs}
    result = {"skipped": False, "meta": meta, "problem": problem, "sizes": sizes, "rungs": rungs, "variants": [],
              "notes": []}
    model, news, x = make_models(torch, p38, problem, args.seed, rung_ids)
    info = p38.problem_info(model, tuple(x.shape), rung_ids[0] if rung_ids else "07")
    sizes["conv_macs_cpp"] = info["conv_macs"]
    if float(sizes["conv_macs"]) != info["conv_macs"]:
        result["notes"].append(f"conv_macs differs: Python {sizes['conv_macs']}, C++ {info['conv_macs']}")
    result["workspace_bytes"] = {r: p38.problem_info(model, tuple(x.shape), r).get("workspace_bytes")
                                 for r in rung_ids}
    log(f"problem {problem}: pooled {sizes['pooled_size']}, output {sizes['out_size']}, "
        f"conv_macs {sizes['conv_macs']:,} (C++ {info['conv_macs']:,.0f}), device {meta['device']}")

    state = {}

    def pooled():
        if "pooled" not in state:
            with torch.no_grad():
                state["pooled"] = model.avg_pool(x)
        return state["pooled"]

    ct = model.conv_transpose
    variants = [
        {"variant": "PyTorch eager (TF32 conv, the default)", "kind": "eager", "tf32": True, "against": "model",
         "fn": lambda: model(x)},
        {"variant": "PyTorch eager, TF32 off", "kind": "eager_fp32", "tf32": False, "against": "model",
         "fn": lambda: model(x)},
    ]
    if not args.no_compile:
        variants.append({"variant": f"torch.compile (mode={args.compile_mode})", "kind": "compile", "tf32": None,
                         "against": "model", "fn": None})
    variants += [
        {"variant": "cuDNN ConvTranspose3d alone (TF32)", "kind": "convt_tf32", "tf32": True, "against": "conv",
         "fn": lambda: ct(pooled())},
        {"variant": "cuDNN ConvTranspose3d alone (FP32)", "kind": "convt_fp32", "tf32": False, "against": "conv",
         "fn": lambda: ct(pooled())},
    ]
    for r in rung_ids:
        variants.append({"variant": f"rung {r} {names[r]} (ModelNew)", "kind": "rung", "rung": r, "tf32": None,
                         "against": "model", "fn": lambda m=news[r]: m(x)})

    def run_phase(name, body):
        cc.run_phase(torch, variants, name, body, log, no_grad=True)

    # 1. memory (and the warm-up; torch.compile compiles here).
    def memory(v):
        if not v["kind"].startswith("convt"):
            state.pop("pooled", None)  # resident only for the convt_* variants
        if v["kind"] == "compile":
            log(f"torch.compile (mode={args.compile_mode}): compiling")
            compiled = torch.compile(model, mode=args.compile_mode)
            v["fn"] = lambda: compiled(x)
            t0 = time.monotonic()
            v["fn"]()
            torch.cuda.synchronize()
            meta["compile_seconds"] = time.monotonic() - t0
        else:
            v["fn"]()
        log(f"memory: {v['variant']}")
        v.update(peak_memory(torch, v["fn"]))

    run_phase("memory", memory)
    state.pop("pooled", None)
    torch.cuda.empty_cache()

    # 2. correctness on the checked samples.
    idx = check_samples(problem["batch"], args.check_samples)
    result["checked_samples"] = idx
    log(f"reference: the Model in float64 on samples {idx}")
    sel = torch.tensor(idx, device="cuda")
    out64, conv64, tol, ez = reference(model, x[sel].double())
    precisions = {r["id"]: r.get("precision", "fp32") for r in rungs}
    tol_at = {"fp32": tol}  # a TF32 rung's tolerance, made when one is checked

    def check(v):
        log(f"check: {v['variant']}")
        if v["kind"] == "rung":
            m = news[v["rung"]]
            out = p38.p38_forward(x, m.conv_transpose.weight, m.conv_transpose.bias, m.scale, rung=v["rung"],
                                  poison=True, **p38.module_params(m))
        else:
            out = v["fn"]()
        got = out[sel]
        del out
        bound = tol
        if v["kind"] == "rung":
            precision = precisions.get(v["rung"], "fp32")
            if precision not in tol_at:
                tol_at[precision] = reference(model, x[sel].double(), precision)[2]
            bound = tol_at[precision]
            v["precision"] = precision
        v["check"] = agreement(got, out64, bound) if v["against"] == "model" else agreement(got, conv64, ez)
        v["check"]["against"] = "float64 Model" if v["against"] == "model" else "float64 ConvTranspose3d (bound e_z)"
        v["check"]["gating"] = v["kind"] == "rung"

    run_phase("check", check)
    meta["tolerance"] = {"max": float(tol.max()), "min": float(tol.min()), "e_z_max": float(ez.max()),
                         "out_abs_max": float(out64.abs().max())}
    out64 = conv64 = tol = ez = sel = None  # freed (not del: check refers to them)
    tol_at.clear()
    torch.cuda.empty_cache()

    # 3. timing, and the floors.
    timer = cc.Timer(torch, args.warmup, args.reps)
    meta.update(reps=args.reps, warmup=args.warmup, l2_bytes=timer.l2_bytes)
    floors = {}
    with torch.no_grad():
        log("timing the floors: x.sum() and fill_(0.0) of an output-sized tensor")
        floors["read_x"] = timer(lambda: x.sum())
        buf = torch.empty(sizes["out_elems"], dtype=torch.float32, device="cuda")
        floors["write_out"] = timer(lambda: buf.fill_(0.0))
        buf = None  # freed (not del: the timed lambda refers to it)
    read_ms, write_ms = floors["read_x"]["median_ms"], floors["write_out"]["median_ms"]
    floors.update(
        read_x_what="x.sum(): reads x once", write_out_what="fill_(0.0) of a preallocated output-sized tensor",
        read_x_ms=read_ms, write_out_ms=write_ms, memory_floor_ms=read_ms + write_ms,
        read_gbps=sizes["x_bytes"] / (read_ms * 1e6), write_gbps=sizes["out_bytes"] / (write_ms * 1e6),
        conv_macs=sizes["conv_macs"])
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    if args.fp32_peak_tflops:
        floors["fp32_peak_tflops"] = args.fp32_peak_tflops
        floors["fp32_peak_source"] = "--fp32-peak-tflops"
    elif getattr(props, "clock_rate", 0):
        major, minor = torch.cuda.get_device_capability()
        tflops, formula = fp32_peak_from_properties(props.multi_processor_count, major, minor, props.clock_rate)
        floors["fp32_peak_tflops"] = tflops
        floors["fp32_peak_source"] = f"device properties, common/device.cpp's formula: {formula}"
    else:
        floors["fp32_peak_tflops"] = None
        floors["fp32_peak_source"] = "unknown (torch gives no clock_rate): pass --fp32-peak-tflops"
    floors["compute_floor_ms"] = compute_floor_ms(sizes["conv_macs"], floors["fp32_peak_tflops"])
    result["floors"] = floors

    def timing(v):
        log(f"timing: {v['variant']}")
        v.update(timer(v["fn"]))

    run_phase("timing", timing)
    state.clear()

    for v in variants:
        v.pop("fn", None)
    result["variants"] = variants
    result["targets"] = evaluate_targets(variants, floors)
    eager_peak = next((v.get("peak_bytes") for v in variants if v["kind"] == "eager" and v.get("peak_bytes")), None)
    if eager_peak:
        resident = sizes["x_bytes"] + sizes["out_bytes"]
        result["notes"].append(
            f"x and the output alone are {resident / eager_peak:.3f} of eager's peak: the smallest peak any "
            f"implementation that returns a new output can have here, inputs included")
    failed = [v for v in variants if v["kind"] == "rung" and not (v.get("check") or {}).get("pass")]
    result["passed"] = not failed
    print_report(result)
    write_json(args.json, result)
    return 0 if result["passed"] else 1


def print_report(result):
    m, p, s, f = result["meta"], result["problem"], result["sizes"], result["floors"]
    print(f"Problem 38 against PyTorch: {cc.env_line(m)}, commit {m['provenance'].get('git_commit')}")
    print(f"problem: batch {p['batch']}, {p['in_channels']} -> {p['out_channels']} channels, input "
          f"{p['depth']}x{p['height']}x{p['width']}, AvgPool3d({p['pool_kernel_size']}), ConvTranspose3d(kernel "
          f"{p['kernel_size']}, stride {p['stride']}, padding {p['padding']}, output_padding {p['output_padding']}), "
          f"clamp [{p['clamp_min']}, {p['clamp_max']}]; output {'x'.join(map(str, s['out_size']))}, "
          f"conv_macs {s['conv_macs']:,} (C++ {s.get('conv_macs_cpp', 0):,.0f})")
    for note in result["notes"]:
        print(f"note: {note}")
    print()
    print(f"median of {m['reps']} calls after {m['warmup']} warm-up, CUDA events, L2 ({m['l2_bytes'] / 1e6:.0f} MB) "
          f"flushed before each; peak = torch.cuda.max_memory_allocated() over one call, inputs and parameters "
          f"included; error on samples {result['checked_samples']} (every channel), x tol = worst |error| / "
          f"its derived bound")
    def mb(v, key):
        return _num(v.get(key) and v[key] / 1e6, ".1f")

    cc.print_table(result["variants"], [
        ("variant", -42, lambda v: v["variant"]), ("median ms", 10, lambda v: _num(v.get("median_ms"), ".4f")),
        ("min ms", 9, lambda v: _num(v.get("min_ms"), ".4f")), ("peak MB", 9, lambda v: mb(v, "peak_bytes")),
        ("call MB", 9, lambda v: mb(v, "peak_above_baseline_bytes")),
        ("max |err|", 10, lambda v: _num((v.get("check") or {}).get("max_abs_err"), ".2e")),
        ("x tol", 9, lambda v: _num((v.get("check") or {}).get("worst_ratio"), ".3g")), cc.RESULT_COLUMN],
        "call MB: the peak above what was resident before the call; the convt_* rows are checked against the "
        "float64 convolution")
    print()
    print(f"floors: read x {f['read_x_ms']:.4f} ms ({f['read_gbps']:.0f} GB/s, {f['read_x_what']}), write output "
          f"{f['write_out_ms']:.4f} ms ({f['write_gbps']:.0f} GB/s, {f['write_out_what']}): memory floor "
          f"{f['memory_floor_ms']:.4f} ms; compute floor {_num(f['compute_floor_ms'], '.4f')} ms = 2 x "
          f"{f['conv_macs']:,} MACs at {_num(f['fp32_peak_tflops'], '.1f')} TFLOP/s ({f['fp32_peak_source']})")
    print()
    cc.print_targets(result["targets"], 96)
    print()
    print("RESULT:", "PASS" if result["passed"] else "FAIL (a rung disagreed with float64 or failed)")


# ---- --selfcheck -----------------------------------------------------------------------------------------

SELFCHECK_CASES = (
    # name, Model's constructor arguments besides channels, batch/channels/input, module replacements
    {"name": "kernelbench parameters, small", "batch": 2, "in_channels": 4, "out_channels": 12, "input": (8, 12, 10),
     "init": (3, 2, 1, 1, 2, 0.0, 1.0)},
    {"name": "partial tiles (w out 66, S 13464)", "batch": 1, "in_channels": 3, "out_channels": 9,
     "input": (6, 34, 66), "init": (3, 2, 1, 1, 2, 0.0, 1.0)},
    {"name": "groups 2, dilation, per-axis, padded ceil_mode pool", "batch": 2, "in_channels": 6, "out_channels": 4,
     "input": (7, 9, 8), "init": ((3, 2, 3), (2, 1, 3), (1, 0, 1), (1, 1, 2), 3, -0.1, 0.3),
     "conv": {"groups": 2, "dilation": (1, 2, 1)},
     "pool": {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}},
    {"name": "wide clamp [-100, 100] (fused rungs refuse)", "batch": 2, "in_channels": 4, "out_channels": 8,
     "input": (4, 6, 6), "init": (3, 2, 1, 1, 2, -100.0, 100.0), "refused": ("05", "06", "07")},
)


def _selfcheck_models(torch, p38, case, seed):
    import torch.nn as nn

    cin, cout = case["in_channels"], case["out_channels"]
    torch.manual_seed(seed)
    model = p38.Model(cin, cout, *case["init"])
    if "conv" in case:  # parameters the KernelBench constructor does not take: replace the module
        old = model.conv_transpose
        model.conv_transpose = nn.ConvTranspose3d(cin, cout, old.kernel_size, stride=old.stride, padding=old.padding,
                                                  output_padding=old.output_padding, **case["conv"])
    if "pool" in case:
        model.avg_pool = nn.AvgPool3d(**case["pool"])
    model = model.cuda()
    new = p38.ModelNew(cin, cout, *case["init"])
    new.conv_transpose, new.avg_pool = copy.deepcopy(model.conv_transpose), copy.deepcopy(model.avg_pool)
    new.load_state_dict(model.state_dict())
    new = new.cuda()
    x = torch.rand((case["batch"], cin) + tuple(case["input"]), device="cuda")
    return model, new, x


def selfcheck(torch, p38, args, rungs) -> int:
    meta = cc.run_meta(torch, args)
    gpu = [r for r in rungs if r["gpu"]]
    ids = resolve_rungs(args.rungs, rungs)
    results = []
    log(f"selfcheck: rungs {', '.join(ids)}")
    kb_here = [KERNELBENCH[k] for k in ("in_channels", "out_channels", "kernel_size", "stride", "padding",
                                        "output_padding", "pool_kernel_size", "clamp_min", "clamp_max")]
    results.append({"check": "KernelBench sizes here and in p38.py agree",
                    "pass": kb_here == p38.get_init_inputs() and KERNELBENCH["batch"] == p38.batch_size
                    and (KERNELBENCH["depth"], KERNELBENCH["height"], KERNELBENCH["width"]) ==
                    (p38.depth, p38.height, p38.width)})
    kb = p38.Model(*p38.get_init_inputs())
    kb_shape = (p38.batch_size, p38.in_channels, p38.depth, p38.height, p38.width)
    kb_macs = problem_sizes(KERNELBENCH)["conv_macs"]
    results.append({"check": "conv_macs at KernelBench's sizes: Python == C++ Problem38::conv_macs",
                    "pass": float(kb_macs) == p38.problem_info(kb, kb_shape)["conv_macs"],
                    "got": f"{kb_macs} vs {p38.problem_info(kb, kb_shape)['conv_macs']:.0f}"})
    first_case = None
    for case in SELFCHECK_CASES:
        model, new, x = _selfcheck_models(torch, p38, case, args.seed)
        first_case = first_case or (model, new, x)
        info = p38.problem_info(model, tuple(x.shape), ids[0] if ids else "07")
        ct, ap = model.conv_transpose, model.avg_pool
        prob = {"batch": x.shape[0], "in_channels": x.shape[1], "out_channels": case["out_channels"],
                "depth": x.shape[2], "height": x.shape[3], "width": x.shape[4], "kernel_size": ct.kernel_size,
                "stride": ct.stride, "padding": ct.padding, "output_padding": ct.output_padding,
                "dilation": ct.dilation, "groups": ct.groups, "pool_kernel_size": ap.kernel_size,
                "pool_stride": ap.stride, "pool_padding": ap.padding, "ceil_mode": ap.ceil_mode}
        py = problem_sizes(prob)
        results.append({"check": f"{case['name']}: sizes and conv_macs, Python == C++",
                        "pass": py["conv_macs"] == info["conv_macs"] and py["out_size"] == info["out_size"]
                        and py["pooled_size"] == info["pooled_size"],
                        "got": f"macs {py['conv_macs']} / {info['conv_macs']:.0f}, out {py['out_size']} / "
                               f"{info['out_size']}, pooled {py['pooled_size']} / {info['pooled_size']}"})
        with torch.no_grad():
            out64, _, tol, _ = reference(model, x.double())
            eager = model(x)
        tol_at = {"fp32": tol}
        results.append({**agreement(eager, out64, tol), "check": f"{case['name']}: PyTorch eager (TF32 as "
                        f"set) vs float64 (information)", "pass": True, "info": True})
        for r in ids:
            label = f"{case['name']}: rung {r}"
            k = p38.module_params(new)
            call = (lambda r=r: p38.p38_forward(x, new.conv_transpose.weight, new.conv_transpose.bias, new.scale,
                                                rung=r, poison=True, **k))
            out = cc.call_rung(torch, results, label, call, "clamp" if r in case.get("refused", ()) else None)
            if out is None:
                continue
            meta_r = next(g for g in gpu if g["id"] == r)
            precision = meta_r.get("precision", "fp32")
            if precision not in tol_at:
                with torch.no_grad():
                    tol_at[precision] = reference(model, x.double(), precision)[2]
            a = agreement(out, out64, tol_at[precision])
            results.append({"check": f"{label} vs float64 at the derived bound ({precision})", **a})
            if meta_r["deterministic"]:
                with torch.no_grad():
                    again = call()
                results.append({"check": f"{label}: deterministic, two runs bitwise equal",
                                "pass": bool(torch.equal(out, again))})
            new.rung = r
            with torch.no_grad():
                via_model = new(x)
            results.append({"check": f"{label}: ModelNew equals the operator"
                                     + (" (bitwise)" if meta_r["deterministic"] else " (within the bound)"),
                            "pass": bool(torch.equal(via_model, out)) if meta_r["deterministic"]
                            else agreement(via_model, out64, tol_at[precision])["pass"]})
    # Errors and autograd, on the first case.
    model, new, x = first_case
    new.rung = ids[-1] if ids else "07"
    cc.expect_error(results, "x on the CPU", lambda: new(x.cpu()), ValueError, "CUDA")
    cc.expect_error(results, "x float64", lambda: new(x.double()), TypeError, "float32")
    cc.expect_error(results, "x not contiguous", lambda: new(x.transpose(3, 4)), ValueError, "contiguous")
    cc.expect_error(results, "weight float64",
                  lambda: p38.p38_forward(x, new.conv_transpose.weight.double(), new.conv_transpose.bias, new.scale,
                                          rung=new.rung, **p38.module_params(new)), TypeError, "float32")
    cc.expect_error(results, "unknown rung", lambda: p38.p38_forward(
        x, new.conv_transpose.weight, new.conv_transpose.bias, new.scale, rung="99", **p38.module_params(new)),
        ValueError, "no rung")
    cc.expect_error(results, "the CPU rung", lambda: p38.p38_forward(
        x, new.conv_transpose.weight, new.conv_transpose.bias, new.scale, rung="00", **p38.module_params(new)),
        ValueError, "CPU")
    cc.expect_error(results, "output_padding >= stride and dilation", lambda: p38.p38_forward(
        x, new.conv_transpose.weight, new.conv_transpose.bias, new.scale, rung=new.rung,
        **{**p38.module_params(new), "output_padding": 2}), ValueError, "output_padding")
    xg = x.clone().requires_grad_(True)
    y = new(xg)  # grad mode on, parameters requiring grad
    results.append({"check": "no autograd: the output does not require grad and has no grad_fn",
                    "pass": (not y.requires_grad) and y.grad_fn is None})
    cc.expect_error(results, "backward through the output raises", lambda: y.sum().backward(), RuntimeError,
                  "does not require grad")

    title = (f"Problem 38 selfcheck: {meta['device']}, torch {meta['torch']}, commit "
             f"{meta['provenance'].get('git_commit')}; rungs {', '.join(ids)}; bound: tolerance.hpp's, ported "
             f"(output_tolerance)")
    return cc.report_selfcheck(SCRIPT, args, meta, title, results, with_max_err=True)

