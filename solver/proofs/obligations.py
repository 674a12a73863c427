"""The proofs' building blocks with z3: an obligation and a report of them, expressions
in z3, and the proofs that need no program (a layout is a bijection onto its buffer, a
cast keeps every value). The rewrite families state their nodes' obligations with
these; solver/proofs/verify.py walks a program and collects them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from math import prod

import z3

from morello_asp.dtypes import Dtype
from morello_asp.expr import Add, Const, Expr, FloorDiv, Mod, Mul, Var
from morello_asp.layout import Layout


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


def _over_loops(ranges, loops: dict | None = None) -> tuple[z3.Solver, dict]:
    """A solver whose loop counters (`ranges`: (name, lo, hi, step)) take every value
    they do in the program, and the counters as z3 integers by name (`loops`, if made
    already)."""
    loops = {n: z3.Int(n) for n, *_ in ranges} if loops is None else loops
    s = z3.Solver()
    s.set("timeout", 20000)
    for (_, lo, hi, step), v in zip(ranges, loops.values()):
        s.add(lo <= v, v <= hi, v % step == 0)
    return s, loops


def _at(m, loops: dict) -> str:
    """The counters' values in a counterexample, for a refutation's reader."""
    return ", ".join(f"{n} = {m.eval(v).as_long()}" for n, v in loops.items())


def prove_adjacent(
    what: str,
    offset: Expr,
    position: Expr,
    shape: tuple[int, ...],
    block: int,
    ranges: tuple[tuple[str, int, int, int], ...] = (),
) -> Obligation:
    """A view's claim of adjacency: the values of each block of `block` consecutive
    positions in the view's own layout (`position`, over view coordinates x0, x1, ...
    of a `shape` view) lie within `block` consecutive slots of its buffer (`offset`),
    for every value of the loop counters in `ranges` ((name, lo, hi, step): lo <= v <=
    hi, v a multiple of step). With the buffer's layout a bijection, that is: no two
    values of one block are `block` or more slots apart. A refutation names them."""
    status, detail = _adjacent(offset, position, shape, block, ranges)
    return Obligation(what, status, detail)


@functools.lru_cache(maxsize=8192)
def _adjacent(offset, position, shape, block, ranges) -> tuple[str, str]:
    rank = len(shape)
    xs = [z3.Int(f"x{i}") for i in range(rank)]
    ys = [z3.Int(f"y{i}") for i in range(rank)]
    s, loops = _over_loops(ranges)
    env_x = {**loops, **{f"x{i}": v for i, v in enumerate(xs)}}
    env_y = {**loops, **{f"x{i}": v for i, v in enumerate(ys)}}
    for v, n in zip(xs + ys, shape + shape):
        s.add(0 <= v, v < n)
    s.add(to_z3(position, env_x) / block == to_z3(position, env_y) / block)
    ox, oy = to_z3(offset, env_x), to_z3(offset, env_y)
    s.add(ox - oy >= block)
    r, m = solve(s)
    if r == z3.unknown:
        return "unknown", s.reason_unknown()
    if r == z3.unsat:
        return "proved", ""
    a = [m.eval(v).as_long() for v in xs]
    b = [m.eval(v).as_long() for v in ys]
    at = _at(m, loops)
    gap = m.eval(ox - oy).as_long()
    return "refuted", (
        f"its values at {a} and {b} are {gap} slots apart{' (at ' + at + ')' if at else ''} "
        f"in one run of {block} it claims adjacent"
    )


def prove_aligned(
    what: str,
    offsets: tuple[Expr, ...],
    nbytes: int,
    size: int,
    base: int,
    ranges: tuple[tuple[str, int, int, int], ...] = (),
    base_why: str = "",
) -> Obligation:
    """A view's claim of alignment: the values at buffer offsets `offsets` (slots of
    `size` bytes, over the loop counters in `ranges`, as prove_adjacent takes them) start
    on `nbytes` boundaries for every value of the counters, in a buffer whose first value
    is known to be `base`-aligned (`base_why` says why no more). A refutation names the
    offset and the counters' values."""
    if base % nbytes:
        return Obligation(what, "refuted", f"{base_why or 'its buffer'} is only known to be {base}-byte aligned")
    status, detail = _aligned(offsets, nbytes, size, ranges)
    return Obligation(what, status, detail)


@functools.lru_cache(maxsize=8192)
def _aligned(offsets, nbytes, size, ranges) -> tuple[str, str]:
    # Constant offsets (unrolled register loops, origin 0) need no solver.
    if all(isinstance(o, Const) for o in offsets):
        bad = next((o.value for o in offsets if o.value * size % nbytes), None)
        if bad is None:
            return "proved", ""
        return "refuted", f"its value at slot {bad} is {bad * size % nbytes} bytes past a {nbytes}-byte boundary"
    s, loops = _over_loops(ranges)
    zs = [to_z3(o, loops) for o in offsets]
    s.add(z3.Or([(z * size) % nbytes != 0 for z in zs]))
    r, m = solve(s)
    if r == z3.unknown:
        return "unknown", s.reason_unknown()
    if r == z3.unsat:
        return "proved", ""
    at = _at(m, loops)
    slot = next(m.eval(z).as_long() for z in zs if m.eval((z * size) % nbytes).as_long())
    return "refuted", (
        f"its value at slot {slot}{' (at ' + at + ')' if at else ''} is {slot * size % nbytes} bytes past a "
        f"{nbytes}-byte boundary"
    )


def prove_consecutive(
    what: str,
    runs: tuple[tuple[Expr, ...], ...],
    coords: tuple[tuple[tuple[int, ...], ...], ...],
    width: int,
    ranges: tuple[tuple[str, int, int, int], ...] = (),
) -> Obligation:
    """Vector loads and stores: the values of each run (buffer offsets `runs[j]`, over
    the loop counters in `ranges` as prove_adjacent takes them; at view coordinates
    `coords[j]`) lie at consecutive offsets in order, value i at value 0's offset plus i,
    for every value of the counters, and each run has all `width` values. A refutation
    names the run, the two values and the counters' values."""
    status, detail = _consecutive(runs, coords, width, ranges)
    return Obligation(what, status, detail)


def _linear(e: Expr) -> tuple[dict[Expr, int], int]:
    """e as (coefficient of each non-constant term, constant): offsets differ by a
    constant where their terms cancel, with no solver."""
    terms: dict[Expr, int] = {}
    const = 0
    for t in e.terms if isinstance(e, Add) else (e,):
        if isinstance(t, Const):
            const += t.value
            continue
        coef, atom = (t.coef, t.term) if isinstance(t, Mul) else (1, t)
        terms[atom] = terms.get(atom, 0) + coef
    return {a: c for a, c in terms.items() if c}, const


@functools.lru_cache(maxsize=8192)
def _consecutive(runs, coords, width, ranges) -> tuple[str, str]:
    short = next((j for j, run in enumerate(runs) if len(run) < width), None)
    if short is not None:
        n = len(runs[short])
        return "refuted", f"its vector {short} takes {width} values, and the view has only {n} of them"
    loops = {n: z3.Int(n) for n, *_ in ranges}
    gaps = []  # (run, value, offset of value i less value 0's as z3), where the terms do not cancel
    for j, run in enumerate(runs):
        first, c0 = _linear(run[0])
        for i, off in enumerate(run[1:], 1):
            terms, c = _linear(off)
            if terms == first:
                if c - c0 != i:
                    return "refuted", _not_consecutive(j, i, coords, c - c0, "")
            else:
                gaps.append((j, i, to_z3(off, loops) - to_z3(run[0], loops)))
    if not gaps:
        return "proved", ""
    s, _ = _over_loops(ranges, loops)
    s.add(z3.Or([g != i for _, i, g in gaps]))
    r, m = solve(s)
    if r == z3.unknown:
        return "unknown", s.reason_unknown()
    if r == z3.unsat:
        return "proved", ""
    j, i, g = next((j, i, g) for j, i, g in gaps if m.eval(g).as_long() != i)
    at = _at(m, loops)
    return "refuted", _not_consecutive(j, i, coords, m.eval(g).as_long(), at)


def _not_consecutive(j: int, i: int, coords, gap: int, at: str) -> str:
    return (
        f"its vector {j}'s value {i} (at {list(coords[j][i])}) is {gap} slots from its value 0 (at "
        f"{list(coords[j][0])}){' (at ' + at + ')' if at else ''}, not {i}"
    )
