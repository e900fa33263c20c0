"""The conv-transpose -> global-pool ladder's GPU stages, loaded into PyTorch.

    import conv_pool_ladder as cpl
    ext = cpl.load_extension(["single_launch"])   # JIT build (ninja, nvcc), then import
    pooled, y = cpl.run_stage("single_launch", x, conv.weight, conv.bias, bias)
    y = cpl.stage_forward(x, conv.weight, conv.bias, bias)  # differentiable (C++ autograd)
    model = cpl.ModelNew(64, 128, 3, (128, 1, 1)).cuda()   # KernelBench-style

Stages are named by number ("13"), folder name or name ("single_launch").
load_extension, list_stage_folders and the build helpers need no torch until a build starts;
run_stage, stage_forward, stage_op, Model and ModelNew import torch.
"""

from ._build import REPO_ROOT, gpu_stages, load_extension, normalize_stage_id, rung_meta, stage_folders


def list_stage_folders():
    """[(id, folder, is_gpu)] for every stages/NN_name/ folder of this checkout."""
    return [(s.id, s.folder, s.is_gpu) for s in stage_folders()]


def list_stages(stages=None):
    """The stages built into the extension for `stages` (default: every GPU stage)."""
    return load_extension(stages).list_stages()


_LAZY = {
    "run_stage": "ops",
    "stage_forward": "ops",
    "stage_op": "ops",
    "Model": "models",
    "ModelNew": "models",
}


def __getattr__(name):  # PEP 562: torch is imported only when these are used
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "REPO_ROOT", "gpu_stages", "load_extension", "normalize_stage_id", "rung_meta", "stage_folders",
    "list_stage_folders", "list_stages", *_LAZY,
]
