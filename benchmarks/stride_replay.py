"""Does a program's speed depend on its operands' row stride? Replay the decisions a memo
table holds for one spec on another spec of a different shape (same rewrites, same tile
sizes), check both against numpy and time them side by side.

    python benchmarks/stride_replay.py --db m.db \\
        "Matmul(1024x1024x1024, f32)" "Matmul(1024x1024x1088, f32)" [--rules FILE ...]

The table must hold the first spec (`morello-asp synth SPEC --db m.db`). Used for README's
"Strides and cache aliasing": with the rules of before specs had strides, the 1024^3
program cached an unpacked tile of B whose rows, 4 KB apart, alias in L1; replayed with
rows 4,352 B apart it ran 1.6x faster. The rules now see the stride and pack such tiles.
"""

from __future__ import annotations

import argparse
import statistics

from morello_asp import parse_spec
from morello_asp.ir import Impl
from morello_asp.rewrites import node_from_expansion
from morello_asp.solver.memo.sqlite import open_memo
from morello_asp.solver.search.engine import Engine
from morello_asp.spec import Spec


def replay(engine: Engine, memo, new: Spec, old: Spec) -> Impl:
    """`new` implemented with the rewrites the table chose for `old`, child by child."""
    d = memo.get(old)
    if d is None or not d.feasible:
        raise SystemExit(f"the table has no program for {old}")
    exp_old = next(e for e in engine.expand(old) if e.action == d.action)
    exp_new = next((e for e in engine.expand(new) if e.action == d.action), None)
    if exp_new is None or len(exp_new.children) != len(exp_old.children):
        raise SystemExit(f"{d.action.text()} does not apply to {new} as it does to {old}")
    kids = [replay(engine, memo, cn, co) for cn, co in zip(exp_new.children, exp_old.children)]
    return node_from_expansion(new, exp_new, kids)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stored", help="the spec whose decisions the table holds")
    ap.add_argument("other", help="a spec of another shape to run the same decisions on")
    ap.add_argument("--db", required=True)
    ap.add_argument("--rules", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds")
    args = ap.parse_args(argv)
    engine = Engine("avx2", tuple(args.rules))
    memo = open_memo(args.db, engine)
    stored = parse_spec(args.stored)
    progs = []
    for text in (args.stored, args.other):
        fn = replay(engine, memo, parse_spec(text), stored).compile("avx2", args.rules)
        err, tol = fn.check()
        if not err <= tol:
            raise SystemExit(f"{text}: result differs from numpy by {err:.3g} (> {tol:.3g})")
        progs.append((text, fn, []))
    for _ in range(args.rounds):  # alternate, so both see the same machine load
        for _, fn, times in progs:
            times.append(fn.benchmark().gflops)
    print(f"{'spec':<36} {'GFLOP/s (median)':>17}")
    for text, _, times in progs:
        print(f"{text:<36} {statistics.median(times):>17.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
