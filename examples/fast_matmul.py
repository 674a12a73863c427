"""A fast f32 matmul scheduled by hand with the classic (Goto/BLIS) recipe, using only
the scheduling API, then compiled, checked against numpy and timed.

    python examples/fast_matmul.py [--size 512] [--show-c] [--save prog.json]

Recipe: zero C; pack B into [n/16, k, 16] panels (a Move into layout
`[0, 2, 1, 2 p(16)]`); loop over 16-wide panels of B, then over 6-row blocks of A;
keep the 6x16 block of C in 12 __m256 accumulators (VRF) while k runs innermost; per
k, load one 16-wide row of the panel into 2 registers and, for each of the 6 rows,
broadcast A[i, k] and FMA (BroadcastVecMultAdd).
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy single-threaded, before it loads

import numpy as np  # noqa: E402

from morello_asp import parse_spec  # noqa: E402
from morello_asp.codegen.baseline import time_python  # noqa: E402

PACK = "[0, 2, 1, 2 p(16)]"  # B (1 x k x n) as [batch, n/16, k, 16]
MR, NR = 6, 16  # register tile: 6 rows x 16 columns = 12 vectors of 8 f32


def _row_moves(mv):
    """Move of a C block between L1 and VRF: one 16-wide row (2 vectors) at a time."""
    return mv.tile([1, 1, NR]).select("VectorAssign")


def _k_step(h):
    """MatmulAccum(1 x r x 1 x 16): load the B row into VRF, then per row of A one
    broadcast-FMA into that row's two accumulators."""
    h = h.move_param(1, "L1", PACK).move_param(1, "VRF", PACK, vector_size=8)
    h = h.subschedule([0, 0], lambda load: load.select("VectorAssign"))
    return h.subschedule([0, 1], lambda body: body.tile([1, 1, 1, NR]).move_param(0, "L1").select("BroadcastVecMultAdd"))


def _register_block(h):
    """MatmulAccum(1 x r x k x 16) with C's r x 16 block held in registers over all of k."""
    h = h.move_param(2, "L1")  # cache hint: no code

    def regs(a):
        a = a.move_param(2, "VRF", "row_major", vector_size=8)
        a = a.subschedule([0], _row_moves).subschedule([2], _row_moves)
        return a.subschedule([1], lambda body: body.split(1).subschedule([0], _k_step))

    return h.subschedule([0], regs)


def _pack(mv):
    """Move(1 x k x n) row-major -> packed panels, one row of B at a time, 16 values at
    a time (one dimension per tile, as the search tiles)."""
    _, k, n = mv.spec.shape
    if k > 1:
        mv = mv.tile([1, 1, n])
    if n > NR:
        mv = mv.tile([1, 1, NR])
    mv = mv.move_param(0, "L1").move_param(1, "L1", PACK)
    return mv.tile([1, 1, 1]).select("ValueAssign")


def fast_matmul(m: int = 512, k: int = 512, n: int = 512, dtype: str = "f32", mr: int = MR):
    """The hand-scheduled program for Matmul(m x k x n) in GL (n a multiple of 16;
    dtype f32 or i32, whose 8-lane kernels the recipe uses). `mr` rows per register
    block: 6 is the classic; a power of two (4) keeps every rewrite in the search space."""
    if n % NR:
        raise ValueError(f"n must be a multiple of {NR}")
    imp = parse_spec(f"Matmul({m}x{k}x{n}, {dtype})").to_accum()
    imp = imp.subschedule([0], lambda z: z.select("MemsetZero"))
    imp = imp.move_param(1, "GL", PACK)  # pack B
    imp = imp.subschedule([1, 0], _pack)
    if n > NR:
        imp = imp.tile([1, m, k, NR])  # loop over 16-wide panels of B (and of C)
    if m > mr:  # loop over mr-row blocks of A (and of C); a remainder block is a boundary
        (path, _), = imp.holes()
        imp = imp.subschedule(path, lambda panel: panel.tile([1, mr, k, NR]))
    for path, _hole in imp.holes():
        imp = imp.subschedule(path, _register_block)
    return imp


def inner_loop_asm(so_path: str) -> str:
    """The first loop of `kernel` that contains an FMA, disassembled: it should be
    broadcasts and vfmadd231ps on ymm registers with no stack (rsp/rbp) traffic."""
    import re
    import subprocess

    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so_path], capture_output=True, text=True).stdout
    body = dis.split("<kernel>:", 1)[1].split("\n\n", 1)[0].splitlines()
    addr = lambda line: int(line.split(":")[0], 16)  # noqa: E731
    first_fma = next(i for i, l in enumerate(body) if "vfmadd" in l)
    for j in range(first_fma, len(body)):
        m = re.search(r"\sj\w+\s+([0-9a-f]+) <", body[j])
        if m and int(m.group(1), 16) < addr(body[j]):
            start = next(i for i, l in enumerate(body) if l.strip() and addr(l) == int(m.group(1), 16))
            loop = body[start:j + 1]
            spills = [l for l in loop if re.search(r"\((%rsp|%rbp)", l)]
            return "\n".join(loop) + f"\n-- {len(loop)} instructions, {sum('vfmadd' in l for l in loop)} FMAs, {len(spills)} stack accesses"
    return "no FMA loop found"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--show-c", action="store_true", help="print the generated C")
    ap.add_argument("--save", help="save the program as JSON (for `morello-asp run/bench`)")
    ap.add_argument("--asm", action="store_true", help="print the innermost FMA loop of the built module (objdump)")
    args = ap.parse_args(argv)
    s = args.size
    imp = fast_matmul(s, s, s)
    if args.show_c:
        print(imp.to_c())
    if args.save:
        from morello_asp.serialize import save

        save(imp, args.save)
    fn = imp.compile()
    if args.asm:
        print(inner_loop_asm(fn.module.__file__))
    rng = np.random.default_rng(0)
    a = rng.random((s, s), dtype=np.float32)
    b = rng.random((s, s), dtype=np.float32)
    err = float(np.abs(fn(a, b) - a @ b).max())
    ours = fn.benchmark()
    c = np.empty((s, s), dtype=np.float32)
    np_s = time_python(lambda: np.matmul(a, b, out=c))
    np_gf = 2 * s**3 / np_s / 1e9
    print(f"f32 Matmul {s}x{s}x{s}: max |ours - numpy| = {err:.3g}")
    print(f"  ours  {ours.gflops:7.2f} GFLOP/s ({ours.seconds * 1e3:.3f} ms)")
    print(f"  numpy {np_gf:7.2f} GFLOP/s (single-threaded OpenBLAS, Haswell/AVX2 kernels here)")
    print(f"  ratio ours/numpy = {ours.gflops / np_gf:.2f}")
    return 0 if err < 1e-2 * s else 1


if __name__ == "__main__":
    sys.exit(main())
