"""How much of a cold search a branch-and-bound could skip: the spec classes it would
still have to ground even if it knew every spec's optimum in advance.

    python benchmarks/pruning.py [--size 64] [--factors 1 1.1 1.25 1.5 2]

A search that prunes safely drops a rewrite only when a lower bound of its cost exceeds
an upper bound of its spec's optimum; it then never grounds the sub-specs it reaches only
through such rewrites. This script runs the exact search of Matmul N^3 (DictMemo), then
walks down from the root again keeping only the rewrites whose lower bound is at most
F x the spec's optimum (F = 1: the best upper bound there can be), and counts the classes
reached. The lower bound of a spec, for each operand and kind, from the target and the
kernels the search met:

- the work: its volume times the cheapest cost per point of a kernel of its kind (a
  kind with no kernel of its own, as Matmul, uses that of its accumulating kind);
- the compulsory moves: an operand at a level no kernel of that kind reads must leave
  it once, each of its lines paying that level's weight and the lightest destination's.

A rewrite's bound is its node's cost over its children's bounds. The script checks that
no bound exceeds the optimum it bounds (the bounds are admissible) and says so if one
does. The answer (64^3, avx2: 93.5% of the classes at F = 1) is why the search is
made faster per class, not by pruning.
"""

from __future__ import annotations

import argparse
from math import prod

from morello_asp import parse_spec
from morello_asp.cost import node_cost
from morello_asp.errors import InputError
from morello_asp.kinds import kind as get_kind
from morello_asp.rewrites import node_from_expansion
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine


class Bounds:
    """Lower bounds of specs' optimal costs, from the kernels a finished search met."""

    def __init__(self, engine: Engine, fitted: dict) -> None:
        self.target = engine.target
        self.rate: dict[str, float] = {}  # kind -> cheapest kernel cost per point
        self.reads: dict[str, set[str]] = {}  # kind -> levels its kernels read operands from
        for spec, exps in fitted.items():
            for e, kids in exps:
                if kids or e.kernel_cost is None:
                    continue
                k = spec.kind
                r = e.kernel_cost / spec.volume
                self.rate[k] = min(self.rate.get(k, r), r)
                self.reads.setdefault(k, set()).update(t.level for t in spec.operands)
        accum = {get_kind(k).accum_of: k for k in self.rate if get_kind(k).accum_of}
        for base, acc in accum.items():  # Matmul's work is done by MatmulAccum kernels
            self.rate.setdefault(base, self.rate[acc])
            self.reads.setdefault(base, self.reads[acc])
        self.leave: dict[str, int] = {}  # level -> least cost a line pays to leave it
        for lv in self.target.levels:
            out = [self.target.level(d).weight for s, d in self.target.move_dests if s == lv.name and d != lv.name]
            if out:
                self.leave[lv.name] = lv.weight + min(out)

    def spec(self, s) -> float:
        b = s.volume * self.rate.get(s.kind, 0)
        readable = self.reads.get(s.kind, set())
        for t, shape in zip(s.operands, s.operand_shapes):
            if t.level not in readable and t.level in self.leave:
                b += -(-prod(shape) * t.dtype.nbytes // self.target.line_bytes) * self.leave[t.level]
        return b

    def rewrite(self, s, e, kids) -> float:
        node = e.derived.get("node") or node_from_expansion(s, e)
        # a bound: no chain of sums below (the floor it would add is a cost, not a saving)
        return node_cost(node, [self.spec(c) for c in kids], [0] * len(kids), self.target)


def run(n: int, factors: list[float], target: str = "avx2") -> dict:
    engine = Engine(target)
    search = Search(engine, DictMemo())
    root = parse_spec(f"Matmul({n}x{n}x{n}, f32)", target)
    program = search.build(root)
    decided = search._decided
    fitted = {s: engine.fitted(s) for s in decided}
    bounds = Bounds(engine, fitted)
    grounded = engine.stats.specs

    def decision(s):
        """The exact search's decision (a memo may have answered s from a spec with
        other limits, so s itself need not have been solved)."""
        d = decided.get(s) or search.solve(s)
        decided[s] = d
        return d

    reached = {}
    for f in factors:
        seen = {root}
        todo = [root]
        while todo:
            s = todo.pop()
            d = decision(s)
            best = d.cost if d.feasible else float("inf")  # no optimum: every rewrite is tried
            if s not in fitted:
                fitted[s] = engine.fitted(s)
            for e, kids in fitted[s]:
                if bounds.rewrite(s, e, kids) > f * best:
                    continue
                for c in kids:  # as the search: no child after one with no implementation
                    if c not in seen:
                        seen.add(c)
                        todo.append(c)
                    if not decision(c).feasible:
                        break
        reached[f] = len({s.without_limits for s in seen})
    over = [s for s, d in decided.items() if d.feasible and bounds.spec(s) > d.cost]
    return {
        "n": n,
        "cost": program.cost.main,
        "program": program,
        "classes": grounded,
        "extra": engine.stats.specs - grounded,
        "reached": reached,
        "over": over,
        "rate": bounds.rate,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=64, help="Matmul N^3 (default 64)")
    ap.add_argument("--factors", type=float, nargs="+", default=[1.0, 1.1, 1.25, 1.5, 2.0])
    ap.add_argument("--target", default="avx2", help="target name or entry file (default avx2)")
    args = ap.parse_args(argv)
    if args.size < 1:
        raise InputError(f"--size {args.size}: give a matmul size of 1 or more")
    bad = [f for f in args.factors if not f >= 1.0]
    if bad:
        raise InputError(f"--factors {bad[0]}: an upper bound is at least the optimum (a factor of 1 or more)")
    r = run(args.size, sorted(args.factors), args.target)
    rates = ", ".join(f"{k} {v:.4g}" for k, v in sorted(r["rate"].items()))
    print(f"Matmul {args.size}^3: optimum {r['cost']:,}, {r['classes']:,} classes grounded by the exact search")
    print(f"  cheapest kernel cost per point: {rates}")
    if r["over"]:
        print(
            f"  the bounds are NOT admissible: {len(r['over'])} specs' bound exceeds their optimum, e.g. {r['over'][0]}"
        )
        return 1
    print("  every bound is at most the optimum it bounds")
    if r["extra"]:
        print(f"  ({r['extra']:,} more classes grounded to decide specs a memo hit had answered)")
    print(f"  {'upper bound':>18} {'classes a pruning search grounds':>33}")
    for f, k in r["reached"].items():
        print(f"  {f:>6.2f} x optimum {k:>22,} {k / r['classes']:>9.1%}")
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "pruning.py"))
