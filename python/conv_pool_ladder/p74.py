"""KernelBench level 2, problem 74, and its replacement on the third track's GPU rungs, forward
and backward.

    from conv_pool_ladder.p74 import Model, ModelNew, get_init_inputs, get_inputs
    model = Model(*get_init_inputs()).cuda()
    new = ModelNew(*get_init_inputs()).cuda()      # forward rung "10", backward rung "09"
    new.load_state_dict(model.state_dict())
    x = get_inputs()[0].cuda().requires_grad_()
    out = new(x)                                   # (16, 32, 16, 32, 32) float32
    out.sum().backward()                           # x.grad, conv_transpose.weight.grad, ...

Model is the problem's PyTorch code: ConvTranspose3d, LeakyReLU(0.2), times a learnable
multiplier of shape (out_channels, 1, 1, 1) drawn from N(0, 1), the same LeakyReLU again,
MaxPool3d(2). The module-level sizes, get_inputs() and get_init_inputs() are KernelBench's.
ModelNew has the same constructor (plus forward_rung and backward_rung after KernelBench's
arguments) and the same parameters (conv_transpose.weight, conv_transpose.bias, multiplier),
created in the same order: one seed gives both the same weights, and load_state_dict works
either way.

ModelNew.forward runs P74Function, a torch.autograd.Function: its forward calls one forward rung
of tracks/p74_backward (the operator torch.ops.<module>.p74_forward of the extension built with
the track, load_extension([], with_p74=True), on first use; csrc/p74_call.cpp), which returns the
output and what the backward needs, the argmax of every pooling window (int32 window offsets) and
the ConvTranspose3d output there (pool-sized, fp32): no conv-sized tensor is kept. Its backward
calls one backward rung (p74_backward) for the four gradients. The fast rungs, 04
(subpixel_forward) and 09 (tiled_grads), handle the KernelBench geometry family only (kernel 3,
stride 2, padding 1, pool 2, ...); for another problem ModelNew warns once and uses the generic
rungs, 03 (fused_forward) and 08 (two_level).

Every check is done in C++: x and the parameters must be float32, CUDA, contiguous and on one
device (ValueError, or TypeError for the dtype, naming the tensor); parameters PyTorch would
reject raise ValueError naming them. The upstream gradient is made contiguous here (autograd
hands over expanded ones, e.g. from out.sum()).

First order only: the backward is decorated with torch.autograd.function.once_differentiable,
so asking for a second derivative through ModelNew (create_graph=True, then differentiating the
gradient) raises RuntimeError. Second-order gradients of this model are PyTorch's (Model) only.

Without tracks/p74_backward in the checkout, the extension has no p74 operators: ModelNew and the
functions below raise RuntimeError saying so. Model, get_inputs and get_init_inputs need only
torch.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn as nn
from torch.autograd.function import once_differentiable

from ._build import p74_track_dir
from ._track_ops import track_ops, triple as _triple

# KernelBench's sizes for this problem.
batch_size = 16
in_channels = 16
out_channels = 32
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
multiplier_shape = (out_channels, 1, 1, 1)

DEFAULT_FORWARD_RUNG = "10"   # tensor_cores (TF32, as PyTorch's default): the KernelBench geometry family
DEFAULT_BACKWARD_RUNG = "09"  # tiled_grads (FP32 gradients): the same family
GENERIC_FORWARD_RUNG = "03"   # fused_forward: every parameter
GENERIC_BACKWARD_RUNG = "08"  # two_level: every parameter, deterministic


def get_inputs():
    """[x], x ~ U[0, 1) of shape (batch_size, in_channels, depth, height, width), on the CPU."""
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    """The constructor arguments of Model and ModelNew, KernelBench's order."""
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier_shape]


class Model(nn.Module):
    """KernelBench level 2, problem 74: ConvTranspose3d, LeakyReLU, times a learnable multiplier,
    LeakyReLU, MaxPool3d."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.leaky_relu = nn.LeakyReLU(negative_slope=0.2)
        self.max_pool = nn.MaxPool3d(kernel_size=2)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = self.leaky_relu(x)
        x = x * self.multiplier
        x = self.leaky_relu(x)
        x = self.max_pool(x)
        return x


# ---- the extension's operators ----------------------------------------------------------------------

def _track_missing() -> RuntimeError:
    return RuntimeError("problem 74's track (tracks/p74_backward, with tracks/shared) is not in this "
                        "checkout, so the extension has no p74 operators; Model works without it, ModelNew does not")


def ops():
    """torch.ops.<module> of a loaded extension module built with the track (load_extension(...,
    with_p74=True)), else of a new build of the track with no ladder stage
    (conv_pool_ladder_p74). RuntimeError when the track is not in this checkout. Found once (_track_ops)."""
    return track_ops("p74", p74_track_dir, _track_missing, "p74_forward")


def _params(stride=2, padding=1, output_padding=1, dilation=1, groups=1, negative_slope=0.2, pool_kernel_size=2,
            pool_stride=None, pool_padding=0, pool_dilation=1, ceil_mode=False):
    """The operators' parameter list, in schema order (csrc/p74_call.cpp): spatial parameters as
    triples, pool_stride None -> pool_kernel_size (nn.MaxPool3d's default). The defaults are
    KernelBench's problem 74 (stride 2, padding 1, output_padding 1, negative_slope 0.2), not the
    PyTorch modules' own: a call without module_params(model) runs the KernelBench model."""
    pk = _triple("pool_kernel_size", pool_kernel_size)
    return (_triple("stride", stride), _triple("padding", padding), _triple("output_padding", output_padding),
            _triple("dilation", dilation), int(groups), float(negative_slope), pk,
            pk if pool_stride is None else _triple("pool_stride", pool_stride), _triple("pool_padding", pool_padding),
            _triple("pool_dilation", pool_dilation), bool(ceil_mode))


def p74_forward(x, weight, bias, multiplier, rung=DEFAULT_FORWARD_RUNG, poison=False, **params):
    """The model's forward by one GPU forward rung, on torch's current stream, no autograd:
    (out float32, argmax int32, y_saved float32), each (batch, out_channels, oD, oH, oW).

    x (batch, in_channels, D, H, W); weight (in_channels, out_channels/groups, kD, kH, kW) and
    bias (out_channels) as in nn.ConvTranspose3d; multiplier (out_channels, 1, 1, 1) or
    (out_channels). params: stride, padding, output_padding, dilation, groups, negative_slope,
    pool_kernel_size, pool_stride, pool_padding, pool_dilation, ceil_mode (module_params gives
    them from a model). poison=True fills the outputs with NaN (argmax with -1) first. Errors: see
    the module docstring."""
    return ops().p74_forward.default(str(rung), x, weight, bias, multiplier, *_params(**params), bool(poison))


def p74_backward(grad_out, x, weight, bias, multiplier, argmax, y_saved, rung=DEFAULT_BACKWARD_RUNG, poison=False,
                 **params):
    """The four gradients (grad_x, grad_weight, grad_bias, grad_multiplier; shaped as x, weight,
    bias and multiplier) by one GPU backward rung, from the upstream gradient grad_out (float32,
    contiguous, the output's shape) and what p74_forward returned. No autograd."""
    return ops().p74_backward.default(str(rung), grad_out, x, weight, bias, multiplier, argmax, y_saved,
                                      *_params(**params), bool(poison))


def module_params(model):
    """The operators' keyword parameters from a Model's or ModelNew's modules."""
    ct, mp = model.conv_transpose, model.max_pool
    if ct.bias is None:
        raise ValueError("the ConvTranspose3d has no bias (bias=False); problem 74's has one")
    if getattr(ct, "padding_mode", "zeros") != "zeros":
        raise ValueError(f"ConvTranspose3d(padding_mode={ct.padding_mode!r}) is not part of problem 74")
    if mp.return_indices:
        raise ValueError("MaxPool3d(return_indices=True) is not part of problem 74")
    return dict(stride=ct.stride, padding=ct.padding, output_padding=ct.output_padding, dilation=ct.dilation,
                groups=ct.groups, negative_slope=model.leaky_relu.negative_slope, pool_kernel_size=mp.kernel_size,
                pool_stride=mp.stride, pool_padding=mp.padding, pool_dilation=mp.dilation, ceil_mode=mp.ceil_mode)


def list_rungs():
    """The track's rungs in ladder order: [{id, name, gpu, forward, backward, deterministic, precision,
    idea}] (forward / backward: p74_forward / p74_backward can run it; precision: "fp32" or "tf32",
    the bound its forward is held to)."""
    rows = []
    for line in ops().p74_rungs.default().splitlines():
        rid, name, kind, fwd, bwd, deterministic, precision, idea = line.split("\t")
        rows.append({"id": rid, "name": name, "gpu": kind == "gpu", "forward": fwd == "1", "backward": bwd == "1",
                     "deterministic": deterministic == "1", "precision": precision, "idea": idea})
    return rows


def problem_info(x_shape, weight_shape, rung=DEFAULT_FORWARD_RUNG, **params):
    """How the track sees a problem, from C++ (Problem74): {rung, conv_size, out_size, conv_macs,
    forward_workspace_bytes / backward_workspace_bytes (where the rung has that pass),
    unsupported ("" when the rung can run it)}. ValueError for parameters PyTorch would reject."""
    text = ops().p74_info.default(str(rung), list(x_shape), list(weight_shape), *_params(**params))
    info = dict(line.split("\t", 1) if "\t" in line else (line, "") for line in text.splitlines())
    for key in ("conv_size", "out_size"):
        info[key] = tuple(int(v) for v in info[key].split(","))
    info["conv_macs"] = float(info["conv_macs"])
    for key in ("forward_workspace_bytes", "backward_workspace_bytes"):
        if key in info:
            info[key] = int(info[key])
    info.setdefault("unsupported", "")
    return info


def model_info(model, x_shape, rung=DEFAULT_FORWARD_RUNG):
    """problem_info for a Model's or ModelNew's parameters on an input of shape x_shape."""
    return problem_info(x_shape, model.conv_transpose.weight.shape, rung, **module_params(model))


class P74Function(torch.autograd.Function):
    """out = MaxPool3d(lrelu(multiplier * lrelu(ConvTranspose3d(x, weight, bias)))) by a forward
    rung; the gradients with respect to x, weight, bias and multiplier by a backward rung.

    apply(x, weight, bias, multiplier, forward_rung, backward_rung, params): params is a dict
    of module_params' keys. Saves x, weight, bias, multiplier, argmax and y_saved (pool-sized).
    The backward is once_differentiable: a second-order request raises RuntimeError (use Model,
    PyTorch's reference, for second order). Gradients that autograd does not need are returned
    as None (the rung still computes all four: it has no switch)."""

    @staticmethod
    def forward(ctx, x, weight, bias, multiplier, forward_rung, backward_rung, params):
        out, argmax, y_saved = p74_forward(x, weight, bias, multiplier, rung=forward_rung, **params)
        ctx.save_for_backward(x, weight, bias, multiplier, argmax, y_saved)
        ctx.backward_rung, ctx.params = backward_rung, params
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        x, weight, bias, multiplier, argmax, y_saved = ctx.saved_tensors
        needs = ctx.needs_input_grad
        if not any(needs[:4]):
            return (None,) * 7
        gx, gw, gb, gm = p74_backward(grad_out.contiguous(), x, weight, bias, multiplier, argmax, y_saved,
                                      rung=ctx.backward_rung, **ctx.params)
        grads = (gx, gw, gb, gm.reshape(multiplier.shape))
        return tuple(g if need else None for g, need in zip(grads, needs[:4])) + (None, None, None)


class ModelNew(nn.Module):
    """Model's forward and backward by GPU rungs of the problem-74 track (see the module docstring).

    Same constructor as Model, then forward_rung (default "10") and backward_rung (default "09"),
    also settable on an instance (model.forward_rung = "03"). When the rung chosen reports that it
    cannot run the problem (the fast rungs' geometry family), ModelNew warns once per shape and
    uses the generic rung of that pass, 03 or 08. Same parameters as Model (conv_transpose.weight,
    conv_transpose.bias, multiplier), in the same order. Inputs: x float32, CUDA, contiguous; the
    parameters float32 on x's device (model.cuda()).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier_shape,
                 forward_rung=DEFAULT_FORWARD_RUNG, backward_rung=DEFAULT_BACKWARD_RUNG):
        super().__init__()
        if p74_track_dir() is None:
            raise _track_missing()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.leaky_relu = nn.LeakyReLU(negative_slope=0.2)
        self.max_pool = nn.MaxPool3d(kernel_size=2)
        self.forward_rung = str(forward_rung)
        self.backward_rung = str(backward_rung)
        self._choices = {}  # (rung, generic, shapes, params) -> the rung used

    def _rung(self, rung, generic, x_shape, params):
        """`rung`, or `generic` (with a warning, once per key) when `rung` cannot run the problem."""
        key = (rung, generic, tuple(x_shape), tuple(self.conv_transpose.weight.shape), tuple(sorted(params.items())))
        if key not in self._choices:
            why = problem_info(x_shape, self.conv_transpose.weight.shape, rung, **params)["unsupported"]
            if why and rung != generic:
                warnings.warn(f"problem 74: rung {rung} cannot run this problem ({why}); using the generic rung "
                              f"{generic} instead", RuntimeWarning, stacklevel=3)
                self._choices[key] = generic
            else:
                self._choices[key] = rung  # an unsupported generic rung raises in the operator, with its reason
        return self._choices[key]

    def rungs_for(self, x_shape):
        """(forward rung, backward rung) that forward uses for an input of shape x_shape."""
        return self._rungs_for(x_shape, module_params(self))

    def _rungs_for(self, x_shape, params):
        return (self._rung(self.forward_rung, GENERIC_FORWARD_RUNG, x_shape, params),
                self._rung(self.backward_rung, GENERIC_BACKWARD_RUNG, x_shape, params))

    def forward(self, x):
        params = module_params(self)
        fwd, bwd = self._rungs_for(tuple(x.shape), params)
        ct = self.conv_transpose
        return P74Function.apply(x, ct.weight, ct.bias, self.multiplier, fwd, bwd, params)

    def extra_repr(self):
        return f"forward_rung={self.forward_rung!r}, backward_rung={self.backward_rung!r}"
