"""Legality proofs with z3. Nothing here trusts the rule files: every obligation is
re-derived from the IR (the tree, its specs and layouts) and either proved, refuted
with a counterexample, or left unknown with z3's reason.

Obligations: every layout in use is a bijection from coordinates onto its buffer;
each node's family states its own (morello_asp/rewrites/: a loop's tiles cover each
point exactly once, a kernel applies to its spec by the target's rules, ...); and
memory stays within limits.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from math import prod

import z3

from morello_asp.cost import compute_cost
from morello_asp.dtypes import Dtype
from morello_asp.expr import Add, Const, Expr, FloorDiv, Mod, Mul, Var
from morello_asp.ir import Impl, KernelApp, SpecHole
from morello_asp.layout import Layout
from morello_asp.rewrites import for_node
from morello_asp.target import Target


@dataclass
class Obligation:
    what: str
    status: str  # proved | refuted | unknown
    detail: str = ""

    def __str__(self) -> str:
        mark = {"proved": "proved ", "refuted": "REFUTED", "unknown": "unknown"}[self.status]
        return f"[{mark}] {self.what}" + (f": {self.detail}" if self.detail else "")


@dataclass
class VerifyReport:
    obligations: list[Obligation] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(o.status == "proved" for o in self.obligations)

    def __str__(self) -> str:
        n = len(self.obligations)
        bad = [o for o in self.obligations if o.status != "proved"]
        head = f"{n - len(bad)} of {n} obligations proved in {self.seconds:.2f} s"
        return "\n".join([head] + [str(o) for o in (bad or self.obligations[:0])])


def to_z3(e: Expr, env: dict):
    if isinstance(e, Const):
        return z3.IntVal(e.value)
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Add):
        return z3.Sum([to_z3(t, env) for t in e.terms])
    if isinstance(e, Mul):
        return e.coef * to_z3(e.term, env)
    if isinstance(e, FloorDiv):  # z3's integer division is floor division for positive divisors
        return to_z3(e.term, env) / e.k
    if isinstance(e, Mod):
        return to_z3(e.term, env) % e.k
    raise TypeError(f"no z3 form for {type(e).__name__}")


def solve(s: z3.Solver):
    r = s.check()
    return r, (s.model() if r == z3.sat else None)


@functools.lru_cache(maxsize=4096)
def prove_layout(layout: Layout, shape: tuple[int, ...]) -> Obligation:
    """In range: every coordinate maps into [0, buffer volume). Injective: no two
    coordinates share an offset. A refutation names the coordinates."""
    what = f"layout {layout} is a bijection for shape {'x'.join(map(str, shape))}"
    rank = len(shape)
    if any(p.dim >= rank for p in layout.pdims):
        return Obligation(
            what, "refuted", f"it names dimension {max(p.dim for p in layout.pdims)} of a rank-{rank} tensor"
        )
    vol = prod(shape)
    size = layout.buffer_volume(shape)
    xs = [z3.Int(f"x{i}") for i in range(rank)]
    ys = [z3.Int(f"y{i}") for i in range(rank)]
    names = [f"d{i}" for i in range(rank)]
    off = layout.buffer_expr(shape, names)
    ox, oy = to_z3(off, dict(zip(names, xs))), to_z3(off, dict(zip(names, ys)))
    bounds = [z3.And(0 <= v, v < n) for v, n in zip(xs, shape)] + [z3.And(0 <= v, v < n) for v, n in zip(ys, shape)]
    s = z3.Solver()
    s.set("timeout", 20000)
    s.add(bounds[:rank])
    s.add(z3.Or(ox < 0, ox >= max(size, vol)))
    r, m = solve(s)
    if r == z3.sat:
        c = [m.eval(v).as_long() for v in xs]
        return Obligation(
            what, "refuted", f"coordinate {c} maps to offset {m.eval(ox).as_long()}, outside [0, {max(size, vol)})"
        )
    if r == z3.unknown:
        return Obligation(what, "unknown", s.reason_unknown())
    s = z3.Solver()
    s.set("timeout", 20000)
    s.add(bounds)
    s.add(z3.Or([a != b for a, b in zip(xs, ys)]))
    s.add(ox == oy)
    r, m = solve(s)
    if r == z3.sat:
        a = [m.eval(v).as_long() for v in xs]
        b = [m.eval(v).as_long() for v in ys]
        return Obligation(what, "refuted", f"coordinates {a} and {b} both map to offset {m.eval(ox).as_long()}")
    if r == z3.unknown:
        return Obligation(what, "unknown", s.reason_unknown())
    if size != vol:
        return Obligation(what, "refuted", f"the buffer has {size} slots for {vol} values (padding)")
    return Obligation(what, "proved")


@functools.cache
def prove_cast(old: Dtype, new: Dtype) -> Obligation:
    """A casting move is exact: every value of `old` is a value of `new`, and the cast
    the C does gives it. Integers: sign- or zero-extension (by `old`'s signedness) read
    in `new`'s signedness is the same number. bf16 -> f32: the f32 whose upper half is
    the bf16's bits (what the kernels do: a 16-bit shift) is the exact conversion, and
    converting back gives the bf16 (NaNs aside: they stay NaNs)."""
    what = f"the cast {old} -> {new} is exact"
    s = z3.Solver()
    s.set("timeout", 20000)
    if old.is_float or new.is_float:
        if (old.short, new.short) != ("bf16", "f32"):
            return Obligation(what, "refuted", f"no exact conversion from {old} to {new} is known")
        b = z3.BitVec("b", 16)
        bf16 = z3.FPSort(8, 8)
        x = z3.fpBVToFP(b, bf16)
        y = z3.fpBVToFP(z3.Concat(b, z3.BitVecVal(0, 16)), z3.Float32())
        rne = z3.RNE()
        ok = z3.Or(
            z3.And(z3.fpIsNaN(x), z3.fpIsNaN(y)),
            z3.And(y == z3.fpToFP(rne, x, z3.Float32()), z3.fpToFP(rne, y, bf16) == x),
        )
        s.add(z3.Not(ok))
        r, m = solve(s)
        if r == z3.sat:
            return Obligation(what, "refuted", f"bf16 bits {m.eval(b).as_long():#06x} change value")
    else:
        n, k = old.nbytes * 8, new.nbytes * 8
        if k < n:
            return Obligation(what, "refuted", f"{new} has {k} bits, {old} has {n}")
        x = z3.BitVec("x", n)
        ext = z3.SignExt(k - n, x) if old.is_signed else z3.ZeroExt(k - n, x)
        s.add(z3.BV2Int(ext, is_signed=new.is_signed) != z3.BV2Int(x, is_signed=old.is_signed))
        r, m = solve(s)
        if r == z3.sat:
            v = m.eval(z3.BV2Int(x, is_signed=old.is_signed)).as_long()
            return Obligation(what, "refuted", f"{old} value {v} is not a {new} value")
    if r == z3.unknown:
        return Obligation(what, "unknown", s.reason_unknown())
    return Obligation(what, "proved")


@functools.cache
def prove_catalog_layout(layout: Layout, rank: int) -> Obligation:
    """A layout a logic file offers to the search (layout_cand/3) has no shape of its own:
    prove it at a representative one, each packed dimension twice its blocks and every
    other dimension 3 (odd, so dropped remainders and aliasing show)."""
    cover = [1] * rank
    for p in layout.pdims:
        if p.kind != "dyn" and p.dim < rank:
            cover[p.dim] *= p.size
    return prove_layout(layout, tuple(2 * c if c > 1 else 3 for c in cover))


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
            from .engine import get_engine

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
