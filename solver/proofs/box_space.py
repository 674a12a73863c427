"""The specs of one memo box as z3 terms, so a claim can be proved for all of them at
once rather than for the few a search happened to visit.

A box [lo, hi] over the point of solver/memo/coords.py stands for every spec whose point
lies in it. Here each axis becomes a term: a dimension is a z3 integer constrained to
the powers of two 2**lo..2**hi (or a plain int when the box does not vary it, or the
key fixes the shape); each operand's level index, vector size, contiguity and
alignment, and each memory limit, is a z3 integer in its range. Axes that do not vary
stay Python ints, so a claim about them folds to a constant.

Only *specs* count: a point whose spec is invalid (say a VRF operand whose vector size
does not divide its volume) or not canonical is never asked of the table. `refute`
excludes such points: validity constraints are added to z3, and a model that still
decodes to a non-spec is blocked and the query repeated.
"""

from __future__ import annotations

import json
from itertools import product
from math import prod

import z3

from morello_asp.errors import SpecError
from morello_asp.solver.memo.coords import OPERAND_AXES, from_coords
from morello_asp.spec import Spec
from morello_asp.target import Target

TIMEOUT_MS = 10_000
MAX_BLOCKED = 50  # non-spec models tried before a query is left unknown


# Arithmetic on ints or z3 terms: stays in Python while both sides are known.
def div(a, b):
    return a // b if isinstance(a, int) and isinstance(b, int) else a / b


def mod(a, b):
    return a % b


def ceil_div(a, b):
    return -(-a // b) if isinstance(a, int) and isinstance(b, int) else (a + b - 1) / b


def product_of(xs):
    return prod(xs, start=1)


def sym_units(target: Target, unit: str, vol, nbytes: int, vector_size: int):
    """Target.units on ints or z3 terms: what a buffer of `vol` values takes at a level
    counting `unit`s."""
    return {
        "value": vol,
        "vector": ceil_div(vol, vector_size or 1),
        "line": ceil_div(vol * nbytes, target.line_bytes),
        "byte": vol * nbytes,
    }[unit]


def is_true(c) -> bool:
    return c is True or (isinstance(c, z3.BoolRef) and z3.is_true(z3.simplify(c)))


def as_bool(c):
    return z3.BoolVal(c) if isinstance(c, bool) else c


class BoxSpace:
    def __init__(self, key: str, lo, hi, target: Target):
        self.key, self.lo, self.hi, self.target = key, tuple(lo), tuple(hi), target
        k = self.k = json.loads(key)
        self.levels = list(k["levels"])
        probe = from_coords(key, self.lo, target)
        self.kind = probe.k
        self.serial = probe.serial
        self.dtypes = [o.dtype for o in probe.operands]
        self.op_access = probe.k.access(k["rank"])
        self.op_deps = probe.k.deps(k["rank"])
        self.vars: list[tuple[z3.ArithRef, int, int]] = []  # (var, lo, hi) of the axes that vary
        self._range: list = []
        i = 0
        if "shape" in k:
            self.dims = list(k["shape"])
            self.dim_values = [[d] for d in self.dims]
        else:
            self.dims, self.dim_values = [], []
            for d in range(k["rank"]):
                vals = [1 << e for e in range(self.lo[i], self.hi[i] + 1)]
                self.dim_values.append(vals)
                self.dims.append(self._axis(f"D{d}", i, vals))
                i += 1
        self.ops = []  # per operand: one axis per coords.OPERAND_AXES
        for op in range(len(k["ops"])):
            self.ops.append([self._axis(f"{n}{op}", i + j) for j, n in enumerate(OPERAND_AXES)])
            i += len(OPERAND_AXES)
        self.limits = [self._axis(f"L{j}", i + j) for j in range(k["nlimits"])]

    def _axis(self, name, i, values=None):
        lo, hi = self.lo[i], self.hi[i]
        if values is None and lo == hi:
            return lo
        if values is not None and len(values) == 1:
            return values[0]
        v = z3.Int(name)
        self.vars.append((v, lo, hi))
        if values is None:
            self._range.append(z3.And(lo <= v, v <= hi))
        else:
            self._range.append(z3.Or([v == x for x in values]))
        return v

    # ---- what the box holds -------------------------------------------------------
    def operand_shape(self, op, dims=None):
        """Operand op's extents over spec dimensions `dims` (default: the box's); a sum of
        dimensions has extent sum(coef * (size - 1)) + 1 + offset."""
        dims = self.dims if dims is None else dims
        out = []
        for a in self.op_access[op]:
            if a.single is not None:
                out.append(dims[a.single])
            else:
                out.append(sum(c * dims[d] for d, c in a.terms) - sum(a.coefs) + 1 + a.offset)
        return out

    def operand_volume(self, op):
        return product_of(self.operand_shape(op))

    def validity(self) -> list:
        """What Spec.validate demands that depends on varying axes: an operand in a
        vector-register level has a register-wide vector size dividing its volume;
        others have none."""
        out = []
        vlevels = [i for i, name in enumerate(self.levels) if self.target.holds_vectors(name)]
        widths = sorted(self.target.vector_types)
        for op, (lv, v, *_) in enumerate(self.ops):
            nb = self.dtypes[op].nbytes
            vol = self.operand_volume(op)
            in_vrf = z3.Or([as_bool(lv == i) for i in vlevels]) if vlevels else False
            if isinstance(v, int) and v <= 0:
                ok_vrf = z3.BoolVal(False)
            else:
                ok_vrf = z3.And(
                    as_bool(v > 0), z3.Or([as_bool(v * nb == w) for w in widths]), as_bool(mod(vol, v) == 0)
                )
            cond = z3.If(as_bool(in_vrf), ok_vrf, as_bool(v == 0))
            if not is_true(cond):
                out.append(cond)
        return out

    def point(self, model) -> tuple[int, ...]:
        env = {str(v): model.eval(v, model_completion=True).as_long() for v, _, _ in self.vars}
        out = []
        if "shape" not in self.k:
            out += [(d if isinstance(d, int) else env[str(d)]).bit_length() - 1 for d in self.dims]
        for axes in self.ops:
            out += [a if isinstance(a, int) else env[str(a)] for a in axes]
        out += [a if isinstance(a, int) else env[str(a)] for a in self.limits]
        return tuple(out)

    def spec_at(self, point) -> Spec | None:
        """The spec at `point`, or None if that point is no spec the table is asked about."""
        spec = from_coords(self.key, point, self.target)
        try:
            spec.validate(self.target, buffers=False)  # table specs are views into buffers
        except SpecError:
            return None
        return spec if spec.canonical() == spec else None

    def classes(self):
        """Every point of the box without its limit axes (limits set to the box's lowest)."""
        n = len(self.lo) - len(self.limits)
        ranges = [range(a, b + 1) for a, b in zip(self.lo[:n], self.hi[:n])]
        for pt in product(*ranges):
            yield pt + self.lo[n:]

    def n_classes(self) -> int:
        n = len(self.lo) - len(self.limits)
        return prod(b - a + 1 for a, b in zip(self.lo[:n], self.hi[:n]))

    def corners(self):
        n = len(self.lo) - len(self.limits)
        for pick in product(*[sorted({a, b}) for a, b in zip(self.lo[:n], self.hi[:n])]):
            yield pick + self.lo[n:]

    def text(self) -> str:
        """Kind, dimension ranges and operand levels, e.g. MatmulAccum(1x1x{2..8}x8, L1, VRF, VRF)."""
        dims = "x".join(str(v[0]) if len(v) == 1 else f"{{{v[0]}..{v[-1]}}}" for v in self.dim_values)
        lv = []
        for axes in self.ops:
            a = axes[0]
            lv.append(
                self.levels[a] if isinstance(a, int) else "|".join(self.levels[self.lo_of(a) : self.hi_of(a) + 1])
            )
        return f"{self.k['kind']}({dims}, {', '.join(lv)})"

    def axis_range(self, term) -> tuple[int, int]:
        """(lo, hi) of an axis term: a constant is its own range."""
        if isinstance(term, int):
            return term, term
        return self.lo_of(term), self.hi_of(term)

    def lo_of(self, var) -> int:
        return next(lo for v, lo, _ in self.vars if v is var)

    def hi_of(self, var) -> int:
        return next(hi for v, _, hi in self.vars if v is var)


class Refuter:
    """Asks z3 for a spec of a box where a claim fails. A first query without the
    validity constraints settles most claims; only when it finds a point are they
    added (and non-spec points blocked)."""

    def __init__(self):
        self.queries = 0

    def refute(self, space: BoxSpace, negation):
        """('proved', None | note, None) | ('refuted', model, spec) | ('unknown', reason, None).
        A proof with no note holds for the axes' ranges alone, whatever the box's key."""
        if isinstance(negation, bool):
            negation = z3.BoolVal(negation)
        negation = z3.simplify(negation)
        if z3.is_false(negation):
            return "proved", None, None
        s = self._solver()
        s.add(*space._range, negation)
        r = self._check(s)
        if r == z3.unsat:
            return "proved", None, None
        if r == z3.unknown:
            return "unknown", s.reason_unknown(), None
        # Some point breaks the claim: look for one that is a spec of the table.
        s = self._solver()
        s.add(*space._range, *space.validity(), negation)
        for _ in range(MAX_BLOCKED):
            r = self._check(s)
            if r == z3.unsat:  # only points that are no specs break it: true of this box only
                return "proved", "proved over the box's specs (its other points are no specs)", None
            if r == z3.unknown:
                return "unknown", s.reason_unknown(), None
            m = s.model()
            spec = space.spec_at(space.point(m))
            if spec is not None:
                return "refuted", m, spec
            s.add(z3.Or([v != m.eval(v, model_completion=True) for v, _, _ in space.vars]))
        return "unknown", f"the first {MAX_BLOCKED} points that break it are not canonical specs", None

    def _solver(self) -> z3.Solver:
        s = z3.Solver()
        s.set("timeout", TIMEOUT_MS)
        return s

    def _check(self, s):
        self.queries += 1
        return s.check()
