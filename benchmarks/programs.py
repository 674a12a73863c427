"""Saved programs of one f32 Matmul spec and target (`synth ... --out F.json`) timed
beside numpy in one process: each is checked against numpy, then every program and numpy
run once per round, interleaved; "paired" is the median of the per-round ratios.

    python benchmarks/programs.py a.json b.json [--rounds 9]
    python benchmarks/programs.py a.json --prefetch-ab

Used to compare the programs that two rule sets give for the same spec. With
--prefetch-ab each program is also compiled with its prefetches in one loop, not split
in two (MORELLO_ASP_PREFETCH=unsplit), and without software prefetch (=off;
codegen/prefetch.py), and all are timed in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # must precede numpy's import

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import beside_numpy_matmul, compile_checked  # noqa: E402

from morello_asp.errors import InputError  # noqa: E402
from morello_asp.serialize import load  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("programs", nargs="+", help="program JSON files of one Matmul spec")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument(
        "--prefetch-ab",
        action="store_true",
        help="also time each program's C with its prefetch loops unsplit, and without prefetch",
    )
    args = ap.parse_args(argv)
    impls = [load(p) for p in args.programs]
    specs = {str(i.spec.without_limits) for i in impls}
    if len(specs) != 1 or impls[0].spec.kind != "Matmul":
        raise InputError(f"programs.py: the programs must be of one Matmul spec, not {sorted(specs)}")
    targets = {i.spec.target.name for i in impls}
    if len(targets) != 1:
        raise InputError(f"programs.py: the programs must be for one target, not {sorted(targets)}")
    labels = list(args.programs)
    target = impls[0].spec.target  # the programs' own target (avx2, avx512, a .lp file)
    fns = compile_checked(impls, target)
    if args.prefetch_ab:
        for switch, label in (("unsplit", "prefetch, loop not split"), ("off", "no prefetch")):
            os.environ["MORELLO_ASP_PREFETCH"] = switch
            try:
                fns += compile_checked(impls, target)
            finally:
                del os.environ["MORELLO_ASP_PREFETCH"]
            labels += [f"{p} ({label})" for p in args.programs]
        impls = impls * 3
    ours, theirs = beside_numpy_matmul(fns, impls[0].spec.shape, args.rounds)
    print(f"{specs.pop()}, {args.rounds} interleaved rounds, numpy single-threaded")
    print("| program | cost | median us | numpy / ours (paired) |")
    print("|---|---|---|---|")
    for p, imp, t in zip(labels, impls, ours):
        paired = statistics.median(a / o for a, o in zip(theirs, t))
        print(f"| {p} | {imp.cost.main:,} | {statistics.median(t) * 1e6:.1f} | {paired:.2f} |")
    print(f"| numpy | | {statistics.median(theirs) * 1e6:.1f} | |")
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "programs.py"))
