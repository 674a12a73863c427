"""A fast f32 matmul scheduled by hand with the classic (Goto/BLIS) recipe, using only
the scheduling API (`morello_asp.recipes.fast_matmul`), then compiled, checked against
numpy and timed.

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

from morello_asp.codegen.asm import inner_loop_asm  # noqa: E402
from morello_asp.codegen.baseline import time_python  # noqa: E402
from morello_asp.recipes import fast_matmul  # noqa: E402


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
