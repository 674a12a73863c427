"""A user-guided f32 matmul (paper 2.3): the outer Goto/BLIS structure is scheduled by
hand, the synthesizer finishes everything inside it with `synthesize_all()`.

    python examples/guided_matmul.py [--size 1024 | --shape MxKxN] [--db FILE] [--show]

By hand: `to_accum`; pack B into 16-wide panels (a Move into `[0, 2, 1, 2 p(16)]`);
for large k, loop over k in chunks of `kc` and over rows in blocks of `mc` (cache
tiles: a kc x 16 panel of B stays in L1, an mc x kc block of A in L2); loop over
16-wide panels and 6-row blocks. Synthesized: zeroing C, the packing Move, and each
6 x kc x 16 block (the register tile, the loads, the kernels) and every boundary
block a non-dividing size leaves (e.g. 4 rows when 6 does not divide m).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy single-threaded, before it loads

from morello_asp import parse_spec  # noqa: E402
from morello_asp.ir import Impl, SpecHole  # noqa: E402

PACK = "[0, 2, 1, 2 p(16)]"  # B (1 x k x n) as [batch, n/16, k, 16]
MR, NR = 6, 16  # rows and columns of the block the synthesizer gets: 6 x 16 f32 = 12 vectors


def _map_accum_holes(imp: Impl, fn) -> Impl:
    """Apply `fn` to every open MatmulAccum (main tiles and boundary regions alike)."""
    for path, hole in imp.holes():
        if hole.spec.kind == "MatmulAccum":
            imp = imp.subschedule(path, fn)
    return imp


def _tile_dim(d: int, size: int):
    """Loop over `size`-wide tiles of dimension d (b, m, k, n) of an open MatmulAccum;
    nothing if the dimension is already that small."""

    def fn(h: Impl) -> Impl:
        shape = list(h.spec.shape)
        if shape[d] <= size:
            return h
        shape[d] = size
        return h.tile(shape)

    return fn


def guided_schedule(m: int, k: int, n: int, kc: int | None = None, mc: int | None = None) -> Impl:
    """The hand-scheduled outer part of Matmul(m x k x n, f32): open specs are left for
    the synthesizer. `kc`/`mc` (default: 256 and 96 when k > 512) are the cache tiles."""
    if n % NR:
        raise ValueError(f"n = {n}: packing B into {NR}-wide panels needs n to be a multiple of {NR}")
    if kc is None and k > 512:
        kc, mc = 256, 96
    imp = parse_spec(f"Matmul({m}x{k}x{n}, f32)").to_accum()
    imp = imp.subschedule([1], lambda a: a.move_param(1, "GL", PACK))  # pack B; the Move stays open
    if kc:
        imp = _map_accum_holes(imp, _tile_dim(2, kc))  # k chunks (split)
    if mc:
        imp = _map_accum_holes(imp, _tile_dim(1, mc))  # row blocks of A (L2)
    imp = _map_accum_holes(imp, _tile_dim(3, NR))  # 16-wide panels of B and C
    return _map_accum_holes(imp, _tile_dim(1, MR))  # 6-row register blocks


def hand_rewrites(imp: Impl) -> int:
    """How many rewrites a schedule applied by hand (its non-open nodes)."""
    return sum(1 for node in imp.walk() if not isinstance(node, SpecHole))


def guided_matmul(m: int, k: int, n: int, db=None, kc: int | None = None, mc: int | None = None) -> Impl:
    """The complete program: `guided_schedule` finished by `synthesize_all(db=db)`."""
    return guided_schedule(m, k, n, kc, mc).synthesize_all(db=db)


def main(argv=None) -> int:
    import numpy as np

    from morello_asp.codegen.baseline import time_python

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024, help="n for an n x n x n matmul")
    ap.add_argument("--shape", help="MxKxN instead of --size (the spec's order: m, k, n)")
    ap.add_argument("--db", help="memo table file (SQLite) the synthesizer reuses and grows")
    ap.add_argument("--show", action="store_true", help="print the hand part and the finished program")
    args = ap.parse_args(argv)
    m, k, n = (int(x) for x in args.shape.lower().split("x")) if args.shape else (args.size,) * 3
    partial = guided_schedule(m, k, n)
    if args.show:
        print(partial)
    t0 = time.perf_counter()
    imp = partial.synthesize_all(db=args.db)
    print(f"synthesize_all: {time.perf_counter() - t0:.1f} s, {imp.cost}")
    if args.show:
        print(imp)
    fn = imp.compile()
    rng = np.random.default_rng(0)
    a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    err = float(np.abs(fn(a, b) - a @ b).max())
    ours = fn.benchmark()
    c = np.empty((m, n), dtype=np.float32)
    np_gf = 2 * m * k * n / time_python(lambda: np.matmul(a, b, out=c)) / 1e9
    print(f"f32 Matmul {m}x{k}x{n}: max |ours - numpy| = {err:.3g}")
    print(f"  ours {ours.gflops:7.2f} GFLOP/s, numpy {np_gf:7.2f} GFLOP/s, ratio {ours.gflops / np_gf:.2f}")
    return 0 if err < 1e-3 * k else 1


if __name__ == "__main__":
    sys.exit(main())
