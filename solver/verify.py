"""Legality proofs with z3. Nothing here trusts the rule files: every obligation is
re-derived from the IR (the tree, its specs and layouts) and either proved, refuted
with a counterexample, or left unknown with z3's reason.

Obligations: every layout in use is a bijection from coordinates onto its buffer;
each node's family states its own (morello_asp/rewrites/: a loop's tiles cover each
point exactly once, a kernel applies to its spec by the target's rules, ...); and
memory stays within limits.
"""

from __future__ import annotations

import time

from morello_asp.cost import compute_cost
from morello_asp.ir import Impl, KernelApp, SpecHole
from morello_asp.rewrites import for_node
from morello_asp.solver.box_space import BoxSpace
from morello_asp.solver.engine import get_engine
from morello_asp.solver.obligations import Obligation, VerifyReport, prove_layout
from morello_asp.solver.verify_boxes import BoxProver, TableReport, rules_obligations
from morello_asp.target import Target


def prove_memory(impl: Impl, target) -> list[Obligation]:
    """Live buffers per level, summed along every root-to-leaf path, within the root's
    limits; each node within its own spec's limits; register tensors fit the file."""
    out = []
    worst = [0] * len(target.levels)

    def walk(node, live):
        allocs = [] if isinstance(node, SpecHole) else for_node(node).allocations(node, target)
        if allocs:
            live = list(live)
            for li, units in allocs:  # a move's buffer, a pipeline's intermediates
                live[li] += units
        for i, v in enumerate(live):
            worst[i] = max(worst[i], v)
        for c in node.children:
            walk(c, live)

    walk(impl, [0] * len(target.levels))
    for lv, w, lim in zip(target.levels, worst, impl.spec.limits):
        what = f"{lv.name}: live buffers on every path ({w} {lv.unit}s) within the limit {lim}"
        out.append(Obligation(what, "proved") if w <= lim else Obligation(what, "refuted", f"{w} > {lim}"))
        what = f"{lv.name}: live buffers within the target's capacity {lv.capacity}"
        out.append(
            Obligation(what, "proved") if w <= lv.capacity else Obligation(what, "refuted", f"{w} > {lv.capacity}")
        )
    bad = [n for n in impl.walk() if any(p > lv for p, lv in zip(compute_cost(n, target).peak, n.spec.limits))]
    what = "every node's peak memory within its spec's limits"
    out.append(
        Obligation(what, "refuted", f"{bad[0].spec}: peak {list(compute_cost(bad[0], target).peak)}")
        if bad
        else Obligation(what, "proved")
    )
    return out


class ProgramContext:
    """What node obligations may ask: the program's target, and the rules' expansions
    of a spec (for checks the target's logic files decide, such as kernels)."""

    def __init__(self, target: Target, rules=()):
        self.target = target
        self.rules = tuple(rules)
        self._engine = None

    @property
    def engine(self):
        if self._engine is None:
            self._engine = get_engine(self.target, self.rules)
        return self._engine

    def prefetch(self, specs) -> None:
        self.engine.expand_many(list(dict.fromkeys(specs)))

    def expansions(self, spec):
        return self.engine.expand(spec)


def verify(impl: Impl, rules=()) -> VerifyReport:
    """Prove a program legal on its spec's target: the operands' layouts are bijections,
    every node's own obligations hold (its family's, morello_asp.rewrites), and memory
    stays within limits. `rules`: logic files the program's kernels come from."""
    t0 = time.perf_counter()
    tgt = impl.spec.target
    ctx = ProgramContext(tgt, rules)
    rep = VerifyReport()
    nodes = [n for n in impl.walk() if not isinstance(n, SpecHole)]
    ctx.prefetch(n.spec for n in nodes if isinstance(n, KernelApp))
    seen: set[str] = set()
    for ts, shp in zip(impl.spec.operands, impl.spec.operand_shapes):
        _add(rep, seen, [prove_layout(ts.layout, tuple(shp))])
    for node in nodes:
        _add(rep, seen, for_node(node).program_obligations(node, ctx))
    rep.obligations += prove_memory(impl, tgt)
    rep.seconds = time.perf_counter() - t0
    return rep


def _add(rep: VerifyReport, seen: set[str], obs: list[Obligation]) -> None:
    """Each claim once (a layout used by many buffers is proved once)."""
    for o in obs:
        if o.what not in seen:
            seen.add(o.what)
            rep.obligations.append(o)


# ---- the table ---------------------------------------------------------------------------
def verify_table(memo, engine=None, limit: int | None = None, progress=None, rules: bool = True) -> TableReport:
    """Prove every box of `memo` (a RectMemo: in memory or solver.memo_db's SQLite table).
    `engine` (default: the avx2 engine) supplies the target and the rule files; `limit`
    stops after that many boxes in table order; `progress(text)` is called as work goes."""
    t0 = time.perf_counter()
    engine = engine or get_engine()
    target = engine.target
    rows = sorted(memo.boxes(), key=lambda b: b[1])[:limit]
    boxes = [(seq, BoxSpace(key, lo, hi, target), d) for key, seq, lo, hi, d in rows]
    rep = TableReport(boxes=len(boxes))
    per_box: list[list] = [[] for _ in boxes]
    if rules:
        for obs, ob in zip(per_box, rules_obligations(boxes, engine, progress)):
            obs += [ob] if ob else []
        rep.rules_seconds = time.perf_counter() - t0
    prover = BoxProver(target)
    last = 0.0
    for i, (seq, space, d) in enumerate(boxes):
        per_box[i] += prover.obligations(seq, space, d)
        if progress and (time.perf_counter() - last > 0.2 or i + 1 == len(boxes)):
            last = time.perf_counter()
            n = sum(len(v) for v in per_box)
            bad = sum(o.status == "refuted" for v in per_box for o in v)
            progress(f"z3: {i + 1}/{len(boxes)} boxes, {n} obligations, {bad} refuted")
    rep.obligations = [o for obs in per_box for o in obs]
    rep.z3_queries, rep.reused = prover.refuter.queries, prover.reused
    rep.seconds = time.perf_counter() - t0
    return rep
