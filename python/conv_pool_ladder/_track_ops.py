"""What the track modules (p38.py, p74.py) share: finding a track's operators in the extension,
and the 3-D parameter triples the operators take."""

from __future__ import annotations

import torch

from ._build import _LOADED, load_extension

_FOUND = {}  # track -> torch.ops.<module>, found once per process


def track_ops(track, track_dir, missing, probe):
    """torch.ops.<module> of a loaded extension module built with `track` ("p38", "p74": one of
    its name's _-separated parts), else of a new build of the track with no ladder stage
    (load_extension([], with_<track>=True)); found once, then cached. RuntimeError missing() when
    track_dir() is None (the track is not in this checkout); RuntimeError when the module has no
    operator `probe` (a build without the track)."""
    if track in _FOUND:
        return _FOUND[track]
    if track_dir() is None:
        raise missing()
    # a module name lists its tracks as parts: conv_pool_ladder_p38_p74, conv_pool_ladder_s01_04_p74
    module = next((m for name, m in _LOADED.items() if track in name.split("_")), None) or load_extension(
        [], **{f"with_{track}": True})
    namespace = getattr(torch.ops, module.__name__)
    try:
        getattr(namespace, probe)  # raises where the module was built without the track
    except (AttributeError, RuntimeError) as e:
        raise RuntimeError(f"the extension module {module.__name__} has no {track} operators: a stale build? "
                           f"({e})") from e
    _FOUND[track] = namespace
    return namespace


def triple(name, value):
    """An int or three ints (depth, height, width), as PyTorch's 3-D modules accept -> a tuple;
    ValueError naming the parameter otherwise."""
    if isinstance(value, int):
        return (value, value, value)
    value = tuple(value)
    if len(value) != 3 or not all(isinstance(v, int) for v in value):
        raise ValueError(f"{name} must be an int or three ints (depth, height, width), got {value!r}")
    return value
