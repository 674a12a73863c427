"""Primitive spec kinds: how a spec's shape maps to its operands' shapes.

Each kind says which spec dimensions each operand spans; tiling, boundary regions,
reference semantics and codegen all work from that projection, so a new kind is a new
table row (plus its numpy semantics) rather than new control flow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    name: str
    rank: int | None  # spec rank, or None when it follows the tensor rank
    operand_dims: Callable[[int], tuple[tuple[int, ...], ...]]
    output: int  # index of the output operand (the last, by convention)
    reduction: Callable[[int], tuple[int, ...]]  # spec dims absent from the output
    params: tuple[str, ...] = ()  # operand names in listings, C and kernel templates
    accum_of: str | None = None  # for accumulating kinds: the non-accumulating kind
    init_kind: str | None = None  # for accumulating kinds: the kind that initialises the output

    @property
    def is_accum(self) -> bool:
        return self.accum_of is not None

    def arity(self, rank: int) -> int:
        return len(self.operand_dims(rank))

    def operand_shapes(self, shape) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(shape[d] for d in dims) for dims in self.operand_dims(len(shape)))

    def dim_names(self, rank: int) -> list[str]:
        if self.name.startswith("Matmul"):
            return ["b", "m", "k", "n"]
        return [f"d{i}" for i in range(rank)]


def _matmul_dims(rank: int):
    return ((0, 1, 2), (0, 2, 3), (0, 1, 3))


def _elementwise(n_operands: int):
    def dims(rank: int):
        return tuple(tuple(range(rank)) for _ in range(n_operands))

    return dims


def _none(rank: int):
    return ()


def _k(rank: int):
    return (2,)


KINDS: dict[str, Kind] = {
    "Matmul": Kind("Matmul", 4, _matmul_dims, 2, _k, ("lhs", "rhs", "out")),
    "MatmulAccum": Kind(
        "MatmulAccum", 4, _matmul_dims, 2, _k, ("lhs", "rhs", "out"), accum_of="Matmul", init_kind="Zero"
    ),
    "Zero": Kind("Zero", None, _elementwise(1), 0, _none, ("out",)),
    "Move": Kind("Move", None, _elementwise(2), 1, _none, ("src", "dst")),
}

ACCUM_VARIANT = {k.accum_of: k.name for k in KINDS.values() if k.accum_of}


def kind(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown spec kind {name!r}; known: {', '.join(KINDS)}") from None
