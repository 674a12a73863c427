"""How well does cost rank speed? Draw many different complete programs of one spec from
the search's alternatives, time each (checked against numpy first), and report the
Spearman rank correlation between predicted cost and measured time under the default
target and under a calibrated one. The programs are drawn from the search of the target
that was calibrated (`--base`; default: the calibrated target's name without
`_calibrated`: avx2 for avx2_calibrated, avx512 for avx512_calibrated), compiled for
the calibrated target (its C flags: no auto-vectorization), and both costs are ranked
against the times of those same binaries. `--against OTHER.lp` also compiles the same programs for another
calibrated target (e.g. one fitted with `calibrate.py --vectorize`), times both sets
of binaries in the same interleaved rounds and reports its Spearman on its binaries.

    python benchmarks/cost_rank.py [--spec "Matmul(16x16x16, f32)"] [--count 60]
                                   [--target avx2_calibrated] [--base avx2] [--against OTHER]
                                   [--db FILE] [--also TARGET ...]

`--also TARGET` ranks the same programs, on the same binaries, under the costs of another
target (name or .lp path): e.g. avx2 as an earlier revision had it, exported with
`git archive REV encodings | tar -x -C old/` and named as old/encodings/targets/avx2.lp.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from alternatives import distinct_programs, recost  # noqa: E402
from timing import compile_checked, median_times, spearman, status  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="Matmul(16x16x16, f32)")
    ap.add_argument("--count", type=int, default=60, help="different programs to time")
    ap.add_argument("--target", default="avx2_calibrated", help="the calibrated target (name or .lp path)")
    ap.add_argument(
        "--base",
        help="the target the programs are drawn from, whose costs are the 'before' "
        "(default: --target's name without _calibrated)",
    )
    ap.add_argument("--k", type=int, default=8, help="sample among the k cheapest other rewrites")
    ap.add_argument("--p-opt", type=float, default=0.4, help="chance of the optimal rewrite at each spec")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--db", help="memo table for the search (speeds up re-runs)")
    ap.add_argument("--against", help="a second calibrated target (name or .lp path), timed on its own binaries")
    ap.add_argument("--list", action="store_true", help="print each program's listing too")
    ap.add_argument(
        "--also", nargs="+", default=[], metavar="TARGET", help="also rank the same programs under these targets' costs"
    )
    args = ap.parse_args(argv)

    from morello_asp import parse_spec
    from morello_asp.codegen.ctarget import get_ctarget
    from morello_asp.errors import InputError
    from morello_asp.solver.search.engine import Engine
    from morello_asp.synthesis import make_search
    from morello_asp.target import installed_targets

    calibrated = Engine(args.target)  # a bad spec or target is one line, exit 2 (run_script)
    base = args.base
    if base is None:
        stem = calibrated.target.name.removesuffix("_calibrated")
        if stem == calibrated.target.name or stem not in installed_targets()[0]:
            raise InputError(
                f"--target {args.target}: name the target its programs are drawn from with --base "
                "(only NAME_calibrated names its own)"
            )
        base = stem
    why = get_ctarget(calibrated.target).cannot_run()
    if why:
        raise InputError(f"{args.target}'s programs are timed here, and this machine cannot run them: {why}")
    spec = parse_spec(args.spec, base)
    other = Engine(args.against) if args.against else None
    search = make_search(base, db=args.db)
    bname = search.engine.target.name
    status(f"synthesizing {args.spec} and sampling {args.count} programs")
    also = [Engine(t) for t in args.also]
    engines = [calibrated] + ([other] if other else []) + also
    refused: set[str] = set()

    def compilable(imp) -> bool:
        """Every kernel of the program has C and a cost in every target it is compiled
        for and ranked under: kernels the base target gained after a target was
        calibrated (avx2's generic scalar `point` and `VectorCopy`) have neither there."""
        from morello_asp.codegen.ctarget import get_ctarget
        from morello_asp.errors import CodegenError
        from morello_asp.ir import KernelApp

        for e in engines:
            try:
                recost(imp, e)
            except ValueError as err:
                refused.add(str(err).split(" for ")[0])
                return False
        for node in imp.walk():
            if isinstance(node, KernelApp):
                dtype = str(node.spec.operands[node.spec.output].dtype)  # as codegen looks it up
                for e in engines:
                    try:
                        get_ctarget(e.target).template(node.kernel, dtype)
                    except CodegenError:
                        refused.add(f"{node.kernel} ({e.target.name})")
                        return False
        return True

    progs = distinct_programs(
        search,
        spec,
        args.count,
        k=args.k,
        p_opt=args.p_opt,
        seed=args.seed,
        progress=lambda n, tries: status(f"sampled {n}/{args.count} programs ({tries} draws)"),
        accept=compilable,
    )
    if refused:
        print(f"left out: programs with a kernel a calibrated target lacks: {'; '.join(sorted(refused))}")
    search.memo.flush()
    fns = compile_checked(progs, args.target)  # the calibrated target's C and flags
    if other:
        fns += compile_checked(progs, args.against)
    both = median_times(fns, rounds=args.rounds)  # one set of interleaved rounds for all binaries
    seconds, seconds_other = both[: len(progs)], both[len(progs) :]
    before = [p.cost.main for p in progs]
    after = [recost(p, calibrated) for p in progs]

    name = calibrated.target.name
    print(
        f"{len(progs)} different programs of {spec}, each checked against numpy; time = median of "
        f"{args.rounds} interleaved rounds (C timing loop); program 0 is the {bname} optimum"
    )
    print(f"{'program':>7} {'cost ' + bname:>12} {'cost ' + name:>22} {'measured ns':>12}")
    for i in sorted(range(len(progs)), key=lambda i: seconds[i]):
        print(f"{i:>7} {before[i]:>12} {after[i]:>22} {seconds[i] * 1e9:>12.1f}")
        if args.list:
            print(progs[i])
    print(
        f"Spearman(cost, time): before ({bname}) {spearman(before, seconds):.3f}, "
        f"after ({name}) {spearman(after, seconds):.3f}  [{len(progs)} programs, compiled for {name}]"
    )
    for t, e in zip(args.also, also):
        print(f"Spearman(cost, time) under {t}: {spearman([recost(p, e) for p in progs], seconds):.3f}")
    if other:
        oname = other.target.name
        print(
            f"Spearman(cost, time) on the binaries compiled for {oname}: "
            f"{bname} {spearman(before, seconds_other):.3f}, "
            f"{oname} {spearman([recost(p, other) for p in progs], seconds_other):.3f}"
        )
        print(
            f"fastest program: {min(seconds) * 1e9:.1f} ns ({name} binaries), {min(seconds_other) * 1e9:.1f} "
            f"ns ({oname})"
        )
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "cost_rank.py"))
