"""The libraries a student's program really loads: an allow-list checked at run time.

The integrity check (integrity.py) reads the rung's objects; this sees the process. The program
runs with LD_AUDIT=<grader/load_audit.c built as a .so>, which writes the path of every object
the dynamic loader maps (at start and by any later dlopen, the CUDA runtime's own included) to a
pipe the grader holds. check() refuses any object outside LOADED_ALLOWED: cuBLAS, cuDNN, PyTorch,
a student's own .so, or an allowed name loaded from a folder the student can write.

Plain runs only: compute-sanitizer loads its own libraries into the program, and its runs are
checked for memory errors, not for this.

What it cannot see (docs/assignments.md, "Integrity"):
 - code mapped by hand without the loader (open and mmap a library's file, relocate it in the
   program's own code): the loader never sees it. Only integrity rule 4 stands in the way: a rung
   may not import mmap, mprotect, open or the loader's functions;
 - in-process tampering: the program shares its address space with the audit library, so code
   that already runs in it can in principle overwrite the loader's state or the audit's. The
   audit ends the process if its descriptor is closed or replaced, which covers the direct ways;
 - anything that does not load an object: a kernel or a solution copied into the rung's source
   (from a library, a classmate or the web) is the rung's own code here. The technique check and
   reading the code remain the answer to that.

Used by the grader (runs.py):
    audit = loaded_libraries.build_audit(out_dir)               # once per grading
    env, fds, collect = loaded_libraries.audited(cmd, audit)    # per run
    p = subprocess.run(cmd, env={**base_env, **env}, pass_fds=fds, ...)
    findings = loaded_libraries.check(collect(), program=cmd[0], untrusted=[work_dir])
    lines = loaded_libraries.report_lines(findings, "stage_03_shared_tree")  # integrity rule 5
"""
import hashlib
import os
import re
import select
import shutil
import subprocess
import tempfile
import threading

from . import integrity

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "load_audit.c")
FD_VARIABLE = "LADDER_LOAD_AUDIT_FD"
AUDIT_EXIT = 97  # load_audit.c's status when its report channel is missing, closed or replaced
MAIN = "[main] "  # load_audit.c's prefix for the main program's line
MAX_BYTES = 1 << 20  # more than this on the channel is itself a finding (the program wrote to it)

# What a plain run of the course's programs maps: the loader and vDSO, glibc (libpthread, libdl and
# librt are shims since glibc 2.34), the C++ and OpenMP runtimes the programs link, the CUDA
# runtime (where linked dynamically), the driver and the helpers it loads itself (the PTX JIT,
# NVVM, the GPU compiler, WSL's libdxcore). Basenames, regex, full match.
LOADED_ALLOWED = [
    r"linux-vdso\.so\.1|linux-gate\.so\.1|ld-linux[\w.-]*\.so\.\d+",
    r"lib(c|m|dl|rt|pthread|gcc_s|stdc\+\+|gomp)\.so(\.\d+)*",
    r"libcuda\.so(\.\d+)*|libcudart\.so(\.\d+)*|libnvidia-[\w.-]+\.so(\.\d+)*|libdxcore\.so",
]
# Folders a library may never come from, whatever its name (check's `untrusted` adds the
# grading's own work and build folders): where a program can put a file, or reach one by
# another name (/proc/self/cwd/..., /dev/fd/...).
UNTRUSTED = ("/tmp", "/var/tmp", "/dev", "/proc", "/run/user")


def build_audit(out_dir, cc=None):
    """Compiles load_audit.c into out_dir/load_audit-<hash>.so (reused while the source and the
    compiler's name are unchanged) and returns its path. cc: the C compiler ($CC, else cc, gcc);
    RuntimeError naming the compiler if it is missing or fails."""
    cc = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc or not shutil.which(cc):
        raise RuntimeError("no C compiler (cc or gcc) to build the load audit (grader/load_audit.c)")
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read() + cc.encode()).hexdigest()[:16]
    out = os.path.join(os.path.abspath(out_dir), f"load_audit-{digest}.so")
    if os.path.isfile(out):
        return out
    os.makedirs(out_dir, exist_ok=True)
    tmp = out + f".{os.getpid()}.tmp"
    p = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", tmp, SOURCE], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{cc} could not build the load audit: {p.stderr.strip()[:500]}")
    os.replace(tmp, out)  # atomic: a concurrent grading sees the whole file or none
    return out


def audited(cmd, audit):
    """(env additions, pass_fds, collect) for one plain run of cmd under the load audit `audit`
    (build_audit's path). Give the env additions to the program itself (inside a sandbox, through
    its own option, e.g. bwrap --setenv: a launcher run under the audit adds its own lines) and
    pass_fds to subprocess; after the process has ended (or was killed), call collect() once: it
    returns the lines written. ValueError for a compute-sanitizer command."""
    if cmd and os.path.basename(str(cmd[0])).startswith("compute-sanitizer"):
        raise ValueError("the load audit applies to plain runs: compute-sanitizer loads its own libraries")
    read_fd, write_fd = os.pipe()  # both close-on-exec: pass_fds hands the write end to cmd alone
    chunks, size, done = [], [0], threading.Event()

    def drain():  # read as it comes, so a full pipe never blocks the program
        while not done.is_set():
            ready, _, _ = select.select([read_fd], [], [], 0.1)
            if not ready:
                continue
            data = os.read(read_fd, 65536)
            if not data:
                break
            size[0] += len(data)
            if sum(len(c) for c in chunks) < MAX_BYTES:
                chunks.append(data)
        done.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    closed = [False]

    def collect(grace=2.0):
        """The lines the run wrote (empty ones dropped); a line '[over MAX_BYTES]' if it wrote
        more. grace: seconds to wait for the end of the pipe (a process the program left behind
        may still hold it; its later lines are lost, and it is itself not allowed)."""
        if not closed[0]:
            os.close(write_fd)
            closed[0] = True
        reader.join(grace)
        done.set()
        reader.join()
        os.close(read_fd)
        text = b"".join(chunks)[:MAX_BYTES].decode("utf-8", "replace")
        lines = [line for line in text.split("\n") if line]
        return lines + ([f"[over {MAX_BYTES} bytes]"] if size[0] > MAX_BYTES else [])

    return {"LD_AUDIT": audit, FD_VARIABLE: str(write_fd)}, (write_fd,), collect


def report_lines(findings, label):
    """check's findings as the grader's failing lines, integrity rule 5 (label: the run, e.g. the
    program and its problem)."""
    return [f"{integrity.FAIL} rule 5 ({integrity.RULE_NAMES[5]}): {label}: {f}" for f in findings]


def under(path, roots):
    """True if path (made absolute, '..' resolved) lies in one of the folders roots."""
    path = os.path.normpath(path)
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in map(os.path.normpath, roots))


def shown(line):
    """A loaded object as the feedback names it: its file name when that is a plain one of at most
    64 characters, else a fixed phrase. The audit's channel is writable by the program, so its
    text is never copied whole (it could carry a hidden case's options to the feedback)."""
    name = os.path.basename(line)
    return name if re.fullmatch(r"[A-Za-z0-9._+-]{1,64}", name) else "a library with an unusual name"


def check(lines, program=None, untrusted=(), wrappers=()):
    """Findings (strings, empty if none) for the lines of one audited run: every object outside
    LOADED_ALLOWED, or of an allowed name but from an untrusted folder (UNTRUSTED, the temp folder
    and `untrusted`) or a relative path; no '[main]' line (the audit did not run); another program
    than `program` (its path, if given). wrappers: the paths of launchers the audit may have seen
    start the program (their own lines are not judged); each may appear before the program only."""
    roots = list(UNTRUSTED) + [tempfile.gettempdir()] + [os.path.abspath(r) for r in untrusted]
    real = lambda p: os.path.realpath(p) if p else p  # noqa: E731
    wrappers = {real(w) for w in wrappers}
    findings, current, seen_program = [], None, False
    for line in lines:
        if line.startswith(MAIN):
            exe = real(line[len(MAIN):])
            if exe in wrappers and not seen_program:
                current = "wrapper"
                continue
            if seen_program or (program and exe != real(program)):
                findings.append(f"another program ran under the audit: {line[len(MAIN):]}")
                current = "other"
                continue
            current, seen_program = "program", True
            continue
        if current == "wrapper":
            continue
        if current is None:
            findings.append("a line on the audit's channel before the program's own")
            continue
        name = os.path.basename(line)
        if line.startswith("["):
            findings.append("an unexpected line on the audit's channel (the program wrote to it)")
        elif not any(re.fullmatch(p, name) for p in LOADED_ALLOWED):
            findings.append(f"loaded {shown(line)}: outside the allowed libraries (the C, C++ and CUDA runtimes, the driver)")
        elif "/" in line and (not line.startswith("/") or under(line, roots)):
            findings.append(f"loaded {shown(line)}: an allowed name, but from a folder the program can write")
        elif "/" not in line and not re.fullmatch(LOADED_ALLOWED[0], name):
            findings.append(f"loaded {shown(line)}: a library without a path")
    if not seen_program:
        findings.insert(0, "the load audit reported nothing for the program (it did not run, or its channel was lost)")
    return findings
