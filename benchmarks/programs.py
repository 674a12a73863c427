"""Saved programs of one spec and target (`synth ... --out F.json`) timed side by side
in one process: each is checked against numpy, then every program (and, for an f32
Matmul, numpy's matmul) runs once per round, interleaved; "paired" is the median of the
per-round ratios. A spec of another kind (a convolution, a softmax) is timed through the
Python call and in the C loop, each program against the first.

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
    ap.add_argument("programs", nargs="+", help="program JSON files of one spec")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument(
        "--prefetch-ab",
        action="store_true",
        help="also time each program's C with its prefetch loops unsplit, and without prefetch",
    )
    args = ap.parse_args(argv)
    impls = [load(p) for p in args.programs]
    specs = {str(i.spec.without_limits) for i in impls}
    if len(specs) != 1:
        raise InputError(f"programs.py: the programs must be of one spec, not {sorted(specs)}")
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
    if impls[0].spec.kind != "Matmul":
        return side_by_side(specs.pop(), labels, impls, fns, args.rounds)
    ours, theirs = beside_numpy_matmul(fns, impls[0].spec.shape, args.rounds)
    print(f"{specs.pop()}, {args.rounds} interleaved rounds, numpy single-threaded")
    print("| program | cost | median us | numpy / ours (paired) |")
    print("|---|---|---|---|")
    for p, imp, t in zip(labels, impls, ours):
        paired = statistics.median(a / o for a, o in zip(theirs, t))
        print(f"| {p} | {imp.cost.main:,} | {statistics.median(t) * 1e6:.1f} | {paired:.2f} |")
    print(f"| numpy | | {statistics.median(theirs) * 1e6:.1f} | |")
    return 0


def side_by_side(spec: str, labels: list[str], impls: list, fns: list, rounds: int) -> int:
    """Each program in the C loop and through the Python call on random inputs (a new
    output each call, as a user's call makes), interleaved; ratios against the first.
    Each input's memory lies in its operand's layout where that is a permutation (a
    channels-last image), as a model's tensors would, so the call copies nothing."""
    import numpy as np

    from morello_asp.codegen.baseline import time_python
    from morello_asp.codegen.convert import dense_order, in_order
    from morello_asp.codegen.reference import random_operands

    sp = impls[0].spec
    ins = []
    for i, a in enumerate(random_operands(sp, 0)):
        if i in sp.outputs:
            continue
        order = dense_order(sp.operands[i].layout, a.shape)
        ins.append(a if order is None else in_order(np.ascontiguousarray(a.transpose(order)), a.shape, order))
    loop: list[list[float]] = [[] for _ in fns]
    call: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, f in enumerate(fns):
            loop[i].append(f.benchmark(reps=3, min_time=0.05).seconds)
            call[i].append(time_python(lambda f=f: f(*ins), reps=3, min_time=0.05))
    print(f"{spec}, {rounds} interleaved rounds")
    print("| program | cost | C loop us | call us | first / this, C loop (paired) | first / this, call (paired) |")
    print("|---|---|---|---|---|---|")
    for p, imp, lt, ct in zip(labels, impls, loop, call):
        r1 = statistics.median(a / b for a, b in zip(loop[0], lt))
        r2 = statistics.median(a / b for a, b in zip(call[0], ct))
        print(
            f"| {p} | {imp.cost.main:,} | {statistics.median(lt) * 1e6:.1f} | {statistics.median(ct) * 1e6:.1f} "
            f"| {r1:.3f} | {r2:.3f} |"
        )
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "programs.py"))
