"""Finds the stage folders and JIT-builds the binding with torch.utils.cpp_extension.load.

The stages come from cmake/Stages.cmake, the one implementation of stage discovery, run in
script mode (`cmake -P`, no compiler involved): it writes the same stage list (stages.tsv) that
CMake writes into a build directory and the scripts read, and the registry. So this file never
decides what a stage is; it needs a `cmake` on PATH (or LADDER_CMAKE), as building the project
does.

What gets compiled, the same set CMake builds (CMakeLists.txt, cmake/Stages.cmake):
  - csrc/*.cpp, this package's C++: the pybind module (binding.cpp), the argument checks and
    stage calls (stage_call.cpp) and the registered operator with its autograd (stage_op.cpp),
  - common/toolkit/*.cpp (CUDA checks, device buffers, ...) and common/model/*.cpp (problem 42's
    model),
  - every GPU stage of the list (stage 00, the CPU reference, is left out): its sources, each
    with the stage's compile definitions (LADDER_STAGE_ID, LADDER_STAGE_NAME, LADDER_STAGE_SYMBOL,
    which stages/lib/register_stage.hpp turns into the descriptor),
  - a generated registry, registry.cpp, defining ladder::registered_stages() over the stages
    built, written by cmake/Stages.cmake,
  - with_p38=True (python/conv_pool_ladder/p38.py asks for it), problem 38, the second track,
    too: its host code (tracks/p38_spatial_softmax/: problem, oracle, tolerance, rows),
    registry.cpp (find_rung), device/geometry.cpp and all its rungs (the source in each rung folder
    rungs/NN_name/, with the number and name cmake/Stages.cmake derives from the folder's name;
    rung 00, the CPU reference, is compiled too, since the registry Stages.cmake generates lists
    every rung folder; it needs OpenMP, which the flags below already give), and the operators of
    csrc/p38_call.cpp. Not runner.cu or main.cpp (they
    need ladder/, nlohmann_json and CLI11). A module of its own (conv_pool_ladder_p38, or
    <stage set>_p38), so that the first track's modules neither wait for nor depend on the
    second's sources. Where the checkout has no track (tracks/p38_spatial_softmax/problem.cpp,
    the test CMakeLists.txt makes; a student handout) with_p38 raises, and csrc/p38_call.cpp is
    never compiled. The track's sources include "common/..." from the repository root and their
    own headers by relative quoted includes, so the include path gains the root and tracks/,
    after csrc/, common/'s parts and stages/, so that every existing include resolves as before
    (common/model/ has a problem.hpp too: p38_call.cpp includes "p38_spatial_softmax/rung.hpp").
  - with_p74=True (python/conv_pool_ladder/p74.py asks for it), problem 74, the third track, the
    same way: its host code (tracks/p74_backward/: problem, oracle, tolerance), registry,
    device/geometry.cpp and all its rungs (rung 00 included), and the operators of
    csrc/p74_call.cpp. Not runner.cu or main.cpp. A module of its own (conv_pool_ladder_p74, or
    <stage set>[_p38]_p74). Where the checkout has no tracks/p74_backward/problem.cpp with_p74
    raises, and csrc/p74_call.cpp is never compiled.
  - with either track, what the tracks share (tracks/shared/: geometry3d.cpp, agreement.cpp;
    CMake's tracks_shared), once. Include path as with_p38;
    p74_call.cpp includes "p74_backward/rung.hpp".
Flags: -O3, -std=c++17 (c++20 from torch 2.12 on, whose headers need it; LADDER_CXX_STD overrides),
code for the local GPU's architecture only (torch.cuda.get_device_capability, sm_90 where none
is visible; LADDER_CUDA_ARCH=90a overrides; sm_90a in place of sm_90 for the whole extension when
a selected stage's rung.json says "build": {"sm_90a": true}, see extension_arch), include dirs csrc/, common/toolkit/, common/model/ and stages/. The architecture
goes through TORCH_CUDA_ARCH_LIST (set for the build only): cpp_extension adds -gencode flags of
its own for every visible GPU whatever extra_cuda_cflags say, so an -arch flag there would
only be a second, possibly conflicting, target. "9.0" becomes -gencode=arch=compute_90,code=sm_90.

cpp_extension names object files after the sources' base names, so two stages with a
kernels.cu each would collide: every project source is compiled through a small wrapper (the
stage's definitions, then #include "<absolute path>") with a unique name in the build directory.
Dependencies on the real files and their headers are still tracked (ninja depfiles), so editing a
stage rebuilds it.

The C++ compiler must link libstdc++ dynamically, as PyTorch does: a static copy inside the
extension is a second libstdc++ in the process, and formatting a number into an error message
then crashes (locale facets indexed by the other copy's ids; seen with the GPU image's
CXX=/opt/gcc/bin/g++, which links libstdc++ statically). load_extension probes the compiler
cpp_extension would use (CXX, else c++) with a one-line shared library and, when its libstdc++
is static, builds with the first c++/g++ on PATH that links it dynamically (CXX and CC set for
the build only; LADDER_TORCH_CXX / LADDER_TORCH_CC force a choice).

Nothing here imports torch until load_extension() is called, so the discovery and the
registry can be checked on a machine without PyTorch.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CSRC = Path(__file__).resolve().parent / "csrc"
COMMON_PARTS = ("toolkit", "model")  # common/toolkit/ (no problem) and common/model/ (problem 42)
P38_CALL = "p38_call.cpp"  # csrc/ file compiled only with the problem-38 track
P74_CALL = "p74_call.cpp"  # csrc/ file compiled only with the problem-74 track
P38_HOST = ("problem.cpp", "oracle.cpp", "tolerance.cpp", "rows.cpp")  # CMake's p38_host
P74_HOST = ("problem.cpp", "oracle.cpp", "tolerance.cpp")  # problem 74's host code
TRACKS_SHARED = ("geometry3d.cpp", "agreement.cpp")  # tracks/shared/: CMake's tracks_shared


def p38_track_dir(root: Path = REPO_ROOT):
    """tracks/p38_spatial_softmax of this checkout, or None where it is absent (handouts)."""
    d = root / "tracks" / "p38_spatial_softmax"
    return d if (d / "problem.cpp").is_file() else None


def _track_sources(track_dir, host, rungs: bool = True) -> list:
    """A track folder's host files `host`, then (with rungs) device/geometry.cpp and every rung's
    source (the .cu or .cpp file in each rung folder rungs/NN_name/), sorted; [] where track_dir
    is None (the track is absent)."""
    if track_dir is None:
        return []
    files = [track_dir / f for f in host]
    if rungs:
        d = track_dir / "rungs"
        files += [track_dir / "device" / "geometry.cpp"] + sorted(list(d.glob("*/*.cu")) + list(d.glob("*/*.cpp")))
    return files


def p38_sources(root: Path = REPO_ROOT) -> list:
    """The track's sources the extension compiles (see the module docstring), [] without the
    track: host code, registry, device/geometry.cpp, every rung (.cu and .cpp), sorted."""
    return _track_sources(p38_track_dir(root), P38_HOST + ("registry.cpp",))


def p74_track_dir(root: Path = REPO_ROOT):
    """tracks/p74_backward of this checkout, or None where it is absent."""
    d = root / "tracks" / "p74_backward"
    return d if (d / "problem.cpp").is_file() else None


def shared_sources(root: Path = REPO_ROOT) -> list:
    """What the tracks share (tracks/shared/), compiled once with either track; [] where absent."""
    d = root / "tracks" / "shared"
    return [d / f for f in TRACKS_SHARED] if (d / TRACKS_SHARED[0]).is_file() else []


def p74_sources(root: Path = REPO_ROOT) -> list:
    """The problem-74 track's sources the extension compiles, [] without the track: host code,
    registry, device/geometry.cpp, every rung (.cu and .cpp), sorted. What it shares with problem
    38 comes from shared_sources."""
    return _track_sources(p74_track_dir(root), P74_HOST + ("registry.cpp",))


def track_rung_definitions(track_dir: Path, namespace: str, out_dir: Path, root: Path = REPO_ROOT):
    """({rung file path: its compile definitions}, the generated registry's path) of a track, as
    CMake makes them (cmake/Stages.cmake in script mode: each rung's number and name from its
    folder's name, rungs() of ladder::<namespace> over every rung folder)."""
    listed, registry = out_dir / f"{namespace}__rungs.tsv", out_dir / f"{namespace}__rungs.cpp"
    run_stages_cmake(root, LADDER_TRACK_RUNGS_DIR=track_dir / "rungs", LADDER_TRACK_NAMESPACE=namespace,
                     LADDER_TRACK_RUNG_LIST_OUT=listed, LADDER_TRACK_REGISTRY_OUT=registry)
    defs = {}
    for line in listed.read_text().splitlines():
        if line and not line.startswith("#"):
            _id, file, _name, definitions = line.split("\t")
            defs[track_dir / "rungs" / file] = tuple(definitions.split(";"))
    return defs, registry


@dataclass(frozen=True)
class StageFolder:
    id: str  # "13"
    folder: str  # "13_single_launch"
    path: Path
    sources: tuple  # the folder's .cu and .cpp files, sorted
    name: str = ""  # "single_launch"
    kind: str = "gpu"  # "gpu" (a .cu source) or "cpu"
    definitions: tuple = ()  # ("LADDER_STAGE_ID=\"06\"", ...): compile definitions of its sources

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"


def _cmake() -> str:
    exe = os.environ.get("LADDER_CMAKE") or shutil.which("cmake")
    if not exe:
        raise RuntimeError("the stages are found by cmake/Stages.cmake, and there is no cmake on PATH: install "
                           "CMake 3.24 or newer (e.g. pip install cmake) or set LADDER_CMAKE to one")
    return exe


def run_stages_cmake(root: Path = REPO_ROOT, **definitions) -> None:
    """Runs cmake/Stages.cmake in script mode with -D<key>=<value> for each keyword argument
    (LADDER_STAGE_LIST_OUT, LADDER_REGISTRY_OUT, LADDER_REGISTRY_IDS); raises RuntimeError with
    its message when it fails (a folder under stages/ it cannot place, an unknown stage id)."""
    definitions = {"LADDER_STAGES_DIR": root / "stages", **definitions}
    cmd = [_cmake()] + [f"-D{k}={v}" for k, v in definitions.items()] + ["-P", str(root / "cmake" / "Stages.cmake")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"cmake/Stages.cmake failed: {(r.stderr or r.stdout).strip()}\n(command: {shlex.join(cmd)})")


def read_stage_list(path: Path, root: Path = REPO_ROOT) -> list:
    """The StageFolders of a stage list (stages.tsv, format in cmake/Stages.cmake), in its order."""
    out = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 6:
            raise ValueError(f"{path}:{number}: expected 6 tab-separated columns, got {len(cols)}: {line!r}")
        sid, folder, name, kind, sources, definitions = cols
        d = root / "stages" / folder
        out.append(StageFolder(sid, folder, d, tuple(d / s for s in sources.split(";") if s), name, kind,
                               tuple(x for x in definitions.split(";") if x)))
    return out


def stage_folders(root: Path = REPO_ROOT) -> list:
    """Every stage under root/stages, in ladder order, as cmake/Stages.cmake finds them (it runs
    that file: the rules live there only)."""
    with tempfile.TemporaryDirectory(prefix="ladder_stages_") as tmp:
        out = Path(tmp) / "stages.tsv"
        run_stages_cmake(root, LADDER_STAGE_LIST_OUT=out)
        return read_stage_list(out, root)


def gpu_stages(root: Path = REPO_ROOT) -> list:
    return [s for s in stage_folders(root) if s.is_gpu]


def normalize_stage_id(stage, root: Path = REPO_ROOT) -> str:
    """13, "13", "13_single_launch" or "single_launch" -> "13".

    A name is looked up among the stage folders of `root`, so code that names its stage keeps
    working when the ladder is renumbered."""
    s = str(stage).strip()
    m = re.match(r"^(\d{1,2})(_.*)?$", s)
    if m:
        return f"{int(m.group(1)):02d}"
    folders = stage_folders(root)
    for f in folders:
        if f.folder[3:] == s:
            return f.id
    raise ValueError(
        f"stage must be a number, a folder name like 13_single_launch or a name like single_launch; "
        f"{stage!r} is none of these (stages: {', '.join(f.folder for f in folders) or 'none'})")


def select_stages(requested=None, root: Path = REPO_ROOT) -> list:
    """The GPU stage folders to build: all of them, or those requested (ids or names).
    A requested stage that has no folder (or is a CPU stage) raises ValueError."""
    available = {s.id: s for s in gpu_stages(root)}
    if requested is None:
        return list(available.values())
    ids = sorted({normalize_stage_id(r, root) for r in requested})
    missing = [i for i in ids if i not in available]
    if missing:
        raise ValueError(
            f"no GPU stage folder for {', '.join(missing)} under {root / 'stages'} "
            f"(GPU stages there: {', '.join(available) or 'none'})"
        )
    return [available[i] for i in ids]


def write_registry(path: Path, ids, root: Path = REPO_ROOT) -> None:
    """Writes the registry of these stage ids, as CMake writes it (cmake/Stages.cmake leaves an
    unchanged file alone, so ninja does not rebuild it)."""
    run_stages_cmake(root, LADDER_REGISTRY_OUT=path, LADDER_REGISTRY_IDS=",".join(ids))


def _write_if_changed(path: Path, text: str) -> None:
    """Leaves an unchanged file alone so that ninja does not rebuild it."""
    if path.exists() and path.read_text() == text:
        return
    path.write_text(text)


def extension_name(stages, with_p38: bool = False, with_p74: bool = False) -> str:
    """One module (and build folder) per stage set: conv_pool_ladder_s01_04_06; with problem
    38's track, conv_pool_ladder_p38 (no stage) or conv_pool_ladder_s01_04_06_p38; with problem
    74's, a further _p74 (conv_pool_ladder_p74, conv_pool_ladder_p38_p74, ...)."""
    tracks = ("_p38" if with_p38 else "") + ("_p74" if with_p74 else "")
    if tracks:
        return ("conv_pool_ladder_s" + "_".join(s.id for s in stages) if stages else "conv_pool_ladder") + tracks
    return "conv_pool_ladder_s" + "_".join(s.id for s in stages) if stages else "conv_pool_ladder_none"


def default_build_root() -> Path:
    """Under the temp dir (writable everywhere, /tmp on Linux), per user and per checkout."""
    env = os.environ.get("LADDER_TORCH_BUILD_DIR")
    if env:
        return Path(env)
    try:
        user = getpass.getuser()
    except Exception:  # no user name in some containers
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    checkout = hashlib.sha1(str(REPO_ROOT).encode()).hexdigest()[:8]
    return Path(tempfile.gettempdir()) / f"conv_pool_ladder_ext_{user}" / checkout


def wrapper_sources(stages, build_dir: Path, root: Path = REPO_ROOT, with_p38: bool = False,
                    with_p74: bool = False) -> list:
    """Writes the registry and one #include wrapper per project source; returns the sources
    to compile (csrc/ first, binding.cpp at its head). with_p38: problem 38's track and
    csrc/p38_call.cpp too (RuntimeError where the checkout has no track). with_p74: problem 74's
    track and csrc/p74_call.cpp (RuntimeError where the checkout lacks it). Either adds
    tracks/shared/ once."""
    src_dir = build_dir / "src"
    src_dir.mkdir(parents=True, exist_ok=True)
    track = p38_track_dir(root)
    if with_p38 and track is None:
        raise RuntimeError(f"problem 38's track is not in this checkout ({root / 'tracks' / 'p38_spatial_softmax'} "
                           "has no problem.cpp): no p38 operators can be built")
    track74 = p74_track_dir(root)
    if with_p74 and track74 is None:
        raise RuntimeError(f"problem 74's track is not in this checkout ({root / 'tracks' / 'p74_backward'} "
                           "has no problem.cpp): no p74 operators can be built")
    skip = {"binding.cpp"} | (set() if with_p38 else {P38_CALL}) | (set() if with_p74 else {P74_CALL})
    sources = [str(CSRC / "binding.cpp")] + [str(p) for p in sorted(CSRC.glob("*.cpp")) if p.name not in skip]

    def wrap(prefix: str, path: Path, definitions=()) -> None:
        wrapper = src_dir / f"{prefix}__{path.stem}{path.suffix}"
        defines = "".join("#define {} {}\n".format(*d.split("=", 1)) for d in definitions)
        _write_if_changed(wrapper, f'// Wrapper: compiles {path} under a unique object name.\n{defines}#include "{path}"\n')
        sources.append(str(wrapper))

    for part in COMMON_PARTS:
        for p in sorted((root / "common" / part).glob("*.cpp")):
            wrap(f"common_{part}", p)
    for s in stages:
        for p in s.sources:
            wrap(f"stage{s.id}", p, s.definitions)
    rung_defs = {}
    for on, track_dir, namespace in ((with_p38, track, "p38"), (with_p74, track74, "p74")):
        if on:  # each rung file's definitions, and the generated rungs() of the track
            defs, registry = track_rung_definitions(track_dir, namespace, src_dir, root)
            rung_defs.update(defs)
            sources.append(str(registry))
    for p in shared_sources(root) if with_p38 or with_p74 else []:  # tracks_shared__<name>
        wrap("tracks_shared", p)
    for p in p38_sources(root) if with_p38 else []:  # p38_<folder>__<name>: not common's problem.cpp
        wrap("p38" + "".join(f"_{part}" for part in p.relative_to(track).parent.parts), p, rung_defs.get(p, ()))
    for p in p74_sources(root) if with_p74 else []:  # p74_<folder>__<name>
        wrap("p74" + "".join(f"_{part}" for part in p.relative_to(track74).parent.parts), p, rung_defs.get(p, ()))
    registry = src_dir / "registry.cpp"
    write_registry(registry, [s.id for s in stages], root)
    sources.append(str(registry))
    return sources


def _torch_version_tuple(torch) -> tuple:
    m = re.match(r"^(\d+)\.(\d+)", torch.__version__)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def cxx_standard(torch) -> str:
    """c++17 as CMake builds the project; torch 2.12 and later need C++20 in their headers."""
    env = os.environ.get("LADDER_CXX_STD")
    if env:
        return env
    return "c++20" if _torch_version_tuple(torch) >= (2, 12) else "c++17"


def cuda_arch(torch) -> str:
    """"90" for sm_90: $LADDER_CUDA_ARCH, else the local GPU's. Without a GPU the extension
    could not run anyway: Hopper (90), announced on stderr, so that it can still be compiled."""
    env = os.environ.get("LADDER_CUDA_ARCH")
    if env:
        return env
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"{major}{minor}"
    print("conv_pool_ladder: no CUDA device visible to PyTorch; compiling for sm_90 "
          "(set LADDER_CUDA_ARCH, e.g. 75 for a T4, to choose)", file=sys.stderr)
    return "90"


def rung_meta(folder: Path) -> dict:
    """A stage folder's rung.json as a dict, {} where the folder has none. The one reader of that
    file outside grader/ (whose grader/rung_meta.py the tooling must not import)."""
    meta = Path(folder) / "rung.json"
    return json.loads(meta.read_text()) if meta.is_file() else {}


def needs_sm90a(stage: StageFolder) -> bool:
    """Whether the stage's rung.json says "build": {"sm_90a": true} (Hopper-only instructions such as
    wgmma, which exist only in sm_90a code; cmake/Stages.cmake reads the same key)."""
    return rung_meta(stage.path).get("build", {}).get("sm_90a") is True


def extension_arch(arch: str, stages) -> str:
    """arch, or "90a" in place of "90" when one of the stages needs sm_90a. CMake changes the
    architecture of that stage alone; cpp_extension compiles every source for one architecture
    list, so here the whole extension gets sm_90a code, which runs on the same GPUs as sm_90 code."""
    return "90a" if arch in ("90", "sm_90") and any(needs_sm90a(s) for s in stages) else arch


def torch_arch_list(arch: str) -> str:
    """"90" -> "9.0", "90a" -> "9.0a", "100" -> "10.0": TORCH_CUDA_ARCH_LIST's spelling."""
    m = re.match(r"^(?:sm_)?(\d+)(\d)([a-z]?)$", arch)
    if not m:
        raise ValueError(f"LADDER_CUDA_ARCH must look like 90 or 90a, got {arch!r}")
    return f"{m.group(1)}.{m.group(2)}{m.group(3)}"


_PROBE_SOURCE = (
    "#include <sstream>\n#include <string>\n"
    "std::string ladder_probe(long v) { std::ostringstream s; s << v; return s.str(); }\n"
)


def _needs_shared_libstdcxx(library: Path):
    """Whether a shared library lists libstdc++ among its NEEDED entries (readelf, else a scan)."""
    readelf = shutil.which("readelf")
    if readelf:
        r = subprocess.run([readelf, "-d", str(library)], capture_output=True, text=True)
        if r.returncode == 0:
            return any("NEEDED" in line and "libstdc++" in line for line in r.stdout.splitlines())
    return b"libstdc++.so" in library.read_bytes()


def links_shared_libstdcxx(cxx: str, workdir: Path):
    """True if `cxx` links a shared library against the shared libstdc++, False if it links
    libstdc++ statically, None if the probe could not be built."""
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "libstdcxx_probe.cpp"
    _write_if_changed(src, _PROBE_SOURCE)
    out = workdir / f"libstdcxx_probe_{hashlib.sha1(cxx.encode()).hexdigest()[:8]}.so"
    try:
        r = subprocess.run(shlex.split(cxx) + ["-shared", "-fPIC", str(src), "-o", str(out)],
                           capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    return _needs_shared_libstdcxx(out)


def build_compilers(workdir: Path):
    """{"CXX": ..., "CC": ...} to set for the build, or {} to keep the environment's."""
    forced = os.environ.get("LADDER_TORCH_CXX")
    if forced:
        return {"CXX": forced, "CC": os.environ.get("LADDER_TORCH_CC") or os.environ.get("CC")}
    cxx = os.environ.get("CXX", "c++")
    if links_shared_libstdcxx(cxx, workdir) is not False:
        return {}
    current = shutil.which(shlex.split(cxx)[0]) or cxx
    for candidate in ("c++", "g++", "/usr/bin/c++", "/usr/bin/g++"):
        path = shutil.which(candidate)
        if not path or os.path.realpath(path) == os.path.realpath(current):
            continue
        if links_shared_libstdcxx(path, workdir):
            folder = Path(path).parent
            cc = next((str(folder / c) for c in ("gcc", "cc") if (folder / c).exists()), None)
            print(f"[conv_pool_ladder] {cxx} (CXX) links libstdc++ statically, which breaks PyTorch "
                  f"extensions; building with {path} (CC {cc}) instead", file=sys.stderr)
            return {"CXX": path, "CC": cc}
    raise RuntimeError(
        f"{cxx} (CXX) links libstdc++ statically into shared libraries, so an extension built with it "
        "carries a second libstdc++ and crashes; no other c++/g++ on PATH links it dynamically. "
        "Set LADDER_TORCH_CXX (and LADDER_TORCH_CC) to compilers that do.")


@contextlib.contextmanager
def _environment(**values):
    """Sets (or, for None, unsets) environment variables for the duration of the block."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_LOADED = {}


def load_extension(stages=None, verbose: bool = False, build_dir=None, with_p38: bool = False,
                   with_p74: bool = False):
    """Builds (if needed) and imports the binding for the given GPU stages (default: all), with
    problem 38's track and its operators (torch.ops.<module>.p38_*) if with_p38, and problem
    74's (torch.ops.<module>.p74_*) if with_p74.

    The first build of a stage set takes a minute or so (nvcc on every source); later calls
    in new processes only re-run ninja, which rebuilds what changed. The build folder is
    default_build_root()/<module name> unless build_dir is given.
    """
    selected = select_stages(stages)
    name = extension_name(selected, with_p38, with_p74)
    if name in _LOADED:
        return _LOADED[name]

    import torch
    from torch.utils import cpp_extension

    build = Path(build_dir) if build_dir else default_build_root() / name
    build.mkdir(parents=True, exist_ok=True)
    sources = wrapper_sources(selected, build, with_p38=with_p38, with_p74=with_p74)
    std = cxx_standard(torch)
    arch = extension_arch(cuda_arch(torch), selected)
    includes = [str(CSRC), *(str(REPO_ROOT / "common" / part) for part in COMMON_PARTS), str(REPO_ROOT / "stages")]
    if with_p38 or with_p74:  # "common/toolkit/cuda_check.hpp" from the root; "p38_spatial_softmax/...", "p74_backward/..."
        includes += [str(REPO_ROOT), str(REPO_ROOT / "tracks")]
    if verbose:
        print(f"[conv_pool_ladder] building {name} in {build}: std={std}, sm_{arch}, "
              f"stages {[s.folder for s in selected]}{', problem 38' if with_p38 else ''}"
              f"{', problem 74' if with_p74 else ''}", file=sys.stderr)
    env = {"TORCH_CUDA_ARCH_LIST": torch_arch_list(arch), **build_compilers(build / "probe")}
    with _environment(**env):
        module = cpp_extension.load(
            name=name,
            sources=sources,
            extra_include_paths=includes,
            extra_cflags=["-O3", f"-std={std}", "-fopenmp"],
            extra_cuda_cflags=["-O3", f"-std={std}", "-lineinfo"],
            extra_ldflags=["-fopenmp"],
            build_directory=str(build),
            with_cuda=True,
            verbose=verbose,
        )
    _LOADED[name] = module
    return module
