"""Calling the stages on tensors.

run_stage(...)      one stage, returns (pooled (N, Cout), y (N, 1)); no autograd.
stage_forward(...)  y (N, 1) through the extension's registered operator, differentiable: its
                    autograd formula is C++ (csrc/stage_op.cpp, StageBackward), exact for first
                    and second derivatives; what ModelNew calls.
stage_op(stage)     the same operator as torch.ops sees it (torch.ops.<module>.stage_forward).

A stage is named by number (13, "13"), folder name ("13_single_launch") or name
("single_launch"). Argument checks happen in C++ only (csrc/stage_call.cpp): wrong tensors
raise ValueError / TypeError naming the tensor, as do parameter sets PyTorch would reject.
"""

from __future__ import annotations

from ._build import _LOADED, load_extension, normalize_stage_id

_RESOLVED = {}  # stage as given -> (extension module, its number "13", which the C++ also accepts)


def _resolve(stage):
    """(module, key) for a stage: a loaded module that holds it, else a build of it alone.
    Cached, so that a call costs one dict lookup. Call load_extension(stages) first to choose
    which stages one module holds."""
    hit = _RESOLVED.get(stage)
    if hit is None:
        sid = normalize_stage_id(stage)
        module = next((m for m in _LOADED.values() if any(s["id"] == sid for s in m.list_stages())), None)
        hit = (module or load_extension([sid]), sid)
        _RESOLVED[stage] = hit
    return hit


def extension_for(stage):
    """The loaded extension module that holds this stage (see _resolve)."""
    return _resolve(stage)[0]


def forward_entry(stage):
    """(fn, key): fn(x, weight, conv_bias, bias, key, stride, padding, output_padding, dilation,
    groups, scale, contiguous=False) -> y, positional only, calls the operator through the
    dispatcher from a plain CPython function (csrc/binding.cpp). Spatial parameters: an int or
    (height, width); contiguous=True makes x contiguous first. The fastest way in from Python:
    ModelNew caches this pair."""
    module, key = _resolve(stage)
    return module.stage_forward, key


def stage_op(stage="single_launch"):
    """torch.ops.<module>.stage_forward.default for the module holding `stage`; schema:
    (x, weight, conv_bias?, bias, stage: str, stride=1, padding=0, output_padding=0, dilation=1,
    groups=1, scale=10.0) -> y."""
    import torch

    namespace, name = _resolve(stage)[0].OP_NAME.split("::")
    return getattr(getattr(torch.ops, namespace), name).default


def _seq(value):
    """An int or a sequence, as nn.ConvTranspose2d accepts them -> a sequence (C++ checks length)."""
    return (value,) if isinstance(value, int) else value  # run_stage's pybind signature takes lists


def run_stage(stage, x, weight, conv_bias, bias, stride=1, padding=0, output_padding=0, dilation=1,
              groups=1, scale=10.0, pooled=None, y=None):
    """Runs GPU stage `stage` on torch's current stream.

    x (N, Cin, H, W), weight (Cin, Cout/groups, kH, kW) as in nn.ConvTranspose2d, conv_bias
    (Cout) or None (no conv bias), bias (Cout, 1, 1) or (Cout): float32, CUDA, contiguous.
    Returns (pooled (N, Cout), y (N, 1)), written into `pooled` and `y` when given.
    No autograd: the outputs have no grad_fn (see stage_forward).
    """
    module, key = _resolve(stage)
    pooled, y = module.run_stage(key, x, weight, conv_bias, bias, _seq(stride), _seq(padding),
                                 _seq(output_padding), _seq(dilation), groups, scale, pooled, y)
    return pooled, y


def stage_forward(x, weight, conv_bias, bias, stride=1, padding=0, output_padding=0, dilation=1,
                  groups=1, scale=10.0, stage="single_launch"):
    """y (N, 1) = scale * logsumexp over channels of (mean of ConvTranspose2d(x) + bias), by a
    ladder stage, differentiable to second order (C++ autograd formula, csrc/stage_op.cpp)."""
    module, key = _resolve(stage)
    return module.stage_forward(x, weight, conv_bias, bias, key, stride, padding, output_padding, dilation,
                                groups, scale)
