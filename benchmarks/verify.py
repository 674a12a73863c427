"""z3 proof time for programs of growing size: the hand-scheduled matmul recipe
(examples/fast_matmul.py) and synthesized matmuls; with --tables, proof time of whole
memo tables (`db verify`) built by synthesizing Matmul NxNxN from an empty table.

    python benchmarks/verify.py [--sizes 48 96 192 384] [--synth 4 8 64] [--db FILE]
    python benchmarks/verify.py --tables 4 8 [--keep DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from morello_asp.recipes import fast_matmul
from morello_asp.solver.proofs.verify import verify
from morello_asp.synthesis import synthesize


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[48, 96, 192, 384])
    ap.add_argument("--synth", type=int, nargs="*", default=[4, 8])
    ap.add_argument("--db", help="memo table for the synthesized programs (reused between runs)")
    ap.add_argument("--tables", type=int, nargs="+", help="prove memo tables of Matmul NxNxN instead")
    ap.add_argument("--keep", help="directory for the table files (default: a temporary one)")
    args = ap.parse_args(argv)
    if args.tables:
        return tables(args.tables, args.keep)
    print(f"{'program':<34} {'nodes':>6} {'obligations':>12} {'proved':>7} {'seconds':>8}")
    progs = [(f"hand-scheduled {n}x{n}x{n}", fast_matmul(n, n, n)) for n in args.sizes]
    progs += [(f"synthesized {n}x{n}x{n}", synthesize(f"Matmul({n}x{n}x{n}, f32)", db=args.db)) for n in args.synth]
    for name, imp in progs:
        rep = verify(imp)
        ok = sum(o.status == "proved" for o in rep.obligations)
        print(
            f"{name:<34} {sum(1 for _ in imp.walk()):>6} {len(rep.obligations):>12} {ok:>7} {rep.seconds:>8.2f}",
            flush=True,
        )


def tables(sizes, keep=None):
    from morello_asp.solver.memo.sqlite import open_memo
    from morello_asp.solver.proofs.verify import verify_table
    from morello_asp.solver.search.engine import get_engine

    tmp = Path(keep or tempfile.mkdtemp())
    tmp.mkdir(parents=True, exist_ok=True)
    print(
        f"{'table':<18} {'synth s':>8} {'boxes':>6} {'obligations':>12} {'proved':>7} {'refuted':>8} {'unknown':>8} "
        f"{'z3 queries':>11} {'reused':>7} {'clingo s':>9} {'views s':>8} {'total s':>8}"
    )
    for n in sizes:
        path = tmp / f"matmul{n}.db"
        t0 = time.perf_counter()
        if not path.exists():
            synthesize(f"Matmul({n}x{n}x{n}, f32)", db=str(path))
        synth = time.perf_counter() - t0
        memo = open_memo(path, get_engine())
        rep = verify_table(memo)
        memo.close()
        print(
            f"{f'Matmul {n}x{n}x{n}':<18} {synth:>8.1f} {rep.boxes:>6} {len(rep.obligations):>12} "
            f"{rep.count('proved'):>7} "
            f"{rep.count('refuted'):>8} {rep.count('unknown'):>8} {rep.z3_queries:>11} {rep.reused:>7} "
            f"{rep.rules_seconds:>9.1f} {rep.views_seconds:>8.1f} {rep.seconds:>8.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
