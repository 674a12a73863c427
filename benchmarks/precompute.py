"""Precompute speed: specs/s with 1 and 2 workers, local processes against a Ray cluster,
and the overhead per task (issue 19).

    python benchmarks/precompute.py [--max-size 32] [--workers 1 2] [--executors local ray]
                                    [--rounds 1] [--plot out.png]

Each configuration fills a fresh table with the grid Matmul f32 (every power of two up
to --max-size per dimension) through `morello_asp.precompute`; configurations run
interleaved (round 1: each once, round 2: each again, ...) in this one process, so a
change in the machine's load falls on all of them. Ratios are against 1 worker of the
same executor, per round, then the median. Every table is compared with the first: they
must be identical (the same rows in the same order).

With `ray` among the executors the whole benchmark runs in a network namespace of its
own whose only interface is loopback (`unshare -n`, as root), where it starts a Ray head
with `ray start` (2 CPUs, token authentication, no dashboard) and stops it at the end;
nothing outside this machine can reach it.

Per-task overhead: the round trip of an empty task (driver -> worker -> driver, 200
pings). "Workers busy" is the time spent inside tasks over wall time x workers (what
remains is overhead and waiting at the ends of stages). On a shared machine other work
takes CPU from the workers: "CPU share in tasks" is the CPU time the workers got over the
time they spent in tasks, and "on free cores" is the ratio of the wall times the runs
would have taken had every task got a whole core (CPU in tasks / (workers x busy)).
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from morello_asp.solver.precompute.driver import Grid, precompute, stages_of
from morello_asp.solver.precompute.executors import LocalExecutor, LocalRayCluster, RayExecutor, isolated, only_loopback

NETNS_FLAG = "MORELLO_ASP_BENCH_NETNS"


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "unknown CPU"
    fields = dict(ln.split(":", 1) for ln in out.splitlines() if ":" in ln)
    name = fields.get("Model name", "?").strip()
    fam, model = fields.get("CPU family", "?").strip(), fields.get("Model", "?").strip()
    cpus = fields.get("CPU(s)", "?").strip()
    return f"{name} (family {fam} model {model}), {cpus} CPUs"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def rows(db: Path) -> list:
    with sqlite3.connect(str(db)) as c:
        return list(c.execute("SELECT seq, key, lo, hi, value FROM decisions ORDER BY seq"))


def executor(kind: str, workers: int, address: str | None):
    return LocalExecutor(workers) if kind == "local" else RayExecutor(address, workers)


def ping(kind: str, workers: int, address: str | None, n: int = 200) -> float:
    ex = executor(kind, workers, address)
    from morello_asp.solver.precompute.driver import PROTOCOL, pack

    ex.start({"protocol": PROTOCOL, "target": "avx2", "rules": []}, lambda: pack([]))
    try:
        ex.ping(10)
        return ex.ping(n)
    finally:
        ex.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-size", type=int, default=32)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--executors", nargs="+", choices=["local", "ray"], default=["local", "ray"])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tasks-per-stage", type=int, default=8)
    ap.add_argument("--plot", metavar="PNG")
    args = ap.parse_args()

    if "ray" in args.executors and not only_loopback():
        if os.environ.get(NETNS_FLAG):
            print("cannot isolate the Ray cluster (no loopback-only namespace)", file=sys.stderr)
            return 2
        env = {**os.environ, NETNS_FLAG: "1"}
        return subprocess.call(isolated([sys.executable, *sys.argv]), env=env)

    def stop(signum, frame):  # SIGTERM as Ctrl-C: the Ray cluster is stopped on the way out
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    configs = [(e, w) for e in args.executors for w in args.workers]
    grid = Grid(("matmul",), ("f32",), args.max_size)
    print(f"# precompute benchmark: Matmul f32 up to {args.max_size}, {len(grid.roots())} root specs")
    print(f"# CPU: {cpu_name()}; load before: {load()}")
    results: dict[tuple[str, int], list] = {c: [] for c in configs}
    first: list | None = None
    identical = True
    cluster = LocalRayCluster(max(args.workers)) if "ray" in args.executors else None
    tmp = Path(tempfile.mkdtemp(prefix="pcbench-"))
    overhead: dict[tuple[str, int], float] = {}
    try:
        if cluster is not None:
            cluster.__enter__()
        address = cluster.address if cluster is not None else None
        for e in args.executors:
            overhead[(e, 1)] = ping(e, 1, address)
        for r in range(args.rounds):
            for e, w in configs:
                db = tmp / f"{e}-{w}-{r}.db"
                t0 = time.perf_counter()
                rep = precompute(grid, db, executor=executor(e, w, address), tasks_per_stage=args.tasks_per_stage)
                wall = time.perf_counter() - t0
                got = rows(db)
                same = first is None or got == first
                first = got if first is None else first
                identical = identical and same
                results[(e, w)].append((wall, rep))
                print(
                    f"round {r + 1} {e} x{w}: {wall:.1f} s, {rep.decisions:,} decisions, "
                    f"{rep.decisions / wall:,.0f}/s, {rep.task_seconds:.1f} s in tasks, driver CPU "
                    f"{rep.driver_cpu:.1f} s, workers busy {rep.task_seconds / (wall * w):.0%}, CPU share of the "
                    f"workers in tasks {rep.task_cpu / max(rep.task_seconds, 1e-9):.0%}, "
                    f"{rep.lent_calls} clingo calls on borrowed cores, "
                    f"table {'identical to the first' if same else 'DIFFERENT from the first'}, load {load()}",
                    flush=True,
                )
                for f in tmp.glob(f"{e}-{w}-{r}.db*"):
                    f.unlink()
    finally:
        if cluster is not None:
            cluster.__exit__(None, None, None)

    print(f"# load after: {load()}")
    print()
    print(
        "| executor | workers | wall s | decisions | specs/s | vs 1 worker | in tasks s | workers busy "
        "| CPU share in tasks | CPU s in tasks | vs 1 worker on free cores |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    stages = stages_of(grid_specs(grid), args.tasks_per_stage)
    ntasks = sum(len(st.tasks) for st in stages)
    ratios = {}
    for e, w in configs:
        runs = results[(e, w)]
        wall = statistics.median(x[0] for x in runs)
        rep = runs[0][1]
        base = results.get((e, min(args.workers)))
        ratio = statistics.median(b[0] / x[0] for b, x in zip(base, runs)) if base else float("nan")
        ratios[(e, w)] = ratio
        in_tasks = statistics.median(x[1].task_seconds for x in runs)
        busy = statistics.median(x[1].task_seconds / (x[0] * w) for x in runs)
        cpu = statistics.median(x[1].task_cpu for x in runs)
        share = statistics.median(x[1].task_cpu / x[1].task_seconds for x in runs)
        # On free cores a task takes its CPU time: wall = CPU in tasks / (workers x busy).
        free = cpu / (w * busy)
        free1 = statistics.median(x[1].task_cpu / (x[1].task_seconds / x[0]) for x in base) if base else free
        print(
            f"| {e} | {w} | {wall:.1f} | {rep.decisions:,} | {rep.decisions / wall:,.0f} | {ratio:.2f}x | "
            f"{in_tasks:.1f} | {busy:.0%} | {share:.0%} | {cpu:.1f} | {free1 / free:.2f}x |"
        )
    print()
    for e in args.executors:
        print(f"round trip of an empty task, {e}: {overhead[(e, 1)] * 1e3:.2f} ms")
    print(f"{ntasks} tasks in {len(stages)} stages; tasks per stage: {[len(st.tasks) for st in stages]}")
    print(f"tables identical across all runs: {'yes' if identical else 'NO'}")
    # The critical path: stages run one after another, each as long as its longest task
    # (with as many workers as tasks). From the first run of 1 worker.
    one = results[configs[0]][0][1]
    longest: dict[int, float] = {}
    for si, _, sec in one.task_times:
        longest[si] = max(longest.get(si, 0.0), sec)
    crit = sum(longest.values())
    print(
        f"work inside tasks {one.task_seconds:.1f} s; critical path (sum over stages of the longest task) "
        f"{crit:.1f} s: at most {one.task_seconds / crit:.1f}x from more workers with this grouping"
    )
    print(f"longest task per stage (s): {[round(longest.get(i, 0.0), 1) for i in range(len(stages))]}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        labels = [f"{e} x{w}" for e, w in configs]
        rates = [results[c][0][1].decisions / statistics.median(x[0] for x in results[c]) for c in configs]
        ax.bar(labels, rates, color=["#4477aa" if e == "local" else "#cc6677" for e, _ in configs])
        ax.set_ylabel("specs solved per second")
        ax.set_title(f"precompute Matmul f32 up to {args.max_size} ({cpu_name().split(',')[0]})", fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot: {args.plot}")
    return 0 if identical else 1


def grid_specs(grid):
    from morello_asp.solver.precompute.driver import grid_specs as gs
    from morello_asp.target import as_target

    return gs(grid, as_target(None))[0]


if __name__ == "__main__":
    from morello_asp.cli import run_script

    sys.exit(run_script(main, Path(__file__).name))
