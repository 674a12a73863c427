"""The text form of Compose specs, as Morello prints them (spec.rs, `Display for
LogicalSpec`): the components head first, then the operands with their shapes, the
output last as `out=...`:

    (Compose((Softmax2, Matmul), [(1x8x4, f32, GL, row_major), (1x4x16, f32, GL, row_major),
              out=(1x8x16, f32, GL, row_major)], serial), [16, 16, 1024, 33554432])

Sugar (like `Matmul(8x8x8, f32)`): bare shapes and one dtype, everything in the
target's memory level, row-major and serial, the output derived:

    Compose((Softmax2, Matmul), [1x8x4, 1x4x16], f32)

A tensor may also be `(1x8x4, f32)` (memory level, row-major). The Compose's shape (its
merged dimensions, morello_asp/compose.py) is inferred from the operands' shapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .dtypes import Dtype
from .errors import SpecError
from .layout import Layout

if TYPE_CHECKING:
    from .spec import Spec, TensorSpec, _Parser
    from .target import Target


def compose_text(spec: Spec) -> str:
    from .compose import parse_name

    parsed = parse_name(spec.kind)
    assert parsed is not None
    names, _ = parsed
    shapes = spec.operand_shapes
    ops = []
    for i, (ts, shp) in enumerate(zip(spec.operands, shapes)):
        t = "(" + "x".join(map(str, shp)) + ", " + ts.text()[1:]
        ops.append(("out=" if i == len(shapes) - 1 else "") + t)
    serial = ", serial" if spec.serial else ""
    lims = ", ".join(str(x) for x in spec.limits)
    return f"(Compose(({', '.join(names)}), [{', '.join(ops)}]{serial}), [{lims}])"


def parse_compose(p: _Parser, tgt: Target, full: bool) -> Spec:
    """After the word `Compose` (and a "(" before it when `full`): the rest of the text."""
    from .compose import compose_name, needs_rank
    from .kinds import kind as get_kind
    from .spec import Spec, TensorSpec

    p.eat("(")
    p.eat("(")
    names = [p.word("a component kind")]
    while p.maybe(","):
        names.append(p.word("a component kind"))
    p.eat(")")
    for n in names:
        try:
            get_kind(n)
        except ValueError as e:
            raise SpecError(f"Compose component: {e}") from None
    if len(names) < 2:
        raise SpecError("a Compose has at least two components")
    p.eat(",")
    p.eat("[")
    items: list[tuple[tuple[int, ...], TensorSpec | None, bool]] = []
    while True:
        is_out = False
        save = p.pos
        p.skip_ws()
        if p.text.startswith("out", p.pos):
            p.word()
            p.eat("=")
            is_out = True
        elif p.pos != save:
            p.pos = save
        if p.maybe("("):
            shape = p.dims()
            p.eat(",")
            ts = p.tensor_fields(len(shape), tgt.memory_level.name)
            items.append((shape, ts, is_out))
        else:
            items.append((p.dims(), None, is_out))
        if not p.maybe(","):
            break
    p.eat("]")
    serial = not full  # sugar is serial, like a primitive's
    dtype = None
    while p.maybe(","):
        w = p.word("a dtype, serial or parallel")
        if w in ("serial", "parallel"):
            serial = w == "serial"
            continue
        try:
            dtype = Dtype.parse(w)
        except ValueError:
            p.error(f"a dtype (one of {Dtype.choices()}), serial or parallel")
    p.eat(")")
    limits = p.limits_tail(tgt, full)
    if any(o for *_, o in items[:-1]):
        raise SpecError("out= names the Compose's output, its last operand")
    tss: list[TensorSpec | None] = []
    for item_shape, given, _ in items:
        if given is None:
            if dtype is None:
                raise SpecError("a Compose with bare operand shapes needs a dtype after the list: [..], f32)")
            given = TensorSpec(dtype, tgt.memory_level.name, Layout.row_major(len(item_shape)))
        tss.append(given)
    rank = None
    if needs_rank(names):
        rank = len(items[0][0])
    kname = compose_name(names, rank)
    try:
        k = get_kind(kname)
    except ValueError as e:
        raise SpecError(str(e)) from None
    nops = len(k.params)
    shapes: list[tuple[int, ...] | None] = [sh for sh, _, _ in items]
    if len(items) == nops - 1 and not items[-1][2]:  # the output left out: derived
        shapes.append(None)
        tss.append(None)
    if len(items) != nops and len(shapes) != nops:
        raise SpecError(f"{kname} takes {nops} operands ({', '.join(k.params)}; the last is out=), got {len(items)}")
    dims = infer_shape(k, shapes)
    want = k.operand_shapes(dims)
    for i, (got, expect) in enumerate(zip(shapes, want)):
        if got is not None and tuple(got) != tuple(expect):
            raise SpecError(
                f"{kname}: operand {i} ({k.params[i]}) has shape {'x'.join(map(str, got))}, but the other "
                f"operands make it {'x'.join(map(str, expect))}"
            )
    if tss[-1] is None:
        first = next(t for t in tss if t is not None)
        tss[-1] = TensorSpec(first.dtype, first.level, Layout.row_major(len(want[-1])))
    ops = tuple(t for t in tss if t is not None)
    return Spec(kname, dims, ops, serial, tuple(limits), tgt)


def infer_shape(k, shapes) -> tuple[int, ...]:
    """The Compose's dimensions from the operand shapes given (None: not given): each
    dimension from an operand dimension that is exactly it."""
    assert k.rank is not None
    out: list[int | None] = [None] * k.rank
    for i, s in enumerate(shapes):
        if s is None:
            continue
        acc = k.access(k.rank)[i]
        if len(s) != len(acc):
            raise SpecError(f"{k.name}: operand {i} ({k.params[i]}) has rank {len(s)}; it needs rank {len(acc)}")
        for a, x in zip(acc, s):
            d = a.single
            if d is None:
                continue
            if out[d] is not None and out[d] != x:
                raise SpecError(f"{k.name}: dimension {k.dims[d]} is {out[d]} in one operand and {x} in {k.params[i]}")
            out[d] = x
    missing = [k.dims[d] for d, x in enumerate(out) if x is None]
    if missing:
        raise SpecError(f"{k.name}: no operand gives dimension {missing[0]}: write the output (out=...) too")
    return tuple(x for x in out if x is not None)
