"""Memo tables for the dynamic program: the interface and the in-memory implementation.

A table stores *decisions*, not programs. `put(spec, d)` records that `d` is optimal
for `spec` and, because a decision found with peak memory P under limits L stays
optimal for every limit vector between P and L (fewer resources never lower the
optimum, and the same subtree still fits), for all those limits at once. A decision
with no action ("no implementation") holds for every limit at or below L.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from morello_asp.spec import Spec


@dataclass(frozen=True)
class Decision:
    action: object | None  # solver.engine.Action, or None when nothing fits
    cost: int
    peak: tuple[int, ...]
    depth: int

    @property
    def feasible(self) -> bool:
        return self.action is not None


def limits_range(spec: Spec, d: Decision) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The box of memory limits over which `d` answers for `spec`."""
    if d.action is None:
        return tuple(0 for _ in spec.limits), spec.limits
    return d.peak, spec.limits


def unlimited_key(spec: Spec) -> Spec:
    return replace(spec, limits=())


class MemoTable(Protocol):
    def get(self, spec: Spec) -> Decision | None: ...

    def put(self, spec: Spec, decision: Decision) -> None: ...

    def flush(self) -> None: ...


class DictMemo:
    """Exact spec (minus limits) -> list of (limit box, decision)."""

    def __init__(self):
        self._t: dict[Spec, list[tuple[tuple, tuple, Decision]]] = {}
        self.hits = 0
        self.misses = 0

    def get(self, spec: Spec) -> Decision | None:
        for lo, hi, d in self._t.get(unlimited_key(spec), ()):
            if all(a <= x <= b for a, x, b in zip(lo, spec.limits, hi)):
                self.hits += 1
                return d
        self.misses += 1
        return None

    def put(self, spec: Spec, decision: Decision) -> None:
        lo, hi = limits_range(spec, decision)
        self._t.setdefault(unlimited_key(spec), []).append((lo, hi, decision))

    def flush(self) -> None:
        pass

    def __len__(self) -> int:
        return sum(len(v) for v in self._t.values())
