"""Legality proofs with z3. Nothing here trusts the rule files: every obligation is
re-derived from the IR (the tree, its specs and layouts) and either proved, refuted
with a counterexample, or left unknown with z3's reason.

Obligations: every layout in use is a bijection from coordinates onto its buffer;
each node's family states its own (morello_asp/rewrites/: a loop's tiles cover each
point exactly once, a kernel applies to its spec by the target's rules, ...); memory
stays within limits; and what codegen assumes of every view holds (prove_views: the
adjacency and strides specs claim, computed from the views the program's C indexes).
"""

from __future__ import annotations

import time
from dataclasses import replace
from math import prod

from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.codegen.emitter import Buffer, Emitter, View, param_names, parameter_views
from morello_asp.cost import compute_cost
from morello_asp.errors import CodegenError
from morello_asp.expr import Const, Var
from morello_asp.ir import Impl, KernelApp, SpecHole
from morello_asp.rewrites import for_node, node_from_expansion
from morello_asp.solver.proofs.box_space import BoxSpace
from morello_asp.solver.proofs.boxes import BoxObligation, BoxProver, TableReport, class_obligations, rules_obligations
from morello_asp.solver.proofs.obligations import Obligation, VerifyReport, prove_adjacent, prove_layout
from morello_asp.solver.search.engine import get_engine
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


class _ViewWalk(Emitter):
    """The emitter's walk over a program, writing its C as codegen does (every node's
    family, every kernel's template), but stating what each view claims as obligations
    where codegen refuses a view that contradicts its spec (Emitter.check_contiguous,
    check_strides): the views are computed from the IR, not taken from the specs."""

    def __init__(self, ct):
        super().__init__(ct, for_node)
        self.claims: dict[str, Obligation] = {}  # what -> the first refutation, else proved

    def _claim(self, ob: Obligation) -> None:
        old = self.claims.get(ob.what)
        if old is None or (old.status == "proved" and ob.status != "proved"):
            self.claims[ob.what] = ob

    def emit(self, node, views):
        if isinstance(node, SpecHole):  # an open spec: what its operands claim still holds or not
            self.visit(node, [replace(v, ts=t) for v, t in zip(views, node.spec.operands)])
            return
        super().emit(node, views)

    def visit(self, node, views):
        """Each memory view claims its adjacency (TensorSpec.contig): the values of the
        inner c physical dims of its layout are adjacent in its buffer, for every value
        of the enclosing loop counters."""
        for name, v in zip(param_names(node.spec), views):
            ts = v.ts
            full = ts.layout.full_contiguity()
            contig = full if ts.contig is None else ts.contig
            if v.buf.in_registers or contig == 0 or prod(v.shape) == 1:
                continue
            block = ts.layout.contiguous_run(v.shape, contig)
            if block == 1:
                continue
            names = [f"x{d}" for d in range(len(v.shape))]
            if not v.buf.ts.layout.is_packed:
                # a layout without packs is linear: where a view starts does not change
                # which of its values are adjacent, so one proof serves every origin
                v = replace(v, origin=tuple(Const(0) for _ in v.origin))
            offset = v.buf.ts.layout.buffer_expr(v.buf.shape, v.position([Var(n) for n in names]))
            loops = tuple((n, r.lo, r.hi, r.step) for n, r in sorted(self.env.items()) if n in offset.vars())
            claim = (
                "fully contiguous" if contig >= full else f"contiguous in its {contig} inner physical dims (c{contig})"
            )
            what = f"{node.spec.short()}: operand {name} {ts.text()} is {claim} in {v.buf.name}"
            self._claim(prove_adjacent(what, offset, ts.layout.buffer_expr(v.shape, names), v.shape, block, loops))

    def check_contiguous(self, node, views):
        """visit proves it (at every node, for every loop iteration)."""

    def check_strides(self, node, views):
        """The stride a kernel's view claims, at the loops' first and last iterations."""
        last = {n: r.hi - r.hi % r.step for n, r in self.env.items()}
        for name, v in zip(param_names(node.spec), views):
            if v.ts.stride is None:
                continue
            line = node.spec.target.line_bytes
            why = self.stride_mismatch(v, line) or self.stride_mismatch(v, line, at=last)
            what = f"{node.spec.short()}: operand {name} {v.ts.text()} has the stride it claims in {v.buf.name}"
            self._claim(Obligation(what, "refuted", why) if why else Obligation(what, "proved"))


def prove_views(impl: Impl, rules=()) -> list[Obligation]:
    """What codegen assumes of the views its kernels and loops index: each claim of
    adjacency and stride holds in the buffers of the program's C (_ViewWalk), and the
    C can be written at all (every kernel has a template for its operands, register
    views start at whole registers, ...): a program codegen would refuse never proves."""
    em = _ViewWalk(get_ctarget(impl.spec.target, rules))
    what = f"codegen lowers {impl.spec.short()} to C"
    try:
        em.emit(impl, parameter_views(em, impl.spec)[0])
    except CodegenError as e:
        return [*em.claims.values(), Obligation(what, "refuted", str(e))]
    return [*em.claims.values(), Obligation(what, "proved")]


# ---- what a memo box's decision builds: the same view claims, for every spec class ----
VIEW_CAP = 4096  # spec classes per box whose views are checked one by one; beyond, corners only
EMBED_GROWTH = 64  # how far a parameter's buffer may be grown to hold exactly what its spec claims


def _embedded_views(em: _ViewWalk, spec) -> list:
    """The views a decision's node sees of its spec's operands, in buffers that hold what
    the spec claims and no more: a memo box's spec is a view inside some larger buffer,
    so an operand claiming cN (0 < N < full) lies in a buffer grown along the logical
    dimension of the outermost of its inner N physical dims, so that the values just
    beyond its run are not adjacent. The growth is the smallest (up to EMBED_GROWTH)
    under which the operand's own claims hold in the buffer: its adjacency (proved as
    for programs) and its stride exponent sN; a claim no growth satisfies keeps the
    exact buffer, and so does c0 (claiming nothing: a view of it stepping over values
    would be a reshaped view, which codegen's spatial_split refuses of its operands;
    the rules give a child of a c0 view adjacency only along single positions)."""
    views = parameter_views(em, spec)[0]
    line = spec.target.line_bytes
    out = list(views)
    for i, (name, v) in enumerate(zip(param_names(spec), views)):
        ts = v.ts
        full = ts.layout.full_contiguity()
        contig = full if ts.contig is None else ts.contig
        pdims = ts.layout.pdims
        if v.buf.in_registers or not pdims or contig == 0 or (contig >= full and ts.stride is None):
            continue
        d = pdims[len(pdims) - contig].dim
        for grow in range(1, EMBED_GROWTH + 1):
            shape = list(v.shape)
            shape[d] += grow
            buf = Buffer(v.buf.name, tuple(shape), ts, False, v.buf.root, align=v.buf.align)
            cand = View(buf, v.origin, v.shape, ts)
            probe = _ViewWalk(em.ct)
            probe.visit(SpecHole(spec), [*out[:i], cand, *out[i + 1 :]])
            own = [o for o in probe.claims.values() if f": operand {name} " in o.what]
            if all(o.status == "proved" for o in own) and not probe.stride_mismatch(cand, line):
                out[i] = cand
                break
    return out


def prove_decision_views(spec, expansion, ct) -> Obligation | None:
    """The first claim a decision's node (its children open) makes of a view that its
    spec's operands, embedded as _embedded_views says, do not back; None if every one
    holds. The claims are prove_views': each child's and kernel's adjacency and stride,
    and that codegen can write the node's C."""
    node = node_from_expansion(spec, expansion)
    em = _ViewWalk(ct)
    try:
        em.emit(node, _embedded_views(em, spec))
    except CodegenError as e:
        return Obligation(f"codegen lowers {spec.short()}'s {expansion.action} to C", "refuted", str(e))
    return next((o for o in em.claims.values() if o.status != "proved"), None)


def views_obligations(boxes, engine, progress=None) -> list[BoxObligation | None]:
    """One obligation per box (None for a box with no action): on every spec class of the
    box (its lowest limits; up to VIEW_CAP, else its corners, and the obligation is
    unknown), the views the decision builds back what its children and kernels claim of
    them (prove_decision_views), as `verify` proves them for a program. A class the rule
    files derive no such decision for is the rules obligation's to refute."""
    ct = get_ctarget(engine.target, engine.rules)

    def check(s, action, e):
        why = prove_decision_views(s, e, ct) if e is not None else None
        return f"{why.what}: {why.detail}" if why is not None else None

    claim = "the views it builds back what its children and kernels claim"
    return class_obligations(boxes, engine, claim, check, progress, VIEW_CAP, "views")


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
    _add(rep, seen, prove_views(impl, rules))
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
def verify_table(
    memo, engine=None, limit: int | None = None, progress=None, rules: bool = True, views: bool = True
) -> TableReport:
    """Prove every box of `memo` (a RectMemo: in memory or solver/memo/sqlite.py's SQLite table).
    `engine` (default: the avx2 engine) supplies the target and the rule files; `limit`
    stops after that many boxes in table order; `progress(text)` is called as work goes.
    `rules`: clingo re-derives each decision on the box's spec classes; `views`: what the
    decision's views claim holds on them (views_obligations), as `verify` proves it."""
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
    if views:
        t1 = time.perf_counter()
        for obs, ob in zip(per_box, views_obligations(boxes, engine, progress)):
            obs += [ob] if ob else []
        rep.views_seconds = time.perf_counter() - t1
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
