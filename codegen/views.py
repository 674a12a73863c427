"""Programs whose operands are regions of larger arrays (docs/convolutions.md, "Padding
without a copy").

A program's parameter is normally a whole buffer of the operand's shape. Compiled with
`buffer_shapes` ({operand: the array's logical shape}), operand i is instead a region of
an array of that shape in the operand's (dense) layout: the parameter points at the
region's first value and every index steps with the array's strides. The spec the search
solved must say what such a region is (its contiguousness `cN` and stride `sN`, as a
tile's view in a program: TensorSpec.contig, .stride), so no kernel assumes values
adjacent that are not. A padded convolution's interior runs this way on the caller's
image and output (morello_asp/padded.py), with no copy.
"""

from __future__ import annotations

from dataclasses import replace
from math import prod

from morello_asp.codegen.convert import dense_order
from morello_asp.errors import CodegenError
from morello_asp.spec import Spec


def element_strides(shape, order) -> tuple[int, ...]:
    """Per logical dimension, the values between neighbours along it in an array of
    `shape` laid out densely in `order` (dimensions from the outermost in memory)."""
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def check_buffer_shapes(spec: Spec, buffer_shapes) -> dict[int, tuple[int, ...]]:
    """`buffer_shapes` checked against `spec`: operand -> the shape of the array it is a
    region of, for the operands whose array is larger than they are. A CodegenError names
    what cannot hold: another rank, a region larger than its array, a register operand,
    a packing layout, or a spec that claims more contiguousness than the region has."""
    out: dict[int, tuple[int, ...]] = {}
    for i, bshape in (buffer_shapes or {}).items():
        if not 0 <= i < len(spec.operands):
            raise CodegenError(f"{spec.short()}: buffer_shapes names operand {i}; it has {len(spec.operands)}")
        ts, shape = spec.operands[i], tuple(spec.operand_shapes[i])
        bshape = tuple(int(n) for n in bshape)
        if len(bshape) != len(shape) or any(b < n for b, n in zip(bshape, shape)):
            raise CodegenError(
                f"{spec.short()}: operand {i} of shape {shape} is no region of an array of shape {bshape}"
            )
        if bshape == shape:
            continue
        if spec.target.is_register(ts.level):
            raise CodegenError(
                f"{spec.short()}: operand {i} is in registers; only memory operands are regions of arrays"
            )
        order = dense_order(ts.layout, bshape)
        if order is None:
            raise CodegenError(f"{spec.short()}: operand {i}'s layout {ts.layout} packs; a region needs a dense layout")
        full = ts.layout.full_contiguity()
        has = ts.layout.tile_contiguity(bshape, shape, full)
        claims = full if ts.contig is None else ts.contig
        if claims > has:
            raise CodegenError(
                f"{spec.short()}: operand {i} claims contiguousness {claims}, but as a region of a {bshape} "
                f"array it has {has} (write c{has} in its tensor spec)"
            )
        out[i] = bshape
    return out


def span(spec: Spec, i: int, bshape: tuple[int, ...] | None) -> int:
    """Values from operand i's first to its last, one past: its buffer's volume, or for a
    region of a `bshape` array, the reach of its last value."""
    ts, shape = spec.operands[i], tuple(spec.operand_shapes[i])
    if bshape is None or tuple(bshape) == shape:
        return ts.layout.buffer_volume(shape)
    order = dense_order(ts.layout, tuple(bshape))
    assert order is not None  # check_buffer_shapes refused packing layouts
    return reach(shape, element_strides(bshape, order))


def reach(shape, strides) -> int:
    """Values from a view's first to its last, one past (0 for an empty view), given its
    element strides per dimension."""
    if prod(shape) == 0:
        return 0
    return sum((n - 1) * s for n, s in zip(shape, strides)) + 1


def region_tensor(ts, shape, bshape, line_bytes: int):
    """TensorSpec `ts` as a region of `shape` at the corner of a `bshape` array in its
    dense layout: the contiguousness the region has there and, where it is not
    contiguous, the stride exponent of its runs (TensorSpec.stride: the power of two
    dividing their distance in bytes, at least the line's)."""
    shape, bshape = tuple(shape), tuple(bshape)
    lay = ts.layout
    full = lay.full_contiguity()
    contig = lay.tile_contiguity(bshape, shape, full)
    if contig >= full:
        return replace(ts, contig=None, stride=None)
    if lay.is_packed:
        raise CodegenError(f"layout {lay} packs; a region needs a dense layout")
    # the run boundary is the contig-th physical dimension from the innermost
    inner = [p.dim for p in reversed(lay.pdims)][:contig]
    step = prod(bshape[d] for d in inner) * ts.dtype.nbytes
    exp = max((step & -step).bit_length() - 1, line_bytes.bit_length() - 1)
    return replace(ts, contig=contig, stride=exp)


def copy_loops(shape, dst_strides, src_strides) -> tuple[list[int], list[int], list[int]]:
    """The copy's loops: dimensions in the destination's memory order (its largest stride
    outermost), those of one value dropped, and neighbours that are one run on both sides
    merged, so the innermost loop walks adjacent values where it can (a channels-last
    interior: rows of w x c values, not single values c apart)."""
    dims = sorted((j for j in range(len(shape)) if shape[j] > 1), key=lambda j: -abs(dst_strides[j]))
    out: list[list[int]] = []
    for j in dims:
        n, d, s = shape[j], dst_strides[j], src_strides[j]
        if out and out[-1][1] == d * n and out[-1][2] == s * n:  # the outer loop steps over exactly this one
            out[-1] = [out[-1][0] * n, d, s]
        else:
            out.append([n, d, s])
    if not out:
        out = [[1, 1, 1]]
    return [x[0] for x in out], [x[1] for x in out], [x[2] for x in out]
