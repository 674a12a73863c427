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

from morello_asp.codegen.calling import loadable
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.codegen.padding import Pad, Padded, borders_for, regions
from morello_asp.codegen.reference import flops
from morello_asp.codegen.split_padded import SplitPadded
from morello_asp.default_table import DEFAULT_TABLE
from morello_asp.errors import CodegenError
from morello_asp.spec import Spec, parse_spec
from morello_asp.synthesis import synthesize

# Cut where the copy would be a tenth of the layer or more: a copy moves each byte of the
# padded inputs twice at memcpy's speed (tens of GB/s), a program does about a hundred
# GFLOP/s, so the copy costs about a tenth of the layer at 64 FLOPs per byte copied.
# Depthwise layers do 1 to 5 (the copy was up to 0.6 of MobileNetV2's stride-2 layer's
# call); dense convolutions hundreds, where the edges' extra searches (each a conv spec)
# would cost seconds to save a percent.
SPLIT_MAX_FLOPS_PER_BYTE = 64


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
    called on unpadded arrays: a `SplitPadded` (regions, no copy of the image) or the
    bordered program's `Padded` call (it copies the image), which `split=None` takes
    where the iteration space cannot be cut, where the target's programs do not run in
    this process, or where the layer does more than SPLIT_MAX_FLOPS_PER_BYTE per byte
    of padded inputs (the copy is then a small part of the call)."""
    if isinstance(spec, str):
        spec = parse_spec(spec, target, rules=rules)
    borders = borders_for(spec, pad)
    parts = regions(spec, borders) if len(spec.outputs) == 1 else None
    ct = get_ctarget(spec.target, rules)
    if split is None:
        nbytes = sum(prod(spec.operand_shapes[i]) * spec.operands[i].dtype.nbytes for i in borders)
        split = parts is not None and _in_process(ct) and flops(spec) <= SPLIT_MAX_FLOPS_PER_BYTE * nbytes
    if split and parts is None:
        raise CodegenError(
            f"{spec.short()}: its padded dimensions cannot be cut into an interior and edges "
            "(no output dimension, or no interior, along one of them)"
        )
    if not split:
        imp = synthesize(spec, rules=rules, db=db, progress=progress)
        return Padded(imp.compile(rules), pad)
    assert parts is not None
    impls = [(r, synthesize(r.spec, rules=rules, db=db, progress=progress)) for r in parts]
    return SplitPadded(spec, borders, impls, ct)


def _in_process(ct) -> bool:
    """The target's programs load into this process (codegen/calling.py's loadable)."""
    try:
        loadable(ct)
    except CodegenError:
        return False
    return True
