"""The grading's two builds: the student's (the grading tree, in the jail) and the reference's
(this tree, the instructor's, as the grader, in WORK/reference-build). Both take each rung's
targets from its record (rungs.Rung), whatever its ladder."""
import os
import shutil
import subprocess

from . import handout, markers
from .runs import log


def student(args, jail, rungs, root):
    """Configures and builds the rungs' programs in the jail (the grading tree, read-only; the
    build folder its only writable place); returns {rung id: (built, log tail, compiled)}:
    compiled, the rung's objects compiled (the integrity check reads them even when the programs
    do not link); built, its programs linked as well. A rung whose program links the rest of its
    ladder (shared_program) and that does not compile is replaced, in the grading tree only, by
    its handout stub, so that the others still link and are graded."""
    tree, build_dir = jail.inside("tree"), jail.inside("build")
    cmake = ["cmake", "-S", tree, "-B", build_dir, "-G", "Ninja", "-DLADDER_BUILD_TESTS=OFF",
             "-DLADDER_GRADE_RUNGS=" + ";".join(r.id for r in rungs if r.kind == "stage")]
    # Nothing of the reference: its programs are the reference build's (reference()).
    if args.cuda_architectures:
        cmake.append("-DCMAKE_CUDA_ARCHITECTURES=" + args.cuda_architectures)
    p = jail.build(cmake)
    if p.returncode != 0:
        tail = (p.stdout + p.stderr).strip()[-3000:]
        return {r.id: (False, "the build could not be configured:\n" + tail, False) for r in rungs}

    def make(targets):
        p = jail.build(["cmake", "--build", build_dir, "-j", str(args.jobs), "--target", *targets])
        lines = [l for l in (p.stdout + p.stderr).splitlines()
                 if any(w in l.lower() for w in ("error", "warning", "undefined reference", "multiple definition"))]
        return p.returncode == 0, "\n".join(lines[:40]) if p.returncode else ""

    compiled, given = {}, set()
    for r in rungs:  # the given libraries first (their errors are not the rung's), then the rung's objects alone
        log(f"building rung {r.id}")
        if tuple(r.given) not in given:
            given.add(tuple(r.given))
            make(r.given)
        compiled[r.id] = make(r.compile)
    stub_broken(root, jail.dirs["tree"], [r for r in rungs if r.shared_program], compiled)
    out, linked = {}, {}
    for r in rungs:
        ok, compile_log = compiled[r.id]
        if ok and tuple(r.link) not in linked:
            linked[tuple(r.link)] = make(r.link)
        link_ok, link_log = linked[tuple(r.link)] if ok else (False, compile_log)
        out[r.id] = (ok and link_ok, link_log, ok)
    return out


def stub_broken(root, tree, rungs, compiled):
    """Writes, in the grading tree `tree`, the handout's stub of each declared file of the rungs
    that did not compile, unless a rung that compiled declares it too."""
    failing = [r.id for r in rungs if not compiled[r.id][0]]
    kept = {f for r in rungs if r.id not in failing for f in r.files}
    for r in rungs:
        for path in r.files if r.id in failing else ():
            if path not in kept:
                with open(os.path.join(tree, path), "w", encoding="utf-8") as f:
                    f.write(markers.render(handout.parse_file(root, path), failing))


def reference_dir(work):
    """The reference build: this tree (the instructor's), built by the grader in WORK/reference-build."""
    return os.path.join(work, "reference-build")


def reference(args, work, rungs, root):
    """Builds each rung's reference_target from this tree (instructor code only), outside the
    sandbox, in reference_dir(work): a stage's grade_timing_NN, a track's program, which the
    timing runs beside the student's in processes of their own; the objects the stage's integrity
    check compares with. The folder is the grader's alone (mode 0700: root's when grading as root),
    never bound into the sandbox and never copied into the grading folder, so neither the
    student's build nor their programs can read the reference's sources or objects. Returns
    {rung id: (program path, "") or (None, why)}."""
    build_dir = reference_dir(work)
    if configured_from_elsewhere(build_dir, root):  # CMake refuses it; every timing would fail
        shutil.rmtree(build_dir)
    os.makedirs(build_dir, exist_ok=True)
    os.chmod(build_dir, 0o700)
    stages = [r.id for r in rungs if r.kind == "stage"]
    cmake = ["cmake", "-S", root, "-B", build_dir, "-G", "Ninja", "-DLADDER_BUILD_TESTS=OFF"]
    cmake += ["-DLADDER_GRADE_RUNGS=" + ";".join(stages)] if stages else []
    if args.cuda_architectures:
        cmake.append("-DCMAKE_CUDA_ARCHITECTURES=" + args.cuda_architectures)
    p = subprocess.run(cmake, capture_output=True, text=True)
    failed = "" if p.returncode == 0 else "the reference build failed: " + (p.stdout + p.stderr).strip()[-500:]
    built = {}
    for r in rungs:
        if r.reference_target not in built:
            built[r.reference_target] = (None, failed) if failed else _reference_program(args, build_dir, r)
        if built[r.reference_target][0] is None:
            log(f"rung {r.id}: {built[r.reference_target][1]}")
    return {r.id: built[r.reference_target] for r in rungs}


def configured_from_elsewhere(build_dir, root):
    """Whether build_dir holds a CMake cache of another source tree (the instructor's checkout
    moved, or a copy graded with --reuse-work), which CMake would refuse to reconfigure."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    home = line.split("=", 1)[1].strip()
                    return os.path.realpath(home) != os.path.realpath(root)
    except OSError:
        return False
    return False


def _reference_program(args, build_dir, r):
    """(path, "") of rung r's reference_target, built now, or (None, why)."""
    program = os.path.join(build_dir, r.reference_target)
    if os.path.exists(program):  # never an older build's program in place of one that now fails
        os.remove(program)
    p = subprocess.run(["cmake", "--build", build_dir, "-j", str(args.jobs), "--target", r.reference_target],
                       capture_output=True, text=True)
    if p.returncode == 0 and os.path.isfile(program):
        return program, ""
    return None, "the reference build failed: " + (p.stdout + p.stderr).strip()[-500:]
