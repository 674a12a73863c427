"""Integer index expressions: built by layouts and tilings, printed as C, evaluated on numpy.

The same tree feeds three consumers (C emission, numpy reference checks, z3 proofs), so
it has one small vocabulary: constants, variables, +, *, floor-division and modulo by
positive constants.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class Expr:
    def __add__(self, other: Expr | int) -> Expr:
        return add(self, lift(other))

    __radd__ = __add__

    def __mul__(self, other: Expr | int) -> Expr:
        return mul(self, lift(other))

    __rmul__ = __mul__

    def __floordiv__(self, k: int) -> Expr:
        return floordiv(self, k)

    def __mod__(self, k: int) -> Expr:
        return mod(self, k)

    def map_vars(self, fn: Callable[[str], Expr]) -> Expr:
        raise NotImplementedError

    def to_c(self) -> str:
        raise NotImplementedError

    def eval(self, env: Mapping) -> Any:
        """The value with variables from `env` (ints or numpy arrays)."""
        raise NotImplementedError

    def vars(self) -> set[str]:
        raise NotImplementedError

    def subs(self, env: Mapping[str, Expr | int]) -> Expr:
        return self.map_vars(lambda n: lift(env[n]) if n in env else Var(n))


@dataclass(frozen=True)
class Const(Expr):
    value: int

    def to_c(self) -> str:
        return str(self.value)

    def eval(self, env):
        return self.value

    def vars(self):
        return set()

    def map_vars(self, fn):
        return self


@dataclass(frozen=True)
class Var(Expr):
    name: str

    def to_c(self) -> str:
        return self.name

    def eval(self, env):
        return env[self.name]

    def vars(self):
        return {self.name}

    def map_vars(self, fn):
        return fn(self.name)


@dataclass(frozen=True)
class Add(Expr):
    terms: tuple

    def to_c(self) -> str:
        return "(" + " + ".join(t.to_c() for t in self.terms) + ")"

    def eval(self, env):
        total = 0
        for t in self.terms:
            total = total + t.eval(env)
        return total

    def vars(self):
        return set().union(*(t.vars() for t in self.terms))

    def map_vars(self, fn):
        out: Expr = Const(0)
        for t in self.terms:
            out = add(out, t.map_vars(fn))
        return out


@dataclass(frozen=True)
class Mul(Expr):
    coef: int
    term: Expr

    def to_c(self) -> str:
        return f"{self.coef} * {self.term.to_c()}"

    def eval(self, env):
        return self.coef * self.term.eval(env)

    def vars(self):
        return self.term.vars()

    def map_vars(self, fn):
        return mul(Const(self.coef), self.term.map_vars(fn))


@dataclass(frozen=True)
class FloorDiv(Expr):
    term: Expr
    k: int

    def to_c(self) -> str:
        return f"({self.term.to_c()} / {self.k})"

    def eval(self, env):
        return self.term.eval(env) // self.k

    def vars(self):
        return self.term.vars()

    def map_vars(self, fn):
        return floordiv(self.term.map_vars(fn), self.k)


@dataclass(frozen=True)
class Mod(Expr):
    term: Expr
    k: int

    def to_c(self) -> str:
        return f"({self.term.to_c()} % {self.k})"

    def eval(self, env):
        return self.term.eval(env) % self.k

    def vars(self):
        return self.term.vars()

    def map_vars(self, fn):
        return mod(self.term.map_vars(fn), self.k)


def lift(x: Expr | int) -> Expr:
    return x if isinstance(x, Expr) else Const(int(x))


def add(a: Expr, b: Expr) -> Expr:
    """Flattening add that folds constants, so emitted C stays readable."""
    terms: list[Expr] = []
    const = 0
    for t in (a, b):
        for u in t.terms if isinstance(t, Add) else (t,):
            if isinstance(u, Const):
                const += u.value
            else:
                terms.append(u)
    if const:
        terms.append(Const(const))
    if not terms:
        return Const(0)
    if len(terms) == 1:
        return terms[0]
    return Add(tuple(terms))


def mul(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value * b.value)
    if isinstance(b, Const):
        a, b = b, a
    if not isinstance(a, Const):
        raise ValueError("index expressions multiply only by constants")
    if a.value == 0:
        return Const(0)
    if a.value == 1:
        return b
    if isinstance(b, Mul):
        return mul(Const(a.value * b.coef), b.term)
    if isinstance(b, Add):
        out: Expr = Const(0)
        for t in b.terms:
            out = add(out, mul(a, t))
        return out
    return Mul(a.value, b)


def floordiv(a: Expr, k: int) -> Expr:
    if k == 1:
        return a
    if isinstance(a, Const):
        return Const(a.value // k)
    return FloorDiv(a, k)


def mod(a: Expr, k: int) -> Expr:
    if k == 1:
        return Const(0)
    if isinstance(a, Const):
        return Const(a.value % k)
    return Mod(a, k)
