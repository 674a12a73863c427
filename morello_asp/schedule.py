"""Manual scheduling (paper 2.3): rewrites applied to the open leaves of a partial program.

Each primitive is a thin, checked wrapper that asks the rule files (through the engine)
whether the rewrite applies and what sub-specs it leaves, then grows the tree. With
several open specs, a rewrite goes to the sole non-Move one (default child selection);
otherwise use `subschedule(path, fn)`.
"""
from __future__ import annotations

from typing import Callable

from .errors import LegalityError, ScheduleError
from .ir import Alloc, Block, Impl, KernelApp, Loop, SpecHole
from .layout import Layout
from .spec import Spec


def _engine(target=None, rules=()):
    from morello_asp.solver.engine import get_engine

    return get_engine(target or "avx2", tuple(rules))


def node_from_expansion(spec: Spec, exp, children: list[Impl] | None = None) -> Impl:
    """The IR node a rewrite builds, with `children` (default: open holes)."""
    kids = children if children is not None else [SpecHole(c) for c in exp.children]
    a = exp.action
    if a.name == "tile":
        shape, par = a.args
        return Loop(spec, tuple(shape), par, kids[0], tuple(kids[1:]))
    if a.name == "to_accum":
        return Block(spec, tuple(kids))
    if a.name == "move":
        op = a.args[0]
        idx = {k: kids[i] for i, k in enumerate(exp.keys)}
        body_spec = exp.children[exp.keys.index(1)]
        return Alloc(spec, op, body_spec.operands[op], idx[1], idx.get(0), idx.get(2))
    if a.name == "select":
        return KernelApp(spec, a.args[0], exp.kernel_cost)
    raise ScheduleError(f"no IR node for rewrite {a}")


def _replace(node: Impl, path: tuple[int, ...], fn: Callable[[Impl], Impl]) -> Impl:
    if not path:
        return fn(node)
    kids = list(node.children)
    if path[0] >= len(kids):
        raise ScheduleError(f"no child {path[0]} under {type(node).__name__} of {node.spec.short()}")
    kids[path[0]] = _replace(kids[path[0]], path[1:], fn)
    return node.with_children(kids)


def _default_hole(impl: Impl) -> tuple[int, ...]:
    holes = impl.holes()
    if not holes:
        raise ScheduleError("the program is complete: no open spec left to rewrite")
    if len(holes) == 1:
        return holes[0][0]
    non_move = [p for p, h in holes if h.spec.kind != "Move"]
    if len(non_move) == 1:
        return non_move[0]
    listing = "; ".join(f"{list(p)}: {h.spec.short()}" for p, h in holes)
    raise ScheduleError(f"{len(holes)} open specs and no sole non-Move one; pick one with subschedule(path, fn): {listing}")


class Schedulable:
    """Scheduling methods shared by Spec (through SpecHole) and partial programs."""

    def _apply(self, action) -> Impl:
        from morello_asp.solver.engine import Action  # noqa: F401

        impl = self if isinstance(self, Impl) else SpecHole(self)
        path = _default_hole(impl)
        eng = _engine(getattr(self, "_target", None))

        def grow(hole: Impl) -> Impl:
            return node_from_expansion(hole.spec, eng.request(hole.spec, action))

        return _replace(impl, path, grow)

    def tile(self, shape, parallel: bool = False) -> Impl:
        """Spec(N) -> loop over tiles: Spec(tile), plus a boundary spec per leftover region.

        `shape` has one size per spec dimension (b, m, k, n for Matmul)."""
        from morello_asp.solver.engine import Action

        return self._apply(Action("tile", (tuple(int(x) for x in shape), bool(parallel))))

    def split(self, k: int) -> Impl:
        """MatmulAccum(b,m,K,n) -> loop over K in steps of k: MatmulAccum(b,m,k,n)."""
        leaf = self._leaf_spec()
        red = leaf.k.reduction(len(leaf.shape))
        if not red:
            raise ScheduleError(f"{leaf.short()} has no reduction dimension to split")
        shape = list(leaf.shape)
        for d in red:
            shape[d] = k
        return self.tile(shape)

    def to_accum(self) -> Impl:
        """Matmul -> Block[Zero(out); MatmulAccum(lhs, rhs, out)]."""
        from morello_asp.solver.engine import Action

        return self._apply(Action("to_accum"))

    def move_param(self, operand: int, level: str, layout: str | Layout = "row_major", vector_size: int | None = None) -> Impl:
        """Spec(.., t, ..) -> alloc t' at `level`: [load t -> t'] Spec(.., t', ..) [store t' -> t]."""
        from morello_asp.solver.engine import Action

        leaf = self._leaf_spec()
        if not 0 <= operand < len(leaf.operands):
            raise ScheduleError(f"{leaf.short()} has no operand {operand}")
        if isinstance(layout, str):
            try:
                layout = Layout.parse(layout, len(leaf.operand_shapes[operand]))
            except ValueError as e:
                raise ScheduleError(str(e)) from None
        if layout.is_packed:  # a user's layout must be a bijection onto its buffer (z3)
            from morello_asp.solver.verify import prove_layout

            ob = prove_layout(layout, leaf.operand_shapes[operand])
            if ob.status == "refuted":
                raise LegalityError(f"operand {operand} of {leaf.short()}: {ob.what}: refuted: {ob.detail}")
        return self._apply(Action("move", (operand, level.upper(), layout, vector_size or 0)))

    def select(self, kernel: str) -> Impl:
        """Spec -> the target microkernel `kernel` (e.g. BroadcastVecMultAdd)."""
        from morello_asp.solver.engine import Action

        return self._apply(Action("select", (kernel,)))

    def subschedule(self, path, fn: Callable[[Impl], Impl]) -> Impl:
        """Apply `fn` to the child at `path` (child indices from this node's open leaf)."""
        impl = self if isinstance(self, Impl) else SpecHole(self)
        path = tuple(path)

        def sub(node: Impl) -> Impl:
            return fn(node)

        return _replace(impl, path, sub)

    def _leaf_spec(self) -> Spec:
        impl = self if isinstance(self, Impl) else SpecHole(self)
        path = _default_hole(impl)
        node = impl
        for i in path:
            node = node.children[i]
        return node.spec


def _attach():
    """Give Spec and every IR node the scheduling methods and the cost/print helpers."""
    from . import cost as _cost
    from . import printer as _printer

    for name in ("tile", "split", "to_accum", "move_param", "select", "subschedule", "_apply", "_leaf_spec"):
        setattr(Spec, name, getattr(Schedulable, name))
        setattr(Impl, name, getattr(Schedulable, name))
    Impl.cost = property(lambda self: _cost.compute_cost(self))
    Impl.__str__ = lambda self: _printer.listing(self)


_attach()
