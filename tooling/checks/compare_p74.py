"""Problem 74 (tracks/p74_backward), forward and backward, side by side with PyTorch, in one run
on one GPU.

    python3 scripts/compare.py --problem 74 --selfcheck                # first: every rung, every gradient
    python3 scripts/compare.py --problem 74 --json /tmp/p74.json           # KernelBench's sizes, timing
    python3 scripts/compare.py --problem 74 --batch 4 --forward-rungs 03,04 --backward-rungs 08,09

The problem: KernelBench level 2, problem 74 (python/conv_pool_ladder/p74.py: ConvTranspose3d ->
LeakyReLU(0.2) -> * multiplier (out_channels, 1, 1, 1) -> LeakyReLU(0.2) -> MaxPool3d(2)), at
KernelBench's sizes unless --batch, --depth, ... say otherwise; weights seeded, x = torch.rand,
the upstream gradient grad_out ~ U(-1, 1).

Default mode. Variants, on the same weights, x and grad_out:
  eager          the Model, cuDNN allowed TF32 (PyTorch's default for convolutions);
  eager_fp32     the Model with torch.backends.cudnn.allow_tf32 = False;
  compile        torch.compile(Model), --compile-mode (default "default"), flags at their defaults;
  forward NN     ModelNew(forward_rung="NN"), forward only (--forward-rungs, default every GPU
                 forward rung);
  pair FF+BB     ModelNew(forward_rung=FF, backward_rung=BB): FF the fastest forward rung that
                 passed its check, BB each backward rung (--backward-rungs, default all).
"forward" is a call under torch.no_grad() (inference: nothing saved); "forward+backward" is
out = m(x); out.backward(grad_out) with x and the parameters requiring grad, their .grad set to
None before each call, so every call allocates its gradients (the parameters' and x's).

Two stages, forward then forward+backward, each in three phases:
  1. memory: one untimed call (warm-up; torch.compile compiles here), then one call between
     torch.cuda.reset_peak_memory_stats() and torch.cuda.max_memory_allocated(): peak_bytes,
     the most bytes PyTorch's caching allocator held during the call. As in compare_p38.py,
     what is resident at the call counts: x, grad_out and every model's parameters (reported as
     baseline_bytes; peak_above_baseline_bytes is the call's own). Nothing else is resident then
     (the references and the L2-flush buffer come later).
  2. correctness, against float64 on the GPU (gating for the rungs, exit 1 on failure; for
     PyTorch, reported): the forward rungs' out, argmax and y_saved (check_forward), the pairs'
     four gradients (check_backward), at the bounds derived below, on the whole batch.
  3. timing: CUDA events around each call; before each repetition the L2 is flushed by writing a
     --flush-mb (default 256) MB buffer; after --warmup calls, the median (min, max) of --reps.

Targets (this run's numbers; reported, never gating):
  fastest forward rung's forward           <= 0.25 x torch.compile's forward;
  fastest pair's forward+backward          <= 0.3 x torch.compile's forward+backward;
  fastest pair's forward+backward peak     <= 0.15 x eager's forward+backward peak (both with
                                              inputs and parameters resident).

Correctness bounds: tracks/p74_backward/tolerance.cpp's, ported (derivations there; u = 2^-24,
lambda = 8, Higham and Mary's probabilistic bound as in the other tracks). Each forward rung is held
to the bound of the precision it declares (list_rungs' "precision"; a precision not below is an
error, ValueError, before anything runs):
  y (conv output + bias), K = in_channels/groups x taps landing there, M = |bias| + sum |w x|:
      fp32: e_y = (lambda*sqrt(K + 1) + 2)*u*M + (K + 1)*2^-126
      tf32 (x and w rounded to TF32 before the products, u_t = 2^-11; FP32 sums, taken at 2u):
            e_y = (2u_t + u_t^2)*M + (lambda*sqrt(K + 1) + 2)*2u*(1 + 2u_t + u_t^2)*M + 2*(K + 1)*2^-126
  (the steps below are the same for both, on that e_y; PyTorch's outputs and the gradients' y term
  below are judged at the fp32 bound, or at that of the rung whose saved state routes them)
  z = lrelu(multiplier*lrelu(y)), L = max(1, |slope|):
      e_z = L^2*|mult|*(e_y + 3u*(|y| + e_y))*(1 + 2^-10) + 3*2^-126*L^2*max(1, |mult|)
  out, the max of z over a window (1-Lipschitz): tol_out = the largest e_z over the window.
  argmax: the window offset must be in range, not on padding, and near-maximal:
      z64[chosen] >= out64 - (tol_out + e_z[chosen]); offsets that differ from float64's first
      maximum are counted (near-ties, information).
  y_saved: within e_y of y64 at the chosen position. And (a check of this script's) out within
      e_z with e_y = 0 of lrelu(multiplier*lrelu(y_saved)): the saved y is the output's.
  gradients: the float64 reference is routed through the rung's own argmax and y_saved (as the
      C++ oracle does), so that a near-tie or a y within rounding of 0 routes both sides alike:
      g_m = (m > 0 ? g : slope*g), grad_multiplier = sum g_m*a, g_y = g_m*multiplier*(y > 0 ? 1 :
      slope), grad_bias = sum g_y, and grad_x, grad_weight from torch.autograd through
      F.conv_transpose3d with g_y scattered to the argmax positions. Each gradient element, a sum
      of n nonzero terms with sum |terms| = mag, must be within (lambda*sqrt(n) + 6)*u*mag +
      n*2^-120 in any summation order (an element with no nonzero term must be exactly 0).
      Against plain torch.autograd of the float64 Model (grad of sum(out*grad_out)) the same bound
      applies (plus L^2*sum |g|*e_y for grad_multiplier, whose terms use y64 there) where PyTorch's
      float64 routing is the rung's (every argmax equal, every sign of y and m equal); otherwise
      that comparison is information, with the windows that differ counted.

--selfcheck: small problems (the KernelBench geometry at small sizes, partial tiles, a generic
problem with groups, dilation, per-axis parameters and an overlapping padded ceil_mode pool that
the fast rungs 04, 09, 10 and 12 must refuse with their reason) and KernelBench's size: every forward
rung and every backward rung at the bounds above (poisoned outputs), determinism where claimed; the
window arithmetic against F.max_pool3d's indices; ModelNew equal to the operators and its rung
fallback; torch.autograd.gradcheck of ModelNew's autograd.Function (P74Function) for every
backward rung; torch.autograd.gradgradcheck of the Model in float64 (PyTorch's second order) and
ModelNew's second order raising; needs_input_grad; error messages. Exit 1 on any FAIL.

Skips (message, exit 0) where PyTorch is not importable or there is no CUDA device. Exit 1 when
the extension does not build, the track is not in this checkout, or a rung fails its check.
Progress on stderr, results on stdout; --json FILE writes everything.
"""

from __future__ import annotations

import copy
import math
import time
import traceback
import warnings

from . import compare_common as cc
from .compare_common import agreement, fp32_round, num as _num, peak_memory, triple
from .compare_common import FP32_U, LAMBDA, TF32_U

SCRIPT = cc.Script("compare_p74")
log, write_json = SCRIPT.log, SCRIPT.write_json
TITLE = "problem 74's GPU rungs, forward and backward, against PyTorch (KernelBench L2 P74), one GPU"
REPS, WARMUP, TRACK, MINIMUMS = 20, 3, "p74", {"flush_mb": 0}

SECOND_ORDER = 2.0 ** -10
MIN_NORMAL = 2.0 ** -126  # fp32's smallest normal: what an underflowed or flushed value loses

# torch.autograd.gradcheck of P74Function on float32 inputs. The function is piecewise linear in
# every input (conv, LeakyReLU, products by one parameter at a time, max), and the inputs are
# chosen (gradcheck_inputs) so that no perturbation of GRADCHECK_EPS crosses a kink: the central
# difference has no truncation error, only fp32 rounding. An output's fp32 error is at most
# ~40 ulps at |out| <= 1 here (sums of <= 54 products: the e_z bound above), 2.4e-6, and the step
# x + eps rounds by u*|x|: the numerical derivative is off by <= 2.4e-6/eps + |f'|*u*|x|/eps,
# about 2.5e-3. GRADCHECK_ATOL = 5e-3 and GRADCHECK_RTOL = 1e-2 leave a factor two; a gradient
# that misses a tap or a slope is off by |w|*|g| ~ 0.05 or more (weights U(-0.2, 0.2)), ten times
# the tolerance. Atomic rungs reorder float sums between calls: GRADCHECK_NONDET_TOL bounds the
# difference of two analytical Jacobians (a few ulps of values <= 1).
GRADCHECK_EPS = 1e-3
GRADCHECK_ATOL = 5e-3
GRADCHECK_RTOL = 1e-2
GRADCHECK_NONDET_TOL = 1e-5
GRADCHECK_MARGIN = 0.02  # |y|, |m| at every argmax and each window's gap to its runner-up exceed this

# The bound on y of each precision a rung may declare (tolerance.cpp's forward_tolerance):
# (rel, u, floors) in e_y = rel*M + (lambda*sqrt(K + 1) + 2)*u*(1 + rel)*M + floors*(K + 1)*2^-126.
# fp32: the sums' roundings alone. tf32: each product of TF32-rounded operands off by (2u_t + u_t^2)
# of itself, the FP32 sums taken at 2u (tensor cores may truncate when they add), and two floors
# for operands TF32 rounds in the subnormal range.
Y_BOUND = {"fp32": (0.0, FP32_U, 1.0), "tf32": (2 * TF32_U + TF32_U ** 2, 2 * FP32_U, 2.0)}

# KernelBench's sizes (python/conv_pool_ladder/p74.py holds the same; --selfcheck compares them).
KERNELBENCH = {"batch": 16, "in_channels": 16, "out_channels": 32, "depth": 16, "height": 32, "width": 32,
               "kernel_size": 3, "stride": 2, "padding": 1, "output_padding": 1, "negative_slope": 0.2,
               "pool_kernel_size": 2}


# ---- sizes, counts, windows, targets: plain Python, no torch (scripts/test_compare.py) ---------

def problem_sizes(p):
    """compare_common.problem_sizes with the pool last, as problem 74 computes."""
    return cc.problem_sizes(p, pool_first=False)


def in_family(p) -> bool:
    """Whether a problem dict lies in the fast rungs' (04, 09, 10, 12) KernelBench geometry family:
    conv kernel 3, stride 2, padding 1, dilation 1, output_padding 0 or 1, groups 1; pool kernel
    2, stride 2, padding 0, dilation 1, no ceil_mode. The rungs decide (their unsupported());
    this is what --selfcheck expects of them."""
    conv_ok = (triple(p["kernel_size"]) == (3,) * 3 and triple(p["stride"]) == (2,) * 3
               and triple(p["padding"]) == (1,) * 3 and triple(p.get("dilation", 1)) == (1,) * 3
               and all(v in (0, 1) for v in triple(p["output_padding"])) and int(p.get("groups", 1)) == 1)
    pk = triple(p["pool_kernel_size"])
    pool_ok = (pk == (2,) * 3 and triple(p.get("pool_stride") or pk) == (2,) * 3
               and triple(p.get("pool_padding", 0)) == (0,) * 3 and triple(p.get("pool_dilation", 1)) == (1,) * 3
               and not p.get("ceil_mode", False))
    return conv_ok and pool_ok


def y_bound(precision, k_terms, mag):
    """e_y (module docstring) of a rung of `precision` ("fp32" or "tf32") for K = k_terms products
    of total magnitude M = mag: floats or float64 tensors alike. ValueError for another precision."""
    if precision not in Y_BOUND:
        raise ValueError(f"no bound for precision {precision!r} (those: {', '.join(Y_BOUND)})")
    rel, u, floors = Y_BOUND[precision]
    e = (LAMBDA * (k_terms + 1.0) ** 0.5 + 2.0) * u * (1.0 + rel) * mag + floors * (k_terms + 1.0) * MIN_NORMAL
    return e + rel * mag if rel else e  # fp32: no conv-sized temporary for a zero term


def rung_precisions(rungs):
    """{rung id: its declared precision} from list_rungs' entries; ValueError naming the rung when
    one declares a precision with no bound here (or none): it cannot be judged."""
    out = {}
    for r in rungs:
        prec = r.get("precision")
        if prec not in Y_BOUND:
            raise ValueError(f"rung {r['id']} {r.get('name', '')} declares precision {prec!r}: compare_p74 has "
                             f"bounds for {', '.join(Y_BOUND)} only")
        out[r["id"]] = prec
    return out


def _passed(v):
    return bool((v.get("check") or {}).get("pass"))


def fastest(variants, kind, phase):
    """The variant of `kind` with the smallest `phase` ("forward" or "train") median among those
    timed that passed their check; None if none."""
    ok = [v for v in variants if v.get("kind") == kind and (v.get(phase) or {}).get("median_ms") is not None
          and _passed(v)]
    return min(ok, key=lambda v: v[phase]["median_ms"], default=None)


def _ms(v, phase):
    return None if v is None else (v.get(phase) or {}).get("median_ms")


def evaluate_targets(variants):
    """The three targets (module docstring) from this run's variants: dicts with kind ("eager",
    "eager_fp32", "compile", "forward", "pair"), forward / train ({median_ms}), peak_train_bytes
    and check ({pass}). A target whose numbers are missing is "not measured" (met None)."""
    compile_v = next((v for v in variants if v.get("kind") == "compile"), None)
    eager_v = next((v for v in variants if v.get("kind") == "eager"), None)
    best_f = fastest(variants, "forward", "forward")
    best_p = fastest(variants, "pair", "train")
    out = []
    f_ms, c_f = _ms(best_f, "forward"), _ms(compile_v, "forward")
    out.append(cc.target(f"{best_f['variant'] if best_f else 'fastest forward rung (none passed)'}: forward <= 0.25 x "
                         "torch.compile's", f_ms / c_f if f_ms and c_f else None, 0.25, ms=f_ms, reference_ms=c_f))
    p_ms, c_t = _ms(best_p, "train"), _ms(compile_v, "train")
    label = best_p["variant"] if best_p else "fastest pair (none passed)"
    out.append(cc.target(f"{label}: forward+backward <= 0.3 x torch.compile's", p_ms / c_t if p_ms and c_t else None,
                         0.3, ms=p_ms, reference_ms=c_t))
    peak = best_p.get("peak_train_bytes") if best_p else None
    eager_peak = eager_v.get("peak_train_bytes") if eager_v else None
    out.append(cc.target(f"{label}: forward+backward peak memory <= 0.15 x eager's (inputs and parameters included)",
                         peak / eager_peak if peak and eager_peak else None, 0.15, bytes=peak,
                         reference_bytes=eager_peak))
    return out


def resolve_rungs(spec, rungs, direction):
    """Rung ids with a GPU `direction` pass ("forward" or "backward") for a --*-rungs value
    ("all", or ids / names, comma-separated); ValueError names the unknown."""
    avail = [r for r in rungs if r[direction]]
    try:
        return cc.pick_rungs(spec, avail)
    except LookupError as e:
        raise ValueError(f"--{direction}-rungs: no rung {e.args[0]!r} with a GPU {direction} pass (those: "
                         f"{cc.rung_names(avail) or 'none'})") from None


def add_args(p) -> None:
    """Problem 74's options (compare.py adds the shared ones)."""
    p.add_argument("--forward-rungs", default="all", help="forward rungs by number or name, comma-separated")
    p.add_argument("--backward-rungs", default="all", help="backward rungs by number or name, comma-separated")
    cc.add_problem_args(p, KERNELBENCH, flush_mb=256)
    p.add_argument("--skip-kernelbench-selfcheck", action="store_true",
                   help="--selfcheck: leave out the KernelBench-sized case")


def problem_of(args):
    """The problem dict of a default-mode run (KERNELBENCH's keys)."""
    return {**{k: getattr(args, k) for k in KERNELBENCH if k != "negative_slope"},
            "negative_slope": KERNELBENCH["negative_slope"]}


def problem_case(problem):
    """A default-mode problem dict as a selfcheck case (case_problem's form), for case_models."""
    return {"name": "run", "batch": problem["batch"], "in_channels": problem["in_channels"],
            "out_channels": problem["out_channels"], "input": (problem["depth"], problem["height"], problem["width"]),
            "conv": {k: problem[k] for k in ("kernel_size", "stride", "padding", "output_padding")},
            "pool": {"kernel_size": problem["pool_kernel_size"]}, "negative_slope": problem["negative_slope"]}


# ---- windows, references and bounds (torch) ---------------------------------------------------------

def pool_params(model):
    """MaxPool3d's parameters as triples: kernel, stride, padding, dilation, and ceil_mode."""
    mp = model.max_pool
    k = triple(mp.kernel_size)
    return {"kernel": k, "stride": triple(mp.stride if mp.stride is not None else k), "padding": triple(mp.padding),
            "dilation": triple(mp.dilation), "ceil_mode": bool(mp.ceil_mode)}


def windows(t, pool, out_size, fill=-math.inf):
    """Every pooling window of t (N, C, D, H, W) as (N, C, oD, oH, oW, window) in window order
    (jd, jh, jw), padding positions holding `fill`."""
    import torch.nn.functional as F

    pads = []
    for a in (2, 1, 0):  # F.pad takes the last axis first
        k, s, p, d = pool["kernel"][a], pool["stride"][a], pool["padding"][a], pool["dilation"][a]
        need = (out_size[a] - 1) * s + d * (k - 1) + 1
        pads += [p, max(0, need - (t.shape[2 + a] + p))]
    w = F.pad(t, pads, value=fill)
    for a in range(3):
        k, s, d = pool["kernel"][a], pool["stride"][a], pool["dilation"][a]
        w = w.unfold(2 + a, d * (k - 1) + 1, s).narrow(2 + a, 0, out_size[a])
    w = w[..., ::pool["dilation"][0], ::pool["dilation"][1], ::pool["dilation"][2]]
    return w.reshape(*w.shape[:5], -1)


def offset_positions(torch, offsets, pool, conv_size):
    """(flat conv-spatial index, valid) of window offsets (N, C, oD, oH, oW): valid where the
    offset is in range and not on padding; the index is 0 where invalid."""
    k, s, p, d = pool["kernel"], pool["stride"], pool["padding"], pool["dilation"]
    off = offsets.long()
    valid = (off >= 0) & (off < math.prod(k))
    off = off.clamp(0, math.prod(k) - 1)
    j = (off // (k[1] * k[2]), (off // k[2]) % k[1], off % k[2])
    pos = []
    for a in range(3):
        shape = [1, 1, 1, 1, 1]
        shape[2 + a] = off.shape[2 + a]
        q = torch.arange(off.shape[2 + a], device=off.device).view(shape)
        pa = q * s[a] - p[a] + j[a] * d[a]
        valid &= (pa >= 0) & (pa < conv_size[a])
        pos.append(pa)
    flat = (pos[0] * conv_size[1] + pos[1]) * conv_size[2] + pos[2]
    return torch.where(valid, flat, torch.zeros_like(flat)), valid


def conv_kwargs(ct):
    return dict(stride=ct.stride, padding=ct.padding, output_padding=ct.output_padding, groups=ct.groups,
                dilation=ct.dilation)


def chain64(torch, y, mult, slope):
    """(a, m, z) = (lrelu(y), multiplier*a, lrelu(m)) in float64; mult (C,) broadcast per channel."""
    a = torch.where(y > 0, y, slope * y)
    m = mult.view(1, -1, 1, 1, 1) * a
    return a, m, torch.where(m > 0, m, slope * m)


def chain_bound(torch, y, mult, slope, e_y):
    """e_z of the module docstring (tolerance.cpp's z_error) for y (float64) with bound e_y."""
    lip2 = max(1.0, abs(slope)) ** 2
    am = mult.abs().view(1, -1, 1, 1, 1)
    return (lip2 * am * (e_y + 3 * FP32_U * (y.abs() + e_y)) * (1 + SECOND_ORDER)
            + 3 * MIN_NORMAL * lip2 * torch.clamp(am, min=1.0))


def forward_reference(torch, model, x, precisions=("fp32",)):
    """The float64 forward of `model`'s parameters on x, with everything the checks need:
    {y, e_y, z, e_z, out, tol_out, offsets (first maximum, window order), indices (F.max_pool3d's),
    conv_size, out_size, pool, slope, bounds}. bounds[precision] = {e_y, e_z, tol_out} for each of
    `precisions` (y_bound's); e_y, e_z and tol_out alone are fp32's, always computed. The slope is
    rounded to fp32 first, as PyTorch applies it to an fp32 tensor."""
    import torch.nn.functional as F

    ct = model.conv_transpose
    kw = conv_kwargs(ct)
    slope = fp32_round(model.leaky_relu.negative_slope)
    x64, w64, b64 = x.detach().double(), ct.weight.detach().double(), ct.bias.detach().double()
    mult = model.multiplier.detach().double().reshape(-1)
    with torch.no_grad():
        y = F.conv_transpose3d(x64, w64, b64, **kw)
        mag = F.conv_transpose3d(x64.abs(), w64.abs(), b64.abs(), **kw)
        ones_in = torch.ones((1, 1) + tuple(x.shape[2:]), dtype=torch.float64, device=x.device)
        ones_k = torch.ones((1, 1) + tuple(w64.shape[2:]), dtype=torch.float64, device=x.device)
        taps = F.conv_transpose3d(ones_in, ones_k, stride=ct.stride, padding=ct.padding,
                                  output_padding=ct.output_padding, dilation=ct.dilation)
        k_terms = (x.shape[1] // ct.groups) * taps
        e_ys = {prec: y_bound(prec, k_terms, mag) for prec in dict.fromkeys(("fp32", *precisions))}
        del mag
        _, _, z = chain64(torch, y, mult, slope)
        pool = pool_params(model)
        out, indices = F.max_pool3d(z, pool["kernel"], pool["stride"], pool["padding"], pool["dilation"],
                                    pool["ceil_mode"], return_indices=True)
        out_size = tuple(out.shape[2:])
        zw = windows(z, pool, out_size)
        offsets = zw.argmax(-1)  # the first maximum: torch.argmax returns the first of equal maxima
        del zw
        bounds = {}
        for prec, e_y in e_ys.items():
            e_z = chain_bound(torch, y, mult, slope, e_y)
            bounds[prec] = {"e_y": e_y, "e_z": e_z, "tol_out": windows(e_z, pool, out_size).amax(-1)}
    fp32 = bounds["fp32"]
    return {"y": y, "e_y": fp32["e_y"], "z": z, "e_z": fp32["e_z"], "out": out, "tol_out": fp32["tol_out"],
            "offsets": offsets, "indices": indices, "conv_size": tuple(y.shape[2:]), "out_size": out_size,
            "pool": pool, "slope": slope, "mult": mult, "bounds": bounds}


def _at(torch, t, flat):
    """t (N, C, conv...) gathered at flat conv-spatial indices (N, C, out...)."""
    return t.flatten(2).gather(2, flat.flatten(2)).view(flat.shape)


def reference_bounds(ref, precision):
    """forward_reference's {e_y, e_z, tol_out} for `precision`; ValueError when the reference was
    not built with it (a rung must never fall back to another precision's bound)."""
    if precision not in ref["bounds"]:
        raise ValueError(f"the float64 reference has no {precision!r} bound (built for "
                         f"{', '.join(ref['bounds'])}): pass the rungs' precisions to forward_reference")
    return ref["bounds"][precision]


def check_forward(torch, ref, out, argmax, y_saved, precision="fp32"):
    """A forward rung's (out, argmax, y_saved) against forward_reference (module docstring), at the
    bound of the rung's `precision`."""
    bound = reference_bounds(ref, precision)
    flat, valid = offset_positions(torch, argmax, ref["pool"], ref["conv_size"])
    z_at, e_at = _at(torch, ref["z"], flat), _at(torch, bound["e_z"], flat)
    near_max = valid & (z_at >= ref["out"] - (bound["tol_out"] + e_at))
    argmax_failures = int((~near_max).sum())
    differs = int((valid & (argmax.long() != ref["offsets"])).sum())
    res = {"out": agreement(out, ref["out"], bound["tol_out"]), "argmax_failures": argmax_failures,
           "argmax_differs": differs, "precision": precision}
    tol_y = _at(torch, bound["e_y"], flat)
    y_ref = torch.where(valid, _at(torch, ref["y"], flat), y_saved.double())  # invalid ones fail above
    res["y_saved"] = agreement(y_saved, y_ref, tol_y)
    ys = y_saved.double()
    _, _, z = chain64(torch, ys, ref["mult"], ref["slope"])
    res["out_from_y_saved"] = agreement(out, z, chain_bound(torch, ys, ref["mult"], ref["slope"], torch.zeros_like(ys)))
    res["pass"] = (res["out"]["pass"] and res["y_saved"]["pass"] and res["out_from_y_saved"]["pass"]
                   and argmax_failures == 0)
    return res


def _sum_bound(torch, mag, terms, precision="fp32"):
    """tolerance.cpp's grad_tol: rel*mag + (lambda*sqrt(terms) + 6)*u*(1 + rel)*mag + floors*terms*2^-120,
    with Y_BOUND's (rel, u, floors) of `precision`: fp32 (0, u, 1); tf32, products of TF32-rounded
    operands (2u_t + u_t^2, 2u, 2)."""
    rel, u, floors = Y_BOUND[precision]
    return rel * mag + (LAMBDA * torch.sqrt(terms) + 6.0) * u * (1.0 + rel) * mag + floors * terms * 2.0 ** -120


def backward_reference(torch, model, x, argmax, y_saved, grad_out, ref):
    """The float64 gradients routed through a forward rung's argmax and y_saved, with their bounds
    (module docstring): {grad_x, grad_weight, grad_bias, grad_multiplier, tol_*}. Of ref
    (forward_reference's) only slope, mult, pool and conv_size are read."""
    import torch.nn.functional as F

    ct = model.conv_transpose
    kw = conv_kwargs(ct)
    s, mult = ref["slope"], ref["mult"]
    flat, valid = offset_positions(torch, argmax, ref["pool"], ref["conv_size"])
    with torch.no_grad():
        ys, g = y_saved.double(), grad_out.double() * valid
        a = torch.where(ys > 0, ys, s * ys)
        m = mult.view(1, -1, 1, 1, 1) * a
        g_m = torch.where(m > 0, g, s * g)
        t_mult = g_m * a
        gy = g_m * mult.view(1, -1, 1, 1, 1)
        g_y = torch.where(ys > 0, gy, s * gy)
        dims = (0, 2, 3, 4)
        out = {"grad_multiplier": t_mult.sum(dims), "grad_bias": g_y.sum(dims)}
        out["tol_grad_multiplier"] = _sum_bound(torch, t_mult.abs().sum(dims), (t_mult != 0).sum(dims).double())
        out["tol_grad_bias"] = _sum_bound(torch, g_y.abs().sum(dims), (g_y != 0).sum(dims).double())
        n, c = y_saved.shape[:2]

        def scatter(v):
            conv = torch.zeros((n, c, math.prod(ref["conv_size"])), dtype=torch.float64, device=x.device)
            conv.scatter_add_(2, flat.flatten(2), v.flatten(2))  # overlapping windows add
            return conv.view((n, c) + ref["conv_size"])

        grad_y, grad_y_abs, grad_y_nz = scatter(g_y), scatter(g_y.abs()), scatter((g_y != 0).double())
    x64, w64 = x.detach().double(), ct.weight.detach().double()

    def conv_grads(xv, wv, gv):
        xr, wr = xv.clone().requires_grad_(True), wv.clone().requires_grad_(True)
        with torch.enable_grad():
            yv = F.conv_transpose3d(xr, wr, None, **kw)
            return torch.autograd.grad(yv, (xr, wr), gv)

    out["grad_x"], out["grad_weight"] = conv_grads(x64, w64, grad_y)
    mag_x, mag_w = conv_grads(x64.abs(), w64.abs(), grad_y_abs)
    n_x, n_w = conv_grads((x64 != 0).double(), (w64 != 0).double(), grad_y_nz)
    # grad_x and grad_weight are the convolutions a TF32 rung may run on tensor cores; grad_bias
    # and grad_multiplier stay FP32 sums in every rung (tolerance.cpp's grad_tolerance)
    for prec in Y_BOUND:
        out[f"tol_grad_x_{prec}"] = _sum_bound(torch, mag_x, n_x, prec)
        out[f"tol_grad_weight_{prec}"] = _sum_bound(torch, mag_w, n_w, prec)
    return out


GRAD_NAMES = ("grad_x", "grad_weight", "grad_bias", "grad_multiplier")


def grad_tolerance(bref, name, precision="fp32"):
    """The bound backward_reference computed for gradient `name` of a rung of `precision`:
    grad_x and grad_weight have one per precision (Y_BOUND's), grad_bias and grad_multiplier one.
    ValueError for a precision with no bound."""
    if precision not in Y_BOUND:
        raise ValueError(f"no gradient bound for precision {precision!r} (those: {', '.join(Y_BOUND)})")
    return bref.get(f"tol_{name}_{precision}", bref.get("tol_" + name))


def check_backward(torch, bref, grads, precision="fp32"):
    """A backward rung's four gradients against backward_reference, at `precision`'s bound."""
    res = {"precision": precision}
    for name, g in zip(GRAD_NAMES, grads):
        res[name] = agreement(g.reshape(bref[name].shape), bref[name], grad_tolerance(bref, name, precision))
    res["pass"] = all(res[n]["pass"] for n in GRAD_NAMES)
    return res


def autograd_reference(torch, model, x, grad_out):
    """PyTorch's float64 gradients of sum(Model(x) * grad_out), slope rounded to fp32:
    (grad_x, grad_weight, grad_bias, grad_multiplier flattened)."""
    m64 = copy.deepcopy(model).double()
    m64.leaky_relu.negative_slope = fp32_round(model.leaky_relu.negative_slope)
    x64 = x.detach().double().requires_grad_(True)
    with torch.enable_grad():
        out = m64(x64)
        params = (x64, m64.conv_transpose.weight, m64.conv_transpose.bias, m64.multiplier)
        grads = torch.autograd.grad(out, params, grad_out.double())
    return grads[:3] + (grads[3].reshape(-1),)


def routing_differences(torch, ref, argmax, y_saved):
    """Windows where PyTorch's float64 routing differs from the rung's: another argmax, or another
    sign of y or of m at it."""
    flat, valid = offset_positions(torch, argmax, ref["pool"], ref["conv_size"])
    y64 = _at(torch, ref["y"], flat)
    ys = y_saved.double()
    mult = ref["mult"].view(1, -1, 1, 1, 1)
    differ = (argmax.long() != ref["offsets"]) | ~valid | ((y64 > 0) != (ys > 0)) | ((mult * y64 > 0) !=
                                                                                      (mult * ys > 0))
    return int(differ.sum())


# ---- the extension and the models (torch) -----------------------------------------------------------

# ---- the comparison (default mode) -------------------------------------------------------------------

def compare(torch, p74, args, rungs) -> int:
    meta = cc.run_meta(torch, args)
    problem = problem_of(args)
    sizes = problem_sizes(problem)
    fwd_ids = resolve_rungs(args.forward_rungs, rungs, "forward")
    bwd_ids = resolve_rungs(args.backward_rungs, rungs, "backward")
    precision = rung_precisions(rungs)  # each forward rung is held to its own precision's bound
    names = {r["id"]: r["name"] for r in rungs}
    model, init, x, grad_out = case_models(torch, p74, problem_case(problem), args.seed)
    info = p74.model_info(model, tuple(x.shape), fwd_ids[0] if fwd_ids else "03")
    sizes["conv_macs_cpp"] = info["conv_macs"]
    result = {"skipped": False, "meta": meta, "problem": problem, "sizes": sizes, "rungs": rungs, "notes": [],
              "unsupported": {}}
    if float(sizes["conv_macs"]) != info["conv_macs"]:
        result["notes"].append(f"conv_macs differs: Python {sizes['conv_macs']}, C++ {info['conv_macs']}")
    for r in sorted(set(fwd_ids + bwd_ids)):
        why = p74.model_info(model, tuple(x.shape), r)["unsupported"]
        if why:
            result["unsupported"][r] = why
    fwd_ids = [r for r in fwd_ids if r not in result["unsupported"]]
    bwd_ids = [r for r in bwd_ids if r not in result["unsupported"]]
    log(f"problem {problem}: conv {sizes['conv_size']}, out {sizes['out_size']}, conv_macs {sizes['conv_macs']:,}; "
        f"forward rungs {fwd_ids}, backward rungs {bwd_ids}; device {meta['device']}")
    params = list(model.parameters())
    news = {}

    def train_fn(m, ps):
        def fn():
            x.grad = None
            for p_ in ps:
                p_.grad = None
            out = m(x)
            out.backward(grad_out)
            return out
        return fn

    variants = [{"variant": "PyTorch eager (TF32 conv, the default)", "kind": "eager", "tf32": True},
                {"variant": "PyTorch eager, TF32 off", "kind": "eager_fp32", "tf32": False}]
    if not args.no_compile:
        variants.append({"variant": f"torch.compile (mode={args.compile_mode})", "kind": "compile", "tf32": None})
    compiled = {}

    def module_of(v):
        if v["kind"] == "compile":
            if "m" not in compiled:
                log(f"torch.compile (mode={args.compile_mode})")
                compiled["m"] = torch.compile(model, mode=args.compile_mode)
            return compiled["m"], params
        if v["kind"] in ("eager", "eager_fp32"):
            return model, params
        m = news[v["key"]]
        return m, list(m.parameters())

    for r in fwd_ids:
        news[("f", r)] = case_new(p74, model, init, r, bwd_ids[0] if bwd_ids else "08")
        variants.append({"variant": f"forward {r} {names[r]}", "kind": "forward", "rung": r, "key": ("f", r),
                         "tf32": None, "precision": precision[r]})

    def run(vs, phase_name, body):
        cc.run_phase(torch, vs, phase_name, body, log)

    # ---- stage 1: forward ----
    def fwd_fn(v):
        m, _ = module_of(v)
        return lambda: m(x)

    def fwd_memory(v):
        with torch.no_grad():
            t0 = time.monotonic()
            fwd_fn(v)()
            torch.cuda.synchronize()
            if v["kind"] == "compile":
                meta["compile_forward_seconds"] = time.monotonic() - t0
            log(f"memory (forward): {v['variant']}")
            mem = peak_memory(torch, fwd_fn(v))
        v.update({f"{k}_forward": val for k, val in mem.items()})

    run(variants, "memory (forward)", fwd_memory)
    torch.cuda.empty_cache()
    log("reference: the forward in float64")
    state = {"ref": forward_reference(torch, model, x, [precision[r] for r in fwd_ids])}  # entries go when popped
    bwd_ref = {k: state["ref"][k] for k in ("slope", "mult", "pool", "conv_size")}  # what backward_reference reads

    def fwd_check(v):
        ref = state["ref"]
        log(f"check (forward): {v['variant']}")
        with torch.no_grad():
            if v["kind"] == "forward":
                out, argmax, y_saved = p74.p74_forward(x, model.conv_transpose.weight, model.conv_transpose.bias,
                                                       model.multiplier, rung=v["rung"], poison=True,
                                                       **p74.module_params(model))
                v["check"] = check_forward(torch, ref, out, argmax, y_saved, precision[v["rung"]])
                v["check"]["gating"] = True
                v["routing_differs_from_pytorch"] = routing_differences(torch, ref, argmax, y_saved)
            else:
                v["check"] = {**agreement(fwd_fn(v)(), ref["out"], ref["tol_out"]), "gating": False}

    run(variants, "check (forward)", fwd_check)
    state.pop("ref")
    torch.cuda.empty_cache()
    state["timer"] = cc.Timer(torch, args.warmup, args.reps, args.flush_mb * 2**20)

    def fwd_time(v):
        log(f"timing (forward): {v['variant']}")
        with torch.no_grad():
            v["forward"] = state["timer"](fwd_fn(v))

    run(variants, "timing (forward)", fwd_time)
    state.pop("timer")
    best_f = fastest(variants, "forward", "forward")

    # ---- stage 2: forward+backward ----
    pairs = []
    if best_f is not None:
        for r in bwd_ids:
            news[("p", r)] = case_new(p74, model, init, best_f["rung"], r)
            pairs.append({"variant": f"pair {best_f['rung']}+{r} {names[best_f['rung']]}+{names[r]}", "kind": "pair",
                          "rung": r, "forward_rung": best_f["rung"], "key": ("p", r), "tf32": None})
    else:
        result["notes"].append("no forward rung passed: no forward+backward pairs")
    x.requires_grad_(True)
    train_vs = [v for v in variants if v["kind"] in ("eager", "eager_fp32", "compile")] + pairs
    variants += pairs
    torch.cuda.empty_cache()  # nothing of the checks or the timer stays resident during the memory phase

    def train_memory(v):
        m, ps = module_of(v)
        t0 = time.monotonic()
        train_fn(m, ps)()
        torch.cuda.synchronize()
        if v["kind"] == "compile":
            meta["compile_train_seconds"] = time.monotonic() - t0
        # the warm-up's gradients (and earlier variants') go: resident are x, grad_out, parameters
        x.grad = None
        for mod in [model, *news.values()]:
            mod.zero_grad(set_to_none=True)
        log(f"memory (forward+backward): {v['variant']}")
        mem = peak_memory(torch, train_fn(m, ps))
        v.update({"peak_train_bytes": mem["peak_bytes"], "baseline_train_bytes": mem["baseline_bytes"],
                  "peak_above_baseline_train_bytes": mem["peak_above_baseline_bytes"]})

    run(train_vs, "memory (forward+backward)", train_memory)
    torch.cuda.empty_cache()
    if pairs:
        log("reference: gradients in float64, routed through the fastest forward rung's argmax")
        with torch.no_grad():
            _, argmax, y_saved = p74.p74_forward(x.detach(), model.conv_transpose.weight, model.conv_transpose.bias,
                                                 model.multiplier, rung=best_f["rung"], **p74.module_params(model))
        bref = backward_reference(torch, model, x, argmax, y_saved, grad_out, bwd_ref)
        result["routing_differs_from_pytorch"] = best_f["routing_differs_from_pytorch"]

        def train_check(v):
            log(f"check (backward): {v['variant']}")
            with torch.no_grad():
                grads = p74.p74_backward(grad_out, x.detach(), model.conv_transpose.weight, model.conv_transpose.bias,
                                         model.multiplier, argmax, y_saved, rung=v["rung"], poison=True,
                                         **p74.module_params(model))
            v["check"] = {**check_backward(torch, bref, grads, precision[v["rung"]]), "gating": True}

        run(pairs, "check (backward)", train_check)
        del bref, argmax, y_saved
    torch.cuda.empty_cache()
    state["timer"] = cc.Timer(torch, args.warmup, args.reps, args.flush_mb * 2**20)
    meta.update(reps=args.reps, warmup=args.warmup, flush_bytes=args.flush_mb * 2**20)

    def train_time(v):
        log(f"timing (forward+backward): {v['variant']}")
        m, ps = module_of(v)
        v["train"] = state["timer"](train_fn(m, ps))

    run(train_vs, "timing (forward+backward)", train_time)
    state.pop("timer")
    for v in variants:
        v.pop("key", None)
    result["variants"] = variants
    result["targets"] = evaluate_targets(variants)
    failed = [v for v in variants if v["kind"] in ("forward", "pair") and (v.get("error") or not _passed(v))]
    result["passed"] = not failed and best_f is not None
    print_report(result)
    write_json(args.json, result)
    return 0 if result["passed"] else 1


def _mb(v):
    return None if v is None else v / 1e6


def print_report(result):
    m, p, s = result["meta"], result["problem"], result["sizes"]
    print(f"Problem 74 against PyTorch: {cc.env_line(m)}, commit {m['provenance'].get('git_commit')}")
    print(f"problem: batch {p['batch']}, {p['in_channels']} -> {p['out_channels']} channels, input "
          f"{p['depth']}x{p['height']}x{p['width']}, ConvTranspose3d(kernel {p['kernel_size']}, stride {p['stride']}, "
          f"padding {p['padding']}, output_padding {p['output_padding']}), LeakyReLU({p['negative_slope']}), "
          f"MaxPool3d({p['pool_kernel_size']}); conv {'x'.join(map(str, s['conv_size']))}, out "
          f"{'x'.join(map(str, s['out_size']))}, conv_macs {s['conv_macs']:,} (C++ {s.get('conv_macs_cpp', 0):,.0f})")
    for r, why in result["unsupported"].items():
        print(f"note: rung {r} left out: {why}")
    for note in result["notes"]:
        print(f"note: {note}")
    if "routing_differs_from_pytorch" in result:
        print(f"note: windows where PyTorch's float64 routing differs from the fastest forward rung's: "
              f"{result['routing_differs_from_pytorch']} (near-ties or y/m within rounding of 0)")
    print()
    print(f"median of {m['reps']} calls after {m['warmup']} warm-up, CUDA events, L2 flushed before each by a "
          f"{m['flush_bytes'] / 2**20:.0f} MiB write; forward under no_grad; peak = max_memory_allocated over one "
          f"forward+backward, inputs, grad_out and parameters included")
    def ratio(v):
        c = v.get("check") or {}
        parts = {"forward": ("out", "y_saved", "out_from_y_saved"), "pair": GRAD_NAMES}.get(v["kind"])
        if "worst_ratio" in c or not parts:
            return _num(c.get("worst_ratio"), ".3g")
        return _num(max((c.get(k) or {}).get("worst_ratio", 0.0) for k in parts), ".3g")

    cc.print_table(result["variants"], [
        ("variant", -44, lambda v: v["variant"]), ("fwd ms", 9, lambda v: _num(_ms(v, "forward"), ".4f")),
        ("fwd+bwd ms", 11, lambda v: _num(_ms(v, "train"), ".4f")),
        ("peak MB", 9, lambda v: _num(_mb(v.get("peak_train_bytes")), ".1f")),
        ("call MB", 9, lambda v: _num(_mb(v.get("peak_above_baseline_train_bytes")), ".1f")),
        ("x tol", 9, ratio), cc.RESULT_COLUMN],
        "x tol: worst |error| / its derived bound; forward rungs: out, y_saved and out from y_saved, at the bound "
        "of the rung's precision (fp32, or tf32 for a tensor-core rung); pairs: the four gradients; PyTorch: out "
        "at the fp32 bound, information")
    print()
    cc.print_targets(result["targets"], 100)
    print()
    print("RESULT:", "PASS" if result["passed"] else "FAIL (a rung disagreed with float64 or failed)")


# ---- --selfcheck -------------------------------------------------------------------------------------

SELFCHECK_CASES = (
    {"name": "kernelbench geometry, small", "batch": 2, "in_channels": 4, "out_channels": 12, "input": (4, 6, 5)},
    {"name": "partial tiles, output_padding 0", "batch": 1, "in_channels": 3, "out_channels": 9, "input": (3, 9, 17),
     "output_padding": 0},
    {"name": "generic: groups 2, dilation, per-axis, overlapping padded ceil_mode pool, slope 0.1", "batch": 2,
     "in_channels": 4, "out_channels": 6, "input": (3, 4, 5),
     "conv": {"kernel_size": (2, 3, 3), "stride": (1, 2, 3), "padding": (0, 1, 2), "output_padding": (0, 1, 2),
              "dilation": (1, 1, 2), "groups": 2},
     "pool": {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": (1, 1, 2), "ceil_mode": True},
     "negative_slope": 0.1},
)
KERNELBENCH_CASE = {"name": "KernelBench's sizes", "batch": 16, "in_channels": 16, "out_channels": 32,
                    "input": (16, 32, 32)}
# gradcheck problems: few windows, so that inputs away from every kink are found quickly
GRADCHECK_CASES = (
    {"name": "gradcheck, kernelbench geometry", "batch": 1, "in_channels": 2, "out_channels": 2, "input": (1, 2, 2)},
    {"name": "gradcheck, generic", "batch": 1, "in_channels": 2, "out_channels": 2, "input": (1, 2, 2),
     "conv": {"kernel_size": 2, "stride": 1, "padding": 0, "output_padding": 0, "dilation": (1, 1, 2), "groups": 2},
     "pool": {"kernel_size": 2, "stride": 2, "padding": 0, "ceil_mode": True}, "negative_slope": 0.1},
)


def case_problem(case):
    """The problem dict of a selfcheck case (KERNELBENCH's parameters unless the case sets them)."""
    conv = case.get("conv", {})
    pool = case.get("pool", {})
    p = {"batch": case["batch"], "in_channels": case["in_channels"], "out_channels": case["out_channels"],
         "depth": case["input"][0], "height": case["input"][1], "width": case["input"][2],
         "kernel_size": conv.get("kernel_size", 3), "stride": conv.get("stride", 2),
         "padding": conv.get("padding", 1), "output_padding": conv.get("output_padding", case.get("output_padding", 1)),
         "dilation": conv.get("dilation", 1), "groups": conv.get("groups", 1),
         "negative_slope": case.get("negative_slope", 0.2), "pool_kernel_size": pool.get("kernel_size", 2),
         "pool_stride": pool.get("stride"), "pool_padding": pool.get("padding", 0),
         "pool_dilation": pool.get("dilation", 1), "ceil_mode": pool.get("ceil_mode", False)}
    return p


def case_models(torch, p74, case, seed, weight_scale=None):
    """(Model (seeded), init, x = torch.rand, grad_out ~ U(-1, 1)) of a case, CUDA; modules the
    KernelBench constructor does not parametrize are replaced (ConvTranspose3d with groups or
    dilation, MaxPool3d, the slope)."""
    import torch.nn as nn

    p = case_problem(case)
    cin, cout = p["in_channels"], p["out_channels"]
    init = [cin, cout, p["kernel_size"], p["stride"], p["padding"], p["output_padding"], (cout, 1, 1, 1)]
    torch.manual_seed(seed)
    model = p74.Model(*init)
    if p["groups"] != 1 or triple(p["dilation"]) != (1, 1, 1):  # the constructor takes the rest
        model.conv_transpose = nn.ConvTranspose3d(cin, cout, p["kernel_size"], stride=p["stride"],
                                                  padding=p["padding"], output_padding=p["output_padding"],
                                                  groups=p["groups"], dilation=p["dilation"])
    if "pool" in case:
        model.max_pool = nn.MaxPool3d(p["pool_kernel_size"], stride=p["pool_stride"], padding=p["pool_padding"],
                                      dilation=p["pool_dilation"], ceil_mode=p["ceil_mode"])
    model.leaky_relu.negative_slope = p["negative_slope"]
    if weight_scale is not None:
        with torch.no_grad():
            model.conv_transpose.weight.uniform_(-weight_scale, weight_scale)
            model.conv_transpose.bias.uniform_(-weight_scale, weight_scale)
    model = model.cuda()
    x = torch.rand((p["batch"], cin) + tuple(case["input"]), device="cuda")
    out_size = problem_sizes(p)["out_size"]
    grad_out = torch.rand((p["batch"], cout) + out_size, device="cuda") * 2 - 1
    return model, init, x, grad_out


def case_new(p74, model, init, fwd, bwd):
    """A ModelNew with the model's modules (copied) and parameters."""
    new = p74.ModelNew(*init, forward_rung=fwd, backward_rung=bwd)
    new.conv_transpose = copy.deepcopy(model.conv_transpose).cpu()
    new.max_pool = copy.deepcopy(model.max_pool)
    new.leaky_relu.negative_slope = model.leaky_relu.negative_slope
    new.load_state_dict(model.state_dict())
    return new.cuda()


def _forward_args(model):
    ct = model.conv_transpose
    return ct.weight.detach(), ct.bias.detach(), model.multiplier.detach()


def check_case(torch, p74, case, seed, fwd_ids, bwd_ids, rung_meta, results):
    """Every forward and backward rung on one case (module docstring)."""
    name = case["name"]
    model, init, x, grad_out = case_models(torch, p74, case, seed)
    p = case_problem(case)
    family = in_family(p)

    def refusal(r):  # the fast rungs refuse a problem outside their family, naming it
        return "cannot run this problem" if r in rung_meta["fast"] and not family else None

    w, b, mult = _forward_args(model)
    kw = p74.module_params(model)
    py = problem_sizes(p)
    info = p74.model_info(model, tuple(x.shape), "03")
    results.append({"check": f"{name}: sizes and conv_macs, Python == C++",
                    "pass": py["conv_macs"] == info["conv_macs"] and py["conv_size"] == info["conv_size"]
                    and py["out_size"] == info["out_size"],
                    "got": f"macs {py['conv_macs']} / {info['conv_macs']:.0f}, conv {py['conv_size']} / "
                           f"{info['conv_size']}, out {py['out_size']} / {info['out_size']}"})
    ref = forward_reference(torch, model, x, [rung_meta["precision"][r] for r in fwd_ids])
    pos_ok = bool(torch.equal(offset_positions(torch, ref["offsets"], ref["pool"], ref["conv_size"])[0],
                              ref["indices"]))
    results.append({"check": f"{name}: window offsets (first maximum) map to F.max_pool3d's indices",
                    "pass": pos_ok})
    with torch.no_grad():
        eager = model(x)
    results.append({**agreement(eager, ref["out"], ref["tol_out"]), "check": f"{name}: PyTorch eager (TF32 as set) "
                    "vs float64 (information)", "pass": True, "info": True})
    saved = None
    for r in fwd_ids:
        label = f"{name}: forward {r}"
        call = (lambda r=r: p74.p74_forward(x, w, b, mult, rung=r, poison=True, **kw))
        got = cc.call_rung(torch, results, label, call, refusal(r))
        if got is None:
            continue
        out, argmax, y_saved = got
        prec = rung_meta["precision"][r]
        c = check_forward(torch, ref, out, argmax, y_saved, prec)
        results.append({"check": f"{label} vs float64 (out, argmax, y_saved) at the {prec} bound", "pass": c["pass"],
                        "worst_ratio": max(c[k]["worst_ratio"] for k in ("out", "y_saved", "out_from_y_saved")),
                        "max_abs_err": c["out"]["max_abs_err"],
                        "got": f"argmax failures {c['argmax_failures']}, near-ties taken differently "
                               f"{c['argmax_differs']}"})
        if rung_meta["deterministic"].get(r):
            with torch.no_grad():
                again = call()
            results.append({"check": f"{label}: deterministic, two runs bitwise equal",
                            "pass": all(bool(torch.equal(u, v)) for u, v in zip((out, argmax, y_saved), again))})
        if c["pass"] and (saved is None or r == "03"):
            saved = (r, argmax, y_saved, prec)
    if saved is None:
        results.append({"check": f"{name}: backward rungs", "pass": False, "got": "no forward rung passed"})
        return
    src, argmax, y_saved, src_prec = saved
    bref = backward_reference(torch, model, x, argmax, y_saved, grad_out, ref)
    plain = autograd_reference(torch, model, x, grad_out)
    differ = routing_differences(torch, ref, argmax, y_saved)
    flat, _ = offset_positions(torch, argmax, ref["pool"], ref["conv_size"])
    lip2 = max(1.0, abs(ref["slope"])) ** 2  # grad_multiplier's terms use y64's a there, not y_saved's
    e_y_src = reference_bounds(ref, src_prec)["e_y"]  # y_saved is within the saving rung's bound of y64
    mult_slack = lip2 * (grad_out.double().abs() * _at(torch, e_y_src, flat)).sum((0, 2, 3, 4))
    for r in bwd_ids:
        label = f"{name}: backward {r} (state of forward {src})"
        call = (lambda r=r: p74.p74_backward(grad_out, x, w, b, mult, argmax, y_saved, rung=r, poison=True, **kw))
        grads = cc.call_rung(torch, results, label, call, refusal(r))
        if grads is None:
            continue
        prec = rung_meta["precision"][r]
        tols = [grad_tolerance(bref, n, prec) for n in GRAD_NAMES]
        tols[3] = tols[3] + mult_slack
        c = check_backward(torch, bref, grads, prec)
        results.append({"check": f"{label} vs float64 routed alike", "pass": c["pass"],
                        "worst_ratio": max(c[n]["worst_ratio"] for n in GRAD_NAMES),
                        "got": ", ".join(f"{n} {c[n]['worst_ratio']:.3g}" for n in GRAD_NAMES)})
        pc = [agreement(g.reshape(t.shape), pg.reshape(t.shape), t) for g, pg, t in zip(grads, plain, tols)]
        results.append({"check": f"{label} vs torch.autograd of the float64 Model"
                                 + ("" if differ == 0 else f" (information: {differ} windows routed differently)"),
                        "pass": all(a["pass"] for a in pc) if differ == 0 else True, "info": differ != 0,
                        "worst_ratio": max(a["worst_ratio"] for a in pc)})
        if rung_meta["deterministic"].get(r):
            with torch.no_grad():
                again = call()
            results.append({"check": f"{label}: deterministic, two runs bitwise equal",
                            "pass": all(bool(torch.equal(u, v)) for u, v in zip(grads, again))})


def gradcheck_inputs(torch, p74, case, first_seed, tries=4000):
    """(model, init, x) of a gradcheck case whose float64 forward keeps GRADCHECK_MARGIN from
    every kink: |y| and |m| at each window's argmax, and each window's gap to its runner-up.
    Weights and bias U(-0.2, 0.2). RuntimeError when no seed in `tries` gives such inputs."""
    for seed in range(first_seed, first_seed + tries):
        model, init, x, _ = case_models(torch, p74, case, seed, weight_scale=0.2)
        ref = forward_reference(torch, model, x)
        flat, _ = offset_positions(torch, ref["offsets"], ref["pool"], ref["conv_size"])
        y_at = _at(torch, ref["y"], flat)
        m_at = ref["mult"].view(1, -1, 1, 1, 1) * torch.where(y_at > 0, y_at, ref["slope"] * y_at)
        zw = windows(ref["z"], ref["pool"], ref["out_size"])
        top = zw.topk(2, dim=-1).values if zw.shape[-1] > 1 else None
        gap_ok = top is None or bool(((top[..., 0] - top[..., 1]) > GRADCHECK_MARGIN).all())
        if gap_ok and bool((y_at.abs() > GRADCHECK_MARGIN).all()) and bool((m_at.abs() > GRADCHECK_MARGIN).all()):
            return model, init, x, seed
    raise RuntimeError(f"{case['name']}: no seed in [{first_seed}, {first_seed + tries}) keeps the inputs "
                       f"{GRADCHECK_MARGIN} from every kink")


def gradchecks(torch, p74, args, fwd_ids, bwd_ids, rung_meta, results):
    """gradcheck of P74Function per backward rung, gradgradcheck of the float64 Model, ModelNew's
    second order raising, needs_input_grad."""
    for case in GRADCHECK_CASES:
        family = in_family(case_problem(case))
        try:
            model, init, x, seed = gradcheck_inputs(torch, p74, case, args.seed)
        except RuntimeError as e:
            results.append({"check": case["name"], "pass": False, "got": str(e)})
            continue
        w, b, mult = (t.detach().clone().requires_grad_(True) for t in _forward_args(model))
        xg = x.clone().requires_grad_(True)
        params = p74.module_params(model)
        fwd = next((r for r in ("04", "03") if r in fwd_ids and (family or r not in rung_meta["fast"])), None)
        if fwd is None:  # an fp32 rung first: gradcheck's differences of a TF32 forward are off by ~2^-10 / eps
            runs = [r for r in fwd_ids if family or r not in rung_meta["fast"]]
            fwd = next((r for r in runs if rung_meta["precision"][r] == "fp32"), runs[0] if runs else None)
        for r in bwd_ids:
            if r in rung_meta["fast"] and not family:
                continue
            det = rung_meta["deterministic"].get(r, False)
            label = f"{case['name']} (seed {seed}): P74Function, forward {fwd}, backward {r}"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # gradcheck warns that the inputs are not float64
                    ok = torch.autograd.gradcheck(
                        lambda *t, r=r: p74.P74Function.apply(*t, fwd, r, params), (xg, w, b, mult),
                        eps=GRADCHECK_EPS, atol=GRADCHECK_ATOL, rtol=GRADCHECK_RTOL,
                        nondet_tol=0.0 if det else GRADCHECK_NONDET_TOL, raise_exception=True)
                results.append({"check": label, "pass": bool(ok)})
            except Exception as e:
                results.append({"check": label, "pass": False, "got": f"{type(e).__name__}: {str(e)[:400]}"})
        # PyTorch's second order, on the same inputs in float64
        m64 = copy.deepcopy(model).double()
        ins = (x.double().requires_grad_(True),)

        def f64(xx, m64=m64):
            return m64(xx)

        try:
            ok = torch.autograd.gradgradcheck(f64, ins, raise_exception=True)
            results.append({"check": f"{case['name']}: gradgradcheck of the float64 Model (PyTorch's second order)",
                            "pass": bool(ok)})
        except Exception as e:
            results.append({"check": f"{case['name']}: gradgradcheck of the float64 Model", "pass": False,
                            "got": f"{type(e).__name__}: {str(e)[:400]}"})
        new = case_new(p74, model, init, fwd, next(r for r in bwd_ids if family or r not in rung_meta["fast"]))
        xs = x.clone().requires_grad_(True)

        def second_order():
            out = new(xs)
            (gx,) = torch.autograd.grad((out * out).sum(), xs, create_graph=True)
            gx.sum().backward()

        cc.expect_error(results, f"{case['name']}: ModelNew's second order raises", second_order, RuntimeError,
                      "once_differentiable")
        # needs_input_grad: x without grad; then the parameters frozen
        new.zero_grad(set_to_none=True)
        new(x).sum().backward()
        results.append({"check": f"{case['name']}: x without requires_grad: parameters get gradients",
                        "pass": all(p_.grad is not None for p_ in new.parameters())})
        for p_ in new.parameters():
            p_.requires_grad_(False)
            p_.grad = None
        xs = x.clone().requires_grad_(True)
        new(xs).sum().backward()
        results.append({"check": f"{case['name']}: frozen parameters: only x gets a gradient",
                        "pass": xs.grad is not None and all(p_.grad is None for p_ in new.parameters())})


def model_checks(torch, p74, args, fwd_ids, bwd_ids, rung_meta, results):
    """ModelNew against the operators, its fallback, and the error messages."""
    case = SELFCHECK_CASES[0]
    model, init, x, grad_out = case_models(torch, p74, case, args.seed)
    w, b, mult = _forward_args(model)
    kw = p74.module_params(model)
    f_r = "04" if "04" in fwd_ids else fwd_ids[0]
    b_r = "09" if "09" in bwd_ids else bwd_ids[0]
    new = case_new(p74, model, init, f_r, b_r)
    xs = x.clone().requires_grad_(True)
    out = new(xs)
    out.backward(grad_out)
    with torch.no_grad():
        o, am, ys = p74.p74_forward(x, w, b, mult, rung=f_r, **kw)
        grads = p74.p74_backward(grad_out, x, w, b, mult, am, ys, rung=b_r, **kw)
    det = rung_meta["deterministic"].get(b_r, False)
    got = (xs.grad, new.conv_transpose.weight.grad, new.conv_transpose.bias.grad, new.multiplier.grad)
    same = all(bool(torch.equal(g, e.reshape(g.shape))) for g, e in zip(got, grads))
    results.append({"check": f"ModelNew ({f_r}, {b_r}) equals the operators: out"
                             + (" and the four gradients, bitwise" if det else " bitwise"),
                    "pass": bool(torch.equal(out, o)) and (same or not det)})
    results.append({"check": "multiplier.grad has the multiplier's shape (C, 1, 1, 1)",
                    "pass": tuple(new.multiplier.grad.shape) == tuple(new.multiplier.shape)})
    # fallback on a problem outside the fast rungs' family
    g_case = SELFCHECK_CASES[2]
    gm, g_init, gx, _ = case_models(torch, p74, g_case, args.seed)
    if "04" in fwd_ids and "09" in bwd_ids:
        gnew = case_new(p74, gm, g_init, "04", "09")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            chosen = gnew.rungs_for(tuple(gx.shape))
            gout = gnew(gx)
        results.append({"check": "ModelNew falls back to 03/08 with a warning outside 04/09's family",
                        "pass": chosen == ("03", "08") and any("generic rung" in str(c.message) for c in caught)
                        and gout.shape == gm(gx).shape, "got": f"{chosen}, {len(caught)} warnings"})
    # errors
    call = p74.p74_forward
    cc.expect_error(results, "x on the CPU", lambda: call(x.cpu(), w, b, mult, rung=f_r, **kw), ValueError, "CUDA")
    cc.expect_error(results, "x float64", lambda: call(x.double(), w, b, mult, rung=f_r, **kw), TypeError, "float32")
    cc.expect_error(results, "x not contiguous", lambda: call(x.transpose(3, 4), w, b, mult, rung=f_r, **kw),
                  ValueError, "contiguous")
    cc.expect_error(results, "bias of the wrong shape", lambda: call(x, w, b[:-1].contiguous(), mult, rung=f_r, **kw),
                  ValueError, "bias must have shape")
    cc.expect_error(results, "multiplier of the wrong shape",
                  lambda: call(x, w, b, mult.reshape(-1)[:-1].contiguous(), rung=f_r, **kw), ValueError, "multiplier")
    cc.expect_error(results, "unknown rung", lambda: call(x, w, b, mult, rung="99", **kw), ValueError, "no rung")
    cc.expect_error(results, "the CPU rung 00 in p74_forward", lambda: call(x, w, b, mult, rung="00", **kw), ValueError,
                  "no GPU forward pass")
    cc.expect_error(results, "a backward rung in p74_forward", lambda: call(x, w, b, mult, rung=b_r, **kw), ValueError,
                  "no GPU forward pass")
    cc.expect_error(results, "output_padding >= stride and dilation",
                  lambda: call(x, w, b, mult, rung=f_r, **{**kw, "output_padding": 2}), ValueError, "output_padding")
    bcall = p74.p74_backward
    cc.expect_error(results, "argmax int64", lambda: bcall(grad_out, x, w, b, mult, am.long(), ys, rung=b_r, **kw),
                  TypeError, "argmax")
    cc.expect_error(results, "grad_out of the wrong shape",
                  lambda: bcall(grad_out[:, :-1].contiguous(), x, w, b, mult, am, ys, rung=b_r, **kw), ValueError,
                  "grad_out must have shape")
    cc.expect_error(results, "a forward rung in p74_backward",
                  lambda: bcall(grad_out, x, w, b, mult, am, ys, rung=f_r, **kw), ValueError, "no GPU backward pass")


def selfcheck(torch, p74, args, rungs) -> int:
    meta = cc.run_meta(torch, args)
    fwd_ids = resolve_rungs(args.forward_rungs, rungs, "forward")
    bwd_ids = resolve_rungs(args.backward_rungs, rungs, "backward")
    rung_meta = {"deterministic": {r["id"]: r["deterministic"] for r in rungs}, "fast": ("04", "09", "10", "12"),
                 "precision": rung_precisions(rungs)}
    results = []
    log(f"selfcheck: forward rungs {fwd_ids}, backward rungs {bwd_ids}")
    kb_here = [KERNELBENCH[k] for k in ("in_channels", "out_channels", "kernel_size", "stride", "padding",
                                        "output_padding")] + [(KERNELBENCH["out_channels"], 1, 1, 1)]
    results.append({"check": "KernelBench sizes here and in p74.py agree",
                    "pass": kb_here == list(p74.get_init_inputs()) and KERNELBENCH["batch"] == p74.batch_size
                    and (KERNELBENCH["depth"], KERNELBENCH["height"], KERNELBENCH["width"]) ==
                    (p74.depth, p74.height, p74.width)})
    kb = p74.Model(*p74.get_init_inputs())
    kb_shape = (p74.batch_size, p74.in_channels, p74.depth, p74.height, p74.width)
    kb_macs = problem_sizes(KERNELBENCH)["conv_macs"]
    cpp = p74.model_info(kb, kb_shape)["conv_macs"]
    results.append({"check": "conv_macs at KernelBench's sizes: Python == C++ Problem74::conv_macs",
                    "pass": float(kb_macs) == cpp, "got": f"{kb_macs} vs {cpp:.0f}"})
    for r in rung_meta["fast"]:
        if r in fwd_ids + bwd_ids:
            why = p74.model_info(kb, kb_shape, r)["unsupported"]
            results.append({"check": f"rung {r} runs KernelBench's problem", "pass": why == "", "got": why})
    cases = list(SELFCHECK_CASES) + ([] if args.skip_kernelbench_selfcheck else [KERNELBENCH_CASE])
    sections = [(f"case: {c['name']}", lambda c=c: check_case(torch, p74, c, args.seed, fwd_ids, bwd_ids, rung_meta,
                                                                results)) for c in cases]
    sections += [("ModelNew and errors", lambda: model_checks(torch, p74, args, fwd_ids, bwd_ids, rung_meta, results)),
                 ("gradcheck", lambda: gradchecks(torch, p74, args, fwd_ids, bwd_ids, rung_meta, results))]
    for label, body in sections:
        log(f"selfcheck: {label}")
        try:
            body()
        except Exception as e:
            results.append({"check": f"{label}: ran to the end", "pass": False,
                            "got": f"{type(e).__name__}: {e}\n{traceback.format_exc()}"})
        torch.cuda.empty_cache()

    title = (f"Problem 74 selfcheck: {meta['device']}, torch {meta['torch']}, commit "
             f"{meta['provenance'].get('git_commit')}; forward rungs {', '.join(fwd_ids)}, backward rungs "
             f"{', '.join(bwd_ids)}")
    return cc.report_selfcheck(SCRIPT, args, meta, title, results, got_words=("argmax",))

