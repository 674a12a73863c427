"""Memo tables for the dynamic program: the interface and the in-memory implementation.

A table stores *decisions*, not programs. `put(spec, d)` records that `d` is optimal
for `spec` and, because a decision found with peak memory P under limits L stays
optimal for every limit vector between P and L (fewer resources never lower the
optimum, and the same subtree still fits), for all those limits at once. A decision
with no action ("no implementation") holds for every limit at or below L.
"""
from __future__ import annotations

import json
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
        self._g: dict[str, dict] = {}  # key -> non-limit point or None -> [[seq, lo, hi, decision]] by seq
        self._nlim: dict[str, int] = {}
        self._nlimits = 4
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
        self._nlim.setdefault(key, json.loads(key)["nlimits"])
        self._lists(key, tuple(lo), tuple(hi), create=True)[0].append([seq, tuple(lo), tuple(hi), d])
        self._seq = max(self._seq, seq)

    def _lists(self, key, lo, hi, create=False) -> list[list]:
        """Boxes that may meet [lo, hi]: those on the same non-limit point (a box spanning
        one point there is filed under it, so a look-up scans one short list) and the few
        spanning several points (filed under None). The first list is where [lo, hi] lives."""
        g = self._g.setdefault(key, {}) if create else self._g.get(key, {})
        n = len(lo) - self._nlim.setdefault(key, self._nlimits)
        fixed = lo[:n] == hi[:n]
        if fixed:
            home = g.setdefault(lo[:n], []) if create else g.get(lo[:n], [])
            wide = g.get(None, [])
            return [home, wide] if wide else [home]
        home = g.setdefault(None, []) if create else g.get(None, [])
        return [home] + [l for k, l in g.items() if k is not None]

    # --- table ---
    def get(self, spec: Spec) -> Decision | None:
        from .coords import to_coords

        key, p = to_coords(spec, self.levels)
        self._nlimits = len(spec.limits)
        best = None
        for boxes in self._lists(key, p, p):
            for b in boxes:
                if (best is None or b[0] < best[0]) and all(a <= x <= c for a, x, c in zip(b[1], p, b[2])):
                    best = b
                    break  # each list is in sequence order
        if best is None:
            self.misses += 1
            return None
        self.hits += 1
        return best[3]

    def put(self, spec: Spec, decision: Decision) -> None:
        from .coords import to_coords

        key, p = to_coords(spec, self.levels)
        self._nlimits = len(spec.limits)
        llo, lhi = limits_range(spec, decision)
        n = len(spec.limits)
        lo = p[: len(p) - n] + tuple(llo)
        hi = p[: len(p) - n] + tuple(lhi)
        self._insert_box(key, lo, hi, decision)

    def _insert_box(self, key, lo, hi, decision) -> None:
        if key not in self._nlim:
            self._nlim[key] = json.loads(key)["nlimits"]
        lists = self._lists(key, lo, hi, create=True)
        if any(b[3] == decision and _contains(b[1], b[2], lo, hi) for bs in lists for b in bs):
            return  # already answered identically (an earlier equal box covers it)
        seq = self._store_insert(key, lo, hi, decision)
        self._seq = max(self._seq, seq)
        cur = [seq, lo, hi, decision]
        lists[0].append(cur)
        merged = True
        while merged:
            merged = False
            lists = self._lists(key, cur[1], cur[2])
            for b in (b for bs in lists for b in bs):
                if b is cur or b[3] != decision:
                    continue
                m = _union_box(b[1], b[2], cur[1], cur[2])
                if m is None:
                    continue
                first = min(b[0], cur[0])
                if any(c[3] != decision and c[0] > first and _intersects(c[1], c[2], *m)
                       for bs in self._lists(key, *m) for c in bs):
                    continue
                keep, drop = (b, cur) if b[0] < cur[0] else (cur, b)
                for bs in lists:
                    if drop in bs:
                        bs.remove(drop)
                    if keep in bs:
                        bs.remove(keep)
                keep[1], keep[2] = m
                home = self._lists(key, *m, create=True)[0]
                home.append(keep)
                home.sort(key=lambda x: x[0])
                self._store_update(keep[0], *m)
                self._store_delete(drop[0])
                self.merged_at.pop(drop[0], None)
                self.merged_at[keep[0]] = self._seq
                cur = keep
                merged = True
                break

    def flush(self) -> None:
        pass

    def boxes(self):
        for key, g in self._g.items():
            for bs in g.values():
                for seq, lo, hi, d in bs:
                    yield key, seq, lo, hi, d

    def __len__(self) -> int:
        return sum(len(bs) for g in self._g.values() for bs in g.values())


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
