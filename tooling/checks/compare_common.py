"""What the PyTorch comparison of the three problems (compare.py, the one program; compare_p42.py,
compare_p38.py, compare_p74.py, the problems' parts) shares, independent of the problem:

  * progress, JSON and skips: Script (a log line on stderr with the seconds since start), cuda_torch();
  * where a run came from: provenance(), device_meta(), run_meta(), env_line();
  * measuring: Timer (CUDA events, the L2 flushed before each repetition, the median),
    peak_memory(), cudnn_tf32(), run_phase() (one phase over every variant, errors recorded), err();
  * checking: abs_error(), agreement(), expect_error(), call_rung(), report_selfcheck();
  * 3-D geometry in plain Python: triple(), conv_transpose_out_size(), pool_out_size(),
    taps_per_output(), conv_macs(), fp32_round(), problem_sizes() (the tracks' sizes and counts);
  * tables and targets: print_table(), verdict(), target(), print_targets(); options: add_problem_args();
    rung selection: pick_rungs(); the PyTorch package: ladder_package().

Plain Python at import: torch is imported by the functions that need it (the tests of the
geometry run without torch).
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import importlib.util
import json
import math
import platform
import statistics
import struct
import sys
import time
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# Unit roundoffs and the probabilistic bound's lambda, one copy for the three problems' bounds
# (each C++ tolerance.hpp names the same values: kTf32UnitRoundoff in common/toolkit/tf32.hpp).
FP32_U = 2.0 ** -24   # fp32, round to nearest
TF32_U = 2.0 ** -11   # TF32 keeps 10 of fp32's 23 mantissa bits; cvt.rna rounds to nearest
LAMBDA = 8.0          # the probabilistic error bound's lambda (kProbabilisticLambda)


# ---- progress, JSON, skips ---------------------------------------------------------------------------

class Script:
    """A compare script's output helpers: log (progress on stderr, "[name   12.3s] msg"),
    write_json and skip, all naming the script."""

    def __init__(self, name: str):
        self.name, self.t0 = name, time.monotonic()

    def log(self, msg: str) -> None:
        print(f"[{self.name} {time.monotonic() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    def write_json(self, path, data) -> None:
        """Writes data to path as indented JSON (values JSON lacks as str); nothing without a path."""
        if path:
            Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")
            self.log(f"wrote {path}")

    def skip(self, args, reason: str) -> int:
        """Prints the reason a run cannot happen here (no torch, no GPU), records it; exit status 0."""
        print(f"{self.name}: SKIPPED: {reason}")
        self.write_json(args.json, {"skipped": True, "reason": reason})
        return 0


# ---- where a run came from ---------------------------------------------------------------------------

def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance() -> dict:
    """Where a result came from, as the ladder's JSON records it: git commit (LADDER_GIT_COMMIT /
    LADDER_GIT_DIRTY override it where the tree has no .git), nvcc and driver versions, host CPU,
    date. Fields that cannot be read are "unknown"."""
    import os
    import subprocess

    def run(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    root = str(REPO_ROOT)
    commit = os.environ.get("LADDER_GIT_COMMIT") or run(["git", "-C", root, "rev-parse", "HEAD"]) or "unknown"
    dirty = os.environ.get("LADDER_GIT_DIRTY")
    if dirty is None:
        status = run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"])
        dirty = "unknown" if commit == "unknown" else ("yes" if status else "no")
    nvcc = next((l.split("release")[-1].strip() for l in run(["nvcc", "--version"]).splitlines() if "release" in l),
                "unknown")
    driver = "unknown"
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
        driver = next((w for w in first.split() if w.count(".") >= 1 and w.replace(".", "").isdigit()), "unknown")
    except (OSError, IndexError):
        pass
    cpu = "unknown"
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                   if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"git_commit": commit, "git_dirty": dirty, "nvcc_version": nvcc, "driver_release": driver,
            "host_cpu": cpu, "date_utc": utc_now()}


def device_meta(torch) -> dict:
    """The current GPU and the software stack: device, capability, sm_count, torch, cuda, cudnn,
    python, cudnn_allow_tf32_default."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"device": props.name, "capability": list(torch.cuda.get_device_capability()),
            "sm_count": props.multi_processor_count, "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
            "cudnn_allow_tf32_default": bool(torch.backends.cudnn.allow_tf32)}


def run_meta(torch, args) -> dict:
    """device_meta plus the date, provenance(), the command line and args.seed."""
    return {**device_meta(torch), "date_utc": utc_now(), "provenance": provenance(), "argv": sys.argv[1:],
            "seed": args.seed}


def env_line(meta) -> str:
    """'NVIDIA H200 (sm_90, 132 SMs), torch ..., CUDA ..., cuDNN ...' from device_meta's fields."""
    return (f"{meta['device']} (sm_{''.join(map(str, meta['capability']))}, {meta['sm_count']} SMs), "
            f"torch {meta['torch']}, CUDA {meta['cuda']}, cuDNN {meta['cudnn']}")


# ---- measuring ---------------------------------------------------------------------------------------

class Timer:
    """CUDA events around each call; before each repetition a write of flush_bytes (default twice
    the L2 size) evicts the L2. A call returns {median_ms, min_ms, max_ms, reps}."""

    def __init__(self, torch, warmup, reps, flush_bytes=None):
        self.torch, self.warmup, self.reps = torch, warmup, reps
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
        size = 2 * self.l2_bytes if flush_bytes is None else max(flush_bytes, 1)
        self.flush = torch.empty(size, dtype=torch.uint8, device="cuda")

    def __call__(self, fn):
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        start = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        end = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        for i in range(self.reps):
            self.flush.fill_(i & 0xFF)
            start[i].record()
            fn()
            end[i].record()
            end[i].synchronize()  # one call at a time: the next flush waits for this one
        ms = [s.elapsed_time(e) for s, e in zip(start, end)]
        return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "reps": self.reps}


def peak_memory(torch, fn):
    """{peak_bytes, baseline_bytes, peak_above_baseline_bytes} of one call of fn: the most bytes
    PyTorch's caching allocator held during it, what it held before (inputs, parameters), and
    the difference."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del out
    return {"peak_bytes": peak, "baseline_bytes": base, "peak_above_baseline_bytes": peak - base}


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


def tf32_context(enabled):
    """cudnn_tf32(enabled), or no change where enabled is None."""
    return contextlib.nullcontext() if enabled is None else cudnn_tf32(enabled)


def err(e) -> str:
    """'TypeName: first line of the message' of an exception, as the results record errors."""
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def run_phase(torch, variants, name, body, log, no_grad=False):
    """body(v) for each variant v (dicts) without an error yet, under its "tf32" setting (and
    torch.no_grad() with no_grad). An exception is recorded in v ("error": the phase and the
    first line, "traceback") and logged; the other variants go on."""
    for v in variants:
        if v.get("error"):
            continue
        try:
            with (torch.no_grad() if no_grad else contextlib.nullcontext()), tf32_context(v.get("tf32")):
                body(v)
        except Exception as e:
            log(f"{name}: {v['variant']} failed: {err(e)}")
            v["error"] = f"{name}: {err(e)}"
            v["traceback"] = traceback.format_exc()


# ---- checking ----------------------------------------------------------------------------------------

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


def agreement(got, ref, tol):
    """{max_abs_err, worst_ratio (max |got - ref| / tol; an exact match counts 0 whatever tol),
    nan_mismatches, pass}; a NaN on one side only is an infinite error (abs_error)."""
    import torch

    err, nan = abs_error(got, ref)
    ratio = float(torch.where(err == 0, torch.zeros_like(err), err / tol).max()) if err.numel() else 0.0
    finite = err[torch.isfinite(err)]
    return {"max_abs_err": float(finite.max()) if finite.numel() else None, "worst_ratio": ratio,
            "nan_mismatches": nan, "pass": nan == 0 and ratio <= 1.0}


def expect_error(results, check, fn, exc_type, needle):
    """Appends to results whether fn() raises exc_type with `needle` in its message (any case)."""
    expected = f"{exc_type.__name__} mentioning {needle!r}"
    try:
        fn()
    except exc_type as e:
        results.append({"check": check, "pass": needle.lower() in str(e).lower(),
                        "got": f"{type(e).__name__}: {str(e)[:200]}", "expected": expected})
        return
    except Exception as e:
        results.append({"check": check, "pass": False, "got": f"{type(e).__name__}: {str(e)[:200]}",
                        "expected": expected})
        return
    results.append({"check": check, "pass": False, "got": "no error", "expected": exc_type.__name__})


def call_rung(torch, results, label, call, refusal=None):
    """call() (a rung's operator) under torch.no_grad(), synchronized: its result. With refusal
    (a word of the rung's reason), the rung must refuse the problem instead (expect_error) and
    None is returned; so it is when call raises, recorded in results as a failure."""
    if refusal is not None:
        expect_error(results, f"{label} refuses with its reason", call, ValueError, refusal)
        return None
    try:
        with torch.no_grad():
            out = call()
            torch.cuda.synchronize()
    except Exception as e:
        results.append({"check": label, "pass": False, "got": f"{type(e).__name__}: {e}"})
        return None
    return out


def report_selfcheck(script, args, meta, title, results, with_max_err=False, got_words=()) -> int:
    """Prints a selfcheck: the title; per result info / PASS / FAIL, the check, its worst ratio to
    the bound (with max |err| if with_max_err), what it got where it failed, refused or mentions
    one of got_words; the count. Writes --json; exit status 1 on any failure."""
    failed = [r for r in results if not r.get("pass")]
    print(title)
    for r in results:
        extra = ""
        if r.get("worst_ratio") is not None:
            extra = (f"  max |err| {num(r.get('max_abs_err'), '.2e')}," if with_max_err else " ")
            extra += f" {r['worst_ratio']:.3g} x bound"
        if r.get("got") and (not r.get("pass") or "refuses" in r["check"]
                             or any(w in str(r["got"]) for w in got_words)):
            extra += f"  [{r['got']}]"
        verdict = "info" if r.get("info") else ("PASS" if r.get("pass") else "FAIL")
        print(f"  {verdict:<4} {r['check']}{extra}")
    print(f"RESULT: {'PASS' if not failed else 'FAIL'} ({len(results) - len(failed)}/{len(results)})")
    script.write_json(args.json, {"skipped": False, "selfcheck": True, "meta": meta, "results": results,
                                  "passed": not failed})
    return 0 if not failed else 1


# ---- 3-D geometry, plain Python ------------------------------------------------------------------------

def triple(value):
    """An int or three ints -> a tuple of three, as PyTorch's 3-D modules take them."""
    if isinstance(value, int):
        return (value, value, value)
    value = tuple(int(v) for v in value)
    if len(value) != 3:
        raise ValueError(f"expected one value or three (depth, height, width), got {value!r}")
    return value


def fp32_round(v):
    """v rounded to float32 (to nearest even), as PyTorch applies a Python float to an fp32 tensor
    (a clamp bound, a negative_slope); beyond float32's range, +-inf. None stays None."""
    if v is None:
        return None
    try:
        return struct.unpack("f", struct.pack("f", float(v)))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def conv_transpose_out_size(size, kernel, stride, padding, output_padding, dilation=1):
    """ConvTranspose3d's output size along one axis (PyTorch's formula)."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def pool_out_size(size, kernel, stride, padding, dilation=1, ceil_mode=False):
    """AvgPool3d's and MaxPool3d's output size along one axis (PyTorch's pooling_output_shape):
    floor (or ceil) of (size + 2*padding - dilation*(kernel - 1) - 1)/stride, plus 1; with
    ceil_mode a last window starting in the right padding is dropped."""
    num = size + 2 * padding - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = num // stride + 1  # floor division, as PyTorch's div_rtn
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def taps_per_output(in_size, out_size, kernel, stride, padding, dilation=1):
    """For each output index o of one axis, how many taps k reach an input: the k with
    o + padding - k*dilation = i*stride for an i in [0, in_size)."""
    counts = []
    for o in range(out_size):
        c = 0
        for k in range(kernel):
            t = o + padding - k * dilation
            if t >= 0 and t % stride == 0 and t // stride < in_size:
                c += 1
        counts.append(c)
    return counts


def conv_macs(batch, in_channels, out_channels, groups, in_size, out_size, kernel, stride, padding,
              dilation=(1, 1, 1)):
    """Multiply-adds of ConvTranspose3d (input in_size, output out_size, triples) counting only
    taps that land inside the output: the sum over output positions of (in_channels/groups) x
    (taps reaching an input there), times batch and out_channels. Taps factor over the axes, so
    the sum over positions is the product over the axes of the per-axis sums. An int (exact)."""
    per_axis = 1
    for a in range(3):
        per_axis *= sum(taps_per_output(in_size[a], out_size[a], kernel[a], stride[a], padding[a], dilation[a]))
    return batch * out_channels * (in_channels // groups) * per_axis


def problem_sizes(p, pool_first):
    """Derived sizes of a tracks' 3-D problem dict (batch, in_channels, out_channels, depth, height,
    width, kernel_size, stride, padding, output_padding, pool_kernel_size; optional dilation,
    groups, pool_stride, pool_padding, pool_dilation, ceil_mode): the pool before the
    ConvTranspose3d (pool_first, problem 38) or after it (problem 74). Sizes in_size,
    pooled_size (pool_first only), conv_size, out_size; spatial (output positions per channel);
    x_, conv_, out_ elems and float32 bytes; weight_elems, pool_window, conv_macs."""
    in_size = (p["depth"], p["height"], p["width"])
    k, s, pad = triple(p["kernel_size"]), triple(p["stride"]), triple(p["padding"])
    op, d = triple(p["output_padding"]), triple(p.get("dilation", 1))
    pk = triple(p["pool_kernel_size"])
    ps, pp = triple(p.get("pool_stride") or pk), triple(p.get("pool_padding", 0))
    pd, ceil, groups = triple(p.get("pool_dilation", 1)), bool(p.get("ceil_mode", False)), int(p.get("groups", 1))

    def pool(size):
        return tuple(pool_out_size(size[a], pk[a], ps[a], pp[a], pd[a], ceil) for a in range(3))

    def conv(size):
        return tuple(conv_transpose_out_size(size[a], k[a], s[a], pad[a], op[a], d[a]) for a in range(3))

    conv_in = pool(in_size) if pool_first else in_size
    conv_size = conv(conv_in)
    out = conv_size if pool_first else pool(conv_size)
    b, cin, cout = p["batch"], p["in_channels"], p["out_channels"]
    elems = {"x": b * cin * math.prod(in_size), "conv": b * cout * math.prod(conv_size), "out": b * cout * math.prod(out)}
    return {"in_size": in_size, **({"pooled_size": conv_in} if pool_first else {}), "conv_size": conv_size,
            "out_size": out, "spatial": math.prod(out), **{f"{n}_elems": e for n, e in elems.items()},
            **{f"{n}_bytes": 4 * e for n, e in elems.items()}, "weight_elems": cin * (cout // groups) * math.prod(k),
            "pool_window": math.prod(pk), "conv_macs": conv_macs(b, cin, cout, groups, conv_in, conv_size, k, s, pad, d)}


# ---- targets and rungs -----------------------------------------------------------------------------------

def target(name, value, limit, op="<=", **fields):
    """A target's record: value (a ratio) against limit by op ("<=" or "<"); status "met", "not
    met", or "not measured" (met None) where value is None."""
    met = None if value is None else bool(value <= limit if op == "<=" else value < limit)
    return {"name": name, "value": value, "limit": limit, "op": op, "met": met,
            "status": "not measured" if met is None else ("met" if met else "not met"), **fields}


def num(v, spec):
    """format(v, spec), or "-" for None."""
    return "-" if v is None else format(v, spec)


def print_table(rows, columns, note=None) -> None:
    """A text table: columns are (header, width, cell), cell(row) a str, a negative width aligning
    left; a dashed line under the header; note, in parentheses, under the rows."""
    def line(cells):
        return " ".join(f"{c:<{-w}}" if w < 0 else f"{c:>{w}}" for c, (_, w, _) in zip(cells, columns)).rstrip()

    print(line([h for h, _, _ in columns]))
    print("-" * len(line([h for h, _, _ in columns])))
    for r in rows:
        print(line([cell(r) for _, _, cell in columns]))
    if note:
        print(f"({note})")


def verdict(v) -> str:
    """A variant's result cell: FAILED (its error), PASS / FAIL where its check gates, else info."""
    c = v.get("check") or {}
    if v.get("error"):
        return "FAILED: " + v["error"][:60]
    return ("PASS" if c.get("pass") else "FAIL") if c.get("gating") else "info"


RESULT_COLUMN = (" result", -1, lambda v: " " + verdict(v))  # print_table's last column of the tracks' variants


def print_targets(targets, name_width, title="Targets (this run's numbers only; value = the ratio)", limit_width=7):
    """The targets' table: name, value, op and limit, status (with a target's note, or the
    timings it misses)."""
    print(title)
    hdr = f"{'target':<{name_width}} {'value':>7} {'limit':>{limit_width}}  result"
    print(hdr)
    print("-" * len(hdr))
    for t in targets:
        status = t["status"] + (f" ({t['note']})" if t.get("note") else "")
        status += f" (no timing: {', '.join(t['missing'])})" if t.get("missing") else ""
        print(f"{t['name']:<{name_width}} {num(t['value'], '.3f'):>7} "
              f"{t['op'] + ' ' + format(t['limit'], 'g'):>{limit_width}}  {status}")


def add_problem_args(parser, kernelbench, flush_mb=None):
    """An int option per size of the problem (defaults: kernelbench's) on a parser, and --flush-mb
    where flush_mb (its default) is given."""
    if flush_mb is not None:
        parser.add_argument("--flush-mb", type=int, default=flush_mb,
                            help="MB written before each repetition to flush the L2")
    for key in ("batch", "in_channels", "out_channels", "depth", "height", "width", "kernel_size", "stride",
                "padding", "output_padding", "pool_kernel_size"):
        parser.add_argument("--" + key.replace("_", "-"), type=int, default=kernelbench[key],
                            help=f"default {kernelbench[key]} (KernelBench)")


def pick_rungs(spec, avail):
    """Rung ids from `avail` (rung dicts with id and name) for a comma-separated spec of ids,
    numbers or names ("all": every one). LookupError(key) for a key that names none."""
    if spec.strip() == "all":
        return [r["id"] for r in avail]
    ids = []
    for key in (s.strip() for s in spec.split(",") if s.strip()):
        hit = next((r for r in avail if key in (r["id"], r["name"], f"{r['id']}_{r['name']}")
                    or (key.isdigit() and int(key) == int(r["id"]))), None)
        if hit is None:
            raise LookupError(key)
        ids.append(hit["id"])
    return ids


def rung_names(rungs):
    """'01_naive, 02_fused, ...' of rung dicts."""
    return ", ".join(r["id"] + "_" + r["name"] for r in rungs)


# ---- the run's prerequisites -------------------------------------------------------------------------------

def cuda_torch(script, args):
    """(torch, None) where PyTorch imports and sees a CUDA device; else (None, 0) after
    script.skip has printed why (a compare script's skip: exit status 0)."""
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install (OSError from a shared library)
        return None, script.skip(args, f"PyTorch is not importable ({type(e).__name__}: {e})")
    if not torch.cuda.is_available():
        return None, script.skip(args, "no CUDA device (torch.cuda.is_available() is False)")
    return torch, None


def ladder_package():
    """conv_pool_ladder, the PyTorch package in python/, which is no installed distribution: loaded
    from its folder by its spec (the import system's own recipe), so that sys.path stays as it is
    and `python3 -m tooling.checks.X` finds it too. A copy imported already is kept."""
    name = "conv_pool_ladder"
    if name in sys.modules:
        return sys.modules[name]
    folder = REPO_ROOT / "python" / name
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
