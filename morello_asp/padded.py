"""Padded convolutions compiled to run on the caller's unpadded arrays (docs/convolutions.md,
"Padding without a copy").

`fn.padded(p)` (codegen/padding.py) copies the whole image into a zero-bordered buffer
on every call: for a large image that copy costs as much as the layer. `compile_padded`
cuts the padded spec's iteration space instead (codegen/padding.py's `regions`): an
interior whose windows read no border, synthesized as a spec over views of the caller's
image and output, and thin edge regions, each a spec of its own over a small bordered
copy of just the rows or columns its windows read. Every region is searched like any
spec (one memo table), and the programs together compute what the bordered program does.
"""

from __future__ import annotations

from math import prod
from typing import Any

from morello_asp.codegen.api import compile_impl
from morello_asp.codegen.padding import Pad, Padded, SplitPadded, borders_for, regions
from morello_asp.default_table import DEFAULT_TABLE
from morello_asp.errors import CodegenError
from morello_asp.spec import Spec, parse_spec
from morello_asp.synthesis import synthesize

# Below this many bytes of padded inputs the one copy into a bordered buffer costs less
# than the extra calls and small copies of the edge regions (a few microseconds).
SPLIT_MIN_BYTES = 256 * 1024


def compile_padded(
    spec: Spec | str,
    pad: Pad,
    target=None,
    rules=(),
    db: Any = DEFAULT_TABLE,
    progress=None,
    split: bool | None = None,
):
    """`spec` (over the zero-bordered inputs, as `fn.padded` takes it) compiled to be
    called on unpadded arrays: a `SplitPadded` (regions, no copy of the image) or, where
    the iteration space cannot be cut or (`split=None`) the padded inputs are smaller
    than SPLIT_MIN_BYTES, the bordered program's `Padded` call."""
    if isinstance(spec, str):
        spec = parse_spec(spec, target, rules=rules)
    borders = borders_for(spec, pad)
    parts = regions(spec, borders) if len(spec.outputs) == 1 else None
    if split is None:
        nbytes = sum(prod(spec.operand_shapes[i]) * spec.operands[i].dtype.nbytes for i in borders)
        split = parts is not None and nbytes >= SPLIT_MIN_BYTES
    if split and parts is None:
        raise CodegenError(
            f"{spec.short()}: its padded dimensions cannot be cut into an interior and edges "
            "(no output dimension, or no interior, along one of them)"
        )
    if not split:
        imp = synthesize(spec, rules=rules, db=db, progress=progress)
        return Padded(imp.compile(rules), pad)
    assert parts is not None
    progs = []
    for r in parts:
        imp = synthesize(r.spec, rules=rules, db=db, progress=progress)
        progs.append((r, compile_impl(imp, imp.spec.target, rules, buffer_shapes=r.buffer_shapes)))
    return SplitPadded(spec, borders, progs)
