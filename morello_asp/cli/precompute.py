"""`morello-asp precompute`: fill a memo table with every spec of a grid, or of an ONNX
model (--onnx), in parallel (solver/precompute/driver.py), on this machine's cores or a
Ray cluster."""

from __future__ import annotations

import sys

from morello_asp.cli.args import add_rules_option, add_target_option, check_logic_inputs, int_range
from morello_asp.cli.main import UsageError
from morello_asp.solver.precompute.driver import Grid, Progress, load_kinds, precompute
from morello_asp.solver.precompute.executors import LocalExecutor, RayExecutor


def _roots(args) -> tuple[object, str | None]:
    """The grid of --kinds/--dtypes/--max-size, or the distinct specs of the --onnx model
    and what to call them in messages. Not both: a grid option beside --onnx is refused
    rather than silently ignored."""
    grid = (args.kinds, args.dtypes, args.max_size)  # None where not given
    if args.onnx is None:
        return Grid(*(d if v is None else v for v, d in zip(grid, ("matmul", "f32", 128)))), None
    given = [o for o, v in zip(("--kinds", "--dtypes", "--max-size"), grid) if v is not None]
    if given:
        raise UsageError(
            f"argument --onnx: not allowed with argument {given[0]} (the model's specs replace the grid) "
            "(see `morello-asp precompute --help`)"
        )
    from morello_asp.onnx.specs import model_specs  # here: onnx is optional and slow to load

    return model_specs(args.onnx, args.target), f"--onnx {args.onnx}"


def _precompute(args) -> int:

    check_logic_inputs(args)
    load_kinds(args.target, args.rules or ())
    grid, describe = _roots(args)
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
            describe=describe,
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
        help="fill a memo table with every spec of a grid or an ONNX model, in parallel (local cores or Ray)",
        description="Solve every spec of a grid (or of an ONNX model: --onnx) into a memo table, stage by stage "
        "(smaller specs first), in parallel. The driver alone writes the table; an interrupted run continues with "
        "--resume.",
    )
    p.add_argument("--db", required=True, metavar="FILE", help="memo table to fill (created if missing)")
    p.add_argument("--kinds", metavar="KIND[,KIND]", help="spec kinds of the grid (default: matmul)")
    p.add_argument("--dtypes", metavar="DTYPE[,DTYPE]", help="dtypes of the grid (default: f32)")
    p.add_argument(
        "--max-size",
        type=int_range(1, 2**30, "a dimension size"),
        metavar="N",
        help="largest dimension: every power of two up to N (default 128)",
    )
    p.add_argument(
        "--onnx",
        metavar="MODEL.onnx",
        help="instead of a grid, the distinct specs of an ONNX model (as `morello-asp onnx` searches them; "
        "needs the onnx extra): then `onnx MODEL.onnx --db FILE` searches nothing",
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
