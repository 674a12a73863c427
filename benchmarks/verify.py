"""z3 proof time for programs of growing size: the hand-scheduled matmul recipe
(examples/fast_matmul.py) and synthesized matmuls.

    python benchmarks/verify.py [--sizes 48 96 192 384] [--synth 4 8]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from fast_matmul import fast_matmul  # noqa: E402

from morello_asp.solver.verify import verify  # noqa: E402
from morello_asp.synthesis import synthesize  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[48, 96, 192, 384])
    ap.add_argument("--synth", type=int, nargs="*", default=[4, 8])
    args = ap.parse_args(argv)
    print(f"{'program':<34} {'nodes':>6} {'obligations':>12} {'proved':>7} {'seconds':>8}")
    progs = [(f"hand-scheduled {n}x{n}x{n}", fast_matmul(n, n, n)) for n in args.sizes]
    progs += [(f"synthesized {n}x{n}x{n}", synthesize(f"Matmul({n}x{n}x{n}, f32)")) for n in args.synth]
    for name, imp in progs:
        rep = verify(imp)
        ok = sum(o.status == "proved" for o in rep.obligations)
        print(f"{name:<34} {sum(1 for _ in imp.walk()):>6} {len(rep.obligations):>12} {ok:>7} {rep.seconds:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
