"""A rung's metadata lives next to it, one small file that the tools read instead of keeping a
table of every rung: a stage's stages/NN_name/rung.json, a track rung's tracks/T_x/rungs/NN_name.json
beside its NN_name.cu. Its keys:

  "sass"     the machine-code expectations of the technique check (grader/technique.py's rule
             dicts: check, kernel and its parameters; a pattern "$NAME" names one of
             technique.PATTERNS); [] when the local-memory check is all;
  "profile"  the Nsight Compute capture (scripts/capture_profiles.sh): "kernel_filter" and the
             problem's "args";
  "grader"   the rung's grading settings (what grader/rungs.json's "rungs" held for it): its
             "timing" and, for a TF32 rung, "precision" (a track rung: its "timing" args);
  "build"    how CMake compiles the stage (cmake/Stages.cmake): {"sm_90a": true} builds sm_90a
             in place of sm_90, for Hopper-only instructions (wgmma); "fallback": {"macro",
             "what"} is the build that takes an older GPU's path (compiled with the macro,
             LADDER_NO_...), which the tests build and check (tests/CMakeLists.txt).

The file belongs to the instructor's tree: a handout ships it with the stage's folder, and a
grading reads the grader's own copy, never the submission's.
"""
import json
import os

from .handout import stage_folders, track_rungs as track_rung_files

KEYS = ("sass", "profile", "grader", "build")


class RungMetaError(ValueError):
    pass


def read(path):
    """One rung.json, checked: a JSON object with only KEYS. Raises RungMetaError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise RungMetaError(f"{path}: {e}") from e
    if not isinstance(meta, dict):
        raise RungMetaError(f"{path}: expected a JSON object")
    unknown = sorted(set(meta) - set(KEYS))
    if unknown:
        raise RungMetaError(f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    if not isinstance(meta.get("sass", []), list) or not all(isinstance(r, dict) and "check" in r and "kernel" in r
                                                             for r in meta.get("sass", [])):
        raise RungMetaError(f"{path}: \"sass\" is a list of rules, each with \"check\" and \"kernel\"")
    return meta


def stages(root):
    """{stage id: (folder, metadata)} of every stage folder under root/stages that has a rung.json."""
    if not os.path.isdir(os.path.join(root, "stages")):
        return {}
    return {sid: (folder, read(path)) for sid, folder in stage_folders(root).items()
            if os.path.isfile(path := os.path.join(root, "stages", folder, "rung.json"))}


def by_name(root, key):
    """{stage name: metadata[key]} of the stages whose rung.json has `key`."""
    return {folder.split("_", 1)[1]: meta[key] for folder, meta in stages(root).values() if key in meta}


def track_rungs(root):
    """{"TRACK-NN": metadata} of every track rung under root/tracks with a NN_name.json beside its file."""
    return {rung: read(meta) for rung, path in track_rung_files(root).items()
            if os.path.isfile(meta := os.path.join(root, os.path.splitext(path)[0] + ".json"))}


def with_rung_settings(config, root):
    """grader/rungs.json's config with each rung's "grader" settings merged in: a stage's under
    config["rungs"][NN], a track rung's under config["tracks"][T]["rungs"][NN]. Returns config."""
    config.setdefault("rungs", {}).update({sid: meta["grader"] for sid, (_folder, meta) in stages(root).items()
                                           if "grader" in meta})
    for rung, meta in track_rungs(root).items():
        t, number = rung.split("-")
        if "grader" in meta and t in config.get("tracks", {}):
            config["tracks"][t].setdefault("rungs", {})[number] = meta["grader"]
    return config
