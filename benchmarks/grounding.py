"""One clingo call on a batch of spec classes, with the rule files as written against
the engine's copies (anonymous variables named, solver/anonymous_vars.py), interleaved
in one process; each pair's answers must be the same set of atoms.

    python benchmarks/grounding.py [--size 16] [--batches 3] [--rounds 5] [--plot out.png]

The batches are the largest that a cold search of Matmul SIZE^3 sends to clingo.
"""

from __future__ import annotations

import argparse
import statistics
import time

from morello_asp import parse_spec
from morello_asp.solver import clingo_run
from morello_asp.solver.dp import Search
from morello_asp.solver.engine import Engine
from morello_asp.solver.memo import DictMemo


def batches(n: int, keep: int) -> list[tuple[int, str]]:
    """(classes, facts) of the `keep` largest clingo calls of a cold Matmul n^3 search."""
    seen: list[tuple[int, str]] = []
    submit = clingo_run.submit

    def record(files, facts, size, *a, **kw):
        seen.append((size, facts))
        return submit(files, facts, size, *a, **kw)

    clingo_run.submit = record
    try:
        Search(Engine("avx2"), DictMemo()).build(parse_spec(f"Matmul({n}x{n}x{n}, f32)"))
    finally:
        clingo_run.submit = submit
    return sorted(seen, key=lambda b: -b[0])[:keep]


def timed(files: tuple[str, ...], facts: str) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    rc, text, errs = clingo_run.answer(files, facts)
    took = time.perf_counter() - t0
    if rc not in (10, 30):
        raise SystemExit(f"grounding.py: clingo failed: {errs.strip()}")
    return took, sorted(text.split())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--plot", help="write a bar chart of the times")
    args = ap.parse_args(argv)
    engine = Engine("avx2")
    written = tuple(str(f) for f in engine.files)  # the files as the user reads them
    named = engine._files  # the engine's copies
    rows = []
    for size, facts in batches(args.size, args.batches):
        a: list[float] = []
        b: list[float] = []
        for _ in range(args.rounds):
            ta, ans_a = timed(written, facts)
            tb, ans_b = timed(named, facts)
            if ans_a != ans_b:
                raise SystemExit("grounding.py: the two answers differ")
            a.append(ta)
            b.append(tb)
        ratios = [x / y for x, y in zip(a, b)]
        rows.append((size, len(ans_a), statistics.median(a), statistics.median(b), statistics.median(ratios)))
    print(f"Matmul {args.size}^3, the {len(rows)} largest clingo calls, {args.rounds} interleaved rounds")
    print("| classes | atoms shown | as written s | named s | speed-up (paired median) |")
    print("|---|---|---|---|---|")
    for size, atoms, ta, tb, r in rows:
        print(f"| {size} | {atoms:,} | {ta:.3f} | {tb:.3f} | {r:.2f}x |")
    if args.plot:
        import matplotlib.pyplot as plt

        xs = range(len(rows))
        plt.bar([x - 0.2 for x in xs], [r[2] for r in rows], 0.4, label="as written")
        plt.bar([x + 0.2 for x in xs], [r[3] for r in rows], 0.4, label="anonymous variables named")
        plt.xticks(list(xs), [f"{r[0]} classes" for r in rows])
        plt.ylabel("seconds per clingo call")
        plt.legend()
        plt.savefig(args.plot)
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "grounding.py"))
