"""The machine-code counts the chapters quote, read from a build's sm_90 SASS and committed in
results/sass_counts_sm90.txt, so that prose markers (<!-- num: sass#... -->) can name their
source and CI can tell when the compiler's code no longer matches them.

  python3 -m tooling.results.sass_counts [BUILD]           write the file from BUILD (default build)
  python3 -m tooling.results.sass_counts --check [BUILD]   compare; exit 1 on a difference

The counts belong to one compiler: a build by another nvcc release, or one without sm_90 code,
is reported as not comparable (exit 0, one SKIP line), never as a match. Needs cuobjdump
(tooling/checks/sass.py's lookup, which the grader's technique check shares)."""
import argparse
import functools
import glob
import os
import re
import subprocess
import sys

from tooling.checks import sass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COUNTS = os.path.join(ROOT, "results", "sass_counts_sm90.txt")
ARCH = "sm_90"
FADD = re.compile(r"FADD(\.|$)")


@functools.lru_cache(maxsize=None)  # --check asks for stage 12 twice: disassemble once
def stage_functions(build, sid, cuobjdump):
    """The sm_90 functions of stage `sid`'s objects in BUILD."""
    objects = glob.glob(os.path.join(build, "CMakeFiles", f"stage_{sid}.dir", "stages", "*", "*.cu.o"))
    return tuple(f for f in sass.disassemble(cuobjdump, objects) if f.arch == ARCH)


def function(functions, name):
    hits = [f for f in functions if f.short == name or f.short.startswith(name + "I")]
    if len(hits) != 1:
        raise SystemExit(f"error: {len(hits)} sm_90 functions named {name} (is the build current?)")
    return hits[0]


def inner_ffma_loop(fn):
    """The innermost loop with the most FFMA: the tile's compute loop."""
    loops = sass.ffma_loops(fn)
    if not loops:
        raise SystemExit(f"error: {fn.short} has no innermost loop with FFMA")
    return max(loops, key=lambda l: l.count(sass.FFMA))


def wide_loads_before_first_add(fn):
    """In the first innermost loop that loads 16 bytes at a time, the LDG.128s issued before its
    first FADD: the loads a thread has in flight before it waits on one."""
    for loop in fn.loops:
        if loop.innermost and loop.has(sass.LDG128):
            n = 0
            for ins in loop.body:
                if FADD.match(ins.op):
                    return n
                n += bool(sass.LDG128.match(ins.op))
    raise SystemExit(f"error: {fn.short} has no innermost loop of 128-bit loads")


def compute(build, cuobjdump):
    """[(key, value)] in the file's order."""
    out = []
    for sid, name in (("07", "conv_pool_smem_tile"), ("08", "conv_pool_register_tile")):
        # the kernel width 3 instance, the KernelBench problem's
        fn = function(stage_functions(build, sid, cuobjdump), f"{name}ILi3EEEvNS0_9TiledArgsE")
        loop = inner_ffma_loop(fn)
        key = f"{sid}.{name}<3>.inner_loop"
        out += [(f"{key}.instructions", len(loop.body)), (f"{key}.FFMA", loop.count(sass.FFMA)),
                (f"{key}.LDS", loop.count(sass.LDS))]
    for sid, name in (("12", "plane_chunk_sums"), ("13", "pool_before_conv_fused")):
        fn = function(stage_functions(build, sid, cuobjdump), name)
        out.append((f"{sid}.{name}.wide_loads_before_first_fadd", wide_loads_before_first_add(fn)))
    return out


def nvcc_release(build):
    """The release of the build's CUDA compiler ("13.0"), from its CMake cache, or None."""
    try:
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
            compiler = next((l.split("=", 1)[1].strip() for l in f if l.startswith("CMAKE_CUDA_COMPILER:")), None)
    except OSError:
        return None
    if not compiler:
        return None
    p = subprocess.run([compiler, "--version"], capture_output=True, text=True)
    m = re.search(r"release (\d+\.\d+)", p.stdout)
    return m.group(1) if m else None


def render(release, counts):
    lines = [f"# The SASS counts the chapters quote: {ARCH}, nvcc {release}, written by",
             "# python3 -m tooling.results.sass_counts BUILD (the kernel-width-3 instances of stages 07 and 08).",
             f"nvcc {release}"]
    return "\n".join(lines + [f"{k} {v}" for k, v in counts]) + "\n"


def committed_release(text):
    m = re.search(r"^nvcc (\d+\.\d+)$", text, re.M)
    return m.group(1) if m else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    a = ap.parse_args(argv)
    cuobjdump = sass.find_cuobjdump()
    if not cuobjdump:
        print("error: cuobjdump not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, or set CUOBJDUMP)",
              file=sys.stderr)
        return 2
    release = nvcc_release(a.build)
    if release is None:
        print(f"error: {a.build} is not a configured build (no CMAKE_CUDA_COMPILER in its CMakeCache.txt)",
              file=sys.stderr)
        return 2
    if not a.check:
        with open(COUNTS, "w", encoding="utf-8") as f:
            f.write(render(release, compute(a.build, cuobjdump)))
        print(f"wrote {os.path.relpath(COUNTS, ROOT)}")
        return 0
    with open(COUNTS, encoding="utf-8") as f:
        text = f.read()
    if committed_release(text) != release:
        print(f"SKIP: {a.build} was built by nvcc {release}; the committed counts are nvcc "
              f"{committed_release(text)}'s, so they are not comparable")
        return 0
    if not stage_functions(a.build, "12", cuobjdump):
        print(f"SKIP: {a.build} has no {ARCH} code for stage 12")
        return 0
    want = render(release, compute(a.build, cuobjdump))
    if want != text:
        got = dict(l.split(" ", 1) for l in text.splitlines() if l and not l.startswith("#"))
        for k, v in (l.split(" ", 1) for l in want.splitlines() if l and not l.startswith("#")):
            if got.get(k) != v:
                print(f"FAIL: {k}: the build gives {v}, {os.path.relpath(COUNTS, ROOT)} says {got.get(k)}")
        print("run `python3 -m tooling.results.sass_counts` and update the prose it feeds")
        return 1
    print(f"PASS: {os.path.relpath(COUNTS, ROOT)} matches {a.build}'s {ARCH} SASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
