"""Synthesis speed from an empty memo: wall time, specs solved, specs/s, and how much
of the time clingo (grounding + solving the rule files) takes.

    python benchmarks/synthesis.py --sizes 4 8 16 [--batches 1 4] [--plot synth.png]
    python benchmarks/synthesis.py --sizes 64 --target examples/avx2_l2_packed.lp
    python benchmarks/synthesis.py --sizes 64 --classes 10
    python benchmarks/synthesis.py --compare REV --sizes 64 1024 [--target avx2] [--rounds 3]

--compare REV: the cold `synth` of each size by REV's own command line and by this
checkout's, interleaved round by round (benchmarks/revisions.py --cli): ratios, and the
costs, which must agree unless the rules differ.

--classes K: after each search, the K largest groups of the spec classes it grounded,
by kind and operand levels (where a rule or a target's new level adds classes).

With --batches, each size runs once per batch (Matmul BxNxNxN), in the order given.
Each search starts from a new, empty SQLite table, as `synth` does for a user whose
default table is new; --memo dict keeps decisions in memory instead (nothing written).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

from morello_asp import parse_spec
from morello_asp.errors import InputError
from morello_asp.solver.memo.sqlite import open_memo
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine


def run(n: int, dtype: str = "f32", batch: int = 1, memo: str = "table", target: str = "avx2") -> dict:
    engine = Engine(target)  # fresh: no expansion cache carried between sizes
    with tempfile.TemporaryDirectory() as tmp:
        table = open_memo(Path(tmp) / "memo.db", engine) if memo == "table" else DictMemo()
        search = Search(engine, table)
        t0 = time.perf_counter()
        imp = search.build(parse_spec(f"Matmul({batch}x{n}x{n}x{n}, {dtype})", target))
        table.flush()
        wall = time.perf_counter() - t0
        if memo == "table":
            table.close()
    return {
        "n": n,
        "batch": batch,
        "wall": wall,
        "solved": search.stats.solved,
        "classes": engine.stats.specs,
        "calls": engine.stats.calls,
        "clingo": engine.stats.seconds,
        "cost": imp.cost.main,
        "program": imp,
        "groups": Counter((c.kind, tuple(t.level for t in c.operands)) for c in engine._class_cache),
    }


def print_groups(groups: Counter, top: int) -> None:
    total = sum(groups.values())
    print(f"  the {min(top, len(groups))} largest of {len(groups)} groups of {total:,} spec classes:")
    for (kind, levels), k in groups.most_common(top):
        print(f"  {k:>8,} {k / total:>6.1%}  {kind}({', '.join(levels)})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--batches", type=int, nargs="+", default=[1], help="batch sizes (Matmul BxNxNxN)")
    ap.add_argument(
        "--memo", choices=("table", "dict"), default="table", help="where decisions go (default: a new SQLite table)"
    )
    ap.add_argument("--target", default="avx2", help="target name or entry file (default avx2)")
    ap.add_argument("--classes", type=int, metavar="K", help="print the K largest groups of classes grounded")
    ap.add_argument("--plot", help="write a chart of wall time per size")
    ap.add_argument("--compare", metavar="REV", help="time against git revision REV, side by side (by the CLI)")
    ap.add_argument("--rounds", type=int, default=3, help="with --compare: interleaved rounds")
    ap.add_argument("--other-rules", action="store_true", help="with --compare: REV's rules differ; print both costs")
    args = ap.parse_args(argv)
    if args.compare:
        import revisions  # benchmarks/, beside this script

        extra = ["--plot", args.plot] if args.plot else []
        extra += ["--other-rules"] if args.other_rules else []
        sizes = [str(n) for n in args.sizes]
        return revisions.main(
            ["--base", args.compare, "--cli", "--target", args.target, "--sizes", *sizes, "--rounds", str(args.rounds)]
            + extra
        )
    if args.classes is not None and args.classes < 1:
        raise InputError(f"--classes {args.classes}: give how many groups to print (1 or more)")
    rows = []
    print(
        f"{'n':>5} {'batch':>5} {'wall s':>9} {'specs solved':>13} {'specs/s':>9} {'classes grounded':>17} "
        f"{'clingo calls':>13} {'clingo share':>13} {'cost':>8}"
    )
    for n, b in [(n, b) for n in args.sizes for b in args.batches]:
        r = run(n, args.dtype, b, args.memo, args.target)
        rows.append(r)
        print(
            f"{n:>5} {b:>5} {r['wall']:>9.2f} {r['solved']:>13} {r['solved'] / r['wall']:>9.0f} {r['classes']:>17} "
            f"{r['calls']:>13} {r['clingo'] / r['wall']:>12.0%} {r['cost']:>8}",
            flush=True,
        )
        if args.classes:
            print_groups(r["groups"], args.classes)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        for b in args.batches:
            mine = [r for r in rows if r["batch"] == b]
            ax.semilogy([r["n"] for r in mine], [r["wall"] for r in mine], "o-", label=f"batch {b}")
        ax.legend()
        ax.set_xlabel("n (Matmul n x n x n)")
        ax.set_ylabel("synthesis wall time, s")
        ax.set_title("morello-asp synthesis from an empty memo")
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "synthesis.py"))
