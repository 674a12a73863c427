"""Legality proofs over memo boxes (issue 6, part 4): the table stores one decision for
a whole box of specs, so prove it legal for *every* spec in the box, not only the ones
a search visited.

Each box's specs are z3 terms (solver/proofs/box_space.py: dimensions are integers ranging
over the powers of two of the box, limits and operand axes integers in their ranges).
Per decision:

Each decision's family states its claims (morello_asp/rewrites/, box_obligations):

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

from dataclasses import dataclass

import z3

from morello_asp.layout import Layout, LayoutError
from morello_asp.solver.proofs.box_space import BoxSpace, Refuter, as_bool, ceil_div, div, mod, product_of
from morello_asp.solver.proofs.obligations import Obligation, VerifyReport
from morello_asp.spec import Spec

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
    views_seconds: float = 0.0  # of `seconds`, spent proving the views decisions build (verify.views_obligations)
    z3_queries: int = 0
    reused: int = 0  # claims answered by an identical claim proved for an earlier box

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.obligations)

    def summary(self) -> str:
        return (
            f"{self.boxes} boxes, {len(self.obligations)} obligations: {self.count('proved')} proved, "
            f"{self.count('refuted')} refuted, {self.count('unknown')} unknown in {self.seconds:.1f} s"
        )

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
            x = div(y, 2) + (ext // 2) * mod(y, 2)
        total = total + alpha * x
        alpha = alpha * ext
        covered[p.dim] = v * ext
    return total, alpha


# ---- the obligations ---------------------------------------------------------------
def value(m, t) -> int:
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
        obs = a.family.box_obligations(self, head, seq, space, a)
        return obs + [self._memory(head, seq, space, tuple(decision.peak))]

    def ob(self, head, seq, space, what, negation, explain, key=None) -> BoxObligation:
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

    def buffer_fits(self, head, seq, space, lv, units, key=None) -> BoxObligation:
        """A buffer of `units` (a z3 term over the box's dimensions) fits under the box's
        lowest limit at level `lv`: the claim of every rewrite that allocates."""
        limit = space.limits[lv.index]
        return self.ob(
            head,
            seq,
            space,
            f"the new buffer fits under the box's lowest {lv.name} limit",
            lambda: as_bool(units > limit),
            lambda m: (
                f"{value(m, units)} {lv.unit}s at shape {self.shape(m, space)} but the limit is {value(m, limit)}"
            ),
            None if key is None else (*key, space.axis_range(limit)),
        )

    def shape(self, m, space) -> str:
        return "x".join(str(value(m, d)) for d in space.dims)

    def layout(self, head, seq, sp: BoxSpace, layout: Layout, shape, shape_key) -> BoxObligation:
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
        sh = lambda m: "x".join(str(value(m, d)) for d in shape)  # noqa: E731
        checks = [
            (
                "padding",
                lambda: as_bool(size != vol),
                lambda m: f"padding: {value(m, size)} slots for {value(m, vol)} values at shape {sh(m)}",
            ),
            (
                "range",
                lambda: z3.And(inb(xs), z3.Or(ox < 0, ox >= size)),
                lambda m: (
                    f"coordinate {[value(m, x) for x in xs]} maps to {value(m, ox)}, outside [0, {value(m, size)}) at "
                    f"shape {sh(m)}"
                ),
            ),
            (
                "injective",
                lambda: z3.And(inb(xs), inb(ys), z3.Or([x != y for x, y in zip(xs, ys)]), ox == oy),
                lambda m: (
                    f"coordinates {[value(m, x) for x in xs]} and {[value(m, y) for y in ys]} share offset "
                    f"{value(m, ox)} at shape {sh(m)}"
                ),
            ),
        ]
        for part, neg, explain in checks:
            ob = self.ob(head, seq, sp, what, neg, explain, (part, layout, shape_key))
            if ob.status != "proved":
                return ob
        return ob

    def _memory(self, head, seq, sp: BoxSpace, peak) -> BoxObligation:
        lims = sp.limits
        if len(peak) != len(lims):
            return BoxObligation(
                f"{head}: peak memory within every limit vector",
                "refuted",
                f"peak {list(peak)} has {len(peak)} levels, the box {len(lims)}",
                seq,
            )
        return self.ob(
            head,
            seq,
            sp,
            f"peak memory {list(peak)} within every limit vector",
            lambda: z3.Or([as_bool(p > lim) for p, lim in zip(peak, lims)]),
            lambda m: f"peak {list(peak)} exceeds limits {[value(m, x) for x in lims]}",
            tuple(sp.axis_range(x) for x in lims),
        )


# ---- rules: clingo derives the decision on every class of the box -------------------
def class_specs(space: BoxSpace, cap: int = CLASS_CAP) -> tuple[list[Spec], bool]:
    """The specs of the box's classes (its lowest limits), and True; or, beyond `cap`
    classes, those of its corners only, and False."""
    exhaustive = space.n_classes() <= cap
    pts = space.classes() if exhaustive else space.corners()
    return list(dict.fromkeys(s for s in (space.spec_at(p) for p in pts) if s is not None)), exhaustive


def rules_obligations(boxes, engine, progress=None) -> list[BoxObligation | None]:
    """One obligation per box (None for a box with no action): every spec class of the box (its lowest
    limits; the rules never see limits, moves are then fitted to them) gets the
    decision's action from the rule files, and a tile gets the children the loop runs."""

    def check(s, action, e):
        if e is None:
            return f"the rule files derive no {action} for this spec"
        return action.family.rule_children_mismatch(s, action, e)

    return class_obligations(boxes, engine, "the rule files derive it for every spec class", check, progress)


def class_obligations(boxes, engine, claim: str, check, progress=None, cap: int = CLASS_CAP, label: str = "rules"):
    """One obligation per box (None for a box with no action) that `claim` holds on each
    spec class of the box (up to `cap` classes, else its corners, and the obligation is
    unknown): `check(spec, action, expansion)` says why not (expansion: the rule files'
    expansion of the spec with the box's action, or None), or returns None."""
    jobs: list[tuple | None] = []  # (seq, space, action, specs, exhaustive), or None
    for seq, space, d in boxes:
        if d.action is None:
            jobs.append(None)
            continue
        specs, exhaustive = class_specs(space, cap)
        jobs.append((seq, space, d.action, specs, exhaustive))
    todo = list(dict.fromkeys(s for j in jobs if j for s in j[3]))
    exps: dict = {}
    for i in range(0, len(todo), RULES_BATCH):
        chunk = todo[i : i + RULES_BATCH]
        exps.update(zip(chunk, engine.expand_many(chunk)))
        if progress:
            progress(f"{label}: {min(i + RULES_BATCH, len(todo))}/{len(todo)} spec classes expanded")
    out: list[BoxObligation | None] = []
    for job in jobs:
        if job is None:
            out.append(None)
            continue
        seq, space, action, specs, exhaustive = job
        what = f"box {seq} {space.text()} {action}: {claim}"
        bad = None
        for s in specs:
            why = check(s, action, next((e for e in exps[s] if e.action == action), None))
            if why is not None:
                bad = (why, s)
                break
        if bad:
            out.append(BoxObligation(what, "refuted", f"{bad[0]}; counterexample {bad[1]}", seq, bad[1]))
        elif not exhaustive:
            out.append(
                BoxObligation(what, "unknown", f"{space.n_classes()} classes; only the box's corners checked", seq)
            )
        else:
            out.append(
                BoxObligation(
                    what, "proved", f"{len(specs)} classes" if specs else "the box holds no canonical spec", seq
                )
            )
    return out
