"""`morello-asp synth`, `query` and `explain`: optimal programs from the rule files."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from morello_asp.cli.args import (
    add_rules_option,
    add_target_option,
    check_logic_inputs,
    int_range,
    output_file,
    pad_list,
)
from morello_asp.codegen.baseline import numpy_expression, numpy_seconds, time_python
from morello_asp.errors import CodegenError, InputError, MemoError, MorelloError
from morello_asp.graph import compose_graph, write_graph
from morello_asp.guides import guided, hand_rewrites
from morello_asp.rewrites import family
from morello_asp.serialize import save, to_json
from morello_asp.solver.memo.sqlite import default_table
from morello_asp.solver.search.dp import Progress
from morello_asp.solver.search.engine import get_engine
from morello_asp.spec import parse_spec
from morello_asp.synthesis import DEFAULT_TABLE, make_search
from morello_asp.target import as_target


def _search(args, progress: bool):

    db = None if args.no_db else (args.db or DEFAULT_TABLE)
    return make_search(args.target, args.rules or (), db, Progress(enabled=None if progress else False))


def _table(search) -> Path | None:
    """The file the search keeps its decisions in (--db, or the default table)."""
    return getattr(search.memo, "path", None)


def _spec(args):

    check_logic_inputs(args)
    return parse_spec(args.spec, args.target, rules=args.rules)


def _interrupted(search, args) -> int:
    """After Ctrl-C or SIGTERM: the search has committed what it knew and stopped its
    workers; say what was kept."""
    n = search.stats.solved
    table = _table(search)
    if table is not None:
        classes = getattr(search.memo, "expansions_saved", 0)
        more = f" and {classes} expanded spec classes" if classes else ""
        print(
            f"morello-asp: interrupted; {n} decisions kept in {table}{more}; run the same command to resume",
            file=sys.stderr,
        )
    else:
        print(
            f"morello-asp: interrupted; {n} decisions found, none kept (no memo table: --no-db or MORELLO_ASP_DB=off; "
            "with one, a rerun resumes)",
            file=sys.stderr,
        )
    return 130


def _searching(search, args, work):
    """(work(), None), or (None, exit code) after Ctrl-C or SIGTERM: the table flushed
    and the progress display closed either way."""
    try:
        return work(), None
    except KeyboardInterrupt:
        search.progress.done()
        return None, _interrupted(search, args)
    finally:
        search.memo.flush()
        search.progress.done()


def _lower(imp, args):
    """Lower the program before anything is printed or saved: codegen's refusal (a kernel
    template it cannot expand, ...) is then the one line, and no --out file is left that
    `run` would refuse. Returns (the compiled program for --run and --bench, the C text for
    --emit c); neither is made when not asked for (--out alone lowers to C to check)."""

    if args.standalone and args.emit != "c":
        raise MorelloError("--standalone needs --emit c")
    rules = args.rules or ()
    fn = c_text = None
    try:
        if getattr(args, "run", False) or getattr(args, "bench", False):
            fn = imp.compile(rules)
        if args.emit == "c":
            c_text = imp.to_c(rules, standalone=args.standalone)
        elif args.out and fn is None:
            imp.to_c(rules)
    except CodegenError as e:
        if args.out:
            raise CodegenError(f"{e}; the program was not saved to {args.out}") from None
        raise
    return fn, c_text


def _emit(imp, args, c_text: str | None = None):

    if args.emit == "c":
        print(c_text if c_text is not None else imp.to_c(args.rules or (), standalone=args.standalone))
    elif args.emit == "json":
        import json

        print(json.dumps(to_json(imp, args.rules or ()), indent=1))
    else:
        print(imp)
        print(imp.cost)
    if args.out:
        save(imp, args.out, args.rules or ())
        print(f"saved program (JSON) to {args.out}", file=sys.stderr)


def _run_and_bench(imp, args, fn):
    pad = getattr(args, "pad", None)
    padded = fn.padded(pad[0] if len(pad) == 1 else pad) if fn is not None and pad is not None else None
    if padded is not None and getattr(args, "split", False):
        from morello_asp.padded import compile_padded  # codegen: loaded when this command runs

        db = None if args.no_db else (args.db or DEFAULT_TABLE)
        padded = compile_padded(imp.spec, pad[0] if len(pad) == 1 else pad, rules=args.rules or (), db=db, split=True)
        edges = sum(not r.interior for r, _ in padded.parts)
        print(
            f"regions: {len(padded.parts)} programs, the interior over the caller's arrays and {edges} edge(s) "
            "over small zero-bordered copies",
            file=sys.stderr,
        )
    if args.run or args.bench:
        err, tol = (padded or fn).check()
        ok = err <= tol
        pads = f" (inputs padded by {', '.join(map(str, args.pad))} with zeros)" if padded else ""
        print(f"checked against numpy{pads}: max |error| {err:.3g} (tolerance {tol:.3g}): {'OK' if ok else 'MISMATCH'}")
        if not ok:
            return 1
    if args.bench:
        from morello_asp.codegen.api import (  # numpy, cffi: loaded when this command runs, not for every command
            Program,
            bench_operands,
            per_call,
        )
        from morello_asp.codegen.reference import flops  # numpy: loaded when this command runs

        r = fn.benchmark()
        spec = imp.spec
        emulator = getattr(fn, "emulator", ())
        if emulator:
            print(f"ours:  {r} under {' '.join(emulator)} (an emulator: not a speed claim, no numpy comparison)")
            return 0
        print(f"ours:  {r} (the C timing loop)")
        call = None
        if isinstance(fn, Program):  # a standalone executable's call is a process, not a speed claim
            ops = bench_operands(spec)
            ins = [a for i, a in enumerate(ops) if i not in spec.outputs]
            call = time_python(lambda: fn(*ins))
            print(
                f"ours:  {per_call(call)}/iter through Python (fn(a, b) on numpy's arrays; "
                f"{(call - r.seconds) * 1e6:+.2f} us against the C loop)"
            )
            if padded is not None:
                import numpy as np  # loaded when this command runs, not for every command

                small = [
                    np.ascontiguousarray(a[tuple(slice(0, n) for n in padded.shape(i))]) for i, a in enumerate(ops)
                ]
                ins_p = [a for i, a in enumerate(small) if i not in spec.outputs]
                t_pad = time_python(lambda: padded(*ins_p))
                how = (
                    "the regions' programs, no copy of the image"
                    if getattr(args, "split", False)
                    else "fn.padded: writing them into the zero-bordered buffers"
                )
                print(
                    f"ours:  {per_call(t_pad)}/iter through Python on unpadded inputs ({how}: "
                    f"{(t_pad - call) * 1e6:+.2f} us against the call on bordered inputs)"
                )
        threads = None if args.numpy_threads == 0 else args.numpy_threads

        def ratio(t: float) -> str:
            both = f"C loop {t / r.seconds:.2f}"
            return both + (f", through Python {t / call:.2f}" if call else "")

        t = numpy_seconds(spec, threads) if all(o.dtype.short == "f32" for o in spec.operands) else None
        if t is not None:  # the kind declares the numpy call a user would make instead (kind_numpy/2)
            held = os.environ.get("OPENBLAS_CORETYPE")
            work = flops(spec)
            rate = f", {work / t / 1e9:.2f} GFLOP/s" if work else ""
            print(
                f"numpy: {per_call(t)}/iter{rate} ({numpy_expression(spec)} from Python; BLAS threads: "
                f"{threads or 'all'}{f', held back to OPENBLAS_CORETYPE={held}' if held else ''})"
            )
            print(f"ratio (numpy time / ours): {ratio(t)}")
    return 0


def _synth(args):
    if args.split and args.pad is None:
        raise InputError("--split cuts a padded call into regions: give --pad P too")
    spec = _spec(args)
    search = _search(args, not args.quiet)
    partial = None
    if args.guide:
        partial = guided(spec, args.guide)
        if not args.quiet:
            print(
                f"guide {args.guide}: {hand_rewrites(partial)} rewrites by hand, "
                f"{len(list(partial.holes()))} open specs left to synthesize",
                file=sys.stderr,
            )
    t0 = time.perf_counter()
    imp, stopped = _searching(search, args, lambda: search.build(spec) if partial is None else search.complete(partial))
    if stopped is not None:
        return stopped
    dt = time.perf_counter() - t0
    if not args.quiet:
        e = search.engine.stats
        print(
            f"synthesized in {dt:.2f} s: {search.stats.solved} specs solved, {search.stats.memo_hits} memo hits, "
            f"{e.specs} spec classes grounded in {e.calls} clingo calls ({e.seconds:.2f} s)",
            file=sys.stderr,
        )
    if args.verify:
        try:
            from morello_asp.solver.proofs.verify import (
                verify,  # z3: loaded when this command runs, not for every command
            )
        except ImportError as err:
            raise MorelloError(f"verification is not available: {err}") from None
        report = verify(imp, args.rules or ())
        print(report, file=sys.stderr)
        if not report.ok:
            return 1
    if args.graph:
        _graph(imp, args.graph)
    fn, c_text = _lower(imp, args)
    _emit(imp, args, c_text)
    return _run_and_bench(imp, args, fn)


def _graph(imp, path) -> None:
    """--graph: the program's dataflow, and a Compose's component graph beside it."""

    imp.write_graph(path)
    if imp.spec.k.components is not None:
        p = Path(path)
        write_graph(compose_graph(imp.spec), p.with_name(p.stem + ".compose" + p.suffix), "compose")


def _query(args):
    if args.no_db:
        raise MorelloError("query answers only from a memo table, without searching: drop --no-db")
    if args.db and Path(args.db).is_dir():
        raise MemoError(f"memo table {args.db} is a directory, not a file")
    if args.db and not Path(args.db).is_file():
        raise MemoError(f"no memo table at {args.db}: run `morello-asp synth SPEC --db {args.db}` first")
    spec = _spec(args)
    if not args.db:
        path = default_table(get_engine(as_target(args.target), tuple(str(r) for r in args.rules or ())))
        if path is None:
            raise MemoError(
                "query answers from a memo table and the default one is off (MORELLO_ASP_DB=off): "
                "name one with --db FILE"
            )
        if not path.is_file():
            raise MemoError(
                f"no default table at {path}: run `morello-asp synth SPEC` first, or name one with --db FILE"
            )
        args.db = str(path)
    search = _search(args, False)
    d = search.memo.get(spec)
    if d is None:
        print(f"not in {args.db}: run `morello-asp synth` with --db {args.db} first")
        return 1
    if not d.feasible:
        print(
            f"no implementation of {spec} under these rules and memory limits (recorded in {args.db}; "
            "`morello-asp synth` with the same options says why)"
        )
        return 1
    imp = search.build(spec)  # every decision on the way is a memo hit
    _emit(imp, args, _lower(imp, args)[1])
    return 0


def _explain(args):
    spec = _spec(args)
    search = _search(args, not args.quiet)  # on a cold table it searches as synth does
    rows, stopped = _searching(search, args, lambda: search.explain(spec))
    if stopped is not None:
        return stopped
    print(spec)
    if not rows:
        print("  no rewrite applies")
    for e, d in rows:
        cost = "no implementation" if d is None else f"cost {d.cost}"
        print(f"  {e.action}: {cost}")
        if args.terms:
            print(f"      % action term: {_rule_term(spec, e.action, search.engine)}")
        for c in e.children:
            print(f"      {c}")
    return 0


def _rule_term(spec, action, engine) -> str:
    """How the rule files spell `action` (rewrites' rule_term)."""

    try:
        return family(action.name).rule_term(spec, action, engine)
    except MorelloError as e:  # an action the rules derived cannot fail to spell; say so if it does
        return f"? ({e})"


def program_output(p) -> None:
    """What synth and query print or save of the program they find."""
    p.add_argument("--emit", choices=["listing", "c", "json"], default="listing")
    p.add_argument(
        "--standalone",
        action="store_true",
        help="with --emit c: a whole C program with main() (reads inputs from files, writes the output, times it)",
    )
    p.add_argument(
        "--out",
        type=output_file(),
        metavar="FILE",
        help="also save the program as JSON (for run, bench, verify), whatever --emit prints",
    )


def register(sub):
    def common(p):
        p.add_argument("spec", help='a spec, e.g. "Matmul(64x64x64, f32)" or the full paper syntax')
        add_target_option(p)
        add_rules_option(
            p,
            "extra logic file, or an optional rule set of encodings/options/ by name, e.g. fuse_in_cache (repeatable)",
        )
        g = p.add_mutually_exclusive_group()
        g.add_argument(
            "--db",
            metavar="FILE",
            help="memo table file to reuse and grow (default: one per target and rule set in "
            "$MORELLO_ASP_CACHE, ~/.cache/morello-asp; MORELLO_ASP_DB=off: none)",
        )
        g.add_argument("--no-db", action="store_true", help="keep nothing: search from scratch, write no table")

    p = sub.add_parser("synth", help="synthesize the optimal program for a spec")
    common(p)
    program_output(p)
    p.add_argument("--run", action="store_true", help="compile, run on random inputs, check against numpy")
    p.add_argument("--bench", action="store_true", help="also time it beside numpy")
    p.add_argument(
        "--numpy-threads",
        type=int_range(0, 1024, "a number of threads"),
        default=1,
        metavar="N",
        help="OpenBLAS threads for the numpy timing of --bench (default 1, as ours is serial; 0: all)",
    )
    p.add_argument(
        "--pad",
        type=pad_list,
        metavar="P[,P...]",
        help="with --run/--bench: call the program on inputs without their zero border (a padded "
        "convolution: the spec's image is the bordered one); P zeros on both sides of every windowed "
        "dimension, or one P per windowed dimension (docs/convolutions.md, Padding)",
    )
    p.add_argument(
        "--split",
        action="store_true",
        help="with --pad: check (and with --bench time) the call that copies no image: the padded spec's "
        "interior and edges synthesized as specs of their own (docs/convolutions.md, Padding without a copy)",
    )
    p.add_argument("--verify", action="store_true", help="prove the program legal with z3")
    p.add_argument(
        "--graph",
        type=output_file(),
        metavar="FILE",
        help="write the program's dataflow (buffers, pipeline intermediates, kernels) as Graphviz DOT "
        "(FILE.png: drawn, needs matplotlib); for a Compose also FILE's stem + .compose.dot",
    )
    p.add_argument(
        "--guide",
        metavar="NAME",
        help="schedule the outer loops by a named guide (blis: packing, "
        "cache tiles, 6x16 blocks), then synthesize the rest; for large matmuls",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress or statistics on stderr (warnings about your inputs, e.g. a rule file's, still show)",
    )
    p.set_defaults(func=_synth)

    p = sub.add_parser("query", help="print the optimal program already in a memo table (no search)")
    common(p)
    program_output(p)
    p.set_defaults(func=_query)

    p = sub.add_parser("explain", help="every applicable rewrite of a spec, its sub-specs and optimal cost")
    common(p)
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no progress on stderr (warnings about your inputs still show)"
    )
    p.add_argument(
        "--terms",
        action="store_true",
        help="under each action, the term the rule files use for it (cand/2, forbid/2, action/2), "
        "e.g. tile1(3,2,0) for tile([1, 2, 2, 2]): what a rule of your own matches",
    )
    p.set_defaults(func=_explain)
