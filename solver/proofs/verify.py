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
from itertools import product
from math import prod

from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.codegen.emitter import ALIGN, Buffer, Emitter, View, param_names, parameter_views
from morello_asp.cost import compute_cost
from morello_asp.errors import CodegenError
from morello_asp.expr import Const, Var
from morello_asp.ir import Impl, KernelApp, SpecHole
from morello_asp.rewrites import for_node, node_from_expansion
from morello_asp.solver.proofs.box_space import BoxSpace
from morello_asp.solver.proofs.boxes import BoxObligation, BoxProver, TableReport, class_obligations, rules_obligations
from morello_asp.solver.proofs.obligations import (
    Obligation,
    VerifyReport,
    prove_adjacent,
    prove_aligned,
    prove_consecutive,
    prove_layout,
)
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

    def __init__(self, ct, track_alignment: bool = False):
        super().__init__(ct, for_node)
        self.claims: dict[str, Obligation] = {}  # what -> the first refutation, else proved
        # Alignment claims (TensorSpec.aligned) say something only where a rule file in
        # force declares track_alignment/0; otherwise every spec claims it.
        self.track_alignment = track_alignment
        # Buffer name -> (bytes its first value is aligned to, why no more) where that is
        # not Buffer.align: a parameter whose spec claims alignment, for the claims alone.
        self.base_align: dict[str, tuple[int, str]] = {}
        # Only the claims of views into this buffer (None: all): db verify's walk of a
        # node again with one operand elsewhere, whose other claims are the first walk's.
        self.only: str | None = None

    def loops(self, *exprs) -> tuple[tuple[str, int, int, int], ...]:
        """The enclosing loop counters that `exprs` read, as the proofs take them: (name,
        lo, hi, step), by name."""
        used = set().union(*(e.vars() for e in exprs))
        return tuple((n, r.lo, r.hi, r.step) for n, r in sorted(self.env.items()) if n in used)

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
        of the enclosing loop counters; and, under track_alignment, its alignment."""
        for name, v in zip(param_names(node.spec), views):
            ob = self.adjacency(node.spec, name, v) if self.only in (None, v.buf.name) else None
            if ob is not None:
                self._claim(ob)
        if self.track_alignment:
            self._claim_alignment(node.spec, views)

    def adjacency(self, spec, name: str, v: View) -> Obligation | None:
        """View v's claim of adjacency, as operand `name` of `spec` (None: it claims none)."""
        ts = v.ts
        full = ts.layout.full_contiguity()
        contig = full if ts.contig is None else ts.contig
        if v.buf.in_registers or contig == 0 or prod(v.shape) == 1:
            return None
        block = ts.layout.contiguous_run(v.shape, contig)
        if block == 1:
            return None
        names = [f"x{d}" for d in range(len(v.shape))]
        if not v.buf.ts.layout.is_packed:
            # a layout without packs is linear: where a view starts does not change
            # which of its values are adjacent, so one proof serves every origin
            v = replace(v, origin=tuple(Const(0) for _ in v.origin))
        offset = v.buf.ts.layout.buffer_expr(v.buf.shape, v.position([Var(n) for n in names]))
        loops = self.loops(offset)
        claim = "fully contiguous" if contig >= full else f"contiguous in its {contig} inner physical dims (c{contig})"
        what = f"{spec.short()}: operand {name} {ts.text()} is {claim} in {v.buf.name}"
        return prove_adjacent(what, offset, ts.layout.buffer_expr(v.shape, names), v.shape, block, loops)

    def _claim_alignment(self, spec, views) -> None:
        """Each memory view of an operand whose spec claims alignment (no `ua`) starts on
        a cache line (tgt_line_bytes/1, what rules/tile.lp keeps it by) for every value
        of the loop counters, in a buffer known to be aligned: the program's own are
        (ALIGN), a parameter is as far as the program's spec claims (its callers' part)."""
        line = spec.target.line_bytes
        for name, v in zip(param_names(spec), views):
            if v.buf.in_registers or not v.ts.aligned or self.only not in (None, v.buf.name):
                continue
            base, why = self.base_align.get(v.buf.name, (v.buf.align, f"buffer {v.buf.name}"))
            what = f"{spec.short()}: operand {name} {v.ts.text()} is aligned to a {line}-byte line in {v.buf.name}"
            self._claim(self._aligned_ob(what, v, [(0,) * len(v.shape)], line, base, why))

    def _aligned_ob(self, what, v, coords, nbytes, base, why) -> Obligation:
        offs = tuple(self.offset(v, c) for c in coords)
        return prove_aligned(what, offs, nbytes, v.buf.ts.dtype.nbytes, base, self.loops(*offs), why)

    def rely_aligned(self, what, v, nbytes, coords):
        """A kernel's aligned variant (a `X=aligned` template line): every access it makes
        starts on an `nbytes` boundary for every value of the loop counters, in a buffer
        aligned as codegen knows it (Buffer.align: a parameter only to its element)."""
        if self.only not in (None, v.buf.name):
            return
        kind = "a parameter" if v.buf.align < ALIGN else "allocated"
        what = f"{what} is {nbytes}-byte aligned in {v.buf.name}"
        self._claim(self._aligned_ob(what, v, coords, nbytes, v.buf.align, f"buffer {v.buf.name} ({kind})"))

    def rely_vector(self, what, v, runs, width):
        """A kernel's vector loads and stores (`{X_v}`): each vector's `width` values lie
        in order at consecutive offsets of the buffer, for every value of the loop
        counters (the kernels' rules require contiguous operands; nothing else did)."""
        if self.only not in (None, v.buf.name):
            return
        offs = tuple(tuple(self.offset(v, c) for c in run) for run in runs)
        loops = self.loops(*(o for run in offs for o in run))
        what = f"{what} are runs of {width} adjacent values in {v.buf.name}"
        self._claim(prove_consecutive(what, offs, tuple(tuple(run) for run in runs), width, loops))

    def check_contiguous(self, node, views):
        """visit proves it (at every node, for every loop iteration)."""

    def check_strides(self, node, views):
        """The stride a kernel's view claims, at the loops' first and last iterations."""
        last = {n: r.hi - r.hi % r.step for n, r in self.env.items()}
        for name, v in zip(param_names(node.spec), views):
            if v.ts.stride is None or self.only not in (None, v.buf.name):
                continue
            line = node.spec.target.line_bytes
            why = self.stride_mismatch(v, line) or self.stride_mismatch(v, line, at=last)
            what = f"{node.spec.short()}: operand {name} {v.ts.text()} has the stride it claims in {v.buf.name}"
            self._claim(Obligation(what, "refuted", why) if why else Obligation(what, "proved"))


def prove_views(impl: Impl, rules=(), track_alignment: bool | None = None) -> list[Obligation]:
    """What codegen assumes of the views its kernels and loops index: each claim of
    adjacency and stride holds in the buffers of the program's C (_ViewWalk), every
    access a kernel's aligned variant makes is aligned, and the C can be written at all
    (every kernel has a template for its operands, register views start at whole
    registers, ...): a program codegen would refuse never proves. Under
    `track_alignment` (default: whether the rule files declare it), each view whose spec
    claims alignment is aligned, taking the program's spec's claims of its parameters."""
    if track_alignment is None:
        track_alignment = get_engine(impl.spec.target, rules).tracks_alignment
    em = _ViewWalk(get_ctarget(impl.spec.target, rules), track_alignment)
    what = f"codegen lowers {impl.spec.short()} to C"
    views = parameter_views(em, impl.spec)[0]
    line = impl.spec.target.line_bytes
    for v, ts in zip(views, impl.spec.operands):
        if ts.aligned and not v.buf.in_registers:
            em.base_align[v.buf.name] = (line, f"parameter {v.buf.name} (as the program's spec claims)")
    try:
        em.emit(impl, views)
    except CodegenError as e:
        return [*em.claims.values(), Obligation(what, "refuted", str(e))]
    return [*em.claims.values(), Obligation(what, "proved")]


# ---- what a memo box's decision builds: the same view claims, for every spec class ----
VIEW_CAP = 4096  # spec classes per box whose views are checked one by one; beyond, corners only
EMBED_GROWTH = 64  # how far a parameter's buffer may be grown to hold exactly what its spec claims


def _own_claims_hold(em: _ViewWalk, spec, name: str, cand: View) -> bool:
    """Operand `name` of `spec` holds in view `cand` what it claims: its adjacency
    (proved as for programs), its stride exponent sN and, under track_alignment, a
    line-aligned first value if it claims alignment (its buffer's first value taken as
    aligned)."""
    ob = em.adjacency(spec, name, cand)
    if ob is not None and ob.status != "proved":
        return False
    line = spec.target.line_bytes
    if em.stride_mismatch(cand, line):
        return False
    if em.track_alignment and cand.ts.aligned:
        first = em.offset(cand, (0,) * len(cand.shape))
        return isinstance(first, Const) and first.value * cand.ts.dtype.nbytes % line == 0
    return True


def _resized(v: View, shape, steps=None, origin=None) -> View:
    buf = Buffer(v.buf.name, tuple(shape), v.ts, False, v.buf.root, align=v.buf.align)
    return View(buf, v.origin if origin is None else origin, v.shape, v.ts, steps=steps)


def _placement(v: View) -> str:
    """Where an embedded operand lies, for a refutation's reader ("" for its exact
    buffer at origin 0)."""
    origin = [o.value if isinstance(o, Const) else o for o in v.origin]
    if v.buf.shape == v.shape and not any(origin) and not v.steps:
        return ""
    text = f"in a {'x'.join(map(str, v.buf.shape))} buffer"
    if any(origin):
        text += f" at origin {origin}"
    if v.steps:
        d = next(j for j, k in enumerate(v.steps) if k != 1)
        text += f", one position in {v.steps[d]} along dimension {d}"
    return text


def _embedded_views(em: _ViewWalk, spec, reshaped: bool = True) -> tuple[list, list]:
    """The views a decision's node sees of its spec's operands: (one embedding of every
    operand, [(operand, another view of it), ...] to prove the node at too).

    A memo box's spec is a view inside some larger buffer, so each operand lies in a
    buffer that holds what it claims and no more. An operand claiming cN (0 < N < full)
    lies in a buffer grown along the logical dimension of the outermost of its inner N
    physical dims, so that the values just beyond its runs are not adjacent. An operand
    claiming c0 (no adjacency at all) takes every k-th position along the logical
    dimension of its innermost physical dim that it spans (View.steps: no two of its
    values adjacent, as spatial_split's view of a strided convolution's image), or,
    where the node's family takes no reshaped operand (`reshaped` False: spatial_split,
    whose C refuses them), lies in a buffer grown along the logical dimension of its
    innermost physical dim (a view of one pixel of an image has its channels h * w
    apart; in a linear layout only the innermost dim's run, if the view spans more than
    one position of it, stays adjacent: no plain view breaks it). The growth or
    step is the smallest (up to EMBED_GROWTH) under which the operand's own claims hold
    in the buffer (_own_claims_hold); a claim no growth satisfies keeps the exact
    buffer, and so does a full claim without a stride.

    Where the layout has packs, which values are adjacent depends on where the view
    starts in its packs too: the alternatives are the operand at every other origin
    modulo its packs' periods (each packed logical dim, one period more of buffer)
    where its own claims still hold, up to ORIGIN_CAP of them per operand. Without
    packs a layout is linear, and where a view starts changes no claim (docs/legality.md)."""
    views = parameter_views(em, spec)[0]
    out = list(views)
    alts: list = []
    for i, (name, v) in enumerate(zip(param_names(spec), views)):
        if v.buf.in_registers or not v.ts.layout.pdims or prod(v.shape) == 1:
            continue
        key = (name, v.ts, v.shape, reshaped, em.track_alignment, spec.target.line_bytes)
        if key not in _EMBEDDED:
            _EMBEDDED[key] = _embed(em, spec, name, v, reshaped)
        out[i], more = _EMBEDDED[key]
        alts += [(i, alt) for alt in more]
    return out, alts


_EMBEDDED: dict = {}  # (name, tensor spec, shape, ...) -> _embed's answer: operands recur in many specs


def _embed(em: _ViewWalk, spec, name: str, v: View, reshaped: bool) -> tuple[View, list]:
    """Operand `name` of `spec` (view v, its exact buffer at origin 0) as _embedded_views
    places it: (its view, [the view at another origin in its packs, ...])."""
    ts = v.ts
    full = ts.layout.full_contiguity()
    contig = full if ts.contig is None else ts.contig
    pdims = ts.layout.pdims
    cands: list[View] = []
    if contig == 0:
        spans = [p.dim for p in reversed(pdims) if v.shape[p.dim] > 1]
        d = spans[0] if spans and reshaped else pdims[-1].dim
        for k in range(2, EMBED_GROWTH + 1):
            shape = list(v.shape)
            if reshaped:
                shape[d] = (shape[d] - 1) * k + 1
                steps = [1] * len(shape)
                steps[d] = k
                cands.append(_resized(v, shape, tuple(steps)))
            else:
                shape[d] += k - 1
                cands.append(_resized(v, shape))
    elif contig < full or ts.stride is not None:
        d = pdims[len(pdims) - contig].dim
        for grow in range(1, EMBED_GROWTH + 1):
            shape = list(v.shape)
            shape[d] += grow
            cands.append(_resized(v, shape))
    v = next((c for c in cands if _own_claims_hold(em, spec, name, c)), v)
    return v, (_pack_origins(em, spec, name, v) if ts.layout.is_packed else [])


ORIGIN_CAP = 64  # other origins in its packs an operand of a packed layout is proved at


def _pack_origins(em: _ViewWalk, spec, name: str, v: View) -> list:
    """Operand `name` of `spec` (view v) at each origin other than 0
    modulo the periods of its layout's packs (in a buffer one period longer along each
    packed dimension) at which its own claims hold, in order, up to ORIGIN_CAP; one of
    each set of origins that place its values alike relative to its first (the claims
    of views of it are then the same)."""
    periods: dict[int, int] = {}
    for p in v.ts.layout.pdims:
        if p.kind != "dyn":
            periods[p.dim] = periods.get(p.dim, 1) * p.size
    dims = sorted(periods)
    shape = list(v.buf.shape)
    for d in dims:
        shape[d] += periods[d]
    out = []
    line = spec.target.line_bytes

    def pattern(view: View) -> tuple:
        """Where its values lie relative to its first (and that first value's place in a
        line, where alignment is claimed): views alike in it back the same claims."""
        off = em.value_offsets(view)
        first = int(off[0]) * view.ts.dtype.nbytes % line if em.track_alignment else 0
        return (first, *(off - off[0]).tolist())

    seen = {pattern(v)}
    for at in product(*[range(periods[d]) for d in dims]):
        if not any(at):
            continue
        origin = [0] * len(v.shape)
        for d, o in zip(dims, at):
            origin[d] = o
        cand = _resized(v, shape, v.steps, tuple(Const(o) for o in origin))
        key = pattern(cand)
        if key in seen:
            continue
        seen.add(key)
        if _own_claims_hold(em, spec, name, cand):
            out.append(cand)
            if len(out) == ORIGIN_CAP:
                break
    return out


def prove_decision_views(spec, expansion, ct, track_alignment: bool = False) -> Obligation | None:
    """The first claim a decision's node (its children open) makes of a view that its
    spec's operands, embedded as _embedded_views says (and at each alternative it
    lists), do not back; None if every one holds. The claims are prove_views': each
    child's and kernel's adjacency and stride, (under `track_alignment`) each child's
    alignment, taking the spec's claims of its own operands (an operand claiming
    alignment starts on a line), and that codegen can write the node's C."""
    node = node_from_expansion(spec, expansion)
    views, alts = _embedded_views(_ViewWalk(ct, track_alignment), spec, for_node(node).lowers_reshaped_operands)
    names = param_names(spec)
    for i, alt in [(None, None), *alts]:
        em = _ViewWalk(ct, track_alignment)
        vs = list(views) if i is None else [*views[:i], alt, *views[i + 1 :]]
        em.only = None if i is None else alt.buf.name
        line = spec.target.line_bytes
        for name, v, ts in zip(names, vs, spec.operands):
            if ts.aligned and not v.buf.in_registers:
                em.base_align[v.buf.name] = (line, f"operand {name}'s buffer (as the box's spec claims)")
        try:
            em.emit(node, vs)
        except CodegenError as e:
            at = f" ({names[i]} {_placement(alt)})" if i is not None else ""
            return Obligation(f"codegen lowers {spec.short()}'s {expansion.action} to C{at}", "refuted", str(e))
        bad = next((o for o in em.claims.values() if o.status != "proved"), None)
        if bad is not None:
            # where the operand lies whose buffer the claim is about (each ends "in BUFFER")
            notes = [f"{n} {p}" for n, v in zip(names, vs) if bad.what.endswith(f" in {n}") and (p := _placement(v))]
            return replace(bad, what=f"{bad.what} ({'; '.join(notes)})") if notes else bad
    return None


def views_obligations(boxes, engine, progress=None) -> list[BoxObligation | None]:
    """One obligation per box (None for a box with no action): on every spec class of the
    box (its lowest limits; up to VIEW_CAP, else its corners, and the obligation is
    unknown), the views the decision builds back what its children and kernels claim of
    them (prove_decision_views), as `verify` proves them for a program. A class the rule
    files derive no such decision for is the rules obligation's to refute."""
    ct = get_ctarget(engine.target, engine.rules)
    tracked = engine.tracks_alignment

    def check(s, action, e):
        why = prove_decision_views(s, e, ct, tracked) if e is not None else None
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
    _add(rep, seen, prove_views(impl, rules, ctx.engine.tracks_alignment))
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
