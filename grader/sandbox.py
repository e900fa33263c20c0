"""The sandbox the student's build and programs run in: bubblewrap (`bwrap`), as packaged by
Debian and Ubuntu (`apt install bubblewrap`).

Why bubblewrap: it is a small, audited setuid-free tool (Flatpak's sandbox) that builds a fresh
mount namespace from an explicit list of paths, so what the student's code can see is written
down here rather than subtracted from the whole machine. util-linux's unshare/setpriv can make
the same namespaces, but the view of the file system would be ours to assemble by hand.

Inside, the student's process
  - runs as an unprivileged user (uid/gid 65534; when the grader runs as root it drops to that
    user with util-linux's setpriv before bwrap starts, so no host uid 0 is ever mapped),
  - has no network (a new, empty network namespace), its own PID, IPC and UTS namespaces and a
    new session (so it sees no process of the grader: no /proc/<ppid>/environ, no cmdline),
  - sees the system (/usr, /etc, /lib*, /opt, /sys) and the paths the grader binds read-only,
    one writable folder (the build), a private /tmp and the GPU's device nodes,
  - gets an empty environment apart from PATH, HOME, TMPDIR and LANG.
`check_paths` refuses a sandbox whose view would hold the instructor's tree, the secret file or
another grading's folder.
"""
import glob
import os
import shutil
import signal
import subprocess

NOBODY = 65534
SYSTEM_DIRS = ["/usr", "/etc", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/opt", "/sys"]
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt install bubblewrap) or set LADDER_BWRAP to its path"


class SandboxError(RuntimeError):
    pass


def find_bwrap():
    """The bwrap executable ($LADDER_BWRAP, else PATH), or None."""
    path = os.environ.get("LADDER_BWRAP") or shutil.which("bwrap")
    return path if path and os.access(path, os.X_OK) else None


class Sandbox:
    """A bwrap command line: `ro` and `rw` map outside paths to paths inside ({outside: inside})."""

    def __init__(self, ro=None, rw=None, gpu=True):
        self.bwrap = find_bwrap()
        if self.bwrap is None:
            raise SandboxError("no sandbox: bwrap not found: " + INSTALL_HINT)
        self.ro, self.rw, self.gpu = dict(ro or {}), dict(rw or {}), gpu
        self.as_root = os.geteuid() == 0
        if self.as_root and not shutil.which("setpriv"):
            raise SandboxError("no sandbox: setpriv (util-linux) not found, needed to drop root before bwrap")

    def writable_prepare(self):
        """Makes the writable folders the sandbox's user's own (needed when the grader is root)."""
        if not self.as_root:
            return
        for outside in self.rw:
            for dirpath, dirnames, filenames in os.walk(outside):
                for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                    os.lchown(name, NOBODY, NOBODY)

    def check_paths(self, private):
        """Raises SandboxError if a bound path holds or lies inside one of `private` (the
        instructor's tree, the secret file, the hidden problems)."""
        views = [os.path.realpath(p) for p in [*self.ro, *self.rw]] + \
                [os.path.realpath(d) for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)]
        for secret in private:
            if not secret:
                continue
            s = os.path.realpath(secret)
            for v in views:
                if s == v or s.startswith(v.rstrip("/") + "/"):
                    raise SandboxError(f"the sandbox would see {secret} through {v}: move the grading's work folder, "
                                       "the instructor's tree or the secret so that none lies inside another")

    def command(self, argv, cwd="/tmp", env=None):
        """The argv that runs `argv` inside the sandbox, with working directory `cwd` (inside)."""
        cmd = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
               "--uid", str(NOBODY), "--gid", str(NOBODY), "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for d in SYSTEM_DIRS:
            if os.path.islink(d):
                cmd += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                cmd += ["--ro-bind", d, d]
        if self.gpu:
            for node in sorted(glob.glob("/dev/nvidia*")):
                cmd += ["--dev-bind", node, node]
        for outside, inside in self.rw.items():
            cmd += ["--bind", outside, inside]
        for outside, inside in self.ro.items():
            cmd += ["--ro-bind", outside, inside]
        cmd += ["--chdir", cwd, "--clearenv"]
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
        for k in ("CUDA_VISIBLE_DEVICES",):
            if k in os.environ:
                base[k] = os.environ[k]
        for k, v in {**base, **(env or {})}.items():
            cmd += ["--setenv", k, v]
        cmd += ["--", *argv]
        if self.as_root:  # the host uid of everything inside is 65534, not 0
            cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all", *cmd]
        return cmd

    def run(self, argv, cwd="/tmp", env=None, timeout=None, pass_fds=()):
        """run_group of argv inside the sandbox."""
        return run_group(self.command(argv, cwd, env), timeout, pass_fds=pass_fds)


def run_group(argv, timeout=None, env=None, pass_fds=()):
    """subprocess.run of argv in a session of its own (text, output captured). A timeout kills
    the whole process group, so nothing the program started outlives it, and raises
    subprocess.TimeoutExpired."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                         start_new_session=True, pass_fds=pass_fds, env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        raise
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def traversable(path):
    """True if every existing folder above `path` lets any user pass (o+x): the sandbox's user
    must reach the folders bwrap binds."""
    path = os.path.abspath(path)
    while True:
        parent = os.path.dirname(path)
        if os.path.isdir(path) and not os.stat(path).st_mode & 0o001:
            return False
        if parent == path:
            return True
        path = parent


def works():
    """(True, "") if a sandbox can start here, else (False, why): bwrap present and user
    namespaces allowed."""
    try:
        s = Sandbox(gpu=False)
        p = s.run(["true"], timeout=30)
    except (SandboxError, OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    if p.returncode != 0:
        return False, "bwrap cannot start a sandbox here: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    return True, ""
