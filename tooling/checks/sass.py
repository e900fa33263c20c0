"""The SASS model the technique check (grader/technique.py) and the chapters' counts
(tooling/results/sass_counts.py) share: `cuobjdump -sass` text split into functions per
architecture, each function's instructions and natural loops, and the opcode patterns both ask
about. It knows nothing of rungs or rules; those stay in the grader."""
import os
import re
import subprocess
from dataclasses import dataclass, field

# ---- the SASS model ---------------------------------------------------------------------------

FUNCTION = re.compile(r"Function : (\S+)")
ARCH = re.compile(r"^\s*(?:arch = |code for )(sm_\w+)")  # an object's header; a cubin's
INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
REGISTER = re.compile(r"(?<![A-Za-z0-9_])R(\d+)")
PREDICATE = re.compile(r"!?U?P([0-6]|T)$")


@dataclass
class Ins:
    addr: int
    pred: str   # "@P0", "@!PT" or ""
    op: str     # the opcode with its modifiers: LDG.E.128.CONSTANT
    args: list  # the operands, as written

    @property
    def base(self):
        return self.op.split(".")[0]

    def text(self):
        return f"{self.pred + ' ' if self.pred else ''}{self.op} {', '.join(self.args)}".strip()


@dataclass
class Loop:
    header: int
    body: list            # its instructions in address order, nested loops' included
    innermost: bool = True

    def has(self, pattern):
        return any(pattern.match(i.op) for i in self.body)

    def count(self, pattern):
        return sum(1 for i in self.body if pattern.match(i.op))

    def where(self):
        return f"loop {self.header:#06x}-{max(i.addr for i in self.body):#06x}"


ENDS_BLOCK = {"BRA", "CALL", "EXIT", "RET", "KILL", "BRX", "JMP", "JMX"}


def successors(ins, next_addr):
    """Where control goes after `ins`: its branch target and/or the next instruction. A branch
    or an exit under a predicate may fall through; BRA.DIV branches only when the warp diverged;
    CALL returns (and its target is reached); an indirect jump's targets are unknown."""
    target = re.search(r"0x([0-9a-f]+)\s*$", ins.args[-1]) if ins.args and ins.base in ("BRA", "CALL") else None
    out = [int(target.group(1), 16)] if target else []
    conditional = ins.pred not in ("", "@PT") or ".DIV" in ins.op or ins.base == "CALL"
    if ins.base not in ENDS_BLOCK or conditional:
        out.append(next_addr)
    return [a for a in out if a is not None]


def natural_loops(code):
    """The natural loops of a function: a back edge u -> h (h dominates u) and every block that
    reaches u without passing h, merged per header. Code the compiler lays out after the exit
    and jumps back from (a shuffle's divergent fallback) is part of a loop only when it is
    reached from inside one: a plain backward branch would make it a loop of its own."""
    if not code:
        return []
    index = {i.addr: k for k, i in enumerate(code)}
    leaders = {code[0].addr}
    for k, i in enumerate(code):
        if i.base in ENDS_BLOCK:
            leaders.update(a for a in successors(i, None) if a in index)
            if k + 1 < len(code):
                leaders.add(code[k + 1].addr)
    starts = sorted(a for a in leaders if a in index)
    blocks, succ = {}, {}
    for n, start in enumerate(starts):
        end = index[starts[n + 1]] if n + 1 < len(starts) else len(code)
        blocks[start] = code[index[start]:end]
        last = blocks[start][-1]
        nxt = code[end].addr if end < len(code) else None
        succ[start] = [a for a in successors(last, nxt) if a in blocks or a in leaders]
    pred = {b: [] for b in blocks}
    for b, ss in succ.items():
        for s in ss:
            pred.setdefault(s, []).append(b)
    # dominators of the blocks reachable from the entry (iterative data flow)
    entry, reach, todo = starts[0], {starts[0]}, [starts[0]]
    while todo:
        for s in succ[todo.pop()]:
            if s not in reach:
                reach.add(s)
                todo.append(s)
    dom = {b: set(reach) for b in reach}
    dom[entry] = {entry}
    changed = True
    while changed:
        changed = False
        for b in starts:
            if b == entry or b not in reach:
                continue
            ps = [dom[p] for p in pred[b] if p in reach]
            new = set.intersection(*ps) | {b} if ps else {b}
            if new != dom[b]:
                dom[b], changed = new, True
    members = {}
    for u in reach:
        for h in succ[u]:
            if h in dom[u]:  # a back edge
                body, todo = members.setdefault(h, {h}), [u]
                while todo:
                    b = todo.pop()
                    if b not in body:
                        body.add(b)
                        todo.extend(p for p in pred[b] if p in reach)
    loops = [Loop(h, sorted((i for b in bs for i in blocks[b]), key=lambda i: i.addr))
             for h, bs in sorted(members.items())]
    for a in loops:
        a.innermost = not any(b is not a and members[b.header] < members[a.header] for b in loops)
    return loops


@dataclass
class Function:
    name: str  # mangled
    arch: str
    code: list = field(default_factory=list)
    _loops: list = None
    _looped: set = None

    @property
    def short(self):
        return base_name(self.name)

    @property
    def loops(self):
        if self._loops is None:
            self._loops = natural_loops(self.code)
            self._looped = {i.addr for l in self._loops for i in l.body}
        return self._loops

    def in_loop(self, ins):
        self.loops
        return ins.addr in self._looped


def base_name(mangled):
    """The function's identifier (the last name of an Itanium nested name), followed by the rest
    of the mangled name when it is a template (its arguments, e.g. ILb1EE...); the name as given
    when it does not parse. The anonymous namespace's component, which holds the file name
    (pool_before_conv_cu), is never part of it."""
    m = mangled
    if not m.startswith("_Z"):
        return m
    i, last = 2, None
    nested = m[i:i + 1] == "N"
    if nested:
        i += 1
        while i < len(m) and m[i] in "rVKRO":
            i += 1
    while i < len(m) and m[i].isdigit():
        j = i
        while j < len(m) and m[j].isdigit():
            j += 1
        n = int(m[i:j])
        last, i = m[j:j + n], j + n
        if not nested:
            break
    if last is None:
        return m
    return last + (m[i:] if m[i:i + 1] == "I" else "")


def parse(text):
    """cuobjdump -sass output -> [Function], in order (one per function and architecture)."""
    out, arch, current = [], "", None
    for line in text.splitlines():
        m = ARCH.match(line)
        if m:
            arch = m.group(1)
            continue
        m = FUNCTION.search(line)
        if m:
            current = Function(m.group(1), arch)
            out.append(current)
            continue
        m = INSTRUCTION.match(line)
        if m and current is not None:
            words = m.group(2).split(None, 1)
            pred = words[0] if words[0].startswith("@") else ""
            if pred:
                words = words[1].split(None, 1) if len(words) > 1 else [""]
            args = [a.strip() for a in words[1].split(",")] if len(words) > 1 else []
            current.code.append(Ins(int(m.group(1), 16), pred, words[0], args))
    return out


def arch_number(arch):
    m = re.match(r"sm_(\d+)", arch)
    return int(m.group(1)) if m else 0


def is_strict(arch, strict_arch):
    """Whether `arch` is the strict architecture: strict_arch itself, or its architecture-specific
    form (sm_90a for sm_90: the same GPU and register budgets, with Hopper-only instructions; a
    stage whose rung.json says "build": {"sm_90a": true} has only sm_90a code)."""
    return bool(strict_arch) and arch in (strict_arch, strict_arch + "a")


# ---- opcode patterns ----------------------------------------------------------------------------

BAR = re.compile(r"BAR\.SYNC")
LDS = re.compile(r"LDS(\.|$)")
STS = re.compile(r"STS(\.|$)")
LDG = re.compile(r"LDG(\.|$)")
LDG128 = re.compile(r"LDG\.(\w+\.)*128(\.|$)")
LDS128 = re.compile(r"LDS\.(\w+\.)*128(\.|$)")
FFMA = re.compile(r"FFMA(\.|$)")
HMMA = re.compile(r"HMMA\.")
GLOBAL_ADD_ATOMIC = re.compile(r"(RED|REDG|ATOM|ATOMG)\.[A-Z0-9_.]*ADD")
TREE_SHUFFLE = re.compile(r"SHFL\.(BFLY|DOWN|UP)")


def ffma_loops(fn):
    """The innermost loops of `fn` that hold an FFMA."""
    return [l for l in fn.loops if l.innermost and l.has(FFMA)]


def find_cuobjdump():
    """cuobjdump's path, or "" if there is none. The lookup is scripts/check_sass.sh's own
    find_cuobjdump ($CUOBJDUMP, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, Python's
    site-packages), run from that script so that every check finds the same program."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(root, "scripts", "check_sass.sh")
    code = 'eval "$(sed -n "/^find_cuobjdump() {/,/^}/p" "$1")" && find_cuobjdump | head -n 1'
    p = subprocess.run(["bash", "-c", code, "find_cuobjdump", script], capture_output=True, text=True)
    path = p.stdout.strip()
    return path if path and os.access(path, os.X_OK) else ""


def disassemble(cuobjdump, objects):
    """The functions of the objects' device code (objects without device code add none)."""
    env = dict(os.environ, PATH=os.path.dirname(cuobjdump) + os.pathsep + os.environ.get("PATH", ""))
    out = []
    for obj in objects:
        p = subprocess.run([cuobjdump, "-sass", obj], capture_output=True, text=True, env=env)
        out += parse(p.stdout)
    return out
