"""The search's own process, without clingo: a cold search of Matmul n^3 is run once with
its clingo answers recorded, then searched again in interleaved rounds with those answers
replayed (no worker competes for the cores), with three memos: a dict of decisions, the
interval-compressed boxes in memory (RectMemo), and a new SQLite table of those boxes, as
a user's first `synth` has. Prints the main process's CPU seconds for each.

    python benchmarks/main_process.py [--size 64] [--rounds 3] [--plot main.png]

Every round must find the recorded search's program (its cost is compared).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

from timing import plot_median_bars

from morello_asp import parse_spec
from morello_asp.solver.logic import clingo_run
from morello_asp.solver.memo.sqlite import open_memo
from morello_asp.solver.memo.table import DictMemo, RectMemo
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine


def _key(engine: Engine, facts: list[str]) -> str:
    return hashlib.sha1(engine._text(facts).encode()).hexdigest()


def record(spec) -> tuple[dict, int]:
    """The parsed answer of every clingo call of a cold search, by its facts; the cost."""
    answers: dict[str, list] = {}
    engine = Engine("avx2")
    submit = engine._submit

    def keep(chunks, sizes):
        keys = [_key(engine, f) for f in chunks]
        inner = submit(chunks, sizes)

        def results():
            for i, parsed in inner():
                answers[keys[i]] = parsed
                yield i, parsed

        return results

    engine._submit = keep
    return answers, Search(engine, DictMemo()).build(spec).cost.main


def replay(spec, answers: dict, memo: str) -> tuple[float, int]:
    """Main-process CPU seconds of a cold search answered from `answers`; the cost."""
    engine = Engine("avx2")

    def replayed(chunks, sizes):
        keys = [_key(engine, f) for f in chunks]
        return lambda: ((i, answers[k]) for i, k in enumerate(keys))

    engine._submit = replayed
    with tempfile.TemporaryDirectory() as tmp:
        table: DictMemo | RectMemo
        if memo == "dict":
            table = DictMemo()
        elif memo == "boxes":
            table = RectMemo(tuple(engine.target.level_names))
        else:
            table = open_memo(Path(tmp) / "memo.db", engine)
        t0 = time.process_time()
        cost = Search(engine, table).build(spec).cost.main
        table.flush()
        took = time.process_time() - t0
        getattr(table, "close", lambda: None)()
    return took, cost


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--plot", help="write a bar chart of the CPU seconds")
    args = ap.parse_args(argv)
    spec = parse_spec(f"Matmul({args.size}x{args.size}x{args.size}, f32)")
    answers, cost = record(spec)
    clingo_run.shutdown()
    memos = {"in memory (DictMemo)": "dict", "boxes in memory (RectMemo)": "boxes", "new SQLite table": "table"}
    times: dict[str, list[float]] = {k: [] for k in memos}
    for _ in range(args.rounds):
        for name, memo in memos.items():
            took, got = replay(spec, answers, memo)
            if got != cost:
                raise SystemExit(f"main_process.py: a replay found cost {got}, the search {cost}")
            times[name].append(took)
    base = times["in memory (DictMemo)"]
    print(f"Matmul {args.size}^3 f32, cold search replayed ({len(answers)} clingo calls), {args.rounds} rounds")
    print("| memo | main-process CPU s (median) | vs in memory (paired median) |")
    print("|---|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.2f} | {statistics.median(t / b for t, b in zip(ts, base)):.2f}x |")
    if args.plot:
        plot_median_bars(args.plot, times, "main-process CPU seconds (median)", height=2.5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
