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


class RectMemo:
    """Interval-compressed table (paper 4.1): each put is a box in coordinate space
    (solver/coords.py) whose memory-limit axes span `limits_range`; a new box merges with
    an equal-valued box when their union fills the bounding box. Look-ups return the
    box with the lowest sequence number containing the point, exactly as DictMemo returns
    the first-inserted matching entry; a merge that could change which box answers a
    point (a differently-valued box of later sequence touching the merged box) is refused.
    Subclasses persist boxes through the _store_* hooks."""

    def __init__(self, levels=("RF", "VRF", "L1", "GL")):
        self.levels = tuple(levels)
        self._g: dict[str, list[list]] = {}  # key -> [[seq, lo, hi, decision]] sorted by seq
        self._seq = 0
        self.merged_at: dict[int, int] = {}  # box seq -> highest seq in the table when it last merged
        self.hits = 0
        self.misses = 0

    # --- hooks (no-ops in memory) ---
    def _store_insert(self, key, lo, hi, d) -> int:
        self._seq += 1
        return self._seq

    def _store_update(self, seq, lo, hi) -> None:
        pass

    def _store_delete(self, seq) -> None:
        pass

    def _add_loaded(self, seq, key, lo, hi, d) -> None:
        self._g.setdefault(key, []).append([seq, tuple(lo), tuple(hi), d])
        self._seq = max(self._seq, seq)

    # --- table ---
    def get(self, spec: Spec) -> Decision | None:
        from .coords import to_coords

        key, p = to_coords(spec, self.levels)
        for _, lo, hi, d in self._g.get(key, ()):
            if all(a <= x <= b for a, x, b in zip(lo, p, hi)):
                self.hits += 1
                return d
        self.misses += 1
        return None

    def put(self, spec: Spec, decision: Decision) -> None:
        from .coords import to_coords

        key, p = to_coords(spec, self.levels)
        llo, lhi = limits_range(spec, decision)
        n = len(spec.limits)
        lo = p[: len(p) - n] + tuple(llo)
        hi = p[: len(p) - n] + tuple(lhi)
        self._insert_box(key, lo, hi, decision)

    def _insert_box(self, key, lo, hi, decision) -> None:
        boxes = self._g.setdefault(key, [])
        if any(b[3] == decision and _contains(b[1], b[2], lo, hi) for b in boxes):
            return  # already answered identically (an earlier equal box covers it)
        seq = self._store_insert(key, lo, hi, decision)
        self._seq = max(self._seq, seq)
        cur = [seq, lo, hi, decision]
        boxes.append(cur)
        merged = True
        while merged:
            merged = False
            for b in boxes:
                if b is cur or b[3] != decision:
                    continue
                m = _union_box(b[1], b[2], cur[1], cur[2])
                if m is None:
                    continue
                first = min(b[0], cur[0])
                if any(c[3] != decision and c[0] > first and _intersects(c[1], c[2], *m) for c in boxes):
                    continue
                keep, drop = (b, cur) if b[0] < cur[0] else (cur, b)
                keep[1], keep[2] = m
                self._store_update(keep[0], *m)
                self._store_delete(drop[0])
                self.merged_at.pop(drop[0], None)
                self.merged_at[keep[0]] = self._seq
                boxes.remove(drop)
                cur = keep
                merged = True
                break

    def flush(self) -> None:
        pass

    def boxes(self):
        for key, bs in self._g.items():
            for seq, lo, hi, d in bs:
                yield key, seq, lo, hi, d

    def __len__(self) -> int:
        return sum(len(v) for v in self._g.values())


def _contains(olo, ohi, lo, hi) -> bool:
    return all(a <= x and y <= b for a, b, x, y in zip(olo, ohi, lo, hi))


def _intersects(alo, ahi, blo, bhi) -> bool:
    return all(x <= d and c <= y for x, y, c, d in zip(alo, ahi, blo, bhi))


def _union_box(alo, ahi, blo, bhi):
    """The bounding box if the two boxes' union fills it exactly, else None."""
    if _contains(alo, ahi, blo, bhi):
        return alo, ahi
    if _contains(blo, bhi, alo, ahi):
        return blo, bhi
    diff = [i for i in range(len(alo)) if (alo[i], ahi[i]) != (blo[i], bhi[i])]
    if len(diff) != 1:
        return None
    i = diff[0]
    if alo[i] > bhi[i] + 1 or blo[i] > ahi[i] + 1:
        return None
    lo = list(alo); hi = list(ahi)
    lo[i] = min(alo[i], blo[i]); hi[i] = max(ahi[i], bhi[i])
    return tuple(lo), tuple(hi)
