"""A proposed SASS check for stage 18 (a draft: not in grader/technique.py yet, and nothing runs it
but a person): 3xTF32 with A from registers, split in the loop that issues the wgmma.

check_wgmma_split_a(fn): in every innermost loop with HGMMA,
  - every commit group (the HGMMA from one WARPGROUP.ARRIVE to the HGMMA that carries gsb0) has at
    least 3 HGMMA and at least 2 distinct A operand registers (the big and the small fragment);
  - the loop has at least one FADD per LDS (small = v - big on every value loaded for A).
Stage 17's kernel fails (one HGMMA per group, no FADD in its innermost loop); stage 16's has no A
from registers (its HGMMA read A by descriptor) and is not what this check is for.

Usage, on a build with the draft copied into stages/ (see the draft's README):
  cuobjdump -sass OBJ > k.sass && python3 drafts/18_three_tf32_warp_specialized/technique/check_wgmma_split_a.py k.sass
Prints PASS/FAIL per conv_pool_* kernel; run from the repository root (it imports tooling.checks.sass).
"""
import re
import sys

from tooling.checks.sass import parse

HGMMA = re.compile(r"HGMMA\.")
REG = re.compile(r"^R(\d+)$")


def check_wgmma_split_a(fn):
    loops = [l for l in fn.loops if l.innermost and l.has(HGMMA)]
    if not loops:
        return False, "no innermost loop with HGMMA"
    for loop in loops:
        groups, current = [], []
        for ins in loop.body:
            if ins.op.startswith("WARPGROUP.ARRIVE"):
                current = []
            elif HGMMA.match(ins.op):
                current.append(ins)
                if "gsb0" in ins.args:
                    groups.append(current)
                    current = []
        for g in groups:
            a_regs = {g_ins.args[1] for g_ins in g if len(g_ins.args) > 1 and REG.match(g_ins.args[1])}
            if len(g) < 3 or len(a_regs) < 2:
                return False, (f"{loop.where()}: a commit group of {len(g)} HGMMA with {len(a_regs)} A register(s) "
                               f"({', '.join(sorted(a_regs))}): 3xTF32 needs three, with a big and a small A fragment")
        lds = sum(1 for i in loop.body if i.op.startswith("LDS"))
        fadd = sum(1 for i in loop.body if i.op.startswith("FADD"))
        if lds == 0 or fadd < lds:
            return False, f"{loop.where()}: {lds} LDS, {fadd} FADD: the small part (v - big) of each loaded value is missing"
    loop = loops[0]
    return True, (f"{loop.where()}: {loop.count(HGMMA)} HGMMA in groups of 3 or more, each with a big and a small A "
                  f"fragment; {sum(1 for i in loop.body if i.op.startswith('FADD'))} FADD for "
                  f"{sum(1 for i in loop.body if i.op.startswith('LDS'))} LDS")


def main(argv):
    ok = True
    for path in argv[1:]:
        for fn in parse(open(path).read()):
            if "conv_pool_" not in fn.name or "general" in fn.name:
                continue
            passed, why = check_wgmma_split_a(fn)
            ok &= passed
            print(("PASS" if passed else "FAIL") + f": {fn.name[-60:]} ({fn.arch}): {why}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
