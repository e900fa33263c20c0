"""Calling the stages on tensors, and the autograd Function that makes them trainable.

run_stage(...)      one stage, returns (pooled (N, Cout), y (N, 1)); no autograd.
stage_forward(...)  y (N, 1) through a torch.autograd.Function whose backward is exact, to
                    second order too (see _StageFunction); what ModelNew calls.
"""

from __future__ import annotations

import torch

from ._build import _LOADED, load_extension, normalize_stage_id


def _pair(value, name: str) -> tuple:
    """An int or a pair of ints, as nn.ConvTranspose2d accepts them -> (h, w)."""
    if isinstance(value, int):
        return (value, value)
    v = tuple(int(e) for e in value)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2:
        raise ValueError(f"{name} must be an int or (height, width), got {value!r}")
    return v


def extension_for(stage):
    """The loaded extension that holds this stage, else a build of this stage alone.
    Call load_extension(stages) first to choose which stages one module holds."""
    sid = normalize_stage_id(stage)
    for module in _LOADED.values():
        if any(s["id"] == sid for s in module.list_stages()):
            return module
    return load_extension([sid])


def output_size(in_size: int, kernel: int, stride: int, padding: int, output_padding: int, dilation: int) -> int:
    """PyTorch's ConvTranspose2d output size along one axis."""
    return (in_size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def run_stage(stage, x, weight, conv_bias, bias, stride=1, padding=0, output_padding=0, dilation=1,
              groups=1, scale=10.0, pooled=None, y=None):
    """Runs GPU stage `stage` (6, "06" or "06_pool_before_conv") on torch's current stream.

    x (N, Cin, H, W), weight (Cin, Cout/groups, kH, kW) as in nn.ConvTranspose2d, conv_bias
    (Cout) or None (no conv bias), bias (Cout, 1, 1) or (Cout): float32, CUDA, contiguous.
    Returns (pooled (N, Cout), y (N, 1)), written into `pooled` and `y` when given.
    No autograd: the outputs have no grad_fn (see stage_forward).
    """
    ext = extension_for(stage)
    if conv_bias is None:
        conv_bias = torch.zeros(weight.shape[1] * int(groups), dtype=weight.dtype, device=weight.device)
    pooled, y = ext.run_stage(
        normalize_stage_id(stage), x, weight, conv_bias, bias,
        list(_pair(stride, "stride")), list(_pair(padding, "padding")),
        list(_pair(output_padding, "output_padding")), list(_pair(dilation, "dilation")),
        int(groups), float(scale), pooled, y,
    )
    return pooled, y


def _tap_masks(in_size, out_size, stride, padding, dilation, kernel, device, dtype):
    """mask[k, i] = 1 where input index i with tap k lands inside the output:
    0 <= i*stride - padding + k*dilation < out_size (the scatter view of the gather form)."""
    i = torch.arange(in_size, device=device)
    k = torch.arange(kernel, device=device).unsqueeze(1)
    pos = i * stride - padding + k * dilation
    return ((pos >= 0) & (pos < out_size)).to(dtype)


def _tap_sums(x, mh, mw):
    """R[n,ci,kh,kw] = sum of x[n,ci] over the rows of mh[kh] and the columns of mw[kw]."""
    return torch.matmul(torch.matmul(mh, x), mw.t())


class _StageFunction(torch.autograd.Function):
    """y = scale * logsumexp_co(pooled + bias), pooled from a ladder stage; exact backward.

    Backward, from the linearity identity (brief, section 3): with P = Hout*Wout and
    R[n,ci,kh,kw] = the sum of x[n,ci] over the input rows and columns whose tap (kh, kw)
    lands inside the output (masks Mh, Mw),
        pooled[n,co] = cb[co] + (1/P) sum_{ci in group(co), kh, kw} w[ci, co', kh, kw] R[n,ci,kh,kw]
    is linear in x, w and cb, so with G[n,co] = dL/dy[n] * scale * softmax_co(pooled + bias)[n,co]
    (the gradient of logsumexp):
        dL/dbias[co] = dL/dcb[co] = sum_n G[n,co]
        dL/dw[ci,co',kh,kw]       = (1/P) sum_n G[n,co] R[n,ci,kh,kw]
        dL/dx[n,ci,ih,iw]         = (1/P) sum_{co in group(ci), kh, kw} G[n,co] w[ci,co',kh,kw] Mh[kh,ih] Mw[kw,iw]
    (co' = co mod Cout/groups): the gradients autograd gives the reference Model, up to rounding.
    The backward is made of differentiable PyTorch ops; when a graph of the gradients is asked
    for (create_graph=True), pooled is recomputed from x, w and cb by the identity in PyTorch
    ops instead of taken from the stage, so that gradients of gradients are exact too.
    compare_pytorch.py checks first and second derivatives against float64 autograd.
    """

    @staticmethod
    def forward(ctx, x, weight, conv_bias, bias, stage, stride, padding, output_padding, dilation,
                groups, scale):
        pooled, y = run_stage(stage, x, weight, conv_bias, bias, stride, padding, output_padding,
                              dilation, groups, scale)
        ctx.save_for_backward(x, weight, conv_bias, bias, pooled)
        ctx.geometry = (stride, padding, output_padding, dilation, groups, scale)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        x, weight, conv_bias, bias, pooled = ctx.saved_tensors
        stride, padding, output_padding, dilation, groups, scale = ctx.geometry
        n, cin, h, w = x.shape
        _, cout_g, kh, kw = weight.shape
        cout, cin_g = cout_g * groups, cin // groups
        hout = output_size(h, kh, stride[0], padding[0], output_padding[0], dilation[0])
        wout = output_size(w, kw, stride[1], padding[1], output_padding[1], dilation[1])
        plane = float(hout * wout)
        mh = _tap_masks(h, hout, stride[0], padding[0], dilation[0], kh, x.device, x.dtype)  # (kH, H)
        mw = _tap_masks(w, wout, stride[1], padding[1], dilation[1], kw, x.device, x.dtype)  # (kW, W)
        need_x, need_w, need_cb, need_b = ctx.needs_input_grad[:4]

        r = None
        if torch.is_grad_enabled():  # create_graph: pooled as a differentiable function of x, w, cb
            r = _tap_sums(x, mh, mw)
            pooled = torch.einsum("ngckl,gcjkl->ngj", r.reshape(n, groups, cin_g, kh, kw),
                                  weight.reshape(groups, cin_g, cout_g, kh, kw)).reshape(n, cout) / plane
            if conv_bias is not None:
                pooled = pooled + conv_bias.reshape(1, cout)

        g = grad_y.reshape(n, 1) * scale * torch.softmax(pooled + bias.reshape(1, cout), dim=1)  # (N, Cout)
        g3 = g.reshape(n, groups, cout_g)
        grad_x = grad_w = grad_cb = grad_b = None
        if need_cb:
            grad_cb = g.sum(0)
        if need_b:
            grad_b = g.sum(0).reshape(bias.shape)
        if need_w:
            if r is None:
                r = _tap_sums(x, mh, mw)  # (N, Cin, kH, kW)
            grad_w = torch.einsum("ngj,ngckl->gcjkl", g3, r.reshape(n, groups, cin_g, kh, kw))
            grad_w = grad_w.reshape(cin, cout_g, kh, kw) / plane
        if need_x:
            a = torch.einsum("ngj,gcjkl->ngckl", g3, weight.reshape(groups, cin_g, cout_g, kh, kw))
            a = a.reshape(n, cin, kh, kw) / plane
            grad_x = torch.matmul(torch.matmul(mh.t(), a), mw)  # (N, Cin, H, W)
        return grad_x, grad_w, grad_cb, grad_b, None, None, None, None, None, None, None


def stage_forward(x, weight, conv_bias, bias, stride=1, padding=0, output_padding=0, dilation=1,
                  groups=1, scale=10.0, stage="06"):
    """y (N, 1) = scale * logsumexp over channels of (mean of ConvTranspose2d(x) + bias), by a
    ladder stage, differentiable (exact gradients computed with PyTorch ops)."""
    return _StageFunction.apply(
        x, weight, conv_bias, bias, normalize_stage_id(stage), _pair(stride, "stride"),
        _pair(padding, "padding"), _pair(output_padding, "output_padding"),
        _pair(dilation, "dilation"), int(groups), float(scale),
    )
