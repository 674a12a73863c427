"""Legality proofs over memo boxes (issue 6, part 4): the table stores one decision for
a whole box of specs, so prove it legal for *every* spec in the box, not only the ones
a search visited.

Each box's specs are z3 terms (solver/box_space.py: dimensions are integers ranging
over the powers of two of the box, limits and operand axes integers in their ranges).
Per decision:

* tile(T): T fits every shape; the main tiles plus the boundary regions (as
  morello_asp/ir.py `loop_regions` builds them, transcribed to terms) cover every point
  of the iteration space exactly once and stay in bounds; every child keeps its
  vector-register operands in whole vectors; reductions are split only in accumulating
  kinds and never by a parallel loop, and serial specs get no parallel loop.
* move(op, level, layout, v): a copy's layout is a bijection onto its buffer for every
  operand shape (no padding where a pack needs divisibility, offsets in range,
  injective); the allocation fits under the box's lowest limit; a VRF vector size
  divides every volume.
* every decision: its peak memory is within every limit vector of the box.
* rules: clingo derives the decision for every spec class of the box (limits do not
  enter the rules), with the children a loop builds. This is how a kernel's shape
  constraints (encodings/targets/*/kernels.lp) are checked: evaluated exactly on each
  class, not sampled and not re-encoded in Python, so a new kernel needs no change here.
"""
from __future__ import annotations

import time
from functools import cache
from dataclasses import dataclass, field
from itertools import product

import z3

from morello_asp.ir import loop_regions
from morello_asp.kinds import ACCUM_VARIANT
from morello_asp.layout import Layout, LayoutError
from morello_asp.spec import Spec

from .box_space import BoxSpace, Refuter, as_bool, ceil_div, div, mod, product_of
from .verify import Obligation, VerifyReport

CLASS_CAP = 4096  # spec classes per box checked one by one against the rules; beyond, corners only
RULES_BATCH = 2000


@dataclass
class BoxObligation(Obligation):
    seq: int = 0  # the box's sequence number in the table
    counterexample: Spec | None = None  # a spec of the box where the claim fails


@dataclass
class TableReport(VerifyReport):
    boxes: int = 0
    rules_seconds: float = 0.0  # of `seconds`, spent expanding spec classes with clingo
    z3_queries: int = 0
    reused: int = 0  # claims answered by an identical claim proved for an earlier box

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.obligations)

    def summary(self) -> str:
        return (f"{self.boxes} boxes, {len(self.obligations)} obligations: {self.count('proved')} proved, "
                f"{self.count('refuted')} refuted, {self.count('unknown')} unknown in {self.seconds:.1f} s")

    def __str__(self) -> str:
        bad = [o for o in self.obligations if o.status != "proved"]
        bad.sort(key=lambda o: o.status != "refuted")
        return "\n".join([self.summary()] + [str(o) for o in bad])


# ---- terms for what the IR builds ------------------------------------------------
@dataclass
class Region:
    mask: int  # sum of 2**d over the dimensions where this region is the remainder
    present: object  # bool or z3 condition: the region exists for this shape
    offset: list
    extent: list  # what the region covers (the main region: all its full tiles)
    child: list  # shape of the child spec that runs on it (the main region: one tile)


def sym_regions(dims, tile) -> list[Region]:
    """ir.loop_regions with the shape as terms: the main region of full tiles, then
    one boundary region per non-empty set R of dimensions, present when the tile does
    not divide the shape along each dimension of R, in mask order."""
    n = len(dims)
    full = [div(d, t) * t for d, t in zip(dims, tile)]
    rem = [mod(d, t) for d, t in zip(dims, tile)]
    out = [Region(0, True, [0] * n, full, list(tile))]
    for mask in range(1, 1 << n):
        rs = [d for d in range(n) if mask >> d & 1]
        present = z3.And([as_bool(rem[d] != 0) for d in rs])
        off = [full[d] if mask >> d & 1 else 0 for d in range(n)]
        ext = [rem[d] if mask >> d & 1 else full[d] for d in range(n)]
        out.append(Region(mask, present, off, ext, ext))
    return out


def sym_layout(layout: Layout, shape, coords):
    """(offset of `coords`, buffer volume) of Layout.buffer_expr with the shape as terms."""
    covered = [1] * len(shape)
    alpha, total = 1, 0
    for p in reversed(layout.pdims):
        v = covered[p.dim]
        ext = ceil_div(shape[p.dim], v) if p.kind == "dyn" else p.size
        x = div(coords[p.dim], v)
        if p.kind == "pack":
            x = mod(x, ext)
        elif p.kind == "oe":  # odd_even(s, x mod s), morello_asp/layout.py
            y = mod(x, ext)
            x = 2 * mod(y, ext // 2) + div(2 * y, ext)
        total = total + alpha * x
        alpha = alpha * ext
        covered[p.dim] = v * ext
    return total, alpha


# ---- the obligations ---------------------------------------------------------------
def _val(m, t) -> int:
    return t if isinstance(t, int) else m.eval(t, model_completion=True).as_long()


class BoxProver:
    def __init__(self, target, refuter: Refuter | None = None):
        self.target = target
        self.refuter = refuter or Refuter()
        self._proved: set = set()  # (claim, everything its formula reads) already proved
        self.reused = 0

    def obligations(self, seq: int, space: BoxSpace, decision) -> list[BoxObligation]:
        a = decision.action
        if a is None:  # "nothing fits": no program to prove
            return []
        head = f"box {seq} {space.text()} {a}"
        obs = getattr(self, "_" + a.name, lambda *_: [])(head, seq, space, a)
        return obs + [self._memory(head, seq, space, tuple(decision.peak))]

    def _ob(self, head, seq, space, what, negation, explain, key=None) -> BoxObligation:
        """Prove `what` by refuting `negation` (a formula, or a function making one).
        `key` names every input of the formula: a claim proved for one box is proved
        for every box with the same key (many boxes differ only in what a claim ignores)."""
        full = f"{head}: {what}"
        k = (what, key) if key is not None else None
        if k is not None and k in self._proved:
            self.reused += 1
            return BoxObligation(full, "proved", "", seq)
        status, m, spec = self.refuter.refute(space, negation() if callable(negation) else negation)
        if status == "refuted":
            return BoxObligation(full, "refuted", f"{explain(m)}; counterexample {spec}", seq, spec)
        if status == "proved" and k is not None and m is None:
            self._proved.add(k)
        return BoxObligation(full, status, m or "", seq)

    def _shape(self, m, space) -> str:
        return "x".join(str(_val(m, d)) for d in space.dims)

    # tile(T, parallel)
    def _tile(self, head, seq, sp: BoxSpace, a):
        tile, par = tuple(a.args[0]), bool(a.args[1])
        dims, n = sp.dims, len(sp.dims)
        if len(tile) != n:
            return [BoxObligation(f"{head}: one tile size per dimension", "refuted", f"{len(tile)} sizes for {n} dimensions", seq)]
        key = (tile, tuple(map(tuple, sp.dim_values)))
        regions = cache(lambda: sym_regions(dims, tile))
        p = [z3.Int(f"p{d}") for d in range(n)]
        inside = cache(lambda: [z3.And(as_bool(r.present), *[z3.And(o <= x, x < o + e) for x, o, e in zip(p, r.offset, r.extent)])
                                for r in regions()])
        obs = [self._ob(head, seq, sp, "the tile fits every shape",
                        lambda: z3.Or([as_bool(t < 1) for t in tile] + [as_bool(t > d) for t, d in zip(tile, dims)]),
                        lambda m: f"tile {list(tile)} exceeds shape {self._shape(m, sp)}", key)]

        def cover(m):
            hits = [("main" if r.mask == 0 else f"boundary {r.mask}") for r, c in zip(regions(), inside()) if z3.is_true(m.eval(c))]
            return f"point {[_val(m, x) for x in p]} of shape {self._shape(m, sp)} is covered by {hits or 'nothing'}"

        in_space = lambda: z3.And([z3.And(0 <= x, x < d) for x, d in zip(p, dims)])  # noqa: E731
        obs.append(self._ob(head, seq, sp, "main tiles and boundary regions cover every point exactly once",
                            lambda: z3.And(in_space(), z3.Sum([z3.If(c, 1, 0) for c in inside()]) != 1), cover, key))
        outside = lambda: z3.Or([z3.And(as_bool(r.present), as_bool(o + e > d))  # noqa: E731
                                 for r in regions() for o, e, d in zip(r.offset, r.extent, dims)])
        obs.append(self._ob(head, seq, sp, "every region stays in bounds", outside,
                            lambda m: f"a region ends past shape {self._shape(m, sp)}", key))
        obs += self._vectors(head, seq, sp, regions, key)
        red = list(sp.kind.reduction(n))
        split = [as_bool(tile[d] != dims[d]) for d in red]
        bad_split = (not sp.kind.is_accum or par) and bool(red)
        neg = z3.Or(z3.And(as_bool(bad_split), z3.Or(split) if split else z3.BoolVal(False)), as_bool(par and sp.serial))

        def loop_kind(m):
            if par and sp.serial:
                return "a serial-only spec gets a parallel loop"
            d = next(d for d, s in zip(red, split) if z3.is_true(m.eval(s)))
            why = "a parallel loop" if par else f"non-accumulating {sp.k['kind']}"
            return f"{why} splits reduction dimension {d} (size {_val(m, dims[d])}, tile {tile[d]})"

        obs.append(self._ob(head, seq, sp, "reductions split only in accumulating kinds, never in parallel", neg, loop_kind))
        return obs

    def _vectors(self, head, seq, sp: BoxSpace, regions, key):
        """Each child's vector-register operands still hold whole vectors."""
        if "VRF" not in sp.levels:
            return []
        vrf = sp.levels.index("VRF")
        ops = [(op, lv, v) for op, (lv, v, _, _) in enumerate(sp.ops) if not (isinstance(lv, int) and lv != vrf)]
        if not ops:
            return []
        labels = cache(lambda: [(r, op, product_of([r.child[d] for d in sp.op_dims[op]]), lv, v) for r in regions() for op, lv, v in ops])
        terms = cache(lambda: [z3.And(as_bool(r.present), as_bool(lv == vrf), as_bool(v > 0),
                                      as_bool(mod(vol, v) != 0) if not isinstance(v, int) or v > 0 else z3.BoolVal(False))
                               for r, op, vol, lv, v in labels()])

        def explain(m):
            r, op, vol, _, v = next(x for x, t in zip(labels(), terms()) if z3.is_true(m.eval(t)))
            which = "the body" if r.mask == 0 else f"boundary child {r.mask}"
            return f"in {which} operand {op} has {_val(m, vol)} values, not whole vectors of {_val(m, v)}"

        axes = tuple((op, sp.axis_range(lv), sp.axis_range(v), tuple(sp.op_dims[op])) for op, lv, v in ops)
        return [self._ob(head, seq, sp, "every child holds its vector-register operands in whole vectors",
                         lambda: z3.Or(terms()), explain, (key, vrf, axes))]

    # move(op, level, layout, vector size)
    def _move(self, head, seq, sp: BoxSpace, a):
        op, level, layout, v = a.args
        v = v or 0
        lv = self.target.level(level)
        shape = sp.operand_shape(op)
        shape_key = tuple(tuple(sp.dim_values[d]) for d in sp.op_dims[op])
        src = Layout.parse(sp.k["ops"][op][1], len(shape), validate=False)
        copies = lv.kind == "register" or layout != src
        obs = []
        if copies:
            obs.append(self._layout(head, seq, sp, layout, shape, shape_key))
        nb = sp.dtypes[op].nbytes
        vol = sp.operand_volume(op)
        units = {"value": vol, "vector": ceil_div(vol, v or 1), "line": ceil_div(vol * nb, self.target.line_bytes),
                 "byte": vol * nb}[lv.unit]
        limit = sp.limits[lv.index]
        obs.append(self._ob(head, seq, sp, f"the new buffer fits under the box's lowest {lv.name} limit",
                            lambda: as_bool(units > limit),
                            lambda m: f"{_val(m, units)} {lv.unit}s at shape {self._shape(m, sp)} but the limit is {_val(m, limit)}",
                            (lv.unit, v, nb, shape_key, sp.axis_range(limit))))
        if lv.name == "VRF":
            width_ok = v > 0 and v * nb in self.target.vector_types
            obs.append(self._ob(head, seq, sp, f"v{v} is a vector register and divides every volume",
                                lambda: z3.Or(as_bool(not width_ok), as_bool(mod(vol, v) != 0) if v > 0 else z3.BoolVal(True)),
                                lambda m: f"v{v} of {sp.dtypes[op]} against {_val(m, vol)} values at shape {self._shape(m, sp)}",
                                (v, nb, shape_key)))
        return obs

    def _layout(self, head, seq, sp: BoxSpace, layout: Layout, shape, shape_key) -> BoxObligation:
        what = f"layout {layout} is a bijection onto its buffer for every operand shape"
        try:
            layout.validate(len(shape))
        except LayoutError as e:
            return BoxObligation(f"{head}: {what}", "refuted", str(e), seq)
        xs = [z3.Int(f"x{i}") for i in range(len(shape))]
        ys = [z3.Int(f"y{i}") for i in range(len(shape))]
        ox, size = sym_layout(layout, shape, xs)
        oy, _ = sym_layout(layout, shape, ys)
        vol = product_of(shape)
        inb = lambda cs: z3.And([z3.And(0 <= c, c < d) for c, d in zip(cs, shape)])  # noqa: E731
        sh = lambda m: "x".join(str(_val(m, d)) for d in shape)  # noqa: E731
        checks = [
            ("padding", lambda: as_bool(size != vol), lambda m: f"padding: {_val(m, size)} slots for {_val(m, vol)} values at shape {sh(m)}"),
            ("range", lambda: z3.And(inb(xs), z3.Or(ox < 0, ox >= size)),
             lambda m: f"coordinate {[_val(m, x) for x in xs]} maps to {_val(m, ox)}, outside [0, {_val(m, size)}) at shape {sh(m)}"),
            ("injective", lambda: z3.And(inb(xs), inb(ys), z3.Or([x != y for x, y in zip(xs, ys)]), ox == oy),
             lambda m: f"coordinates {[_val(m, x) for x in xs]} and {[_val(m, y) for y in ys]} share offset {_val(m, ox)} at shape {sh(m)}"),
        ]
        for part, neg, explain in checks:
            ob = self._ob(head, seq, sp, what, neg, explain, (part, layout, shape_key))
            if ob.status != "proved":
                return ob
        return ob

    def _to_accum(self, head, seq, sp: BoxSpace, a):
        kind = sp.k["kind"]
        ok = kind in ACCUM_VARIANT
        return [BoxObligation(f"{head}: {kind} has an accumulating variant", "proved" if ok else "refuted",
                              "" if ok else f"{kind} has none", seq)]

    def _memory(self, head, seq, sp: BoxSpace, peak) -> BoxObligation:
        lims = sp.limits
        if len(peak) != len(lims):
            return BoxObligation(f"{head}: peak memory within every limit vector", "refuted",
                                 f"peak {list(peak)} has {len(peak)} levels, the box {len(lims)}", seq)
        return self._ob(head, seq, sp, f"peak memory {list(peak)} within every limit vector",
                        lambda: z3.Or([as_bool(p > lim) for p, lim in zip(peak, lims)]),
                        lambda m: f"peak {list(peak)} exceeds limits {[_val(m, x) for x in lims]}",
                        tuple(sp.axis_range(x) for x in lims))


# ---- rules: clingo derives the decision on every class of the box -------------------
def _loop_children(spec: Spec, tile) -> list[tuple[int, ...]]:
    return [tuple(tile)] + [s for _, s, main in loop_regions(spec.shape, tile) if not main]


def rules_obligations(boxes, engine, progress=None) -> list[BoxObligation | None]:
    """One obligation per box (None for a box with no action): every spec class of the box (its lowest
    limits; the rules never see limits, moves are then fitted to them) gets the
    decision's action from the rule files, and a tile gets the children the loop runs."""
    jobs = []  # (seq, space, action, specs, exhaustive), or None
    for seq, space, d in boxes:
        if d.action is None:
            jobs.append(None)
            continue
        exhaustive = space.n_classes() <= CLASS_CAP
        pts = space.classes() if exhaustive else space.corners()
        specs = list(dict.fromkeys(s for s in (space.spec_at(p) for p in pts) if s is not None))
        jobs.append((seq, space, d.action, specs, exhaustive))
    todo = list(dict.fromkeys(s for j in jobs if j for s in j[3]))
    exps = {}
    for i in range(0, len(todo), RULES_BATCH):
        chunk = todo[i:i + RULES_BATCH]
        exps.update(zip(chunk, engine.expand_many(chunk)))
        if progress:
            progress(f"rules: {min(i + RULES_BATCH, len(todo))}/{len(todo)} spec classes expanded")
    out = []
    for job in jobs:
        if job is None:
            out.append(None)
            continue
        seq, space, action, specs, exhaustive = job
        what = f"box {seq} {space.text()} {action}: the rule files derive it for every spec class"
        bad = None
        for s in specs:
            e = next((e for e in exps[s] if e.action == action), None)
            if e is None:
                bad = (f"the rule files derive no {action} for this spec", s)
            elif action.name == "tile" and [c.shape for c in e.children] != _loop_children(s, action.args[0]):
                bad = (f"the rules' children {[c.shape for c in e.children]} differ from the loop's regions "
                       f"{_loop_children(s, action.args[0])}", s)
            if bad:
                break
        if bad:
            out.append(BoxObligation(what, "refuted", f"{bad[0]}; counterexample {bad[1]}", seq, bad[1]))
        elif not exhaustive:
            out.append(BoxObligation(what, "unknown", f"{space.n_classes()} classes; only the box's corners checked", seq))
        else:
            out.append(BoxObligation(what, "proved", f"{len(specs)} classes" if specs else "the box holds no canonical spec", seq))
    return out


# ---- the table ---------------------------------------------------------------------------
def verify_table(memo, engine=None, limit: int | None = None, progress=None, rules: bool = True) -> TableReport:
    """Prove every box of `memo` (a RectMemo: in memory or solver.memo_db's SQLite table).
    `engine` (default: the avx2 engine) supplies the target and the rule files; `limit`
    stops after that many boxes in table order; `progress(text)` is called as work goes."""
    from .engine import get_engine

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
