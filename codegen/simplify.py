"""Range-aware simplification of index expressions before they are printed as C.

Layouts build offsets with `//` and `%` (packs, tiles); inside a loop whose variable
steps by a multiple of the divisor, most of them cancel. Doing that here keeps the
emitted C readable and lets gcc vectorize and strength-reduce the address arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import inf

from morello_asp.expr import Add, Const, Expr, FloorDiv, Mod, Mul, Var, add, floordiv, mod, mul


@dataclass(frozen=True)
class VarRange:
    """A loop variable: lo <= v <= hi, and v is a multiple of step."""

    lo: int
    hi: int
    step: int = 1


def _range(e: Expr, env) -> tuple[float, float]:
    if isinstance(e, Const):
        return e.value, e.value
    if isinstance(e, Var):
        r = env.get(e.name)
        return (r.lo, r.hi) if r else (-inf, inf)
    if isinstance(e, Add):
        lo: float = 0
        hi: float = 0
        for t in e.terms:
            a, b = _range(t, env)
            lo, hi = lo + a, hi + b
        return lo, hi
    if isinstance(e, Mul):
        a, b = _range(e.term, env)
        a, b = a * e.coef, b * e.coef
        return min(a, b), max(a, b)
    if isinstance(e, FloorDiv):
        a, b = _range(e.term, env)
        return (a // e.k if a != -inf else a), (b // e.k if b != inf else b)
    if isinstance(e, Mod):
        a, b = _range(e.term, env)
        if a >= 0 and b < e.k:
            return a, b
        return 0, e.k - 1
    return -inf, inf


def _terms(e: Expr) -> list[tuple[int, Expr]]:
    """e as a list of (coefficient, atom); a constant is (c, Const(1))."""
    out: list[tuple[int, Expr]] = []
    for t in e.terms if isinstance(e, Add) else (e,):
        if isinstance(t, Const):
            out.append((t.value, Const(1)))
        elif isinstance(t, Mul):
            out.append((t.coef, t.term))
        else:
            out.append((1, t))
    return out


def _multiple(atom: Expr, env) -> int:
    """The largest known m such that atom is always a multiple of m."""
    if isinstance(atom, Const):
        return abs(atom.value) or 1
    if isinstance(atom, Var) and atom.name in env:
        return env[atom.name].step
    return 1


def _divide(coef: int, atom: Expr, k: int, env) -> Expr | None:
    """coef * atom / k when it is always an integer, else None."""
    if coef % k == 0:
        return mul(Const(coef // k), atom)
    s = _multiple(atom, env)
    if (coef * s) % k == 0:
        if isinstance(atom, Const):
            return Const(coef * atom.value // k)
        return mul(Const(coef * s // k), floordiv(atom, s))
    return None


def _split(e: Expr, k: int, env) -> tuple[Expr, Expr]:
    """e = k * q + r with q exact; r holds the terms that do not divide."""
    q: Expr = Const(0)
    r: Expr = Const(0)
    for coef, atom in _terms(e):
        if isinstance(atom, Const):
            c = coef * atom.value
            q, r = add(q, Const(c // k)), add(r, Const(c % k))
            continue
        d = _divide(coef, atom, k, env)
        if d is None:
            r = add(r, mul(Const(coef), atom))
        else:
            q = add(q, d)
    return q, r


def simplify(e: Expr, env: dict[str, VarRange]) -> Expr:
    if isinstance(e, (Const, Var)):
        return e
    if isinstance(e, Add):
        out: Expr = Const(0)
        for t in e.terms:
            out = add(out, simplify(t, env))
        return out
    if isinstance(e, Mul):
        t = simplify(e.term, env)
        if isinstance(t, FloorDiv) and e.coef % t.k == 0 and _multiple(t.term, env) % t.k == 0:
            return mul(Const(e.coef // t.k), t.term)  # exact division: 8192 * (n0 / 16) = 512 * n0
        return mul(Const(e.coef), t)
    if isinstance(e, FloorDiv):
        t = simplify(e.term, env)
        q, r = _split(t, e.k, env)
        lo, hi = _range(r, env)
        if lo != -inf and hi != inf and lo // e.k == hi // e.k:
            return add(q, Const(int(lo // e.k)))
        return add(q, floordiv(r, e.k))
    if isinstance(e, Mod):
        t = simplify(e.term, env)
        _, r = _split(t, e.k, env)
        lo, hi = _range(r, env)
        if lo >= 0 and hi < e.k:
            return r
        if lo != -inf and hi != inf and lo // e.k == hi // e.k:
            return add(r, Const(-int(lo // e.k) * e.k))
        return mod(r, e.k)
    return e
