"""The KernelBench model (level 2, problem 42) and its drop-in replacement on stage 06.

Model is the reference exactly as in the brief. ModelNew has the same constructor and the same
parameters (created in the same order, so the same seed gives the same weights), and computes
its forward with a ladder stage (06_pool_before_conv unless the class attribute stage_id says
otherwise).

Autograd: ModelNew's forward goes through a torch.autograd.Function (ops._StageFunction) whose
backward computes the exact gradients for x, the ConvTranspose2d weight and bias, and the extra
bias, from the linearity identity, in PyTorch ops. Nothing is silently detached, and gradients
of gradients (create_graph=True) are exact as well: the backward is itself made of
differentiable PyTorch ops.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .ops import stage_forward


class Model(nn.Module):
    """KernelBench level 2, problem 42, exactly as in the brief."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv_transpose(x)
        x = torch.mean(x, dim=(2, 3), keepdim=True)  # global average pool
        x = x + self.bias
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = torch.sum(x, dim=(2, 3))
        return x * 10.0


class ModelNew(nn.Module):
    """Same constructor and parameters as Model; forward runs ladder stage `stage_id`.

    Inputs: x float32, CUDA. Parameters must be float32 on x's device (model.cuda()).
    Gradients: exact, first and second order (see the module docstring).
    """

    stage_id = "06"  # 06_pool_before_conv: one streaming pass over x

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        ct = self.conv_transpose
        if ct.padding_mode != "zeros":
            raise NotImplementedError(f"ModelNew supports padding_mode='zeros' only, got {ct.padding_mode!r}")
        return stage_forward(
            x.contiguous(), ct.weight, ct.bias, self.bias,
            stride=ct.stride, padding=ct.padding, output_padding=ct.output_padding,
            dilation=ct.dilation, groups=ct.groups, scale=10.0, stage=self.stage_id,
        )
