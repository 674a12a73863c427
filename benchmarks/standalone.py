"""In-process (cffi) timing vs standalone-executable timing of the same program, interleaved.

    python benchmarks/standalone.py [--sizes 16 64 256] [--rounds 9] [--synthesize --db F]

Both paths time the program with the same C function (`kernel_bench`: operands copied
into one page-aligned arena, warm-up, calls per repetition for 0.05 s, CLOCK_MONOTONIC;
codegen/emit.py), the in-process one loaded by cffi from a shared object, the standalone
one in its own executable. Each round times one then the other (alternating which goes
first), 5 repetitions each; the table gives each side's median over rounds, the
median over rounds of the per-round ratio standalone / in-process (1.00: they agree),
and the ratio of each side's best round.
Programs are the hand recipe (`morello_asp.recipes.fast_matmul`), or with --synthesize
the synthesized program (slow from an empty table: 256^3 takes minutes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from precompute import cpu_name  # benchmarks/ is on the path of its scripts

from morello_asp.codegen.api import Program
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.codegen.standalone import StandaloneProgram
from morello_asp.recipes import fast_matmul
from morello_asp.synthesis import synthesize


def measure(inproc: Program, alone: StandaloneProgram, rounds: int, reps: int = 5):
    """Per side: the median and the best over rounds of each round's median; the median
    per-round ratio standalone / in-process, and the ratio of the bests (on a loaded
    machine the best is the least disturbed)."""
    a_times, s_times, ratios = [], [], []
    for r in range(rounds):
        first, second = (alone, inproc) if r % 2 else (inproc, alone)
        t1 = first.benchmark(reps=reps).seconds
        t2 = second.benchmark(reps=reps).seconds
        a, s = (t2, t1) if r % 2 else (t1, t2)
        a_times.append(a)
        s_times.append(s)
        ratios.append(s / a)
    return {
        "inproc": statistics.median(a_times),
        "alone": statistics.median(s_times),
        "ratio": statistics.median(ratios),
        "best_ratio": min(s_times) / min(a_times),
        "ratios": ratios,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="in-process vs standalone timing of the same program")
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256], help="Matmul n^3 (multiples of 16)")
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds per size")
    ap.add_argument("--synthesize", action="store_true", help="synthesized programs instead of the hand recipe")
    ap.add_argument("--db", help="memo table for --synthesize")
    args = ap.parse_args(argv)
    why = get_ctarget("avx2").cannot_run()
    if why:
        print(f"avx2: cannot run here: {why}")
        return 0
    print(f"CPU: {cpu_name()}; load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'n^3':>6} {'program':>12} {'in-process':>12} {'standalone':>12} {'ratio':>6} {'best':>6}  per-round ratios"
    )
    for n in args.sizes:
        spec = f"Matmul({n}x{n}x{n}, f32)"
        imp = synthesize(spec, db=args.db) if args.synthesize else fast_matmul(n, n, n)
        m = measure(Program(imp), StandaloneProgram(imp), args.rounds)
        kind = "synthesized" if args.synthesize else "hand"
        per = " ".join(f"{x:.2f}" for x in m["ratios"])
        print(
            f"{n:>6} {kind:>12} {m['inproc'] * 1e6:>9.3f} us {m['alone'] * 1e6:>9.3f} us {m['ratio']:>6.2f} "
            f"{m['best_ratio']:>6.2f}  {per}",
            flush=True,
        )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
