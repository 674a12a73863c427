"""A user-guided f32 matmul (paper 2.3): the outer Goto/BLIS structure is scheduled by
hand, the synthesizer finishes everything inside it with `synthesize_all()`.

    python examples/guided_matmul.py [--size 1024 | --shape MxKxN] [--db FILE] [--show]

The hand part is the `blis` guide (morello_asp/guides.py, also `morello-asp synth SPEC
--guide blis`): `to_accum`; pack B into 16-wide panels (a Move into
`[0, 2, 1, 2 p(16)]`); for large k, loop over k in chunks of 256 and over rows in blocks
of 96 (cache tiles: a kc x 16 panel of B stays in L1, an mc x kc block of A in L2); loop
over 16-wide panels and 6-row blocks. Synthesized: zeroing C, the packing Move, and each
6 x kc x 16 block (the register tile, the loads, the kernels) and every boundary block a
non-dividing size leaves (e.g. 4 rows when 6 does not divide m).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy single-threaded, before it loads

from morello_asp import parse_spec  # noqa: E402
from morello_asp.guides import blis, hand_rewrites  # noqa: E402


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
    partial = blis(parse_spec(f"Matmul({m}x{k}x{n}, f32)"))  # the hand part: ordinary rewrites
    print(f"by hand: {hand_rewrites(partial)} rewrites")
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
