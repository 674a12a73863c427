"""Manual scheduling (paper 2.3): rewrites applied to the open leaves of a partial program.

Each primitive is a checked free function (Exo style) that asks the rule files, through
the engine of the spec's own target, whether the rewrite applies and what sub-specs it
leaves, then grows the tree. Spec and every program node have the same primitives as
methods (morello_asp.schedulable). With several open specs, a rewrite goes to the sole
one that is not a copy, a Move (default child selection); otherwise use `subschedule(path, fn)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias

from morello_asp import rewrites
from morello_asp.dtypes import Dtype
from morello_asp.errors import LegalityError, ScheduleError
from morello_asp.ir import Impl, SpecHole
from morello_asp.layout import Layout
from morello_asp.naming import snake
from morello_asp.rewrites import Action, node_from_expansion  # noqa: F401 (the scheduling vocabulary: dp and guides use it)
from morello_asp.rewrites.pipeline import temp_rank
from morello_asp.solver.search.engine import get_engine
from morello_asp.spec import Spec

Program: TypeAlias = Spec | Impl


def _engine(spec: Spec):
    # a kind a user's file declares is scheduled by rules that include its declaration
    return get_engine(spec.target, spec.k.user_files())


def _as_impl(p: Program) -> Impl:
    return p if isinstance(p, Impl) else SpecHole(p)


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
    work = [p for p, h in holes if not h.spec.k.is_copy]  # not a Move (Kind.is_copy: declared as a copy)
    if len(work) == 1:
        return work[0]
    listing = "; ".join(f"{list(p)}: {h.spec.short()}" for p, h in holes)
    raise ScheduleError(
        f"{len(holes)} open specs and no sole one that is not a copy (a Move); pick one with "
        f"subschedule(path, fn): {listing}"
    )


def leaf_spec(p: Program) -> Spec:
    """The open spec a rewrite of `p` applies to."""
    impl = _as_impl(p)
    node = impl
    for i in _default_hole(impl):
        node = node.children[i]
    return node.spec


def apply(p: Program, action: Action) -> Impl:
    """Grow `p` at its default open spec by `action` (ScheduleError if it does not apply)."""
    impl = _as_impl(p)
    path = _default_hole(impl)

    def grow(hole: Impl) -> Impl:
        return node_from_expansion(hole.spec, _engine(hole.spec).request(hole.spec, action))

    return _replace(impl, path, grow)


def tile(p: Program, shape: Sequence[int], parallel: bool = False) -> Impl:
    """Loop over tiles of `shape` (one size per spec dimension); see Schedulable.tile."""
    return apply(p, rewrites.tile.action(shape, parallel))


def split(p: Program, k: int) -> Impl:
    """Loop over the reduction dimensions in steps of `k`; see Schedulable.split."""
    leaf = leaf_spec(p)
    red = leaf.k.reduction(len(leaf.shape))
    if not red:
        raise ScheduleError(f"{leaf.short()} has no reduction dimension to split")
    shape = list(leaf.shape)
    for d in red:
        shape[d] = k
    return tile(p, shape)


def to_accum(p: Program) -> Impl:
    """The fill of the output, then the accumulating kind; see Schedulable.to_accum."""
    return apply(p, rewrites.to_accum.action())


def spatial_split(p: Program) -> Impl:
    """A convolution row's loop over filter positions; see Schedulable.spatial_split."""
    return apply(p, rewrites.spatial_split.action())


def subsample(p: Program, level: str = "GL") -> Impl:
    """A strided 1 x 1 convolution's pixels copied densely; see Schedulable.subsample."""
    return apply(p, rewrites.subsample.action(level))


def move_param(
    p: Program,
    operand: int,
    level: str,
    layout: str | Layout = "row_major",
    vector_size: int | None = None,
    dtype: str | Dtype | None = None,
) -> Impl:
    """A new buffer for one operand; see Schedulable.move_param. A packed layout must be
    a bijection onto its buffer, which z3 proves before the rules are asked. `dtype`
    (a name such as "f32") makes it a casting move; the rules say which casts apply."""
    leaf = leaf_spec(p)
    if not 0 <= operand < len(leaf.operands):
        raise ScheduleError(f"{leaf.short()} has no operand {operand}")
    dt: Dtype | None = None
    if dtype is not None:
        try:
            dt = dtype if isinstance(dtype, Dtype) else Dtype.parse(str(dtype))
        except ValueError as e:
            raise ScheduleError(f"move_param dtype: {e}") from None
        if dt == leaf.operands[operand].dtype:
            dt = None  # the operand's own dtype: a plain move
    if isinstance(layout, str):
        try:
            layout = Layout.parse(layout, len(leaf.operand_shapes[operand]))
        except ValueError as e:
            raise ScheduleError(str(e)) from None
    # A move that copies nothing (a cache move: same layout and dtype, not to registers;
    # rules/move.lp move_copies/2) has no buffer of its own to prove: its view may pad.
    lv = next((x for x in leaf.target.levels if x.name == str(level).upper()), None)
    copies = dt is not None or layout != leaf.operands[operand].layout or lv is None or lv.is_register
    if layout.is_packed and copies:
        from morello_asp.solver.proofs.obligations import prove_layout  # z3: on the first proof, not with the package

        ob = prove_layout(layout, leaf.operand_shapes[operand])
        if ob.status == "refuted":
            raise LegalityError(f"operand {operand} of {leaf.short()}: {ob.what}: refuted: {ob.detail}")
    return apply(p, rewrites.move.action(operand, level, layout, vector_size, dt))


def select(p: Program, kernel: str) -> Impl:
    """The target microkernel `kernel`; see Schedulable.select. A kernel the target does
    not have, or one that does not apply, is a ScheduleError that lists those that do."""
    leaf = leaf_spec(p)
    engine = _engine(leaf)

    def applying() -> str:
        names = [e.action.args[0] for e in engine.expand(leaf) if e.action.name == "select"]
        return f"kernels that apply to this spec: {', '.join(names)}" if names else "no kernel applies to this spec"

    if snake(str(kernel)) not in engine.kernels:
        raise ScheduleError(f"unknown kernel {kernel} for target {leaf.target.name}; {applying()}")
    try:
        return apply(p, rewrites.select.action(kernel))
    except ScheduleError as e:
        raise ScheduleError(f"{e}; {applying()}") from None


def pipeline(
    p: Program,
    step: str,
    level: str = "",
    layout: str | Layout = "row_major",
    vector_size: int | None = None,
    index: int = 0,
) -> Impl:
    """A pipeline step (bufferize, to_softmax_parts, ...); see Schedulable.bufferize."""

    leaf = leaf_spec(p)
    lay = None
    if level:
        if isinstance(layout, str):
            try:
                lay = Layout.parse(layout, temp_rank(leaf, step, index))
            except ValueError as e:
                raise ScheduleError(str(e)) from None
        else:
            lay = layout
    return apply(p, rewrites.pipeline.action(step, level, lay, vector_size, index))


def subschedule(p: Program, path: Sequence[int], fn: Callable[[Impl], Impl]) -> Impl:
    """Apply `fn` to the child at `path`; see Schedulable.subschedule."""
    return _replace(_as_impl(p), tuple(path), fn)
