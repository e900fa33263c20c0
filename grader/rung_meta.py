"""A rung's metadata lives next to it, one small file that the tools read instead of keeping a
table of every rung: the rung.json in its folder, a stage's stages/NN_name/rung.json or a track
rung's tracks/T_x/rungs/NN_name/rung.json. Its keys:

  "chapter"  where the rung's chapter is, a link relative to the rung's folder with an optional
             #anchor: a track rung's section of its track's README.md ("../../README.md#rung-03");
             without it, the folder's own README.md (a stage's chapter). grader/tests/test_handout_links.py
             checks that it resolves;
  "sass"     the machine-code expectations of the technique check (grader/technique.py's rule
             dicts: check, kernel and its parameters; a pattern "$NAME" names one of
             technique.PATTERNS); [] when the local-memory check is all;
  "profile"  the Nsight Compute capture (scripts/capture_profiles.sh): "kernel_filter" and the
             problem's "args";
  "grader"   the rung's grading settings (what grader/rungs.json's "rungs" held for it): its
             "timing" and, for a TF32 rung, "precision" (a track rung: its "timing" args, and
             optionally its "report" settings and, for a rung that runs only a family of the
             track's problems, its own "public", "practice", "hidden" lists and
             "sanitizer_problems": grader/problems.py's RUNG_OVERRIDES);
  "build"    how CMake compiles the stage (cmake/Stages.cmake): {"sm_90a": true} builds sm_90a
             in place of sm_90, for Hopper-only instructions (wgmma); "fallback": {"macro",
             "what"} is the build that takes an older GPU's path (compiled with the macro,
             LADDER_NO_...), which the tests build and check (tests/CMakeLists.txt).

The file belongs to the instructor's tree: a handout ships it with the stage's folder, and a
grading reads the grader's own copy, never the submission's.
"""
import json
import os

from .handout import stage_folders, track_rung_folders

KEYS = ("chapter", "sass", "profile", "grader", "build")


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
    if not isinstance(meta.get("chapter", ""), str):
        raise RungMetaError(f"{path}: \"chapter\" is a link, relative to the rung's folder (../../README.md#rung-03)")
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
    """{"TRACK-NN": metadata} of every track rung under root/tracks whose folder has a rung.json."""
    return {rung: read(meta) for rung, folder in track_rung_folders(root).items()
            if os.path.isfile(meta := os.path.join(root, folder, "rung.json"))}


def chapter(root, folder, meta):
    """(path relative to root, anchor or "") of the chapter of the rung in `folder` (relative to
    root): its rung.json's "chapter", else the folder's README.md."""
    link = meta.get("chapter", "README.md")
    target, _, anchor = link.partition("#")
    return os.path.normpath(os.path.join(folder, target)).replace(os.sep, "/"), anchor


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
