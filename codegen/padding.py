"""Zero padding around a windowed operand (docs/convolutions.md, "Padding").

A convolution with zero padding p over an h x w image is the unpadded convolution over
the (h + 2p) x (w + 2p) image with a border of zeros: the spec (and the program the
search finds for it) is the unpadded one over the bordered image; padding is a property
of the call. `Padded(program, pad)` keeps one zero-bordered buffer per padded operand,
in the operand's layout, for the program's lifetime; a call writes the user's unpadded
array into the buffer's interior (one copy, which converts layouts too) and runs the
program on the whole buffer. Its border is never written, so it stays zero.

Which dimensions are padded comes from the kind's declaration alone: an operand's
logical dimension whose index is a sum of spec dimensions (kind_access/3: a
convolution's image row h + fh) is windowed, and `pad` widens every windowed dimension
of every input on both sides (or per dimension, in order, as given). A producer that
writes straight into `interior(i)` (a graph runtime, issue 60) saves the copy: a call
handed that very view passes it through.

A Padded call is not re-entrant: two threads calling one Padded share its buffers.

The copy costs as much as a layer that does little work per value (a depthwise one).
`boxes` and `regions` cut a padded spec's iteration space instead: edges whose windows
reach into the border, and an interior whose windows read none, each a spec of its own
(the interior's operands regions of the caller's arrays, codegen/views.py). Their
programs run as one call in codegen/split_padded.py (docs/convolutions.md, "Padding
without a copy").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from morello_asp.codegen.convert import aligned_array, as_array, dense_order
from morello_asp.codegen.reference import check_call, random_operands, reference
from morello_asp.codegen.views import region_tensor
from morello_asp.errors import CodegenError

if TYPE_CHECKING:  # annotations only: calling.py builds Padded
    from morello_asp.codegen.calling import Callable

Pad = int | Sequence[int | tuple[int, int]]


def windowed_dims(spec) -> dict[int, tuple[int, ...]]:
    """Input operand -> its logical dimensions indexed by a sum of spec dimensions (the
    windows a kernel slides: where padding goes), for operands that have any."""
    out: dict[int, tuple[int, ...]] = {}
    access = spec.k.access(len(spec.shape))
    for i, acc in enumerate(access):
        if i in spec.outputs:
            continue
        dims = tuple(j for j, a in enumerate(acc) if len(a.dims) > 1)
        if dims:
            out[i] = dims
    return out


def borders_for(spec, pad: Pad) -> dict[int, dict[int, tuple[int, int]]]:
    """Operand -> logical dim -> (before, after) zeros, from `pad`: one number for every
    windowed dimension, or one entry (a number, or a pair before/after) per windowed
    dimension of the padded operand, in order."""
    wins = windowed_dims(spec)
    if not wins:
        raise CodegenError(f"{spec.short()}: no operand has a windowed dimension (a sum in kind_access/3) to pad")
    out: dict[int, dict[int, tuple[int, int]]] = {}
    for i, dims in wins.items():
        if isinstance(pad, int | np.integer):
            entries: list = [int(pad)] * len(dims)
        else:
            entries = list(pad)
            if len(entries) != len(dims):
                raise CodegenError(
                    f"pad {tuple(pad)}: {spec.short()} has {len(dims)} windowed dimension(s) to pad, "
                    f"got {len(entries)} entries"
                )
        sides = {}
        for j, e in zip(dims, entries):
            lo, hi = (e, e) if isinstance(e, int | np.integer) else tuple(e)
            if lo < 0 or hi < 0:
                raise CodegenError(f"pad {pad}: padding is a number of zeros, not negative")
            if lo + hi >= spec.operand_shapes[i][j]:
                raise CodegenError(
                    f"pad {pad}: {spec.short()}'s operand {i} spans {spec.operand_shapes[i][j]} along its "
                    f"dimension {j}, which leaves no value inside {lo} + {hi} zeros"
                )
            sides[j] = (int(lo), int(hi))
        out[i] = sides
    return out


class Padded:
    """`program` called on unpadded inputs: each windowed input is written into the
    interior of a kept zero-bordered buffer (module docstring). Call it as the program,
    with the padded operands smaller by their borders; `out=` as the program's."""

    def __init__(self, program: Callable, pad: Pad):
        self.program = program
        spec = self.spec = program.spec
        self.borders = borders_for(spec, pad)
        self._buf: dict[int, np.ndarray] = {}
        self._inner: dict[int, np.ndarray] = {}
        for i, sides in self.borders.items():
            ts, shape = spec.operands[i], tuple(spec.operand_shapes[i])
            order = dense_order(ts.layout, shape)
            if order is None:
                raise CodegenError(
                    f"{spec.short()}: operand {i} is in a packing layout; padding needs a layout that only "
                    "orders dimensions (row_major, channels-last, ...)"
                )
            buf = aligned_array(shape, ts.dtype.np_dtype, zero=True, order=order)  # on a line, as the program's own
            self._buf[i] = buf
            self._inner[i] = buf[
                tuple(slice(sides[j][0], n - sides[j][1]) if j in sides else slice(None) for j, n in enumerate(shape))
            ]
        # what a refused argument's message says of the call, per padded operand
        self._how = {
            i: "padded by " + ", ".join(f"{lo}/{hi}" for lo, hi in s.values()) for i, s in self.borders.items()
        }

    def shape(self, i: int) -> tuple[int, ...]:
        """The shape a call takes for operand i (unpadded)."""
        return self._inner[i].shape if i in self._inner else tuple(self.spec.operand_shapes[i])

    def buffers(self) -> list[np.ndarray]:
        """The kept zero-bordered buffers, one per padded operand (what the program reads)."""
        return list(self._buf.values())

    def interior(self, i: int) -> np.ndarray:
        """The interior of operand i's kept buffer: a producer may write into it, and a
        call given this very array copies nothing."""
        return self._inner[i]

    def __call__(self, *args, out=None):
        full, copies = self._arguments(args)
        for dst, src in copies:
            dst[...] = src
        return self.program(*full, out=out)

    def bind(self, args, out):
        """As Callable.bind: each call copies the windowed inputs into the borders'
        interiors, then runs the program's own bound call."""
        full, copies = self._arguments(args)
        run = self.program.bind(full, out)

        def call():
            for dst, src in copies:
                np.copyto(dst, src)
            return run()

        return call

    def call_ops(self, args, out) -> list:
        """As Program.call_ops: the copies into the borders' interiors, then the program's own steps."""
        full, copies = self._arguments(args)
        return [("copy", dst, src) for dst, src in copies] + self.program.call_ops(full, out)

    def _arguments(self, args) -> tuple[list, list[tuple[np.ndarray, np.ndarray]]]:
        """The program's arguments for a call on `args` (the kept bordered buffers in
        place of the windowed inputs) and the (interior, input) pairs to copy first."""
        spec = self.spec
        ins = [i for i in range(len(spec.operands)) if i not in spec.outputs]
        if len(args) != len(ins):
            raise CodegenError(f"{spec.short()} padded takes {len(ins)} input array(s), got {len(args)}")
        full, copies = [], []
        for k, (i, x) in enumerate(zip(ins, args)):
            if i not in self._inner:
                full.append(x)
                continue
            inner = self._inner[i]
            a = as_array(x, f"argument {k + 1}")
            if a is not inner:
                copies.append((inner, checked_input(spec, k, i, a, inner.shape, self._how[i])))
            full.append(self._buf[i])
        return full, copies

    def padded_inputs(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Unpadded operands (all of them, outputs included) zero-padded as the call pads them."""
        return padded_inputs(self.borders, arrays)

    def check(self, seed: int = 0) -> tuple[float, float]:
        """Run on random unpadded inputs against the numpy reference over the same inputs
        zero-padded: (max |error|, tolerance)."""
        return check_padded(self, self.spec, self.borders, seed)


def checked_input(spec, k: int, i: int, a: np.ndarray, shape, how: str) -> np.ndarray:
    """Argument k (0-based) of a padded call, operand i, `a`, if it has `shape` and the
    operand's dtype; else a CodegenError naming it. `how`: the call, for the message."""
    dt = np.dtype(spec.operands[i].dtype.np_dtype)
    if a.shape != tuple(shape):
        raise CodegenError(f"argument {k + 1} has shape {a.shape}; {spec.short()} {how} needs {tuple(shape)}")
    if a.dtype != dt:
        raise CodegenError(f"argument {k + 1} has dtype {a.dtype}; {spec.short()} needs {dt} (use .astype(np.{dt}))")
    return a


def unpadded_shape(borders, i: int, shape) -> tuple[int, ...]:
    """Operand i's shape without the zeros `borders` put around it."""
    return tuple(n - sum(borders.get(i, {}).get(j, (0, 0))) for j, n in enumerate(shape))


def _sides(borders, i: int, ndim: int) -> list[tuple[int, tuple[int, int]]]:
    """(dim, (before, after)) for every logical dim of operand i, (0, 0) where unpadded."""
    s = borders.get(i, {})
    return [(j, s.get(j, (0, 0))) for j in range(ndim)]


def padded_inputs(borders, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Unpadded operands (all of them, outputs included) zero-padded as `borders` pad them."""
    return [
        a if i not in borders else np.pad(a, [p for _, p in _sides(borders, i, a.ndim)]) for i, a in enumerate(arrays)
    ]


def check_padded(call, spec, borders, seed: int = 0) -> tuple[float, float]:
    """`call` (unpadded inputs) on random inputs against the numpy reference over the
    same inputs zero-padded by `borders`: (max |error|, tolerance)."""
    ops = [
        np.ascontiguousarray(a[tuple(slice(lo, a.shape[j] - hi) for j, (lo, hi) in _sides(borders, i, a.ndim))])
        for i, a in enumerate(random_operands(spec, seed))
    ]
    return check_call(call, spec, ops, reference(spec, *padded_inputs(borders, ops)))


# ------------------------------------------------------- padding without the copy
@dataclass(frozen=True)
class Source:
    """Where one operand of a region's program comes from: `how` is "whole" (the
    caller's array as it is), "view" (the region of the caller's array at `start`, per
    logical dimension: a program over a view, codegen/views.py) or "copy" (a small kept
    zero-bordered buffer of the region's window, into which the part of the caller's
    array the window covers is copied by every call: `start` is the window's start in
    the bordered operand's coordinates)."""

    how: str
    start: tuple[int, ...] = ()


@dataclass(frozen=True)
class Region:
    """A box of a padded spec's iteration space (per spec dimension, [lo, hi)) that one
    program computes: `spec`, the padded spec restricted to it (its operands regions of
    the caller's arrays where they are views), `sources` per operand, and `buffer_shapes`
    (operand -> the caller's array's shape, for the views)."""

    box: tuple[tuple[int, int], ...]
    spec: Any
    sources: tuple[Source, ...]
    buffer_shapes: dict[int, tuple[int, ...]]

    @property
    def interior(self) -> bool:
        """No window of the region reads the zero border."""
        return all(s.how != "copy" for s in self.sources)


def _window(acc, box) -> tuple[int, int]:
    """[lo, hi) of an operand index (kind_access: offset + sum of coef * dim) over a box."""
    lo = acc.offset + sum(c * box[d][0] for d, c in zip(acc.dims, acc.coefs))
    hi = acc.offset + sum(c * (box[d][1] - 1) for d, c in zip(acc.dims, acc.coefs)) + 1
    return lo, hi


def _interior_range(spec, borders, d: int) -> tuple[int, int]:
    """The values [lo, hi) of spec dimension d at which no padded operand's window reaches
    into its border, whatever the other dimensions are."""
    access = spec.k.access(len(spec.shape))
    lo, hi = 0, spec.shape[d]
    for i, sides in borders.items():
        n_op = spec.operand_shapes[i]
        for j, (before, after) in sides.items():
            acc = access[i][j]
            if d not in acc.dims:
                continue
            c = acc.coefs[acc.dims.index(d)]
            rest_hi = acc.offset + sum(k * (spec.shape[e] - 1) for e, k in zip(acc.dims, acc.coefs) if e != d)
            rest_lo = acc.offset
            lo = max(lo, -(-(before - rest_lo) // c))  # c * v + rest_lo >= before
            hi = min(hi, (n_op[j] - 1 - after - rest_hi) // c + 1)  # c * v + rest_hi <= n - 1 - after
    return lo, max(lo, hi)


def split_dims(spec, borders) -> list[int] | None:
    """The spec dimensions a padded spec is cut along: per padded index of an input, the
    dimension of its sum that an output also reads (a convolution's output row h of image
    row S*h + D*fh). None when some padded index has no such single dimension."""
    access = spec.k.access(len(spec.shape))
    out_dims = {d for o in spec.outputs for a in access[o] for d in a.dims}
    dims: list[int] = []
    for i, sides in borders.items():
        for j in sides:
            ds = [d for d in access[i][j].dims if d in out_dims]
            if len(ds) != 1:
                return None
            if ds[0] not in dims:
                dims.append(ds[0])
    return dims


def boxes(spec, borders) -> list[tuple[tuple[int, int], ...]] | None:
    """The padded spec's iteration space cut into boxes: along each cut dimension in
    turn, the part before the interior, the part after it (each whole along the later
    cut dimensions) and the interior, which the next dimension cuts again; the last
    interior is the box whose windows read no border. None if the space cannot be cut
    so (no cut dimension, or no interior along one)."""
    dims = split_dims(spec, borders)
    if not dims:
        return None
    full = [(0, n) for n in spec.shape]
    out = []
    core = list(full)
    for d in dims:
        lo, hi = _interior_range(spec, borders, d)
        if lo >= hi:
            return None
        for r in ((0, lo), (hi, spec.shape[d])):
            if r[0] < r[1]:
                box = list(core)
                box[d] = r
                out.append(tuple(box))
        core[d] = (lo, hi)
    out.append(tuple(core))
    return out


def regions(spec, borders) -> list[Region] | None:
    """The boxes of `boxes` as regions, each with the spec restricted to it: operand
    windows that lie inside the caller's arrays are views of them (TensorSpec
    contiguousness and stride as regions, codegen/views.py), those reaching into a
    border are copies (whole buffers). None where `boxes` is."""
    bx = boxes(spec, borders)
    if bx is None:
        return None
    access = spec.k.access(len(spec.shape))
    line = spec.target.line_bytes
    out = []
    for box in bx:
        shape = tuple(hi - lo for lo, hi in box)
        ops, sources, bshapes = [], [], {}
        for i, (ts, n_op) in enumerate(zip(spec.operands, spec.operand_shapes)):
            win = [_window(a, box) for a in access[i]]
            sides = borders.get(i, {})
            inside = all(
                lo >= sides.get(j, (0, 0))[0] and hi <= n - sides.get(j, (0, 0))[1]
                for j, ((lo, hi), n) in enumerate(zip(win, n_op))
            )
            if not inside:
                sources.append(Source("copy", tuple(lo for lo, _ in win)))
                ops.append(ts)
                continue
            user = unpadded_shape(borders, i, n_op)
            start = tuple(lo - sides.get(j, (0, 0))[0] for j, (lo, _) in enumerate(win))
            wshape = tuple(hi - lo for lo, hi in win)
            if wshape == user:
                sources.append(Source("whole"))
                ops.append(ts)
                continue
            sources.append(Source("view", start))
            bshapes[i] = user
            ops.append(region_tensor(ts, wshape, user, line))
        rspec = replace(spec, shape=shape, operands=tuple(ops)).canonical()
        out.append(Region(box, rspec, tuple(sources), bshapes))
    return out
