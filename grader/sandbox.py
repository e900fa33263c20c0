"""Where the student's build and programs run: the grader's isolation, one of three.

  bwrap  bubblewrap (`bwrap`, Debian/Ubuntu: `apt install bubblewrap`), Flatpak's small
         setuid-free sandbox: a fresh mount namespace built from an explicit list of paths, so
         what the student's code can see is written down here. Inside: uid 65534, no network (a
         new, empty network namespace), its own PID, IPC and UTS namespaces and a new session;
         the system folders (/usr, /etc, /lib*, /opt, /sys) and the paths the grader binds,
         one writable folder, a private /tmp, the GPU's device nodes. bwrap's own arguments come
         through a pipe (`--args`), so /proc/1/cmdline inside shows no host path.
  user   privilege separation without namespaces, for containers whose seccomp profile refuses
         them (Docker's default; Gradescope): a root grader runs the student's processes under
         an unprivileged uid of this grading's own (util-linux's `setpriv`), with a private
         temporary folder. The instructor's tree, the secret file and the reference build are
         made unreadable to that uid (mode 0700/0600) and checked with a probe run as it; when
         a run ends, every process left under the uid is killed.
  none   the student's own machine, practice grading only: the programs run as the grader.
Every mode starts every process (bwrap and setpriv included) with an empty environment apart
from PATH, HOME, TMPDIR, LANG and CUDA_VISIBLE_DEVICES, and under resource limits (prlimit:
processes, file size, open files, no core files). The secret is never in an environment.
"""
import fcntl
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

NOBODY = 65534       # the uid inside a bwrap sandbox
UID_BASE, UID_SLOTS = 61000, 1000  # a root grader's per-grading uids (allocate_uid)
SYSTEM_DIRS = ["/usr", "/etc", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/opt", "/sys"]
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt install bubblewrap) or set LADDER_BWRAP to its path"
ISOLATIONS = ("bwrap", "user", "none")
# prlimit's limits on every student process: enough for nvcc -j and the largest outputs, not a fork bomb.
LIMITS = ["--nproc=2048", "--core=0", "--nofile=4096", f"--fsize={16 << 30}"]


class SandboxError(RuntimeError):
    pass


def find_bwrap():
    """The bwrap executable ($LADDER_BWRAP, else PATH), or None."""
    path = os.environ.get("LADDER_BWRAP") or shutil.which("bwrap")
    return path if path and os.access(path, os.X_OK) else None


def clean_env(extra=None):
    """The whole environment of a student process, and of bwrap and setpriv themselves."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return {**env, **(extra or {})}


def lock_dir():
    """The folder of this user's grader lock files (GPU turns, uids): private to the user, so no
    student process can hold a lock."""
    d = os.path.join(tempfile.gettempdir(), f"ladder-grader-locks-{os.geteuid()}")
    os.makedirs(d, mode=0o700, exist_ok=True)
    st = os.lstat(d)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise SandboxError(f"{d} is not a private folder of this user (owner {st.st_uid}, mode {st.st_mode & 0o777:o})")
    return d


class UidLease:
    """A uid of this grading's own for the student's processes (root only), held by a lock file
    for the grading's life: two gradings on one machine never share a uid, so neither can signal,
    trace or clean up the other's processes. Without root, the grader's own uid."""

    def __init__(self):
        self.file = None
        if os.geteuid() != 0:
            self.uid = os.geteuid()
            return
        d = lock_dir()
        for i in range(UID_SLOTS):
            f = open(os.path.join(d, f"uid-{UID_BASE + i}.lock"), "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            self.file, self.uid = f, UID_BASE + i
            return
        raise SandboxError(f"no free sandbox uid: {UID_SLOTS} gradings hold one each")

    def release(self):
        if self.file:
            self.file.close()
            self.file = None


def chown_tree(folder, uid, gid):
    """Gives `folder` and everything under it to uid:gid, links themselves (never their targets)."""
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            os.lchown(name, uid, gid)


def processes_of(uid):
    """The pids whose real uid is `uid` (from /proc)."""
    pids = []
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(status, encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(status.split("/")[2]))
                        break
        except OSError:
            continue
    return pids


def kill_uid(uid):
    """Kills every process of `uid` (a root grader's sandbox uid, never its own): nothing a
    student's run started outlives it, to hold GPU memory beside the next one."""
    if uid == os.geteuid():
        return
    for _ in range(50):
        pids = processes_of(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


class Box:
    """What every isolation shares: `rw` ({outside: inside}) is made the sandbox user's own, and
    run() starts argv with the clean environment, under LIMITS, with no stdin."""

    def __init__(self, uid, ro=None, rw=None, gpu=True):
        self.uid, self.ro, self.rw, self.gpu = uid, dict(ro or {}), dict(rw or {}), gpu
        self.as_root = os.geteuid() == 0
        if self.as_root and not shutil.which("setpriv"):
            raise SandboxError("no sandbox: setpriv (util-linux) not found, needed to drop root")

    def writable_prepare(self):
        """Makes the writable folders the sandbox user's own (needed when the grader is root)."""
        if self.as_root:
            for outside in self.rw:
                chown_tree(outside, self.uid, self.uid)

    def drop(self):
        """The prefix that becomes the sandbox uid (root), under the limits."""
        cmd = ["prlimit", *LIMITS, "--"] if shutil.which("prlimit") else []
        if self.as_root:
            cmd += ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--inh-caps=-all",
                    "--bounding-set=-all", "--no-new-privs"]
        return cmd

    def run(self, argv, cwd="/tmp", env=None, timeout=None, pass_fds=()):
        raise NotImplementedError


class Sandbox(Box):
    """A bwrap sandbox: `ro` and `rw` map outside paths to paths inside ({outside: inside})."""

    def __init__(self, ro=None, rw=None, gpu=True, uid=None):
        self.bwrap = find_bwrap()
        if self.bwrap is None:
            raise SandboxError("no sandbox: bwrap not found: " + INSTALL_HINT)
        super().__init__(os.geteuid() if uid is None else uid, ro, rw, gpu)

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

    def arguments(self, cwd, env):
        """bwrap's options (passed through a pipe, never on its command line)."""
        args = ["--die-with-parent", "--new-session", "--unshare-all", "--unshare-user", "--uid", str(NOBODY),
                "--gid", str(NOBODY), "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for d in SYSTEM_DIRS:
            if os.path.islink(d):
                args += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                args += ["--ro-bind", d, d]
        if self.gpu:
            for node in sorted(glob.glob("/dev/nvidia*")):
                args += ["--dev-bind", node, node]
        for outside, inside in self.rw.items():
            args += ["--bind", outside, inside]
        for outside, inside in self.ro.items():
            args += ["--ro-bind", outside, inside]
        args += ["--chdir", cwd, "--clearenv"]
        for k, v in clean_env(env).items():
            args += ["--setenv", k, v]
        return args

    def run(self, argv, cwd="/tmp", env=None, timeout=None, pass_fds=()):
        """run_group of argv inside the sandbox."""
        r, w = os.pipe()
        try:
            data = b"".join(a.encode() + b"\0" for a in self.arguments(cwd, env))
            if len(data) > 60000:  # a pipe's buffer: the writer must not block before bwrap reads
                raise SandboxError("too many sandbox arguments for one pipe")
            os.write(w, data)
            os.close(w)
            w = -1
            cmd = [*self.drop(), self.bwrap, "--args", str(r), "--", *argv]
            return run_group(cmd, timeout, env=clean_env(), pass_fds=(r, *pass_fds))
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)


class UserBox(Box):
    """Privilege separation without namespaces: the student's processes run as this grading's
    uid (root grader only), with a private temporary folder `tmp`; what it must not read is
    made unreadable by the grader (make_private) before the first run."""

    def __init__(self, uid, tmp, rw=None, gpu=True):
        if os.geteuid() != 0:
            raise SandboxError("the 'user' isolation drops root to an unprivileged uid: it needs a root grader")
        super().__init__(uid, None, rw, gpu)
        self.tmp = tmp

    def run(self, argv, cwd=None, env=None, timeout=None, pass_fds=()):
        inner = clean_env({"HOME": self.tmp, "TMPDIR": self.tmp, **(env or {})})
        try:
            # A process the run left behind may hold its output pipes: it dies when the run ends.
            return run_group([*self.drop(), *argv], timeout, env=inner, pass_fds=pass_fds, cwd=cwd,
                             on_exit=lambda: kill_uid(self.uid))
        finally:
            kill_uid(self.uid)


def run_group(argv, timeout=None, env=None, pass_fds=(), cwd=None, on_exit=None):
    """subprocess.run of argv in a session of its own (text, output captured, no stdin). A
    timeout kills the whole process group, so nothing the program started outlives it, and
    raises subprocess.TimeoutExpired. on_exit() runs as soon as argv's own process ends (before
    its output is read to the end)."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace", start_new_session=True, pass_fds=pass_fds, env=env, cwd=cwd)
    if on_exit:
        threading.Thread(target=lambda: (p.wait(), on_exit()), daemon=True).start()
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


def bwrap_works():
    """(True, "") if a bwrap sandbox can start here, else (False, why): bwrap present and user
    namespaces allowed (Docker's default seccomp profile refuses them)."""
    lease = None
    try:
        lease = UidLease()
        p = Sandbox(gpu=False, uid=lease.uid).run(["true"], timeout=30)
    except (SandboxError, OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    finally:
        if lease:
            lease.release()
    if p.returncode != 0:
        return False, "bwrap cannot start a sandbox here: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    return True, ""


def choose(requested, official):
    """(isolation, note) for --isolation `requested` (auto, bwrap, user or none): auto takes
    bwrap where it starts, else `user` for a root grader, else `none` (practice only). Raises
    SandboxError when the request cannot be met, or official grading would run unisolated."""
    ok, why = bwrap_works() if requested in ("auto", "bwrap") else (False, "not requested")
    if requested == "bwrap" and not ok:
        raise SandboxError(f"--isolation bwrap: {why}")
    if ok:
        return "bwrap", ""
    root = os.geteuid() == 0
    if requested == "user" or (requested == "auto" and root):
        if not root:
            raise SandboxError("--isolation user drops root to an unprivileged uid: run the grader as root")
        if not shutil.which("setpriv"):
            raise SandboxError("--isolation user: setpriv (util-linux) not found")
        return "user", (f"bwrap unavailable ({why})" if requested == "auto" else "")
    if official and requested == "none":
        raise SandboxError("official grading needs isolation: --isolation none is for practice grading only")
    if official:
        raise SandboxError("official grading needs isolation, and none can run here: bwrap cannot start "
                           f"({why}), and only a root grader can drop the submission to an unprivileged uid")
    return "none", (f"bwrap unavailable ({why})" if requested == "auto" else "")


def describe(isolation, uid, note=""):
    """The report's line about the isolation that ran."""
    text = {"bwrap": f"bubblewrap sandbox (uid {NOBODY} inside, host uid {uid}; no network; own PID, IPC, mount "
                     "namespaces)",
            "user": f"unprivileged uid {uid} without namespaces (setpriv; instructor files unreadable to it; "
                    "its processes killed after every run)",
            "none": "NONE: the submission ran with the grader's own rights (practice grading)"}[isolation]
    return text + (f"; {note}" if note else "")


def probe_unreadable(uid, paths):
    """The paths of `paths` that uid can read or list (a probe run as that uid): [] when none."""
    paths = [p for p in paths if p and os.path.exists(p)]
    if not paths:
        return []
    script = 'for p in "$@"; do if [ -d "$p" ]; then ls "$p" >/dev/null 2>&1 && echo "$p"; ' \
             'elif [ -r "$p" ]; then echo "$p"; fi; done'
    box = UserBox(uid, "/nonexistent", gpu=False)
    p = box.run(["sh", "-c", script, "probe", *paths], cwd="/", timeout=60)
    return [line for line in p.stdout.splitlines() if line]


def make_private(uid, paths):
    """For the 'user' isolation: makes each of `paths` (the instructor's tree, the secret file,
    the reference build) unreadable to uid, owner-only, then proves it with a probe run as uid.
    Raises SandboxError naming what it can still read."""
    for p in paths:
        if not p or not os.path.exists(p):
            continue
        st = os.stat(p)
        if st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.chmod(p, st.st_mode & ~0o077)
    readable = probe_unreadable(uid, paths)
    if readable:
        raise SandboxError(f"the submission's uid {uid} could read {', '.join(readable)}: make it owner-only "
                           "(chmod 700 for a folder, 600 for a file) or grade where bwrap works")
