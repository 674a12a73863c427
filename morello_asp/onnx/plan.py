"""What an ONNX model becomes: a plan of steps over named tensors (docs/onnx.md).

A **step** is either a program (a spec the search implements, its inputs the graph's
tensors or constants prepared at import, its output a new tensor) or a view (a reshape
or transpose of a tensor that copies nothing). Tensors are the graph's values; each has
a static shape and, for a view, the ops that make it from the tensor it views. The plan
is made by importer.py, run by session.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from morello_asp.errors import InputError


def c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return tuple(reversed(out))


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Row-major and dense (dimensions of size one do not count)."""
    want = c_strides(shape)
    return all(d == 1 or s == w for d, s, w in zip(shape, strides, want))


def stride_order(strides: Sequence[int]) -> tuple[int, ...]:
    """The dimensions from the outermost in memory to the innermost (largest stride
    first; ties in logical order)."""
    return tuple(sorted(range(len(strides)), key=lambda d: (-strides[d], d)))


def memory_order(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...] | None:
    """The permutation p for which the array is dense in C order once transposed by p
    (row-major: the identity), or None for a strided view (a crop, every s-th pixel)."""
    order = stride_order(strides)
    ok = is_contiguous([shape[d] for d in order], [strides[d] for d in order])
    return order if ok else None


def order_strides(shape: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    """The strides of a dense tensor of logical `shape` laid out in memory `order`."""
    phys = c_strides([shape[d] for d in order])
    out = [0] * len(shape)
    for i, d in enumerate(order):
        out[d] = phys[i]
    return tuple(out)


def layout_text(order: Sequence[int]) -> str:
    """The spec layout of a dense tensor in memory `order` ([0, 2, 3, 1]: channels-last)."""
    return "[" + ", ".join(map(str, order)) + "]"


def dims_text(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape)


class ModelError(InputError):
    """An ONNX model morello-asp cannot take: a file that is no model, a dynamic shape,
    an op or attribute it does not support. The message names the node, its op and why
    (exit 2 in the CLI)."""


# ("reshape", shape), ("transpose", perm), ("crop", (h, w)), ("stride", (s,)): every s-th row
# and column of the last two dimensions; applied in order
View = list[tuple[str, tuple[int, ...]]]


@dataclass
class Arg:
    """One input of a program: a tensor of the graph (by name) made into the operand's
    logical array by `ops` (views: the importer reshapes only what is contiguous, and
    transposes only what the operand's layout absorbs, such as col_major), or a constant
    array prepared at import (in the operand's logical shape, row-major)."""

    tensor: str | None = None
    const: np.ndarray | None = None
    ops: View = field(default_factory=list)


@dataclass
class Step:
    """A program (spec set) or a view (view set) producing tensor `out`."""

    nodes: list[str]  # the ONNX nodes it came from, by name
    ops: list[str]  # their op types
    out: str
    out_shape: tuple[int, ...]  # the tensor's shape (the program's output is reshaped to it)
    spec: str | None = None  # spec text (the sugar form: GL, row-major), for the search
    layouts: dict[int, str] = field(default_factory=dict)  # operand -> layout, where not row-major
    args: list[Arg] = field(default_factory=list)
    kind: str = ""  # what it computes, for the fold passes: matmul, scale, ...
    view: View | None = None  # a view step: the ops that make `out` from `source`
    source: str | None = None  # the tensor a view views
    note: str = ""  # what the plan says of a step that became something else (a scale folded away)
    pad: tuple[int, ...] | None = None  # zeros around a conv's image (h before, h after, w before, w after)
    filters: int = 1  # a conv's argument holding its filters (0: a pointwise conv lowered to a matmul)
    filter_axis: int = 0  # the filters' axis of output channels (what a folded BatchNormalization scales)
    # the tensor's memory order (None: row-major): `out` is buffer.reshape(its dims in this
    # order).transpose(back), as torch's channels_last is [0, 2, 3, 1] of NCHW
    out_order: tuple[int, ...] | None = None
    # the program's output array made from the tensor's array (None: a reshape to the
    # spec's output shape); views only, never a copy
    out_ops: View | None = None

    @property
    def label(self) -> str:
        return ", ".join(f"{n} ({o})" for n, o in zip(self.nodes, self.ops))


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    type: str = "tensor(float)"


@dataclass
class Plan:
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    steps: list[Step]
    shapes: dict[str, tuple[int, ...]]  # every tensor's shape
    consts_out: dict[str, np.ndarray] = field(default_factory=dict)  # graph outputs that are constants

    def last_use(self) -> dict[str, int]:
        """Tensor -> index of the last step that reads it (a view's reads extend its
        source's life: the view shares its memory); graph outputs live to the end."""
        last: dict[str, int] = {}
        source: dict[str, str] = {}
        for i, st in enumerate(self.steps):
            reads = [a.tensor for a in st.args if a.tensor is not None]
            if st.source is not None:
                reads.append(st.source)
                source[st.out] = st.source
            for r in reads:
                self._extend(last, source, r, i)
        for o in self.outputs:
            self._extend(last, source, o.name, len(self.steps))
        return last

    @staticmethod
    def _extend(last: dict[str, int], source: dict[str, str], t: str | None, i: int) -> None:
        while t is not None:
            last[t] = i
            t = source.get(t)
