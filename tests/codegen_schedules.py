"""Hand schedules shared by the codegen tests: small strategies that complete every
open spec of a program, so tests can cover boundaries (which multiply holes) generically."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from fast_matmul import fast_matmul  # noqa: E402,F401

from morello_asp.ir import Impl, SpecHole  # noqa: E402


def leaf(h):
    return h._leaf_spec()


def to_l1(h, ops):
    """Cache-move the GL operands among `ops` into L1 (no code)."""
    for i in ops:
        ts = leaf(h).operands[i]
        if ts.level == "GL":
            h = h.move_param(i, "L1", str(ts.layout))
    return h


def scalar_tile(h):
    s = leaf(h)
    return h.tile([1] * len(s.shape)) if s.volume > 1 else h


def scalar(h):
    """Any Zero / Move / MatmulAccum spec down to scalar kernels."""
    kind = leaf(h).kind
    h = scalar_tile(h)
    if kind == "Zero":
        return to_l1(h, [0]).select("ValueZero")
    if kind == "Move":
        return to_l1(h, [0, 1]).select("ValueAssign")
    if kind == "MatmulAccum":
        return to_l1(h, [0, 1, 2]).select("MultAdd")
    raise AssertionError(kind)


def complete(imp, strategy):
    """Apply `strategy` to every open spec until none is left."""
    if not isinstance(imp, Impl):
        imp = SpecHole(imp)
    while imp.holes():
        path, _ = imp.holes()[0]
        imp = imp.subschedule(path, strategy)
    return imp


def vec_rows(mv):
    """Move between L1 and VRF one row at a time (VectorAssign on each row)."""
    s = leaf(mv)
    shape = list(s.shape)
    row = [1] * (len(shape) - 1) + [shape[-1]]
    return (mv.tile(row) if row != shape else mv).select("VectorAssign")


def reg_block(h):
    """MatmulAccum(1 x r x k x c), c a multiple of 4, with out held in VRF over all of k:
    per k, rhs row to VRF, then one BroadcastVecMultAdd per row of lhs."""
    s = leaf(h)
    c = s.shape[3]
    vs = 8 if c % 8 == 0 else 4
    rlay = str(s.operands[1].layout)

    def kstep(b):
        b = to_l1(b, [1])
        b = b.move_param(1, "VRF", rlay, vector_size=vs)
        b = complete_kind(b, "Move", lambda m: m.select("VectorAssign"))
        inner = lambda x: (x.tile([1, 1, 1, c]) if leaf(x).shape[1] > 1 else x)  # noqa: E731
        return complete(b, lambda x: to_l1(inner(x), [0]).select("BroadcastVecMultAdd"))

    def accumulate(x):
        return complete(x.split(1) if leaf(x).shape[2] > 1 else x, kstep)

    if s.operands[2].level == "VRF":
        return accumulate(h)
    h = h.move_param(2, "L1").move_param(2, "VRF", "row_major", vector_size=vs)
    h = complete_kind(h, "Move", vec_rows)
    return complete(h, accumulate)


def complete_kind(imp, kind, strategy):
    """Apply `strategy` to every open spec of `kind`."""
    while True:
        todo = [p for p, hole in imp.holes() if hole.spec.kind == kind]
        if not todo:
            return imp
        imp = imp.subschedule(todo[0], strategy)
