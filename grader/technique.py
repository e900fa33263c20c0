"""The technique check: does a rung's machine code show the rung's idea?

It disassembles the rung's objects (`cuobjdump -sass`), splits the code per function and
architecture, and finds the loops: the natural loops of each function's control-flow graph (a
branch back to a block that dominates it, usually a BRA to a lower address). A check then asks
something of a named kernel's loops and counts, not merely whether an opcode occurs: a tree is
a barrier inside the loop that halves (or a chain of barrier-separated levels), not any
BAR/LDS/STS; 3xTF32 is three mma per pair of loaded fragments, not rung 10's one (on wgmma,
three HGMMA per accumulator and tap, not rung 15's one).

STAGE_RULES holds the stages' checks, read from each stage's rung.json ("sass";
grader/rung_meta.py) and keyed by the stage's name (its folder's name without the number, so
renumbering keeps them), TRACK_RULES the track rungs', keyed by id (p38-03). The
check_* functions (CHECKS) say what each kind proves and which wrong technique fails it.

A check names a kernel by a substring of its base name (the identifier; for a template, the
identifier followed by its mangled arguments, e.g. conv_exp_partialsILb1E). Every function of
one architecture that matches must pass (all template instantiations), and there must be one.
A build for several architectures passes a check when one architecture does: sm_75 code has no
TF32 mma and no cp.async. A rule marked "needs_sm90a" is judged on the sm_90a code only (the other
architectures hold the fallback, which would pass a rule of what must be absent). Every GPU stage also may use no local memory (LDL/STL) on
LADDER_SASS_STRICT_ARCH (default sm_90), where the register budgets are tuned, or on its
architecture-specific form (sm_90a: the code of a stage built for sm_90a in place of sm_90, the
wgmma rung's; its rules say "needs_sm90a").

What it cannot see: which kernel run() launches (a kernel compiled but never launched still
passes); whether the loops compute the right thing (the correctness parts decide that); a
wrong technique dressed in the right instructions (a serial sum written to shared memory at
every step and fully unrolled counts as tree levels; three mma per pair, or three HGMMA per
accumulator and tap, with a meaningless "small" operand pass 3xTF32). The rules are tested on
nvcc 13.0's code for sm_75 to sm_90, and sm_90a for the wgmma rungs (grader/tests/test_technique.py).

Command line (scripts/check_sass.sh calls it; LADDER_SASS_STAGES="03 p38-03" picks rungs):
  python3 -m grader.technique [--cuobjdump PATH] BUILD    every stage of BUILD/stages.tsv and,
                                                          unless rungs are picked, every built
                                                          track rung that has rules
  python3 -m grader.technique --check BUILD               every GPU stage has a "sass" entry in its rung.json
  python3 -m grader.technique --sass FILE RUNG            a saved disassembly, RUNG a stage name
                                                          or a track rung id (the tests)
Prints one PASS/FAIL line per check; exits 1 when one fails. grader/programs.py calls
check_track(object, rung) for a track rung.
"""
import collections
import glob
import os
import re
import sys

from tooling.checks.sass import (  # the SASS model, shared with tooling/results/sass_counts.py
    REGISTER, PREDICATE, successors, parse, arch_number, is_strict, BAR, LDS, STS, LDG, LDG128,
    LDS128, FFMA, HMMA, GLOBAL_ADD_ATOMIC, TREE_SHUFFLE, ffma_loops, find_cuobjdump, disassemble)

from . import rung_meta

# ---- a dataflow of one loop body: which loads each mma operand comes from ----------------------

LOADS = {"LDS", "LDG", "LD", "LDL", "LDSM", "LDC", "S2R", "CS2R", "S2UR"}
FLOAT_ARITH = {"FADD", "FFMA", "FMUL", "FADD32I", "FFMA32I", "FMUL32I"}


def destination(ins):
    """(first register written, how many) or None. The destination is the first operand when
    it is a register (a store's first operand is an address); after a predicate output (ATOM PT,
    R3, ...; SHFL.DOWN PT, R5, ...) it is the second."""
    args = ins.args
    if args and PREDICATE.match(args[0]) and len(args) > 1:
        args = args[1:]
    if not args:
        return None
    m = re.fullmatch(r"R(\d+)(\.\w+)*", args[0])
    if not m:
        return None
    width = 4 if ins.base == "HMMA" or ".128" in ins.op else 2 if (".64" in ins.op or ".WIDE" in ins.op) else 1
    return int(m.group(1)), width


def mma_products(body):
    """For each mma (HMMA) of a loop body: (the loads its A operand derives from, those of its B
    operand, whether an operand went through float arithmetic after its load). Registers carry
    the set of load instructions (by address) they were computed from; a register the body reads
    before writing stands for itself. Two sweeps: the second starts from the state the first
    leaves, so values the loop carries from one trip to the next (software pipelining) are
    traced too."""
    source, floated, out = {}, {}, []

    def regs(arg, n):
        m = REGISTER.search(arg)
        return [int(m.group(1)) + k for k in range(n)] if m else []

    def loads(rs):
        return frozenset().union(*(source.get(r, {("in", r)}) for r in rs))

    for sweep in (0, 1):
        for ins in body:
            if ins.base == "HMMA" and sweep and len(ins.args) >= 3:
                a, b = regs(ins.args[1], 4), regs(ins.args[2], 2)
                out.append((loads(a), loads(b), any(floated.get(r, False) for r in a + b)))
            dest = destination(ins)
            if dest is None:
                continue
            reg, width = dest
            srcs = [int(x) for a in ins.args[1:] for x in REGISTER.findall(a)]
            if ins.base in LOADS:
                prov, fl = {ins.addr}, False
            else:
                prov = set(loads(srcs))
                fl = ins.base in FLOAT_ARITH or any(floated.get(r, False) for r in srcs)
            for r in range(reg, reg + width):
                if ins.pred:  # a predicated write may not happen: keep what was there too
                    source[r] = set(source.get(r, {("in", r)})) | prov
                    floated[r] = floated.get(r, False) or fl
                else:
                    source[r], floated[r] = set(prov), fl
    return out


# ---- the checks -------------------------------------------------------------------------------
# Each takes one function and the check's parameters and returns (passed, detail).

def check_present(fn, sass):
    """An instruction matching `sass` (an opcode regex) in the kernel."""
    pattern = re.compile(sass)
    hit = next((i for i in fn.code if pattern.match(i.op)), None)
    return (True, hit.text()) if hit else (False, "none in its machine code")


def check_absent(fn, sass):
    """No instruction matching `sass` in the kernel (e.g. no floating-point atomics: a
    deterministic sum)."""
    pattern = re.compile(sass)
    hit = next((i for i in fn.code if pattern.match(i.op)), None)
    return (False, f"forbidden, found {hit.text()} at {hit.addr:#06x}") if hit else (True, "none")


def check_atomic_per_element(fn):
    """A global atomic add executed once per element: inside a loop (a grid-stride loop), or in
    a kernel with no loop at all (one thread per element). Fails on one thread summing serially
    and then making one atomic: the atomic sits after the loop, outside it."""
    atomics = [i for i in fn.code if GLOBAL_ADD_ATOMIC.match(i.op)]
    if not atomics:
        return False, "no global atomic add (RED/ATOM ... ADD)"
    if not fn.loops:
        return True, f"{atomics[0].text()}, in a kernel without loops: one per thread"
    inside = [i for i in atomics if fn.in_loop(i)]
    if inside:
        return True, f"{inside[0].text()} inside a loop"
    return False, (f"found {len(atomics)} global atomic add(s), the first {atomics[0].text()} at "
                   f"{atomics[0].addr:#06x}, none inside the kernel's {len(fn.loops)} loop(s); expected one inside "
                   f"a loop (one per element of a grid-stride loop) or in a kernel without loops (one per thread)")


def convergent_path(fn):
    """The addresses of fn's instructions reachable from its entry without taking a BRA.DIV
    branch: the code a converged warp runs. The compiler's divergent fallback (a second copy of a
    warp reduction's shuffles, laid out after the exit) is left out, so that a reduction's
    shuffles are counted once."""
    if not fn.code:
        return set()
    index = {i.addr: k for k, i in enumerate(fn.code)}
    seen, todo = set(), [fn.code[0].addr]
    while todo:
        a = todo.pop()
        if a in seen or a not in index:
            continue
        seen.add(a)
        k = index[a]
        ins, nxt = fn.code[k], fn.code[k + 1].addr if k + 1 < len(fn.code) else None
        todo += [nxt] if ".DIV" in ins.op else [s for s in successors(ins, nxt) if s is not None]
    return seen


def warp_shuffle_levels(fn):
    """The butterfly or down/up shuffles (SHFL.BFLY/DOWN/UP) on fn's convergent path: the levels
    of a warp-level reduction (five for 32 lanes; cooperative_groups::reduce and __shfl_xor_sync
    compile to them), each counted once."""
    path = convergent_path(fn)
    return sum(1 for i in fn.code if i.addr in path and TREE_SHUFFLE.match(i.op))


def check_block_tree(fn, min_levels=4):
    """A tree in shared memory: an innermost loop whose body has a barrier, shared loads and
    shared stores (a level per trip, a barrier between levels); or, unrolled, levels that go
    through shared memory (a shared store after shared loads), two or more of them in stretches
    between block barriers (a tree over several warps), and at least min_levels levels in all,
    the last warp's counted either way: through shared memory without block barriers (Harris's
    kernel 5), or by a warp-level reduction (butterfly or down shuffles on the convergent path:
    cooperative_groups::reduce, __shfl_down_sync). Fails on a serial sum by one thread (its loop
    has no barrier, and it stores once) and on no tree at all; the message says what was found."""
    for loop in fn.loops:
        if loop.innermost and loop.has(BAR) and loop.has(LDS) and loop.has(STS):
            return True, f"{loop.where()} holds BAR.SYNC, LDS and STS: one level a trip"
    rounds = levels = 0
    loaded = level = False
    for i in fn.code:
        if BAR.match(i.op):
            levels += level
            loaded = level = False
        elif LDS.match(i.op):
            loaded = True
        elif STS.match(i.op):
            rounds += loaded
            level = level or loaded
            loaded = False
    levels += level
    shuffles = warp_shuffle_levels(fn)
    if levels >= 2 and rounds + shuffles >= min_levels:
        if not shuffles:
            return True, (f"{rounds} levels (shared loads, then a store), unrolled, in {levels} stretches between "
                          f"barriers")
        return True, (f"{rounds} levels through shared memory (shared loads, then a store), unrolled, in {levels} "
                      f"stretches between barriers, and {shuffles} warp-shuffle levels (SHFL.BFLY/DOWN/UP): a "
                      f"warp-level reduction finishes the tree")
    shared_loops = [f"{l.where()} with {l.count(LDS)} LDS, {l.count(STS)} STS, {l.count(BAR)} BAR.SYNC"
                    for l in fn.loops if l.innermost and l.has(LDS)]
    return False, ("no loop holds BAR.SYNC, LDS and STS together" +
                   (f" (shared memory is read in {'; '.join(shared_loops[:3])})" if shared_loops else "") +
                   f"; unrolled, {rounds} level(s) through shared memory (shared loads, then a store) in "
                   f"{levels} stretch(es) between barriers, and {shuffles} warp-shuffle level(s) "
                   f"(SHFL.BFLY/DOWN/UP); expected a loop with a barrier, or levels in >= 2 stretches between "
                   f"barriers and >= {min_levels} levels in all")


def check_shuffles(fn, min_count=5):
    """A warp reduction by shuffles: at least min_count butterfly or down/up shuffles (five
    steps for 32 lanes), or one inside a loop. Fails on a shared-memory tree (no shuffles) and
    on a lane gathering the others' values one by one (SHFL.IDX)."""
    hits = [i for i in fn.code if TREE_SHUFFLE.match(i.op)]
    if len(hits) >= min_count:
        return True, f"{len(hits)} shuffles ({hits[0].op})"
    looped = [i for i in hits if fn.in_loop(i)]
    if looped:
        return True, f"{looped[0].op} inside a loop"
    idx = sum(1 for i in fn.code if i.op.startswith("SHFL.IDX"))
    return False, (f"{len(hits)} SHFL.BFLY/DOWN/UP (< {min_count}), none in a loop"
                   + (f"; {idx} SHFL.IDX (a lane gathering values one by one is not a tree)" if idx else ""))


def check_wide_loads_loop(fn):
    """The main loop reads global memory 16 bytes at a time: some innermost loop loads with
    LDG...128 and with no narrower global load. Fails on scalar loads in the loop (a scalar head
    or tail outside the loop is allowed)."""
    mixed = None
    for loop in fn.loops:
        if not loop.innermost:
            continue
        wide, all_ = loop.count(LDG128), loop.count(LDG)
        if wide and wide == all_:
            return True, f"{loop.where()}: {wide} LDG.128, no narrower global load"
        if all_:
            mixed = f"{loop.where()}: {wide} of its {all_} global loads are 128-bit"
    return False, mixed or "no loop loads global memory"


def check_loop_has(fn, sass):
    """Some loop whose body (nested loops included) holds an instruction matching each regex of
    `sass` (a list)."""
    patterns = [re.compile(s) for s in sass]
    for loop in fn.loops:
        if all(loop.has(p) for p in patterns):
            return True, loop.where()
    return False, f"no loop holds all of {', '.join(sass)}"


def check_not_in_loop(fn, sass):
    """No instruction matching `sass` inside a loop (e.g. no global store per element: the fused
    kernel writes one partial per block, after its loops)."""
    pattern = re.compile(sass)
    hit = next((i for i in fn.code if pattern.match(i.op) and fn.in_loop(i)), None)
    return (False, f"{hit.text()} at {hit.addr:#06x}, inside a loop") if hit else (True, "none inside a loop")


def check_smem_operands(fn):
    """The FMAs read their operands from shared memory: every innermost loop with FFMA loads
    from shared memory (LDS) and not from global memory (LDG). Fails on a compute loop that
    reads x or the weights from global memory."""
    loops = ffma_loops(fn)
    if not loops:
        return False, "no innermost loop with FFMA"
    for loop in loops:
        if loop.has(LDG) or not loop.has(LDS):
            return False, f"{loop.where()}: {loop.count(FFMA)} FFMA, {loop.count(LDS)} LDS, {loop.count(LDG)} LDG"
    return True, f"{len(loops)} innermost FFMA loop(s), operands by LDS only"


def check_register_tile(fn, min_ratio=4):
    """Register tiling: in every innermost loop with FFMA, each shared-memory load feeds at least
    min_ratio FMAs (FFMA >= min_ratio x LDS; one output per thread gives 1/2), and the loads are
    16 bytes wide (LDS.128). Fails on stage 07's one output per thread."""
    loops = ffma_loops(fn)
    if not loops:
        return False, "no innermost loop with FFMA"
    for loop in loops:
        f, s = loop.count(FFMA), loop.count(LDS)
        if f < min_ratio * max(s, 1) or not loop.has(LDS128):
            return False, (f"{loop.where()}: {f} FFMA for {s} LDS ({loop.count(LDS128)} of them 128-bit); "
                           f"register tiling needs >= {min_ratio} FFMA per LDS and LDS.128")
    best = max(loops, key=lambda l: l.count(FFMA))
    return True, f"{best.where()}: {best.count(FFMA)} FFMA for {best.count(LDS)} LDS"


DEPBAR_PENDING = re.compile(r"SB0\s*,?\s*(0x[0-9a-fA-F]+|\d+)")


def depbar_pending(ins):
    """The groups a DEPBAR.LE SB0, n lets stay in flight (n: cp.async.wait_group n), or None."""
    m = DEPBAR_PENDING.search(", ".join(ins.args))
    return int(m.group(1), 0) if m else None


def check_async_pipeline(fn, min_pending=1):
    """cp.async with double buffering: one loop (the step loop) issues copies (LDGSTS), closes
    them as a group (LDGDEPBAR), waits while at least min_pending newer groups are still in
    flight (DEPBAR.LE SB0, n with n >= min_pending: cp.async.wait_group n) and has a barrier.
    Fails on plain loads and on cp.async waited for at once (wait_group 0: no overlap); with
    min_pending 2 (a multistage pipeline, three or more buffers), also on rung 09's and 10's
    double buffer, whose wait leaves one group in flight."""
    best = None
    for loop in fn.loops:
        if not (loop.has(re.compile(r"LDGSTS")) and loop.has(re.compile(r"LDGDEPBAR")) and loop.has(BAR)):
            continue
        waits = [i for i in loop.body if i.op.startswith("DEPBAR")]
        pending = [i for i in waits if (depbar_pending(i) or 0) >= min_pending]
        if pending:
            deepest = max(pending, key=depbar_pending)
            return True, f"{loop.where()}: LDGSTS, LDGDEPBAR, {deepest.text()}, BAR.SYNC"
        most = max((depbar_pending(i) or 0 for i in waits), default=0)
        best = (f"{loop.where()} copies with LDGSTS but waits for all of them "
                f"({', '.join(i.text() for i in waits) or 'no DEPBAR'}): no copy overlaps the compute"
                if most == 0 else
                f"{loop.where()} copies with LDGSTS but its waits leave at most {most} group(s) in flight "
                f"({', '.join(sorted({i.text() for i in waits}))}): fewer than the {min_pending} of this rung's "
                f"pipeline")
    return False, best or "no loop issues cp.async copies (LDGSTS), commits them (LDGDEPBAR) and has a barrier"


def check_mma_loop(fn, sass=r"HMMA\.1688\.F32\.TF32"):
    """Tensor cores in the main loop: an innermost loop holds TF32 mma."""
    pattern = re.compile(sass)
    loops = [l for l in fn.loops if l.innermost and l.has(pattern)]
    if loops:
        return True, f"{loops[0].where()}: {loops[0].count(pattern)} {sass.replace(chr(92), '')}"
    return False, "no innermost loop holds " + sass.replace("\\", "") + ("" if fn.loops else " (no loops)")


def mma_loops(fn, pattern):
    """The smallest loops holding `pattern`: those none of whose nested loops (a loop whose
    header lies in its body) holds it. An innermost loop with the mma is one; so is a loop that
    holds the mma itself next to nested loops without it (a chunk loop around its staging loops)."""
    found = [l for l in fn.loops if l.has(pattern)]
    spans = {id(l): {i.addr for i in l.body} for l in found}

    def nested(inner, outer):
        return inner is not outer and inner.header in spans[id(outer)] and len(inner.body) < len(outer.body)

    return [l for l in found if not any(nested(m, l) for m in found)]


def check_three_products(fn):
    """3xTF32: every pair of loaded fragments (the loads an mma's A and B operands come from)
    feeds at least three mma (small*big, big*small, big*big), and at least two in three mma have
    an operand computed with float arithmetic after its load (small = tf32(v - big)). Traced by
    a dataflow of the smallest loops with HMMA (mma_loops: an innermost loop, or one whose nested
    loops hold no HMMA, as rung p74-12's chunk loop with its staging loops). Fails on rung 10's
    kernel: one mma per fragment pair, operands straight from shared memory."""
    loops = mma_loops(fn, HMMA)
    if not loops:
        return False, "no loop with HMMA"
    for loop in loops:
        products = mma_products(loop.body)
        per_pair = collections.Counter((a, b) for a, b, _ in products)
        split = sum(1 for *_, f in products if f)
        fewest = min(per_pair.values())
        if fewest < 3 or 3 * split < 2 * len(products):
            return False, (f"{loop.where()}: {len(products)} mma on {len(per_pair)} fragment pairs, at least "
                           f"{fewest} per pair; {split} with a split (float-computed) operand: 3xTF32 needs three "
                           f"products per pair, two of them with a small part")
    products = mma_products(loops[0].body)
    pairs = len({(a, b) for a, b, _ in products})
    return True, f"{loops[0].where()}: {len(products)} mma on {pairs} fragment pairs, 2 in 3 with a split operand"


TF32_MASK = "0xffffe000"  # the low 13 mantissa bits cleared: a TF32 value in an FP32 register
TF32_HALF = "0x1000"      # half a TF32 unit in the last place, as an integer on the float's bits
INT_ADD = re.compile(r"(IADD3|IADD|IADD32I|VIADD)(\.|$)|IMAD\.IADD")
SET_CONSTANT = re.compile(r"(MOV|MOV32I)(\.|$)|IMAD\.MOV")


def check_tf32_rounded(fn):
    """TF32 operands rounded to nearest, as cvt.rna.tf32.f32 does: nvcc compiles it (tf32_bits) to
    an integer add of 0x1000 to the float's bits (IADD3, or IMAD.IADD with 0x1000 in a register;
    predicated, so that NaN and infinity are left alone, or unpredicated and then a SEL between the
    sum and the value) and then the mask 0xffffe000 (LOP3.LUT).
    Every mask in the kernel must take a value that went through such an add, and there must be
    one. Traced in address order: a register holds 0x1000 after a MOV of it, a register is
    rounded after an add of 0x1000 (or of a register holding it), until an unpredicated write
    replaces it. Fails on truncation (the mask without the add: tf32(x) = bits & 0xffffe000) and
    on operands never rounded (no mask: the tensor core drops the low bits itself)."""
    half, added, masks, bare = set(), set(), 0, None
    for ins in fn.code:
        if ins.base == "LOP3" and TF32_MASK in ins.args[1:]:
            masks += 1
            src = next((int(m.group(1)) for a in ins.args[1:] if (m := REGISTER.match(a))), None)
            if src not in added and bare is None:
                bare = ins
        dest = destination(ins)
        if dest is None:
            continue
        reg = dest[0]
        srcs = ins.args[1:]
        if SET_CONSTANT.match(ins.op) and srcs and srcs[-1] == TF32_HALF and not ins.pred:
            half.add(reg)
            added.discard(reg)
        elif INT_ADD.match(ins.op) and any(a == TF32_HALF or ((m := REGISTER.match(a)) and int(m.group(1)) in half)
                                           for a in srcs):
            added.add(reg)
            half.discard(reg)
        elif ins.base == "SEL" and any((m := REGISTER.match(a)) and int(m.group(1)) in added for a in srcs[:2]):
            added.add(reg)  # the add's result or the value itself (NaN, infinity): nvcc's other form of cvt.rna
            half.discard(reg)
        elif not ins.pred:
            half.discard(reg)
            added.discard(reg)
    if not masks:
        return False, (f"no TF32 mask (LOP3.LUT with {TF32_MASK}): the operands are never rounded to TF32 "
                       f"(cvt.rna.tf32.f32, tf32_bits)")
    if bare is not None:
        return False, (f"{bare.text()} at {bare.addr:#06x} masks a value that no integer add of {TF32_HALF} "
                       f"rounded: truncation, not cvt.rna's rounding to nearest")
    return True, f"{masks} TF32 mask(s) ({TF32_MASK}), each after an add of {TF32_HALF}: cvt.rna"


TEMPLATE_INT = re.compile(r"I(?:Li|Lj)(\d+)E")


def check_wgmma_products(fn, min_per_tap=3, sass=r"HGMMA\."):
    """3xTF32 on wgmma: in every innermost loop with HGMMA, each accumulator (an HGMMA's
    destination register, the first of its 64) gets at least min_per_tap HGMMA per tap of a kernel
    row (small*big, big*small, big*big). The taps of a row, KW, are the kernel's first integer
    template argument (conv_pool_wgmmaILi3E...: 3; 1 for a kernel without one), which the stage's
    loop over a kernel row's taps is unrolled by (#pragma unroll over the compile-time KW); a loop
    the compiler unrolled further (two kernel rows a trip: nvcc 13.0 does for KW = 1) only raises
    the count, so an honest kernel never fails, and a kernel with fewer products can pass only in
    such an instantiation, which is why every instantiation must pass. Fails on stage
    15's kernel (one HGMMA per accumulator and tap) and on 3xTF32 with a correction left out (two)."""
    pattern = re.compile(sass)
    m = TEMPLATE_INT.search(fn.short)
    taps = int(m.group(1)) if m else 1
    loops = [l for l in fn.loops if l.innermost and l.has(pattern)]
    if not loops:
        return False, f"no innermost loop with {sass.replace(chr(92), '').rstrip('.')}"
    for loop in loops:
        per_acc = collections.Counter(i.args[0] for i in loop.body if pattern.match(i.op) and i.args)
        acc, fewest = min(per_acc.items(), key=lambda kv: kv[1])
        if fewest < min_per_tap * taps:
            return False, (f"{loop.where()}: accumulator {acc} gets {fewest} HGMMA for the kernel's {taps} tap(s) "
                           f"a row ({len(per_acc)} accumulators, {loop.count(pattern)} HGMMA): fewer than "
                           f"{min_per_tap} a tap, 3xTF32 needs small*big, big*small and big*big")
    loop = loops[0]
    per_acc = collections.Counter(i.args[0] for i in loop.body if pattern.match(i.op) and i.args)
    return True, (f"{loop.where()}: {loop.count(pattern)} HGMMA on {len(per_acc)} accumulators, at least "
                  f"{min(per_acc.values())} each for {taps} tap(s) a row")


WGMMA_PENDING = re.compile(r"gsb0\s*,\s*(0x[0-9a-fA-F]+|\d+)")


def wgmma_pending(ins):
    """The wgmma groups a WARPGROUP.DEPBAR.LE gsb0, n lets stay in flight (n: wgmma.wait_group n),
    or None for any other instruction (depbar_pending's counterpart)."""
    m = WGMMA_PENDING.search(", ".join(ins.args)) if ins.op.startswith("WARPGROUP.DEPBAR") else None
    return int(m.group(1), 0) if m else None


def check_wgmma_in_flight(fn, min_pending=1, sass=r"HGMMA\."):
    """wgmma that overlap: in every innermost loop with HGMMA, each wait (WARPGROUP.DEPBAR.LE gsb0,
    n: wgmma.wait_group n) leaves at least min_pending groups in flight. Fails on a wait<0> after
    every wgmma and on the wait ptxas puts in itself when it serializes the wgmma (its C7513
    note: a non-wgmma instruction would write an A fragment's registers while a wgmma still reads
    them; nvcc 13.0 does so when the next A values are loaded across the wait into a buffer the
    fragment is converted from). Both are correct, and both leave the tensor pipe idle while the
    next fragment loads."""
    pattern = re.compile(sass)
    loops = [l for l in fn.loops if l.innermost and l.has(pattern)]
    if not loops:
        return False, f"no innermost loop with {sass.replace(chr(92), '').rstrip('.')}"
    for loop in loops:
        for i in loop.body:
            n = wgmma_pending(i)
            if n is not None and n < min_pending:
                return False, (f"{loop.where()}: {i.text()} at {i.addr:#06x} waits for every wgmma but "
                               f"{n}: fewer than {min_pending} in flight, so the next A "
                               f"fragment loads while the tensor pipe idles (a wait<0>, or ptxas serializing "
                               f"the wgmma: its C7513 note)")
    waits = sorted({i.text() for l in loops for i in l.body if wgmma_pending(i) is not None})
    return True, f"{loops[0].where()}: {', '.join(waits) or 'no wait inside'}"


CHECKS = {"present": check_present, "absent": check_absent, "atomic_per_element": check_atomic_per_element,
          "block_tree": check_block_tree, "shuffles": check_shuffles, "wide_loads_loop": check_wide_loads_loop,
          "loop_has": check_loop_has, "not_in_loop": check_not_in_loop, "smem_operands": check_smem_operands,
          "register_tile": check_register_tile, "async_pipeline": check_async_pipeline,
          "mma_loop": check_mma_loop, "three_products": check_three_products, "tf32_rounded": check_tf32_rounded,
          "wgmma_products": check_wgmma_products, "wgmma_in_flight": check_wgmma_in_flight}

# What each kind is called in a report line when the rule gives no "what".
WHAT = {"atomic_per_element": "a global atomic add per element", "block_tree": "a shared-memory tree",
        "shuffles": "warp shuffles (a butterfly or down tree)", "wide_loads_loop": "128-bit global loads in a loop",
        "smem_operands": "FMAs fed from shared memory", "register_tile": "register tiling (FMAs per shared load)",
        "async_pipeline": "a cp.async double-buffered pipeline", "mma_loop": "TF32 mma in an inner loop",
        "three_products": "3xTF32: three mma per fragment pair",
        "tf32_rounded": "operands rounded to TF32 to nearest (cvt.rna: an add of 0x1000, then the mask)",
        "wgmma_products": "3xTF32 on wgmma: three HGMMA per accumulator and tap",
        "wgmma_in_flight": "wgmma kept in flight in the tap loop (no wait for all of them)"}

# ---- the rules --------------------------------------------------------------------------------

FLOAT_ATOMIC = r"(RED|ATOM)G?\.[A-Z0-9_.]*\.B?F(16|32|64)"
INT_ADD_ATOMIC = r"(RED|ATOM)G?\.(?![A-Z0-9_.]*F(16|32|64))[A-Z0-9_.]*ADD"


def rule(check, kernel, **params):
    return dict(check=check, kernel=kernel, **params)


# The patterns a stage's rung.json may name as "$NAME".
PATTERNS = {"FLOAT_ATOMIC": FLOAT_ATOMIC, "INT_ADD_ATOMIC": INT_ADD_ATOMIC}


def _resolve(value):
    if isinstance(value, list):
        return [_resolve(v) for v in value]
    if isinstance(value, str) and value.startswith("$"):
        if value[1:] not in PATTERNS:
            raise rung_meta.RungMetaError(f"unknown pattern {value} (known: ${', $'.join(PATTERNS)})")
        return PATTERNS[value[1:]]
    return value


def rules_of(sass):
    """A rung.json's "sass" list as rule dicts, its "$NAME" patterns resolved."""
    return [{k: _resolve(v) for k, v in r.items()} for r in sass]


def stage_rules(root):
    """The stages' checks, by name, from each stage's rung.json ("sass"; grader/rung_meta.py).
    "needs_sm80": the idea exists only in sm_80+ code; "needs_sm90a": only in sm_90a code (wgmma, the
    bulk copy: the stage's rung.json also says "build": {"sm_90a": true})."""
    return {name: rules_of(sass) for name, sass in rung_meta.by_name(root, "sass").items()}


# Stages, by name: the grader's own tree's (ROOT) rung.json files.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGE_RULES = stage_rules(ROOT)

# Track rungs, by id, from the rung.json in each rung's folder; each is checked on its own
# object (grader/programs.py).
TRACK_RULES = {rung: rules_of(meta["sass"]) for rung, meta in rung_meta.track_rungs(ROOT).items() if "sass" in meta}

# ---- applying them ----------------------------------------------------------------------------


def apply(functions, rules, label, strict_arch=None):
    """(passed, lines) of `rules` on the disassembled `functions` of one rung (label: 'stage 03',
    'rung p38-03'). A check passes on an architecture when every function whose base name holds
    its kernel passes (and there is one); on the build, when it passes on one architecture. The
    detail shown is strict_arch's (or the last architecture's)."""
    archs = sorted({f.arch for f in functions}, key=lambda a: (is_strict(a, strict_arch), arch_number(a)))
    lines, ok = [], True
    if any(r.get("needs_sm80") for r in rules) and not any(arch_number(a) >= 80 for a in archs):
        lines.append(f"FAIL: {label}: this build has no sm_80 or newer code, and the rung's idea (cp.async, "
                     f"TF32 mma) needs sm_80; build for one such architecture too, "
                     f"e.g. -DCMAKE_CUDA_ARCHITECTURES=\"75;80\"")
        ok = False
    if any(r.get("needs_sm90a") for r in rules) and "sm_90a" not in archs:
        lines.append(f"FAIL: {label}: this build has no sm_90a code, and the rung's idea (wgmma, the bulk copy, "
                     f"mbarriers) exists only in sm_90a code, which CMake builds for this stage when 90 is in the "
                     f"architecture list; build for it too, e.g. -DCMAKE_CUDA_ARCHITECTURES=\"75;90\"")
        ok = False
    for r in rules:
        params = {k: v for k, v in r.items() if k not in ("check", "kernel", "needs_sm80", "needs_sm90a")}
        what = params.get("what") or WHAT.get(r["check"], r["check"])
        fn_check = CHECKS[r["check"]]
        kwargs = {k: v for k, v in params.items() if k != "what"}
        kernel = r["kernel"] or "any function"
        results = []  # (passed, detail, arch), strict_arch last
        # A needs_sm90a rule is judged on the sm_90a code alone: elsewhere the kernel is the
        # fallback without wgmma (often an empty body), which would pass a rule of what must be
        # absent (no BAR.SYNC in a loop) whatever the sm_90a code does.
        for arch in ([a for a in archs if a == "sm_90a"] if r.get("needs_sm90a") else archs):
            mine = [f for f in functions if f.arch == arch and r["kernel"] in f.short]
            if not mine:
                results.append((False, f"no kernel named *{r['kernel']}*", arch))
                continue
            checked = [(fn_check(f, **kwargs), f) for f in mine]
            bad = next(((res, f) for res, f in checked if not res[0]), None)
            if bad:
                (_, detail), f = bad
                results.append((False, detail + (f"  [in {f.short[:60]}]" if len(mine) > 1 else ""), arch))
            else:
                results.append((True, checked[0][0][1], arch))
        passing = [x for x in results if x[0]]
        passed, detail, arch = (passing or results or [(False, "no device code", "")])[-1]
        where = f" on {arch}" if len(archs) > 1 and arch else ""
        lines.append(f"{'PASS' if passed else 'FAIL'}: {label}: {what} in {kernel}{where}: {detail}")
        ok = ok and passed
    return ok, lines


def local_memory(functions, label, strict_arch):
    """(passed, lines): no LDL/STL in any function on strict_arch (or its architecture-specific form,
    sm_90a for sm_90: is_strict); other architectures' local memory is reported as a NOTE (the
    register budgets are tuned on strict_arch)."""
    lines, ok = [], True
    archs = sorted({f.arch for f in functions}, key=arch_number)
    for arch in archs:
        hits = [(f, i) for f in functions if f.arch == arch for i in f.code if i.base in ("LDL", "STL")]
        if is_strict(arch, strict_arch):
            if hits:
                f, i = hits[0]
                lines.append(f"FAIL: {label} uses local memory on {arch}: {i.text()}  [in {f.short[:60]}]")
                ok = False
            else:
                lines.append(f"PASS: {label} kernels use no local memory on {arch} (no LDL/STL)")
        elif hits:
            lines.append(f"NOTE: {label} has {len(hits)} local-memory instructions (LDL/STL) on {arch}, "
                         f"tuned for {strict_arch}")
    if not any(is_strict(a, strict_arch) for a in archs):
        lines.append(f"NOTE: {label}: no {strict_arch} code in this build, so local memory is reported, not checked")
    return ok, lines


def check_track(obj, rung, cuobjdump=None):
    """(passed, lines) for track rung `rung` (p38-03) on its object: the interface of
    grader/programs.py."""
    rules = TRACK_RULES.get(rung)
    if rules is None:
        return False, [f"FAIL: rung {rung}: no technique rules (\"sass\" in the rung.json of its folder)"]
    cuobjdump = cuobjdump or find_cuobjdump()
    if not cuobjdump:
        return False, ["FAIL: cuobjdump not found (install the CUDA toolkit's cuobjdump and nvdisasm, e.g. pip "
                       "install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, or set CUOBJDUMP)"]
    if not os.path.isfile(obj):
        return False, [f"FAIL: rung {rung}: the build holds no object {obj}"]
    functions = disassemble(cuobjdump, [obj])
    if not functions:
        return False, [f"FAIL: rung {rung}: no device code in {os.path.basename(obj)}"]
    return apply(functions, rules, f"rung {rung}")


def stage_list(build):
    """[(id, name, kind)] from BUILD/stages.tsv (cmake/Stages.cmake writes it)."""
    out = []
    with open(os.path.join(build, "stages.tsv"), encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if cols[0] and not cols[0].startswith("#") and len(cols) >= 4:
                out.append((cols[0], cols[2], cols[3]))
    return out


def track_object(build, rung):
    """The built object of track rung p38-03 (BUILD/CMakeFiles/p38_track.dir/tracks/p38_*/rungs/
    03_*/*.cu.o), or None."""
    track, number = rung.split("-")
    hits = sorted(glob.glob(os.path.join(build, "CMakeFiles", f"{track}_track.dir", "tracks", f"{track}_*",
                                         "rungs", f"{number}_*", "*.cu.o")))
    return hits[0] if hits else None


def check_build(build, picked=(), cuobjdump="", strict="sm_90"):
    """(failures, lines) of every stage of BUILD/stages.tsv (those in `picked` if given) and of
    the track rungs with rules: those picked, or, when none is picked, every one that is built."""
    from . import integrity  # the object lists and cuobjdump's lookup, shared with the integrity check
    stages, lines = stage_list(build), []
    if not stages:
        return 1, [f"FAIL: {build}/stages.tsv lists no stages"]
    cuobjdump = cuobjdump or integrity.find_cuobjdump()
    if not cuobjdump:
        return 1, ["FAIL: cuobjdump not found (install the CUDA toolkit's cuobjdump and nvdisasm, e.g. "
                   "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, or set CUOBJDUMP)"]
    listed = integrity.ninja_objects(build)
    for sid, name, kind in stages:
        if picked and sid not in picked:
            continue
        if kind != "gpu":
            lines.append(f"SKIP: stage {sid} {name} is a CPU stage: no GPU machine code to check")
            continue
        objects = integrity.target_objects(build, f"CMakeFiles/stage_{sid}.dir", listed)
        if not objects:
            lines.append(f"FAIL: stage {sid} {name}: the build holds no objects under "
                         f"{build}/CMakeFiles/stage_{sid}.dir")
            continue
        functions = disassemble(cuobjdump, objects)
        if not functions:
            lines.append(f"FAIL: stage {sid} {name}: a GPU stage whose objects hold no device code (cuobjdump -sass "
                         f"lists no function in them)")
            continue
        lines += local_memory(functions, f"stage {sid}", strict)[1]
        if name in STAGE_RULES:
            lines += apply(functions, STAGE_RULES[name], f"stage {sid}", strict)[1]
        else:
            lines.append(NO_ENTRY.format(sid=sid, name=name))
    for rung in TRACK_RULES:
        if picked and rung not in picked:
            continue
        obj = track_object(build, rung)
        if obj is None:
            if picked:
                lines.append(f"FAIL: rung {rung}: the build holds no object of it under "
                             f"{build}/CMakeFiles/{rung.split('-')[0]}_track.dir")
            continue
        lines += check_track(obj, rung, cuobjdump)[1]
    for p in picked:
        if p not in {s[0] for s in stages} and p not in TRACK_RULES:
            lines.append(f"FAIL: {p} is neither a stage of {build}/stages.tsv nor a track rung with rules")
    return sum(1 for l in lines if l.startswith("FAIL")), lines


NO_ENTRY = ("FAIL: stage {sid} {name}: no SASS expectation (\"sass\" in its folder's rung.json); add one, "
            "an empty list if the local-memory check is all")


def main(argv):
    args, check_only, cuobjdump = list(argv), False, os.environ.get("CUOBJDUMP", "")
    if args[:1] == ["--check"]:
        check_only, args = True, args[1:]
    if args[:1] == ["--cuobjdump"]:
        cuobjdump, args = args[1], args[2:]
    if args[:1] == ["--sass"]:  # a saved disassembly: --sass FILE RUNG
        rules = STAGE_RULES.get(args[2], TRACK_RULES.get(args[2]))
        if rules is None:
            print(f"FAIL: no rules for {args[2]}")
            return 1
        with open(args[1], encoding="utf-8") as f:
            ok, lines = apply(parse(f.read()), rules, args[2])
        print("\n".join(lines))
        return 0 if ok else 1
    build = args[0] if args else "build"
    if not os.path.isfile(os.path.join(build, "stages.tsv")):
        print(f"FAIL: no stage list {build}/stages.tsv: configure the build with CMake first "
              f"(cmake/Stages.cmake writes it)")
        return 1
    if check_only:  # every GPU stage has an entry (no cuobjdump needed)
        missing = 0
        for sid, name, kind in stage_list(build):
            if kind == "gpu" and name in STAGE_RULES:
                print(f"PASS: stage {sid} {name} has a SASS expectation entry")
            elif kind == "gpu":
                print(NO_ENTRY.format(sid=sid, name=name))
                missing += 1
        print(f"check_sass --check: {missing} stage(s) without an entry" if missing
              else "check_sass --check: every GPU stage has an entry")
        return 1 if missing else 0
    if not os.path.isdir(os.path.join(build, "CMakeFiles")):
        print(f"FAIL: {build} is not a CMake build directory (no {build}/CMakeFiles); build first")
        return 1
    picked = os.environ.get("LADDER_SASS_STAGES", "").replace(",", " ").split()
    failures, lines = check_build(build, picked, cuobjdump, os.environ.get("LADDER_SASS_STRICT_ARCH", "sm_90"))
    print("\n".join(lines))
    print(f"check_sass: {failures} check(s) failed" if failures else "check_sass: all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
