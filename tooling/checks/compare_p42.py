"""The ladder's stages side by side with PyTorch, in one run on a GPU.

    python3 scripts/compare.py --problem 42 --json results/pytorch_h200.json  # KernelBench sizes, default stages
    python3 scripts/compare.py --problem 42 --stages 09,10,11,12,13             # or by name: async_copy,...
    python3 scripts/compare.py --problem 42 --small --stages 01,06 --json /tmp/cmp.json

Default stages, by name: vectorized_loads, async_copy, tensor_cores, three_tf32, pool_before_conv,
single_launch, multistage_mma, wgmma, three_tf32_wgmma, warp_specialized,
three_tf32_warp_specialized (05, 09 .. 18); a name without a stage folder is skipped with a note
(18's is a draft until it has run on a GPU). The targets need 09, 10, 11, 14, 15, 16, 17 and 18.

1. Builds the reference Model, the problem's PyTorch code unchanged (nn.ConvTranspose2d, mean,
   + bias, logsumexp, sum, * 10; docs/problem.md), at KernelBench's sizes (batch 16, 64 -> 128
   channels, 512x512, kernel 3, x = torch.rand; --small: the first published sizes, batch 128,
   3 -> 16, 32x32, x = torch.randn), seeded.
2. JIT-builds the stages (python/conv_pool_ladder, torch.utils.cpp_extension) and runs each
   on the Model's own weight, conv bias and bias tensors, outputs poisoned with NaN first.
3. Checks each stage against the Model computed in float64 on the same weights and input
   (a deep copy in double: the truth for these fp32 inputs, up to ~1e-16):
     y:      |y - y64| <= 1e-4 absolute. KernelBench checks fp32 outputs with
             torch.allclose(atol=1e-4, rtol=1e-4) (atol = rtol = 1e-2 in its first version),
             i.e. |y - ref| <= 1e-4 + 1e-4*|ref|: this check is stricter by the rtol term, and
             its result under KernelBench's rule is reported too (kernelbench_allclose);
     pooled: |pooled - pooled64| <= lambda*sqrt(n)*u*magnitude + u*|pooled64|, the bound of
             common/tolerance.hpp: u = 2^-24, lambda = 8 (Higham & Mary's probabilistic bound,
             failure probability < 1e-8 per element), n = K + Hout*Wout + H*W + K with
             K = Cin/groups*kH*kW (the longest fp32 addition chain any stage forms), and
             magnitude[n,co] = |cb[co]| + sum_{ci in group(co)} sum_taps |w[ci,co',:,:]| * mean|x[n,ci]|,
             an upper bound of the mean of |terms| that the rounding errors scale with.
   and against the fp32 eager Model: with TF32 off, y within 1e-4 (gating)
   and pooled as a multiple of twice the bound above (both sides fp32; reported, not gating,
   since cuDNN's algorithm is not one whose error the bound was derived for); with TF32 on
   (PyTorch's default for convolutions), both reported only: TF32 rounds the convolution's
   inputs to 10 mantissa bits, so the eager result itself can be 1e-4 away from the truth.
   Where ModelNew's stage (ModelNew.stage) is built, ModelNew (state_dict copied from the
   Model) is checked the same way, and wrong tensors must raise the C++ checks' ValueError /
   TypeError naming the tensor, through ModelNew's entry and through torch.ops (gating).
   The registered operator's C++ backward (first derivatives, and second ones through a
   gradient penalty) is checked against fp64 autograd on small random problems (stride,
   padding, output_padding, dilation, groups), alternately through ModelNew's entry and
   torch.ops, with the forward of ModelNew's stage if requested, else of the last requested FP32
   stage (y is held to Y_ATOL, an FP32 allowance; with TF32 stages only, it is skipped with a
   note); and ModelNew's parameter gradients against the fp64 Model's at the first sizes.
4. Times, with CUDA events around each call, L2 flushed before each repetition (a write of twice
   the L2 size), after warm-up, median of --reps, all under torch.no_grad(): eager (TF32 conv,
   the default), eager with TF32 off, cuDNN's ConvTranspose2d alone (the Model's conv_transpose
   module on x, TF32 allowed and TF32 off: kinds "convt_tf32", "convt_fp32"; and in channels_last
   with TF32 allowed, kind "convt_tf32_cl": a deep copy of the module converted with
   .to(memory_format=torch.channels_last) on x converted once, untimed), cuDNN's convolution kernel
   itself (kind "cudnn_kernel", below), torch.compile (failures are reported, the run goes on),
   each stage (its timing names it in "stage": "10"), and ModelNew. Prints a table with the ratios
   and writes --json.
   cudnn_kernel: the channels_last TF32 call, after warm-up, --reps times, each call in its own
   torch.profiler session (activities CPU and CUDA: the session fixes the call's index; CPU too
   because some versions dropped kernel events without it), the L2 flushed before each outside
   the session. Per call, among the kernels whose name looks like a convolution (is_conv_kernel:
   it holds one of CONV_KERNEL_WORDS, e.g. "implicit_gemm", "xmma", "dgrad", "conv", "cutlass",
   "sm90_", and none of NOT_CONV_WORDS, e.g. "elementwise", "triton_", "nchwtonhwc", "convert",
   "memcpy", any case), the one with the largest device time summed over its launches in the call;
   the kernel picked in most calls is reported (pick_conv_kernel). Fields: "kernel" (its full
   name), median_ms / min_ms / max_ms over the calls that picked it (device time of that kernel
   alone, no launch gap), reps (those calls), calls, picks_other_kernel, kernels_per_call (median
   GPU activities per call: kernels, memcpy and memset), kernels_per_call_max, other_kernels (the
   other names seen). Where the profiler fails or no kernel matches: "error", and the run goes on.
5. Per call, as KernelBench times a model (kernelbench_timing), before step 4's timings: CUDA
   events around one call, synchronize after each, no L2 flush, median of --per-call-reps after
   --per-call-warmup, at the first KernelBench sizes and at the current ones whatever --small
   says. ModelNew (grad mode on, as KernelBench calls model(x)), under torch.no_grad(), its
   forward without nn.Module.__call__, the C++ entry with prebuilt arguments, the operator
   through torch.ops, the stage alone, one tiny PyTorch op (the method's floor) and the eager
   Model; with each, the call's host time and its GPU time alone. With the GPU idle at the start
   event, a call that launches little is timed by its host work, which step 4 hides behind the
   L2 flush. JSON: "per_call", and "model_new_per_call_us" per size.
6. Accuracy against speed, from steps 3 and 4 of this run (nothing re-run): for eager (TF32 conv),
   eager (TF32 off) and each timed stage, the median ms and the max |error| of pooled and y
   against the fp64 Model. JSON: "accuracy_vs_speed", a list of {variant, median_ms,
   max_abs_err_pooled, max_abs_err_y} (null where not measured). Then the targets (TARGETS), from this
   run's medians only, stages found by name (meta "stage_names"), not by number:
     stage tensor_cores <= 0.8 x torch.compile;  stage tensor_cores <= 0.5 x cuDNN ConvTranspose2d
     alone (TF32);  stage three_tf32 < cuDNN ConvTranspose2d alone (FP32);  stage three_tf32 <
     stage async_copy;
   and issue 26's (the Hopper rungs):
     stage wgmma <= 0.7 x torch.compile;  stage wgmma <= 1.13 x cuDNN's conv kernel alone (kind
     cudnn_kernel);  stage three_tf32_wgmma <= 2.6 x stage wgmma;  stage three_tf32_wgmma <= 0.4 x
     cuDNN ConvTranspose2d alone (FP32);  stage multistage_mma < stage async_copy (meant for the
     --small run, the first KernelBench sizes; reported in both, with that note);
   and issue 39's (the warp-specialized kernel, stage warp_specialized): <= cuDNN's conv kernel
     alone, <= 0.85 x it (the stretch, with that note), and < stage wgmma; its 3xTF32 rung
     (stage three_tf32_warp_specialized, a draft under drafts/ until it passes on a GPU):
     <= 2.2 x stage warp_specialized and <= 0.35 x cuDNN ConvTranspose2d alone (FP32).
   JSON: "targets", a list of {name, value (the ratio of the two medians), limit, op ("<=" or "<"),
   met, status, ms, reference_ms, and note where TARGETS gives one}; a target whose timings this
   run lacks has value and met null, status "not measured", and "missing" naming them. Targets are
   reported, never gating.

Skips (message, exit 0) where PyTorch is not importable or no CUDA device exists. Exit 1 when a
gating check fails or the extension does not build. Progress goes to stderr, results to stdout.
The JIT build lands under /tmp (LADDER_TORCH_BUILD_DIR overrides); no network is needed.
"""

from __future__ import annotations

import collections
import copy
import json
import math
import random
import statistics
import sys
import time
import traceback

from . import compare_common as cc
from .compare_common import Timer, abs_error, cudnn_tf32
from .compare_common import FP32_U, LAMBDA, TF32_U

Y_ATOL = 1e-4  # absolute, on y; KernelBench's allclose adds rtol = 1e-4 times |y| (see above)
KB_TOL = 1e-4  # KernelBench's atol = rtol for fp32 outputs (1e-2 in its first version)
# By name, so that a renumbering keeps them; a name without a stage folder is skipped.
DEFAULT_STAGES = ("vectorized_loads,async_copy,tensor_cores,three_tf32,pool_before_conv,single_launch,"
                  "multistage_mma,wgmma,three_tf32_wgmma,warp_specialized,three_tf32_warp_specialized")


SCRIPT = cc.Script("compare_p42")
log, write_json = SCRIPT.log, SCRIPT.write_json
TITLE = "checks and times the ladder's stages against the PyTorch model (KernelBench L2 P42)"
REPS, WARMUP, TRACK = 20, 3, None
MINIMUMS = {"per_call_reps": 1, "per_call_warmup": 0}


def add_args(p) -> None:
    """Problem 42's options (compare.py adds the shared ones)."""
    p.add_argument("--stages", default=DEFAULT_STAGES,
                   help=f"stage names or numbers, comma-separated, or 'all' (default {DEFAULT_STAGES}; names without a folder are skipped)")
    p.add_argument("--small", action="store_true",
                   help="the first KernelBench sizes: batch 128, 3 -> 16, 32x32, x = torch.randn")
    p.add_argument("--no-grad-check", action="store_true", help="skip the backward checks")
    p.add_argument("--no-per-call", action="store_true", help="skip the per-call (KernelBench-style) timing")
    p.add_argument("--per-call-reps", type=int, default=100, help="per-call timing: calls timed (median reported)")
    p.add_argument("--per-call-warmup", type=int, default=10, help="per-call timing: untimed calls first")
    p.add_argument("--graph", action="store_true", help="also time each stage replayed from a CUDA graph")


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


def pooled_bounds(x, weight, conv_bias, pooled64, groups, hout, wout):
    """(fp32 bound, TF32 bound, chain length), per pooled element, from one magnitude: the fp32
    bound of common/tolerance.hpp (see the module docstring), and tf32_tolerance's for a stage
    whose products take TF32 operands: (2 u_t + u_t^2) * magnitude for the rounded inputs, plus the
    fp32 bound with 2u (the tensor core's additions need not round to nearest)."""
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
    fp32 = rel * mag + FP32_U * pooled64.abs()
    tf32 = (2 * TF32_U + TF32_U * TF32_U) * mag + 2 * fp32
    return fp32, tf32, chain


def compare(name, against, pooled, y, ref_pooled, ref_y, pooled_tol, gating, pooled_gating=True):
    ep, nan_p = abs_error(pooled, ref_pooled)
    ey, nan_y = abs_error(y, ref_y)
    ratio = float((ep / pooled_tol).max()) if ep.numel() else 0.0
    max_p, max_y = float(ep.max()), float(ey.max())
    ok_p = nan_p == 0 and ratio <= 1.0
    ok_y = nan_y == 0 and max_y <= Y_ATOL
    kb_ok = nan_y == 0 and bool((ey <= KB_TOL + KB_TOL * ref_y.detach().double().abs()).all())
    passed = ok_y and (ok_p or not pooled_gating)
    return {
        "variant": name, "against": against, "max_abs_pooled": max_p, "pooled_worst_ratio_to_bound": ratio,
        "max_abs_y": max_y, "nan_mismatches": nan_p + nan_y, "pooled_within_bound": ok_p,
        "y_within_1e-4": ok_y, "kernelbench_allclose": kb_ok, "pass": passed, "gating": gating,
    }


# ---- timing ----------------------------------------------------------------------------------------

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


def profile_kernels(torch, fn, warmup, reps, flush=None):
    """[(name, device_us, call_index)] of every GPU activity (kernel, memcpy, memset) of `reps`
    calls of fn, after `warmup` untimed ones; device_us is the activity's own duration in
    microseconds. One torch.profiler session per call: the call index is then exact, with no
    matching of host and device clocks. Activities CPU and CUDA: CUDA alone has lost kernel events
    on some versions. flush (a CUDA tensor, Timer's) is written before each call, outside the
    session, so the kernel starts with a cold L2 as in Timer's medians."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = []
    for i in range(reps):
        if flush is not None:
            flush.fill_(i & 0xFF)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        events += [(e.name, e.time_range.end - e.time_range.start, i) for e in prof.events()
                   if e.device_type == DeviceType.CUDA]
    return events


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
    """The operator's y, gradients and gradients of a gradient penalty (fp32: the stage plus the
    C++ backward) against autograd through F.conv_transpose2d -> mean -> + bias -> logsumexp ->
    sum -> * 10 in float64, on small problems with random parameters. Even cases go through
    ModelNew's entry (ops.stage_forward), odd ones through torch.ops; every fourth has no conv bias."""
    import torch.nn.functional as F
    from conv_pool_ladder.ops import stage_forward, stage_op

    op = stage_op(stage)
    rng = random.Random(seed)
    results = []
    geometries = [{"batch": 2, "groups": 1, "in_channels": 3, "out_channels": 4, "h": 8, "w": 7,
                   "kernel": (3, 3), "stride": (1, 1), "padding": (0, 0), "dilation": (1, 1),
                   "output_padding": (0, 0)}]
    geometries += [random_geometry(rng) for _ in range(cases - 1)]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for i, g in enumerate(geometries):
        cin, cout, groups = g["in_channels"], g["out_channels"], g["groups"]
        shapes = {"x": (g["batch"], cin, g["h"], g["w"]), "weight": (cin, cout // groups, *g["kernel"]),
                  "conv_bias": (cout,), "bias": (cout, 1, 1)}
        base = {k: torch.randn(s, device="cuda", generator=gen, dtype=torch.float32) for k, s in shapes.items()}
        grad_out = torch.randn(g["batch"], 1, device="cuda", generator=gen)
        geo = dict(stride=g["stride"], padding=g["padding"], output_padding=g["output_padding"],
                   dilation=g["dilation"], groups=groups)
        through_ops, no_conv_bias = i % 2 == 1, i % 4 == 3
        names = ("x", "weight", "bias") if no_conv_bias else ("x", "weight", "conv_bias", "bias")
        case = {"geometry": g, "entry": "torch.ops" if through_ops else "ModelNew's entry",
                "conv_bias": not no_conv_bias}

        def tensors(dtype):
            t = {k: v.to(dtype, copy=True).requires_grad_(True) for k, v in base.items()}
            if no_conv_bias:
                t["conv_bias"] = None
            return t

        def forward(t):
            if t["x"].dtype == torch.float64:
                return _reference_y(torch, F, t, geo)
            if through_ops:
                return op(t["x"], t["weight"], t["conv_bias"], t["bias"], stage, geo["stride"], geo["padding"],
                          geo["output_padding"], geo["dilation"], groups, 10.0)
            return stage_forward(t["x"], t["weight"], t["conv_bias"], t["bias"], scale=10.0, stage=stage, **geo)

        # First order: dL/d(x, w, cb, bias) of L = sum(y * grad_out).
        t32, t64 = tensors(torch.float32), tensors(torch.float64)
        y32, y64 = forward(t32), forward(t64)
        (y32 * grad_out).sum().backward()
        (y64 * grad_out.double()).sum().backward()
        case["max_abs_y"] = float((y32.detach().double() - y64.detach()).abs().max())
        ok = case["max_abs_y"] <= Y_ATOL and _grads_close(t32, t64, names, case, "grad_")

        # Second order: a gradient penalty, sum((dL/dx)^2), differentiated again.
        t32, t64 = tensors(torch.float32), tensors(torch.float64)
        for t in (t32, t64):
            (gx,) = torch.autograd.grad((forward(t) * grad_out.to(t["x"].dtype)).sum(), t["x"], create_graph=True)
            (gx * gx).sum().backward()
        ok = _grads_close(t32, t64, names, case, "penalty_grad_") and ok
        case["pass"] = ok
        results.append(case)
    return results


def model_new_grad_check(torch, Model, ModelNew, seed):
    """ModelNew's gradients (x and every parameter) at the first KernelBench sizes against the
    float64 Model's, same weights, for L = sum(y * grad_out)."""
    torch.manual_seed(seed)
    n, cin, cout, h, w, k, _ = PROBLEMS["kernelbench_v1"]
    model = Model(cin, cout, k, (cout, 1, 1)).cuda()
    new = ModelNew(cin, cout, k, (cout, 1, 1)).cuda()
    new.load_state_dict(model.state_dict())
    m64 = copy.deepcopy(model).double()
    x = torch.randn(n, cin, h, w, device="cuda")
    grad_out = torch.randn(n, 1, device="cuda")
    x32, x64 = x.clone().requires_grad_(True), x.double().requires_grad_(True)
    (new(x32) * grad_out).sum().backward()
    (m64(x64) * grad_out.double()).sum().backward()
    t32 = {"x": x32, **{f"param {k}": v for k, v in new.named_parameters()}}
    t64 = {"x": x64, **{f"param {k}": v for k, v in m64.named_parameters()}}
    case = {"problem": "kernelbench_v1", "model": "ModelNew vs fp64 Model"}
    case["pass"] = _grads_close(t32, t64, tuple(t32), case, "grad_")
    return case


def alternating_shapes_check(torch, Model, ModelNew, seed):
    """ModelNew on two problems in turn, A B A B, each against the float64 Model: the operator
    keeps a self-resetting stage's workspace between calls (stage_call.cpp), and a problem with
    another layout must not inherit the previous one's state. B has more (n, ci) planes than A
    but a smaller workspace."""
    torch.manual_seed(seed)
    shapes = {"A": (2, 8, 16, 64, 64), "B": (128, 64, 8, 32, 32)}
    built = {}
    for name, (n, cin, cout, h, w) in shapes.items():
        model = Model(cin, cout, 3, (cout, 1, 1)).cuda()
        new = ModelNew(cin, cout, 3, (cout, 1, 1)).cuda()
        new.load_state_dict(model.state_dict())
        x = torch.rand(n, cin, h, w, device="cuda")
        with torch.no_grad():
            y64 = copy.deepcopy(model).double()(x.double())
        built[name] = (new, x, y64)
    worst, ok = 0.0, True
    with torch.no_grad():
        for name in "ABAB":
            new, x, y64 = built[name]
            err = (new(x).double() - y64).abs().max().item()
            ok = ok and math.isfinite(err) and err <= 1e-4 * max(1.0, y64.abs().max().item())
            worst = max(worst, err) if math.isfinite(err) else float("inf")
    return {"problem": "A (2, 8->16, 64x64), B (128, 64->8, 32x32), called A B A B",
            "model": "ModelNew vs fp64 Model, y", "max_abs_y": worst, "pass": ok}


def error_checks(torch, stage):
    """Wrong tensors and parameters must raise the C++ checks' errors (ValueError / TypeError,
    message naming the culprit), through ModelNew's entry (a CPython function in the extension)
    and through torch.ops; and that entry with contiguous=True (ModelNew's call) must accept a
    non-contiguous x and give the contiguous x's result."""
    from conv_pool_ladder.ops import forward_entry, stage_op

    fn, key = forward_entry(stage)
    op = stage_op(stage)
    good = {"x": torch.randn(2, 3, 8, 8, device="cuda"), "weight": torch.randn(3, 4, 3, 3, device="cuda"),
            "conv_bias": torch.randn(4, device="cuda"), "bias": torch.randn(4, 1, 1, device="cuda"),
            "stage": key, "stride": (1, 1), "padding": (0, 0), "output_padding": (0, 0), "dilation": (1, 1)}
    misaligned = torch.randn(2 * 3 * 8 * 8 + 1, device="cuda")[1:].view(2, 3, 8, 8)
    cases = [  # (what, changed arguments, exception, text the message must hold, torch.ops too)
        ("x on the CPU", {"x": good["x"].cpu()}, ValueError, "x must be a CUDA tensor", True),
        ("x float64", {"x": good["x"].double()}, TypeError, "x must be float32", True),
        ("x not contiguous", {"x": good["x"].transpose(2, 3)}, ValueError, "x must be contiguous", True),
        ("x misaligned", {"x": misaligned}, ValueError, "x must be 16-byte aligned", True),
        ("x 3-D", {"x": good["x"][0]}, ValueError, "x must be 4-D", True),
        ("weight on the CPU", {"weight": good["weight"].cpu()}, ValueError, "weight must be a CUDA tensor", True),
        ("weight in_channels", {"weight": torch.randn(2, 4, 3, 3, device="cuda")}, ValueError, "weight.size(0)", True),
        ("conv_bias shape", {"conv_bias": torch.randn(5, device="cuda")}, ValueError, "conv_bias must have shape", True),
        ("bias shape", {"bias": torch.randn(4, 2, device="cuda")}, ValueError, "bias must have shape", True),
        ("bias float16", {"bias": good["bias"].half()}, TypeError, "bias must be float32", True),
        ("output_padding not below stride", {"output_padding": (1, 1)}, ValueError, "output_padding", True),
        ("stride of three values", {"stride": (1, 1, 1)}, ValueError, "stride must have one value or two", False),
        ("unknown stage", {"stage": "no_such_stage"}, ValueError, "is not in this build", True),
    ]
    results = []
    for what, changes, exc, text, via_ops in cases:
        a = {**good, **changes}
        args = (a["x"], a["weight"], a["conv_bias"], a["bias"], a["stage"], a["stride"], a["padding"],
                a["output_padding"], a["dilation"], 1, 10.0)
        for entry, f in (("ModelNew's entry", fn), ("torch.ops", op)) if via_ops else (("ModelNew's entry", fn),):
            rec = {"case": what, "entry": entry, "expected": f"{exc.__name__}: ...{text}..."}
            try:
                f(*args)
                torch.cuda.synchronize()
                rec.update(got="no error", **{"pass": False})
            except Exception as e:  # the check is on the type and the message
                rec.update(got=cc.err(e), **{"pass": isinstance(e, exc) and text in str(e)})
            results.append(rec)
    g = good
    args = (g["weight"], g["conv_bias"], g["bias"], key, 1, 0, 0, 1, 1, 10.0)
    y_ref = fn(g["x"], *args)
    y_nc = fn(g["x"].transpose(2, 3).contiguous().transpose(2, 3), *args, True)
    results.append({"case": "x not contiguous, contiguous=True", "entry": "ModelNew's entry",
                    "expected": "the contiguous x's y", "got": f"max |difference| {float((y_nc - y_ref).abs().max()):.3g}",
                    "pass": bool(torch.allclose(y_nc, y_ref, rtol=0.0, atol=Y_ATOL))})  # atomics: not bitwise
    return results


# ---- per call, as KernelBench times a model ----------------------------------------------------------

PROBLEMS = {  # name: (batch, in_channels, out_channels, H, W, kernel_size, x distribution)
    "kernelbench_v1": (128, 3, 16, 32, 32, 3, "randn"),  # the first published sizes
    "kernelbench": (16, 64, 128, 512, 512, 3, "rand"),  # the current ones
}


def kernelbench_timing(torch, fn, warmup, reps):
    """As KernelBench times a model: events recorded around one call, synchronize after each,
    no L2 flush; microseconds; after `warmup` calls and at least 0.25 s of them. The GPU is idle at the start event, so the host's work during the
    call counts. Also, per call: host_us, the call's wall time on the host (time.perf_counter),
    and gpu_us, the same events with a spin kernel (torch.cuda._sleep) queued first so that the
    host is far ahead: the GPU time of the call's work alone."""
    # Warm up by count and by time: the first variant timed in a process otherwise pays for lazy
    # initialization and a host that is still settling (seen once: 31 us instead of 15 us).
    t_end = time.perf_counter() + 0.25
    done = 0
    while done < warmup or time.perf_counter() < t_end:
        fn()
        torch.cuda.synchronize()
        done += 1
    us, host, gpu = [], [], []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        end.record()
        torch.cuda.synchronize()
        us.append(1000.0 * start.elapsed_time(end))
        host.append(1e6 * (t1 - t0))
    spin = getattr(torch.cuda, "_sleep", None)
    for _ in range(reps if spin else 0):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        spin(2_000_000)  # clock cycles: about a millisecond, longer than any call's host time here
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        gpu.append(1000.0 * start.elapsed_time(end))
    return {"median_us": statistics.median(us), "mean_us": statistics.fmean(us), "min_us": min(us),
            "max_us": max(us), "host_median_us": statistics.median(host),
            "gpu_median_us": statistics.median(gpu) if gpu else None, "reps": reps, "warmup": warmup}


def per_call(torch, args, stage_key):
    """ModelNew and its neighbours timed per call at both sizes (see the module docstring, 5.)."""
    from conv_pool_ladder.models import Model, ModelNew
    from conv_pool_ladder.ops import run_stage, stage_op

    from conv_pool_ladder.ops import forward_entry

    op = stage_op(stage_key)
    entry, key = forward_entry(stage_key)
    out = {"method": "CUDA events around one call, torch.cuda.synchronize() after each, no L2 flush "
                     "(KernelBench's time_execution_with_cuda_event)",
           "reps": args.per_call_reps, "warmup": args.per_call_warmup, "stage": stage_key, "problems": []}
    for name, (n, cin, cout, h, w, k, dist) in PROBLEMS.items():
        log(f"per call: {name}")
        torch.manual_seed(args.seed)
        model = Model(cin, cout, k, (cout, 1, 1)).cuda()
        new = ModelNew(cin, cout, k, (cout, 1, 1)).cuda()
        new.load_state_dict(model.state_dict())
        x = (torch.rand if dist == "rand" else torch.randn)(n, cin, h, w, device="cuda")
        ct = new.conv_transpose
        entry_args = (x, ct.weight, ct.bias, new.bias, key, ct.stride, ct.padding, ct.output_padding, ct.dilation,
                      ct.groups, 10.0, True)
        tiny = torch.zeros(16, device="cuda")
        variants = [  # (label, kind, grad mode, call); grad mode on is how KernelBench calls model(x)
            ("ModelNew", "model_new", True, lambda: new(x)),
            ("ModelNew, torch.no_grad()", "model_new_no_grad", False, lambda: new(x)),
            ("ModelNew.forward, no nn.Module.__call__", "model_new_forward", True, lambda: new.forward(x)),
            ("C++ entry, its arguments prebuilt", "entry", True, lambda: entry(*entry_args)),
            ("operator through torch.ops", "torch_ops", True, lambda: op(*entry_args[:11])),
            ("stage alone (run_stage, no autograd)", "stage", False,
             lambda: run_stage(stage_key, x, ct.weight, ct.bias, new.bias)),
            ("one tiny op (torch.neg, 16 floats)", "floor", True, lambda: torch.neg(tiny)),
            ("PyTorch eager (TF32 conv, default)", "eager", True, lambda: model(x)),
            ("PyTorch eager, torch.no_grad()", "eager_no_grad", False, lambda: model(x)),
        ]
        problem = {"name": name, "batch": n, "in_channels": cin, "out_channels": cout, "height": h, "width": w,
                   "kernel_size": k, "x": f"torch.{dist}", "timings": []}
        for label, kind, grad, fn in variants:
            try:
                with torch.set_grad_enabled(grad):
                    t = kernelbench_timing(torch, fn, args.per_call_warmup, args.per_call_reps)
            except Exception as e:
                log(f"per call {name}, {label} failed: {type(e).__name__}: {e}")
                problem["timings"].append({"variant": label, "kind": kind, "error": f"{type(e).__name__}: {e}"})
                continue
            t.update(variant=label, kind=kind, grad_enabled=grad)
            problem["timings"].append(t)
        out["problems"].append(problem)
    return out


# ---- accuracy against speed, and the targets: functions of the result's dicts alone ------------------

EAGER_ROWS = (  # (timing kind, the variant of its check against the fp64 Model, label)
    ("eager", "eager (TF32 conv)", "PyTorch eager (TF32 conv, default)"),
    ("eager_fp32", "eager (TF32 off)", "PyTorch eager, TF32 off"),
)
REFERENCE_LABELS = {"compile": "torch.compile", "convt_tf32": "cuDNN ConvTranspose2d alone (TF32)",
                    "convt_fp32": "cuDNN ConvTranspose2d alone (FP32)",
                    "convt_tf32_cl": "cuDNN ConvTranspose2d alone (TF32, channels_last)",
                    "cudnn_kernel": "cuDNN's conv kernel alone (TF32, channels_last)"}
# (stage name, reference: "kind:<timing kind>" or "stage:<stage name>", limit on the ratio, op, note)
TARGETS = (
    ("tensor_cores", "kind:compile", 0.8, "<=", None),
    ("tensor_cores", "kind:convt_tf32", 0.5, "<=", None),
    ("three_tf32", "kind:convt_fp32", 1.0, "<", None),
    ("three_tf32", "stage:async_copy", 1.0, "<", None),
    # issue 26: the Hopper rungs
    ("wgmma", "kind:compile", 0.7, "<=", None),
    ("wgmma", "kind:cudnn_kernel", 1.13, "<=", None),
    ("three_tf32_wgmma", "stage:wgmma", 2.6, "<=", None),
    ("three_tf32_wgmma", "kind:convt_fp32", 0.4, "<=", None),
    ("multistage_mma", "stage:async_copy", 1.0, "<", "meant for the --small run"),
    # issue 39: the warp-specialized Hopper kernel
    ("warp_specialized", "kind:cudnn_kernel", 1.0, "<=", None),
    ("warp_specialized", "kind:cudnn_kernel", 0.85, "<=", "stretch"),
    ("warp_specialized", "stage:wgmma", 1.0, "<", None),
    ("three_tf32_warp_specialized", "stage:warp_specialized", 2.2, "<=", None),
    ("three_tf32_warp_specialized", "kind:convt_fp32", 0.35, "<=", None),
)

# A GPU activity is a convolution kernel when its name (any case) holds one of these and none of
# NOT_CONV_WORDS: cuDNN's and CUTLASS's kernels are named after the algorithm ("sm90_xmma_dgrad_
# implicit_gemm_...", "cutlass_80_tensorop_s1688gemm_...", "implicit_convolve_sgemm"), while the
# layout changes, bias adds and fills around them are not ("nchwToNhwcKernel", "convertTensor",
# "vectorized_elementwise_kernel<...FillFunctor...>"; Triton's "triton_poi_fused_convolution_0").
CONV_KERNEL_WORDS = ("implicit_gemm", "xmma", "dgrad", "fprop", "conv", "cutlass", "winograd", "gemm",
                     "sm90_", "sm80_")
NOT_CONV_WORDS = ("elementwise", "triton_", "nchwtonhwc", "nhwctonchw", "convert", "memcpy", "memset",
                  "fill", "copy")


def is_conv_kernel(name) -> bool:
    """Whether a GPU activity's name looks like a convolution kernel (CONV_KERNEL_WORDS, NOT_CONV_WORDS)."""
    n = str(name).lower()
    return any(w in n for w in CONV_KERNEL_WORDS) and not any(w in n for w in NOT_CONV_WORDS)


def pick_conv_kernel(events, calls=None) -> dict:
    """The convolution kernel of profiled calls, from events: (name, device_us, call_index) per GPU
    activity, calls numbered 0 .. calls-1 (default: the indices seen). Per call, among the names
    is_conv_kernel accepts, the one with the largest device time summed over its launches in that
    call (ties: the name sorting last). The kernel reported is the one picked in most calls (ties:
    the larger total), with median_ms, min_ms, max_ms of its per-call time over the calls that
    picked it (reps of them; ms), calls, picks_other_kernel (calls that picked another),
    kernels_per_call (the median count of GPU activities per call, kernels, memcpy and memset,
    lower median: an int), kernels_per_call_max and other_kernels (the other names, sorted).
    LookupError, naming the activities seen, where no call has a convolution-like kernel."""
    per_call = collections.defaultdict(list)
    for name, us, call in events:
        per_call[call].append((name, float(us)))
    indices = sorted(per_call) if calls is None else list(range(calls))
    picks = {}  # call -> (name, us)
    for c in indices:
        sums = collections.defaultdict(float)
        for name, us in per_call.get(c, ()):
            if is_conv_kernel(name):
                sums[name] += us
        if sums:
            picks[c] = max(sums.items(), key=lambda kv: (kv[1], kv[0]))
    names = sorted({name for name, _, _ in events})
    if not picks:
        seen = ", ".join(short_kernel_name(n, 40) for n in names[:6]) + (", ..." if len(names) > 6 else "")
        raise LookupError(f"no convolution-like kernel (is_conv_kernel) among the {len(names)} GPU activities "
                          f"of {len(indices)} calls" + (f": {seen}" if names else ": the profiler recorded none"))
    count = collections.Counter(name for name, _ in picks.values())
    total = collections.defaultdict(float)
    for name, us in picks.values():
        total[name] += us
    kernel = max(count, key=lambda n: (count[n], total[n]))
    ms = [us / 1000.0 for name, us in picks.values() if name == kernel]
    per = [len(per_call.get(c, ())) for c in indices]
    return {"kernel": kernel, "median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms),
            "reps": len(ms), "calls": len(indices), "picks_other_kernel": len(picks) - len(ms),
            "kernels_per_call": statistics.median_low(per), "kernels_per_call_max": max(per),
            "other_kernels": [n for n in names if n != kernel]}


def short_kernel_name(name, width=64) -> str:
    """A kernel's name for a table: without "void " and the argument list, at most width
    characters (cut at the end, "..." marking the cut): cuDNN's names say the algorithm and tile
    first, CUTLASS's inside their template."""
    n = str(name).strip()
    if n.startswith("void "):
        n = n[5:]
    depth = 0
    for i, ch in enumerate(n):  # the argument list: the first "(" outside template brackets
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth <= 0 and i > 0:
            n = n[:i]
            break
    return n if len(n) <= width else n[:max(width - 3, 1)] + "..."


def stage_label(stage_id, stage_names) -> str:
    """"stage 10 tensor_cores", as the timings name a stage."""
    return f"stage {stage_id} {stage_names.get(stage_id, '')}".rstrip()


def kind_median(timings, kind):
    """The median ms of the first timing of `kind` that has one; None if none has."""
    return next((t["median_ms"] for t in timings if t.get("kind") == kind and t.get("median_ms") is not None),
                None)


def stage_median(timings, stage_id):
    """This run's median ms of stage `stage_id` (kind "stage", field "stage"); None if not timed."""
    return next((t["median_ms"] for t in timings if t.get("kind") == "stage" and t.get("stage") == stage_id
                 and t.get("median_ms") is not None), None)


def fp64_check(checks, variant):
    """The check of `variant` against the fp64 Model (step 3); None where it raised or did not run."""
    return next((c for c in checks if c.get("variant") == variant and c.get("against") == "fp64 Model"), None)


def accuracy_vs_speed(checks, timings, stages, stage_names) -> list:
    """Step 6's rows: eager (TF32 conv), eager (TF32 off), then each stage; null where not measured."""
    rows = []

    def row(label, ms, check):
        rows.append({"variant": label, "median_ms": ms,
                     "max_abs_err_pooled": None if check is None else check.get("max_abs_pooled"),
                     "max_abs_err_y": None if check is None else check.get("max_abs_y")})

    for kind, check_variant, label in EAGER_ROWS:
        row(label, kind_median(timings, kind), fp64_check(checks, check_variant))
    for s in stages:
        row(stage_label(s, stage_names), stage_median(timings, s), fp64_check(checks, f"stage {s}"))
    return rows


def stage_precisions(folders) -> dict:
    """{stage id: "tf32" or "fp32"} of folders ({stage id: its folder}): each stage's precision as
    its rung.json's grader block states it, "fp32" where it says nothing (read by the package's
    rung_meta: tooling never imports grader/)."""
    rung_meta = cc.ladder_package().rung_meta
    return {sid: (rung_meta(folder).get("grader") or {}).get("precision", "fp32") for sid, folder in folders.items()}


def grad_check_stage(stages, new_id, precisions):
    """The stage whose forward the C++ backward check runs: ModelNew's if requested, else the last
    requested FP32 stage (precisions: stage_precisions()). The check holds y to Y_ATOL, an FP32
    allowance that a TF32 forward can exceed on its randn inputs. None if every stage is TF32."""
    if new_id in stages:
        return new_id
    fp32 = [s for s in stages if precisions.get(s, "fp32") != "tf32"]
    return fp32[-1] if fp32 else None


def targets(timings, stage_names) -> list:
    """Step 6's targets from this run's medians; stages by name (stage_names: id -> name). A target
    missing either median is "not measured" with met null: never met by default."""
    ids = {name: sid for sid, name in stage_names.items()}
    out = []
    for stage, reference, limit, op, note in TARGETS:
        sid = ids.get(stage)
        label = stage_label(sid, stage_names) if sid else f"stage {stage}"
        ms = stage_median(timings, sid) if sid else None
        what, key = reference.split(":")
        if what == "stage":
            rid = ids.get(key)
            ref_label = stage_label(rid, stage_names) if rid else f"stage {key}"
            ref_ms = stage_median(timings, rid) if rid else None
        else:
            ref_label, ref_ms = REFERENCE_LABELS[key], kind_median(timings, key)
        factor = "" if limit == 1.0 else f"{limit:g} x "
        t = cc.target(f"{label} {op} {factor}{ref_label}", ms / ref_ms if ms and ref_ms else None, limit, op,
                      ms=ms, reference_ms=ref_ms)
        missing = [name for name, v in ((label, ms), (ref_label, ref_ms)) if not v]
        if missing:
            t["missing"] = missing
        if note:
            t["note"] = note
        out.append(t)
    return out


# ---- main --------------------------------------------------------------------------------------------

def run(torch, args) -> int:
    """Steps 1 to 6 of the module docstring, after compare.py's parsing and skips."""
    cpl = cc.ladder_package()
    from conv_pool_ladder.models import Model, ModelNew
    from conv_pool_ladder.ops import run_stage

    props = torch.cuda.get_device_properties(0)
    meta = {**cc.run_meta(torch, args), "reps": args.reps, "warmup": args.warmup}
    result = {"skipped": False, "meta": meta, "checks": [], "grad_checks": [], "error_checks": [],
              "timings": [], "notes": []}

    # Stages: the requested ones that have a GPU folder; the others are named and skipped.
    gpu_folders = {s.id: s.path for s in cpl.gpu_stages()}
    gpu_ids = list(gpu_folders)
    if args.stages.strip() == "all":
        stages = gpu_ids
    else:
        requested = []
        for s in (s.strip() for s in args.stages.split(",") if s.strip()):
            try:
                requested.append(cpl.normalize_stage_id(s))
            except ValueError:  # a name with no folder: skipped below, like a number
                requested.append(s)
        stages = [s for s in requested if s in gpu_ids]
        for s in requested:
            if s not in gpu_ids:
                note = f"stage {s}: no GPU stage folder under stages/ (yet): skipped"
                log(note)
                result["notes"].append(note)
    meta["stages"] = stages
    new_id = cpl.normalize_stage_id(ModelNew.stage)  # ModelNew names its stage; runs if it is built
    meta["model_new_stage"] = f"{new_id} ({ModelNew.stage})"
    ext = None
    if stages:
        log(f"building the extension for stages {', '.join(stages)} (first build: a minute or two)")
        try:
            ext = cpl.load_extension(stages, verbose=args.verbose_build)
        except Exception as e:
            print(f"{SCRIPT.name}: FAILED to build the extension:\n{e}", file=sys.stderr)
            result["build_error"] = str(e)
            write_json(args.json, result)
            return 1
        meta["stage_names"] = {d["id"]: d["name"] for d in ext.list_stages()}
        meta["stage_tf32"] = {d["id"]: bool(d.get("tf32", False)) for d in ext.list_stages()}
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
        tol, tol_tf32, chain = pooled_bounds(x, ct.weight, ct.bias, pooled64, 1, hout, wout)
        meta["pooled_bound"] = {"u": FP32_U, "lambda": LAMBDA, "chain_length": chain,
                                "min": float(tol.min()), "max": float(tol.max())}
        meta["pooled_bound_tf32"] = {"u_tf32": TF32_U, "min": float(tol_tf32.min()), "max": float(tol_tf32.max())}
        meta["y_atol"] = Y_ATOL
        meta["kernelbench_atol_rtol"] = KB_TOL
        meta["y_abs_max"] = float(y64.abs().max())
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

        def check_outputs(name, pooled, y, bound=tol):
            checks.append(compare(name, "fp64 Model", pooled, y, pooled64, y64, bound, True))
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
            check_outputs(f"stage {s}", pooled, y, tol_tf32 if meta.get("stage_tf32", {}).get(s) else tol)

        model_new = None
        if new_id in stages:
            model_new = ModelNew(cin, cout, k, bias_shape).cuda()
            model_new.load_state_dict(model.state_dict())
            y_new = model_new(x)
            torch.cuda.synchronize()
            # ModelNew returns y only; its pooled is its stage's, checked above.
            c = compare(f"ModelNew ({new_id})", "fp64 Model", pooled64, y_new, pooled64, y64, tol, True)
            c["note"] = "y only (ModelNew returns y)"
            c["max_abs_pooled"] = c["pooled_worst_ratio_to_bound"] = None  # not measured: y only
            checks.append(c)
            result["error_checks"] = error_checks(torch, new_id)
        pooled_tf32 = pooled_fp32 = None  # freed (not del: check_outputs refers to them)
        torch.cuda.empty_cache()

    grad_stage = grad_check_stage(stages, new_id, stage_precisions(gpu_folders)) if stages and not args.no_grad_check else None
    if stages and not args.no_grad_check and grad_stage is None:
        note = "C++ backward check skipped: every requested stage computes in TF32 (it needs an FP32 forward)"
        log(note)
        result["notes"].append(note)
    elif grad_stage is not None:
        log(f"checking the C++ backward (stage {grad_stage}) against fp64 autograd")
        try:
            result["grad_checks"] = grad_check(torch, grad_stage, args.seed)
            meta["grad_check_stage"] = grad_stage
            if model_new is not None:
                result["grad_checks"].append(model_new_grad_check(torch, Model, ModelNew, args.seed))
                result["grad_checks"].append(alternating_shapes_check(torch, Model, ModelNew, args.seed))
        except Exception as e:
            result["grad_checks"].append({"pass": False, "error": f"{type(e).__name__}: {e}",
                                          "traceback": traceback.format_exc()})

    # Per call, first of the timings: before torch.compile and the long stage runs, in a process
    # that has done nothing but checks so far.
    if model_new is not None and not args.no_per_call:
        result["per_call"] = per_call(torch, args, new_id)
        result["model_new_per_call_us"] = {
            p["name"]: next((t["median_us"] for t in p["timings"] if t["kind"] == "model_new" and "median_us" in t),
                            None) for p in result["per_call"]["problems"]}

    # Timing.
    timer = Timer(torch, args.warmup, args.reps)
    meta["l2_bytes"] = timer.l2_bytes
    timings = result["timings"]

    def timed(name, kind, fn, measure=timer, **fields):
        """measure(fn) recorded as a timing; an error is recorded (and logged), never raised."""
        log(f"timing {name}")
        try:
            t = measure(fn)
        except Exception as e:
            log(f"{name} failed: {cc.err(e)}")
            t = {"error": cc.err(e)}
        timings.append({"variant": name, "kind": kind, **fields, **t})

    def conv_kernel(fn):
        """The convolution kernel's own device time per call, through torch.profiler (kind cudnn_kernel)."""
        return {**pick_conv_kernel(profile_kernels(torch, fn, args.warmup, args.reps, timer.flush), args.reps),
                "method": "torch.profiler, one session per call, L2 flushed before each; the largest "
                          "convolution-like kernel per call (is_conv_kernel)"}

    def compiled_model(_):
        log(f"torch.compile (mode={args.compile_mode}): compiling")
        compiled = torch.compile(model, mode=args.compile_mode)
        t0 = time.monotonic()
        compiled(x)
        torch.cuda.synchronize()
        meta["compile_seconds"] = time.monotonic() - t0
        return timer(lambda: compiled(x))

    meta["cudnn_enabled"] = bool(torch.backends.cudnn.enabled)
    with torch.no_grad():
        timed("PyTorch eager (TF32 conv, default)", "eager", lambda: model(x))
        with cudnn_tf32(False):
            timed("PyTorch eager, TF32 off", "eager_fp32", lambda: model(x))
        # The convolution alone, as cuDNN computes it for the Model: what the stages' conv competes with.
        with cudnn_tf32(True):
            timed(REFERENCE_LABELS["convt_tf32"], "convt_tf32", lambda: ct(x))
        with cudnn_tf32(False):
            timed(REFERENCE_LABELS["convt_fp32"], "convt_fp32", lambda: ct(x))
        # channels_last: the layout cuDNN's tensor-core (implicit GEMM) kernels read natively; x is
        # converted once here, untimed (a Model taking NCHW x would pay it on every call).
        try:
            ct_cl = copy.deepcopy(ct).to(memory_format=torch.channels_last)
            x_cl = x.contiguous(memory_format=torch.channels_last)
        except Exception as e:  # e.g. out of memory for the second copy of x
            log(f"channels_last copies failed: {cc.err(e)}")
            for kind in ("convt_tf32_cl", "cudnn_kernel"):
                timings.append({"variant": REFERENCE_LABELS[kind], "kind": kind, "error": cc.err(e)})
        else:
            with cudnn_tf32(True):
                timed(REFERENCE_LABELS["convt_tf32_cl"], "convt_tf32_cl", lambda: ct_cl(x_cl))
                timed(REFERENCE_LABELS["cudnn_kernel"], "cudnn_kernel", lambda: ct_cl(x_cl), conv_kernel)
            ct_cl = x_cl = None  # freed (not del: the lambdas above refer to them)
            torch.cuda.empty_cache()
        if not args.no_compile:
            timed("torch.compile", "compile", None, compiled_model)
            if "error" in timings[-1]:
                result["notes"].append(f"torch.compile failed: {timings[-1]['error']}")
        for s in stages:
            name = stage_label(s, meta["stage_names"])
            fn = (lambda s=s: run_stage(s, x, ct.weight, ct.bias, model.bias))
            timed(name, "stage", fn, stage=s)
            if args.graph:
                timed(name + " (CUDA graph)", "stage_graph", fn, lambda f: timer(graph_of(torch, f).replay))
        if model_new is not None:
            timed(f"ModelNew ({new_id} {ModelNew.stage}, C++ operator)", "model_new", lambda: model_new(x))

    # Ratios: speedup = reference median / this median.
    ref = {t["kind"]: t["median_ms"] for t in timings if "median_ms" in t and t["kind"] in ("eager", "eager_fp32", "compile")}
    for t in timings:
        if "median_ms" in t:
            for kind in ("eager", "eager_fp32", "compile"):
                if kind in ref:
                    t[f"speedup_vs_{kind}"] = ref[kind] / t["median_ms"]

    # Accuracy against speed and the targets: from this run's checks and medians (step 6).
    stage_names = meta.get("stage_names", {})
    result["accuracy_vs_speed"] = accuracy_vs_speed(result["checks"], timings, stages, stage_names)
    result["targets"] = targets(timings, stage_names)

    gating = [c for c in result["checks"] if c.get("gating")] + result["grad_checks"] + result["error_checks"]
    result["passed"] = all(c.get("pass") for c in gating)
    print_report(result)
    write_json(args.json, result)
    return 0 if result["passed"] else 1


def print_report(result) -> None:
    meta = result["meta"]
    p = meta["problem"]
    print(f"PyTorch side by side: {cc.env_line(meta)}")
    print(f"problem: batch {p['batch']}, {p['in_channels']} -> {p['out_channels']} channels, "
          f"{p['height']}x{p['width']}, kernel {p['kernel_size']}, x = {p['x']}")
    b = meta["pooled_bound"]
    print(f"tolerances: y {meta['y_atol']:g} absolute (KernelBench's allclose allows {KB_TOL:g} + {KB_TOL:g}*|y|, "
          f"|y| up to {meta['y_abs_max']:.3g} here: column kb); pooled fp32 bound "
          f"8*sqrt({b['chain_length']})*2^-24*magnitude + 2^-24*|pooled|, here {b['min']:.2e} .. {b['max']:.2e}")
    for note in result["notes"]:
        print(f"note: {note}")
    print()
    print("Correctness (max |error|; pooled also as a multiple of its bound, 2x the bound against eager)")
    hdr = f"{'variant':<26} {'against':<24} {'pooled':>10} {'x bound':>8} {'y':>10} {'kb':>3}  result"
    print(hdr)
    print("-" * len(hdr))
    for c in result["checks"]:
        if "error" in c:
            print(f"{c['variant']:<26} {'-':<24} {'':>10} {'':>8} {'':>10} {'':>3}  FAIL ({c['error']})")
            continue
        verdict = ("PASS" if c["pass"] else "FAIL") if c["gating"] else (
            "info" + ("" if c["y_within_1e-4"] else ": y off by more than 1e-4"))
        if c["gating"] and not c["pooled_within_bound"] and c["pass"]:
            verdict += " (pooled over bound: reported only)"
        if c["nan_mismatches"]:
            verdict += f" ({c['nan_mismatches']} NaN)"
        kb = "ok" if c["kernelbench_allclose"] else "no"
        p_err = "-" if c["max_abs_pooled"] is None else f"{c['max_abs_pooled']:.2e}"
        p_ratio = "-" if c["pooled_worst_ratio_to_bound"] is None else f"{c['pooled_worst_ratio_to_bound']:.3f}"
        print(f"{c['variant']:<26} {c['against']:<24} {p_err:>10} "
              f"{p_ratio:>8} {c['max_abs_y']:>10.2e} {kb:>3}  {verdict}")
    if result["grad_checks"]:
        gc = result["grad_checks"]
        bad = [g for g in gc if not g.get("pass")]
        print(f"C++ backward (1st and 2nd order) vs fp64 autograd (stage {meta.get('grad_check_stage', '?')}), "
              f"{len(gc)} checks (random problems through ModelNew's entry and torch.ops; ModelNew vs the fp64 Model): "
              f"{'PASS' if not bad else 'FAIL'}")
        for g in bad:
            print(f"  FAIL: {json.dumps({k: v for k, v in g.items() if k != 'traceback'}, default=str)}")
    if result["error_checks"]:
        ec = result["error_checks"]
        bad = [e for e in ec if not e["pass"]]
        print(f"Wrong tensors and parameters raise the C++ checks' errors: {len(ec) - len(bad)}/{len(ec)} "
              f"{'PASS' if not bad else 'FAIL'}")
        for e in bad:
            print(f"  FAIL: {e['case']} ({e['entry']}): expected {e['expected']}, got {e['got']}")
    print()
    print(f"Timing: median of {meta['reps']} calls after {meta['warmup']} warm-up, CUDA events, L2 "
          f"({meta['l2_bytes'] / 1e6:.0f} MB) flushed before each, torch.no_grad()")
    def ratio(kind):
        return lambda t: cc.num(t.get(f"speedup_vs_{kind}"), ".2f") + ("x" if t.get(f"speedup_vs_{kind}") else "")

    cc.print_table(result["timings"], [
        ("variant", -max([40] + [len(t["variant"]) for t in result["timings"]]), lambda t: t["variant"]),
        ("median ms", 10, lambda t: "failed" if "error" in t else f"{t['median_ms']:.4f}"),
        ("min ms", 9, lambda t: f"{t['min_ms']:.4f}" if "min_ms" in t else " " + t["error"][:80]),
        ("vs eager", 9, ratio("eager")), ("vs TF32 off", 12, ratio("eager_fp32")), ("vs compile", 11, ratio("compile"))],
        "ratios are speedups: the reference's median over this row's median")
    for t in result["timings"]:
        if t.get("kind") == "cudnn_kernel" and "kernel" in t:
            print(kernel_line(t))
    print()
    print_accuracy_and_targets(result)
    pc = result.get("per_call")
    if pc:
        print(f"Per call, as KernelBench times it: {pc['method']}; median (mean) of {pc['reps']} after "
              f"{pc['warmup']} warm-up, microseconds. host: the call's wall time on the host; gpu: its GPU "
              f"work alone (a spin kernel queued first)")
        probs = pc["problems"]
        hdr = f"{'variant':<40}" + "".join(f" {p['name'] + ': median (mean) host gpu':>44}" for p in probs)
        print(hdr)
        print("-" * len(hdr))
        for i, t0 in enumerate(probs[0]["timings"]):
            cells = []
            for p in probs:
                t = p["timings"][i]
                gpu = f"{t['gpu_median_us']:.1f}" if t.get("gpu_median_us") is not None else "-"
                cells.append(f"{t['median_us']:.1f} ({t['mean_us']:.1f}) {t['host_median_us']:.1f} {gpu}"
                             if "median_us" in t else "failed")
            print(f"{t0['variant']:<40}" + "".join(f" {c:>44}" for c in cells))
        print("(" + "; ".join(f"{p['name']}: batch {p['batch']}, {p['in_channels']} -> {p['out_channels']}, "
                               f"{p['height']}x{p['width']}, x = {p['x']}" for p in probs) + ")")
        print()
    print("RESULT:", "PASS" if result["passed"] else "FAIL")


def kernel_line(t) -> str:
    """Two lines on a cudnn_kernel timing: the kernel's shortened name and how many calls picked
    it; what else each call launched."""
    line = (f"{t['variant']}: {short_kernel_name(t['kernel'])}\n  its device time alone, median of "
            f"{t['reps']} of {t['calls']} calls (torch.profiler); {t['kernels_per_call']} GPU activities per call")
    if t.get("kernels_per_call_max", t["kernels_per_call"]) != t["kernels_per_call"]:
        line += f" (up to {t['kernels_per_call_max']})"
    if t.get("picks_other_kernel"):
        line += f"; {t['picks_other_kernel']} calls picked another kernel"
    if t.get("other_kernels"):
        line += "; others: " + ", ".join(short_kernel_name(n, 40) for n in t["other_kernels"][:4])
        line += ", ..." if len(t["other_kernels"]) > 4 else ""
    return line


def print_accuracy_and_targets(result) -> None:
    """Step 6's two tables (nothing where the result has neither, e.g. an older file)."""
    num = cc.num
    rows = result.get("accuracy_vs_speed") or []
    if rows:
        print("Accuracy against speed: max |error| against the fp64 Model (step 3), median ms (step 4)")
        cc.print_table(rows, [("variant", -40, lambda r: r["variant"]),
                              ("median ms", 10, lambda r: num(r["median_ms"], ".4f")),
                              ("pooled err", 11, lambda r: num(r["max_abs_err_pooled"], ".2e")),
                              ("y err", 10, lambda r: num(r["max_abs_err_y"], ".2e"))])
        print()
    tg = result.get("targets") or []
    if tg:
        cc.print_targets(tg, max([72] + [len(t["name"]) for t in tg]),
                         title="Targets (this run's medians only; value = the ratio of the two medians)",
                         limit_width=8)
        print()

