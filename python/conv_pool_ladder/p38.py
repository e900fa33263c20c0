"""KernelBench level 2, problem 38, and its replacement on the second track's GPU rungs.

    from conv_pool_ladder.p38 import Model, ModelNew, get_init_inputs, get_inputs
    model = Model(*get_init_inputs()).cuda()
    new = ModelNew(*get_init_inputs()).cuda()        # rung "08"
    new.load_state_dict(model.state_dict())
    out = new(get_inputs()[0].cuda())          # (32, 64, 32, 64, 64) float32

Model is the problem's PyTorch code (its current version: AvgPool3d, then ConvTranspose3d,
clamp, a softmax over the flattened D*H*W of each (sample, channel), times a learnable scale of
shape (1, out_channels, 1, 1, 1)); the module-level sizes, get_inputs() and get_init_inputs()
are KernelBench's. ModelNew has the same constructor (plus `rung`, after KernelBench's
arguments) and the same parameters, created in the same order: one seed gives both the same
weights, and load_state_dict works either way.

ModelNew.forward calls one GPU rung of tracks/p38_spatial_softmax (default "08", tensor_cores:
TF32 like PyTorch's default convolution, and the fastest rung that passes KernelBench's procedure
at PyTorch's defaults, docs/kernelbench.md; any GPU rung's number, name, or folder name
"07_subpixel_tiled") through the operator
torch.ops.conv_pool_ladder_p38.p38_forward of the extension built with the track
(load_extension([], with_p38=True), on first use; csrc/p38_call.cpp), which does every check in
C++: x and the parameters must be float32, CUDA, contiguous and on one device (ValueError, or
TypeError for the dtype, naming the tensor); parameters PyTorch would reject raise ValueError
naming them; a rung that cannot run the problem raises ValueError with the rung's reason (the
fused rungs 05-07 need clamp_max - clamp_min <= 87, for instance).

Forward only: the output never requires grad and has no grad_fn, so a backward through it
raises at once ("element 0 of tensors does not require grad"); it never returns silently wrong
or missing gradients. Train with Model.

Without tracks/p38_spatial_softmax in the checkout (a student handout), the extension has no
p38 operators: ModelNew and the functions below raise RuntimeError saying so. Model,
get_inputs and get_init_inputs need only torch.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ._build import p38_track_dir
from ._track_ops import track_ops, triple as _triple

# KernelBench's sizes for this problem.
batch_size = 32
in_channels = 32
out_channels = 64
depth, height, width = 32, 64, 64
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
pool_kernel_size = 2
clamp_min = 0.0
clamp_max = 1.0

DEFAULT_RUNG = "08"  # tensor_cores (TF32); "07" (subpixel_tiled) is the FP32 rung


def get_inputs():
    """[x], x ~ U[0, 1) of shape (batch_size, in_channels, depth, height, width), on the CPU."""
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    """The constructor arguments of Model and ModelNew, KernelBench's order."""
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size, clamp_min,
            clamp_max]


class Model(nn.Module):
    """KernelBench level 2, problem 38: AvgPool3d, ConvTranspose3d, clamp, a softmax over the
    spatial positions of each (sample, channel), times a learnable per-channel scale."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size,
                 clamp_min, clamp_max):
        super().__init__()
        self.avg_pool = nn.AvgPool3d(pool_kernel_size)
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.scale = nn.Parameter(torch.ones(1, out_channels, 1, 1, 1))

    def forward(self, x):
        x = self.avg_pool(x)
        x = self.conv_transpose(x)
        x = torch.clamp(x, self.clamp_min, self.clamp_max)
        b, c, d, h, w = x.shape
        x = x.view(b, c, -1)  # the softmax runs over D*H*W
        x = torch.softmax(x, dim=2)
        x = x.view(b, c, d, h, w)
        x = x * self.scale
        return x


# ---- the extension's operators ----------------------------------------------------------------------

def _track_missing() -> RuntimeError:
    return RuntimeError("problem 38's track (tracks/p38_spatial_softmax) is not in this checkout, so the "
                        "extension has no p38 operators; Model works without it, ModelNew does not")


def ops():
    """torch.ops.<module> of a loaded extension module built with the track (load_extension(...,
    with_p38=True)), else of a new build of the track with no ladder stage
    (conv_pool_ladder_p38). RuntimeError when the track is not in this checkout. Found once (_track_ops)."""
    return track_ops("p38", p38_track_dir, _track_missing, "p38_forward")


def _clamp_bounds(lo, hi):
    """torch.clamp's bounds as floats: None is no bound (-inf / +inf); both None is an error, as
    in torch.clamp."""
    if lo is None and hi is None:
        raise ValueError("clamp_min and clamp_max cannot both be None (torch.clamp needs at least one bound)")
    return (-math.inf if lo is None else float(lo)), (math.inf if hi is None else float(hi))


def _params(pool_kernel_size=2, pool_stride=None, pool_padding=0, ceil_mode=False, count_include_pad=True, stride=1,
            padding=0, output_padding=0, dilation=1, groups=1, clamp_min=0.0, clamp_max=1.0):
    """The operators' parameter list, in schema order (csrc/p38_call.cpp): spatial parameters as
    triples, pool_stride None -> pool_kernel_size (nn.AvgPool3d's default), the clamp bounds as
    floats (_clamp_bounds). ValueError for a malformed triple or two None bounds."""
    lo, hi = _clamp_bounds(clamp_min, clamp_max)
    pk = _triple("pool_kernel_size", pool_kernel_size)
    return (pk, pk if pool_stride is None else _triple("pool_stride", pool_stride),
            _triple("pool_padding", pool_padding), bool(ceil_mode), bool(count_include_pad), _triple("stride", stride),
            _triple("padding", padding), _triple("output_padding", output_padding), _triple("dilation", dilation),
            int(groups), lo, hi)


def p38_forward(x, weight, bias, scale, pool_kernel_size=2, pool_stride=None, pool_padding=0, ceil_mode=False,
                count_include_pad=True, stride=1, padding=0, output_padding=0, dilation=1, groups=1, clamp_min=0.0,
                clamp_max=1.0, rung=DEFAULT_RUNG, poison=False):
    """The model's forward by one GPU rung, on torch's current stream; returns (batch,
    out_channels, D, H, W) float32, no autograd.

    x (batch, in_channels, D, H, W); weight (in_channels, out_channels/groups, kD, kH, kW) and
    bias (out_channels) as in nn.ConvTranspose3d; scale (1, out_channels, 1, 1, 1) or
    (out_channels). Spatial parameters: an int or three. pool_*: nn.AvgPool3d's (pool_stride
    None: the kernel size, PyTorch's default). poison=True fills the output with NaN before the
    rung runs (a check that the rung writes every element; it costs a memset). Errors: see the
    module docstring."""
    params = _params(pool_kernel_size=pool_kernel_size, pool_stride=pool_stride, pool_padding=pool_padding,
                     ceil_mode=ceil_mode, count_include_pad=count_include_pad, stride=stride, padding=padding,
                     output_padding=output_padding, dilation=dilation, groups=groups, clamp_min=clamp_min,
                     clamp_max=clamp_max)
    return ops().p38_forward.default(x, weight, bias, scale, *params, str(rung), bool(poison))


def module_params(model):
    """p38_forward's keyword arguments from a Model's or ModelNew's modules."""
    ap, ct = model.avg_pool, model.conv_transpose
    if getattr(ap, "divisor_override", None) is not None:
        raise ValueError("AvgPool3d(divisor_override=...) is not part of problem 38; the rungs divide as "
                         "PyTorch does without it")
    if ct.bias is None:
        raise ValueError("the ConvTranspose3d has no bias (bias=False); problem 38's has one")
    return dict(pool_kernel_size=ap.kernel_size, pool_stride=ap.stride, pool_padding=ap.padding,
                ceil_mode=ap.ceil_mode, count_include_pad=ap.count_include_pad, stride=ct.stride,
                padding=ct.padding, output_padding=ct.output_padding, dilation=ct.dilation, groups=ct.groups,
                clamp_min=model.clamp_min, clamp_max=model.clamp_max)


def list_rungs():
    """The track's rungs in ladder order: [{id, name, gpu, deterministic, conv_passes, precision,
    idea}]; precision is "fp32", or "tf32" for a rung on tensor cores (held to the TF32 bound)."""
    rows = []
    for line in ops().p38_rungs.default().splitlines():
        rid, name, kind, deterministic, passes, precision, idea = line.split("\t")
        rows.append({"id": rid, "name": name, "gpu": kind == "gpu", "deterministic": deterministic == "1",
                     "conv_passes": int(passes), "precision": precision, "idea": idea})
    return rows


def problem_info(model, x_shape, rung=DEFAULT_RUNG):
    """How the track sees `model` (Model or ModelNew) on an input of shape x_shape, from C++
    (Problem38): {rung, pooled_size, out_size, spatial, conv_macs, workspace_bytes, unsupported}.
    ValueError for parameters PyTorch would reject."""
    text = ops().p38_info.default(list(x_shape), list(model.conv_transpose.weight.shape),
                                  *_params(**module_params(model)), str(rung))
    info = dict(line.split("\t", 1) for line in text.splitlines())
    for key in ("pooled_size", "out_size"):
        info[key] = tuple(int(v) for v in info[key].split(","))
    info["spatial"] = int(info["spatial"])
    info["conv_macs"] = float(info["conv_macs"])
    if "workspace_bytes" in info:
        info["workspace_bytes"] = int(info["workspace_bytes"])
    return info


class ModelNew(nn.Module):
    """Model's forward by a GPU rung of the problem-38 track. Forward only (no gradients; see
    the module docstring).

    Same constructor as Model, then `rung` (default "08"; also settable on an instance:
    model.rung = "04"); same parameters (conv_transpose.weight, conv_transpose.bias, scale), in
    the same order. Inputs: x float32, CUDA, contiguous; the parameters float32 on x's device
    (model.cuda()).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size,
                 clamp_min, clamp_max, rung=DEFAULT_RUNG):
        super().__init__()
        if p38_track_dir() is None:
            raise _track_missing()
        self.avg_pool = nn.AvgPool3d(pool_kernel_size)
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.scale = nn.Parameter(torch.ones(1, out_channels, 1, 1, 1))
        self.rung = str(rung)

    def forward(self, x):
        ct = self.conv_transpose
        return p38_forward(x, ct.weight, ct.bias, self.scale, rung=self.rung, **module_params(self))

    def extra_repr(self):
        return f"rung={self.rung!r}, clamp_min={self.clamp_min}, clamp_max={self.clamp_max}"
