"""Opcode counts of the mma loops of stage 14's and the draft's 3x3 instances, from cuobjdump -sass
of a build's objects (run from the repository root, the draft copied into stages/ as its README says):

  PYTHONPATH=. python3 drafts/20_ldmatrix_two_blocks/sass_loop_counts.py BUILD

The loops are tooling/checks/sass.py's natural loops (the grader's). Stage 14's smallest loop with
HMMA is the step loop (one pass = one step: the copies, the kw-unrolled taps, the pool); the
draft's is the kernel-column loop (one pass = one kw: 6 A rows, 3 taps), nested in the step loop.
"window" is stage 14's after_commit_to_last_hmma (the instructions after the step's LDGDEPBAR up
to the last HMMA of the step loop); for the draft the same window of the step loop, which holds
the kw loop (its counts are printed times 3, the passes of one step). LDS excludes the
never-executed `@!PT LDS` padding."""
import collections
import re
import sys

from tooling.checks import sass  # PYTHONPATH=. (the repository root): tooling is no installed package
from tooling.results.sass_counts import stage_functions

HMMA = re.compile(r"HMMA")


def counts(body):
    c = collections.Counter()
    for i in body:
        if i.pred == "@!PT":
            c["never_executed_" + i.op] += 1
            continue
        c[i.op] += 1
    c["instructions"] = sum(v for k, v in c.items() if not k.startswith("never_executed_"))
    return c


def smallest_hmma_loop(fn):
    loops = [l for l in fn.loops if l.has(HMMA)]
    return min(loops, key=lambda l: len(l.body))


def outer_hmma_loop(fn):
    loops = [l for l in fn.loops if l.has(HMMA)]
    return max(loops, key=lambda l: len(l.body))


def window(loop):
    body = loop.body
    start = max(k for k, i in enumerate(body) if i.op.startswith("LDGDEPBAR"))
    last = max(k for k, i in enumerate(body) if HMMA.match(i.op))
    return body[start + 1:last + 1]


def show(label, c, scale=1):
    keys = ["instructions", "HMMA.1688.F32.TF32", "LDS", "LDS.64", "LDSM.16.M88.4", "FSETP.GEU.AND",
            "IMAD.IADD.U32", "LDGSTS.E.BYPASS.LTC128B.128", "BAR.SYNC.DEFER_BLOCKING"]
    print(label, " ".join(f"{k}={c.get(k, 0) * scale}" for k in keys))
    rest = {k: v * scale for k, v in c.items() if k not in keys}
    print("   other:", dict(sorted(rest.items(), key=lambda kv: -kv[1])))


def main(build):
    cuobjdump = sass.find_cuobjdump()
    for sid, name in (("14", "conv_pool_multistageILi3ELi3ENS0_9TileShapeILi4ELi8E"),
                      ("20", "conv_pool_multistage_ldsmILi3ELi3ENS0_9TileShapeILi4ELi4E"),
                      ("14", "conv_pool_multistageILi3ELi3ENS0_9TileShapeILi8ELi4E"),
                      ("20", "conv_pool_multistage_ldsmILi3ELi3ENS0_9TileShapeILi8ELi4E")):
        fns = [f for f in stage_functions(build, sid, cuobjdump) if name in f.name]  # sm_90, as sass_counts reads them
        assert len(fns) == 1, (name, len(fns))
        fn = fns[0]
        inner, outer = smallest_hmma_loop(fn), outer_hmma_loop(fn)
        print(f"== stage {sid} {fn.short}: {len(fn.loops)} loops")
        print(f"   smallest HMMA loop {inner.where()}, outermost HMMA loop {outer.where()}")
        if inner is outer:
            show("   step loop (one pass = one step):", counts(inner.body))
            show("   window after commit to last HMMA:", counts(window(inner)))
        else:
            show("   kw loop x 3 (one step's taps):", counts(inner.body), 3)
            show("   step loop, once (kw loop counted once):", counts(outer.body))
            inner_addrs = {i.addr for i in inner.body}
            show("   step loop outside the kw loop:", counts([i for i in outer.body if i.addr not in inner_addrs]))
            show("   window after commit to last HMMA (kw loop once):", counts(window(outer)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build")
