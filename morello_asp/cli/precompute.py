"""`morello-asp precompute`: fill a memo table with every spec of a grid, in parallel
(solver/precompute/driver.py), on this machine's cores or a Ray cluster."""

from __future__ import annotations

import sys

from morello_asp.cli.args import add_rules_option, add_target_option, check_logic_inputs, int_range
from morello_asp.solver.precompute.driver import Grid, Progress, load_kinds, precompute
from morello_asp.solver.precompute.executors import LocalExecutor, RayExecutor


def _precompute(args) -> int:

    check_logic_inputs(args)
    load_kinds(args.target, args.rules or ())
    grid = Grid(args.kinds, args.dtypes, args.max_size)
    executor = LocalExecutor(args.workers) if args.ray is None else RayExecutor(args.ray, args.workers)
    progress = Progress(enabled=None if not args.quiet else False)
    try:
        report = precompute(
            grid,
            args.db,
            executor=executor,
            workers=args.workers,
            target=args.target,
            rules=args.rules or (),
            resume=args.resume,
            restart=args.restart,
            progress=progress,
            tasks_per_stage=args.tasks_per_stage,
        )
    except KeyboardInterrupt:
        print(
            f"morello-asp: interrupted; every finished task is kept in {args.db}; continue with the same command "
            "and --resume",
            file=sys.stderr,
        )
        return 130
    if not args.quiet:
        print(report.summary(), file=sys.stderr)
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "precompute",
        help="fill a memo table with every spec of a grid, in parallel (local cores or a Ray cluster)",
        description="Solve every spec of a grid into a memo table, stage by stage (smaller specs first), in "
        "parallel. The driver alone writes the table; an interrupted run continues with --resume.",
    )
    p.add_argument("--db", required=True, metavar="FILE", help="memo table to fill (created if missing)")
    p.add_argument("--kinds", default="matmul", metavar="KIND[,KIND]", help="spec kinds of the grid (default: matmul)")
    p.add_argument("--dtypes", default="f32", metavar="DTYPE[,DTYPE]", help="dtypes of the grid (default: f32)")
    p.add_argument(
        "--max-size",
        type=int_range(1, 2**30, "a dimension size"),
        default=128,
        metavar="N",
        help="largest dimension: every power of two up to N (default 128)",
    )
    add_target_option(p)
    add_rules_option(p, "extra logic file, or an optional rule set by name (repeatable)")
    p.add_argument(
        "--workers",
        type=int_range(1, 100_000, "a number of workers"),
        metavar="N",
        help="worker processes (default: one per local core; with --ray, one per CPU of the cluster)",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the workers on a Ray cluster: auto (the one `ray start` made here), local (a new one on this "
        "machine's loopback), HOST:PORT or ray://HOST:10001 (needs the ray extra)",
    )
    p.add_argument(
        "--tasks-per-stage",
        type=int_range(0, 1_000_000, "a number of tasks"),
        default=8,
        metavar="N",
        help="group each stage's roots into about N tasks (default 8; 0: one task per root); tables of runs "
        "with different N hold the same answers in another order",
    )
    p.add_argument(
        "--resume", action="store_true", help="continue the unfinished precompute of this grid recorded in --db, if any"
    )
    p.add_argument(
        "--restart",
        action="store_true",
        help="drop an unfinished precompute's staged tasks and begin this one (committed decisions stay)",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no progress line or summary (warnings about your inputs still show)"
    )
    p.set_defaults(func=_precompute)
