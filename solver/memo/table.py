"""Memo tables for the dynamic program: the interface and the in-memory implementation.

A table stores *decisions*, not programs. `put(spec, d)` records that `d` is optimal
for `spec` and, because a decision found with peak memory P under limits L stays
optimal for every limit vector between P and L (fewer resources never lower the
optimum, and the same subtree still fits), for all those limits at once. A decision
with no action ("no implementation") holds for every limit at or below L.
"""

from __future__ import annotations

import json
from bisect import insort
from dataclasses import dataclass
from fractions import Fraction
from itertools import product
from typing import Protocol

from morello_asp.rewrites import Action
from morello_asp.solver.memo.coords import to_coords
from morello_asp.spec import Spec


@dataclass(frozen=True)
class Decision:
    action: Action | None  # None when nothing fits
    cost: int | Fraction  # in a RectMemo box: a Fraction, the cost per unit of spec volume
    peak: tuple[int, ...]
    depth: int
    # The longest chain of sums into the same registers the program leaves open to its
    # parent (morello_asp/cost.py, node_chain): a parent loop that adds on to it costs at
    # least the chain's latency. Not proportional to volume: a box's value holds it as is.
    chain: int = 0

    @property
    def feasible(self) -> bool:
        return self.action is not None


def limits_range(spec: Spec, d: Decision) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The box of memory limits over which `d` answers for `spec`."""
    if d.action is None:
        return tuple(0 for _ in spec.limits), spec.limits
    return d.peak, spec.limits


def normalize(d: Decision, spec: Spec) -> Decision:
    """The shape-free value a box stores: cost per unit of spec volume. Rewrites are
    stored as they are (tile sizes absolute), so specs of different sizes that tile to the
    same sub-spec, and so cost in proportion to their volume, get equal values and their
    boxes merge along the dimension axes (paper 4.1)."""
    return Decision(d.action, Fraction(d.cost, spec.volume), d.peak, d.depth, d.chain)


def denormalize(d: Decision, spec: Spec) -> Decision:
    cost = d.cost * spec.volume
    assert cost.denominator == 1, "a box answered a spec its cost does not scale to"
    return Decision(d.action, int(cost), d.peak, d.depth, d.chain)


def unlimited_key(spec: Spec) -> Spec:
    return spec.without_limits


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


# How many look-ups scan a key's rows before they are filed in the point index (filing a
# row costs about as much as scanning it 30-70 times; a query makes a few look-ups per key,
# a search thousands).
SCANS_BEFORE_FILING = 32
_UNREAD = object()  # RectMemo._read_point: read the key whole instead


class _Staged:
    """A key's rows read but not filed, in sequence order, and bucketed by their range on
    one non-limit axis (of those spanning few values, the one whose lower corners differ
    most in a sample): a look-up scans only the rows that can contain its point there."""

    __slots__ = ("rows", "axis", "buckets")

    def __init__(self, rows: list[list], naxes: int):
        self.rows = rows
        sample = rows[:256]
        narrow = [i for i in range(naxes) if all(r[2][i] - r[1][i] <= 64 for r in sample)]
        self.axis = max(narrow, key=lambda i: len({r[1][i] for r in sample}), default=None)
        self.buckets: dict[int, list[list]] = {}
        for r in rows:
            self._bucket(r)

    def _bucket(self, r) -> None:
        if self.axis is not None:
            for v in range(r[1][self.axis], r[2][self.axis] + 1):
                self.buckets.setdefault(v, []).append(r)

    def add(self, r) -> None:
        """A row of later sequence than every other."""
        self.rows.append(r)
        self._bucket(r)

    def candidates(self, p):
        return self.rows if self.axis is None else self.buckets.get(p[self.axis], ())


class RectMemo:
    """Interval-compressed table (paper 4.1): each put is a box in coordinate space
    (solver/memo/coords.py) whose memory-limit axes span `limits_range`; a new box merges with
    an equal-valued box when their union fills the bounding box. Look-ups return the
    box with the lowest sequence number containing the point, exactly as DictMemo returns
    the first-inserted matching entry; a merge that could change which box answers a
    point (a differently-valued box of later sequence touching the merged box) is refused.
    Subclasses persist boxes through the _store_* hooks."""

    def __init__(self, levels: tuple[str, ...]):
        self.levels = tuple(levels)  # the target's level names, in coordinates and keys
        self._g: dict[str, dict] = {}  # key -> non-limit point or None -> [[seq, lo, hi, decision]] by seq
        self._nlim: dict[str, int] = {}
        self._seq = 0
        # Rows read from a file but not filed yet: [seq, lo, hi, value] by seq, a value
        # kept as stored until a look-up returns it (_decode). Filing a box under every
        # point it covers costs tens of scans of it, so a key is scanned until
        # SCANS_BEFORE_FILING look-ups have used it, or until it is written to.
        self._staged: dict[str, _Staged] = {}
        self._scans: dict[str, int] = {}
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

    def _need(self, key) -> None:
        """Before the boxes of `key` are read or changed (a table loaded lazily)."""

    def _need_all(self) -> None:
        """Before every box is read."""

    def _read_point(self, key, p):
        """For a key not read yet: the value of its first box (by sequence) holding point
        p, read alone, or None if no box does; _UNREAD to read the key whole (_need), as
        a table without an index of its boxes always does."""
        return _UNREAD

    def _decode(self, value, key) -> Decision:
        """A staged row's value as a Decision (rows staged by a subclass store text)."""
        return value

    def _add_loaded(self, seq, key, lo, hi, d, sort=False) -> None:
        self._nlim.setdefault(key, json.loads(key)["nlimits"])
        self._seq = max(self._seq, seq)
        staged = self._staged.get(key)
        if staged is not None:  # rows of another process: later sequence, so appended in order
            staged.add([seq, tuple(lo), tuple(hi), d])
            return
        self._file(key, [seq, tuple(lo), tuple(hi), d], sort=sort)

    def _stage(self, key, rows: list[list]) -> None:
        """Rows [seq, lo, hi, value] of a key not read before, in sequence order."""
        n = len(rows[0][1]) - self._split(key) if rows else 0
        self._staged[key] = _Staged(rows, n)
        for r in rows:
            if r[0] > self._seq:
                self._seq = r[0]

    def _file_staged(self, key) -> None:
        staged = self._staged.pop(key, None)
        self._scans.pop(key, None)
        if staged is None:
            return
        for r in staged.rows:
            if not isinstance(r[3], Decision):
                r[3] = self._decode(r[3], key)
            self._file(key, r, sort=False)

    def _staged_get(self, key, p):
        """The value of the first staged box (by sequence) containing point p, or None."""
        for b in self._staged[key].candidates(p):
            if all(a <= x <= c for a, x, c in zip(b[1], p, b[2])):
                if not isinstance(b[3], Decision):
                    b[3] = self._decode(b[3], key)
                return b[3]
        return None

    # --- the index: every box is filed under each non-limit point it covers ---------
    # Non-limit axes (log2 dims, levels, vector sizes, contiguity, alignment) span a few
    # values each, so a box covers few such points; a look-up scans the one short list
    # of its point, and merge candidates are found on the lists just outside a box.
    def _split(self, key) -> int:
        if key not in self._nlim:
            self._nlim[key] = json.loads(key)["nlimits"]
        return self._nlim[key]

    def _points(self, key, lo, hi):
        n = len(lo) - self._split(key)
        first, last = lo[:n], hi[:n]
        if first == last:  # most boxes span one point of the non-limit axes
            return (first,)
        return product(*(range(a, b + 1) for a, b in zip(first, last)))

    def _file(self, key, box, sort=True) -> None:
        g = self._g.setdefault(key, {})
        for pt in self._points(key, box[1], box[2]):
            bs = g.setdefault(pt, [])
            if sort and bs and bs[-1][0] > box[0]:
                insort(bs, box, key=lambda b: b[0])
            else:
                bs.append(box)

    def _unfile(self, key, box) -> None:
        g = self._g[key]
        for pt in self._points(key, box[1], box[2]):
            bs = g[pt]
            for i, b in enumerate(bs):
                if b is box:
                    del bs[i]
                    break

    def _meeting(self, key, lo, hi):
        """Distinct boxes that meet the non-limit range of [lo, hi]."""
        g = self._g.get(key, {})
        seen = set()
        for pt in self._points(key, lo, hi):
            for b in g.get(pt, ()):
                if id(b) not in seen:
                    seen.add(id(b))
                    yield b

    def _neighbours(self, key, lo, hi):
        """Boxes that could merge with [lo, hi]: those on its lowest non-limit point and on
        the points just beyond it along each non-limit axis (a mergeable box shares all
        other ranges, so it covers one of these points)."""
        g = self._g.get(key, {})
        n = len(lo) - self._split(key)
        corner = lo[:n]
        pts = [corner]
        at = list(corner)
        for i in range(n):
            at[i] = lo[i] - 1
            pts.append(tuple(at))
            at[i] = hi[i] + 1
            pts.append(tuple(at))
            at[i] = lo[i]
        seen = set()
        get = g.get
        for pt in pts:
            for b in get(pt, ()):
                if id(b) not in seen:
                    seen.add(id(b))
                    yield b

    # --- table ---
    def get(self, spec: Spec) -> Decision | None:
        key, p = to_coords(spec, self.levels)
        d = self._read_point(key, p)
        if d is not _UNREAD:
            if d is None:
                self.misses += 1
                return None
            self.hits += 1
            return denormalize(d, spec)
        self._need(key)
        if key in self._staged:
            scans = self._scans[key] = self._scans.get(key, 0) + 1
            if scans <= SCANS_BEFORE_FILING:
                d = self._staged_get(key, p)
                if d is None:
                    self.misses += 1
                    return None
                self.hits += 1
                return denormalize(d, spec)
            self._file_staged(key)
        n = len(p) - len(spec.limits)
        for b in self._g.get(key, {}).get(p[:n], ()):  # in sequence order: the first match wins
            if all(a <= x <= c for a, x, c in zip(b[1][n:], p[n:], b[2][n:])):
                self.hits += 1
                return denormalize(b[3], spec)
        self.misses += 1
        return None

    def put(self, spec: Spec, decision: Decision) -> None:
        key, p = to_coords(spec, self.levels)
        llo, lhi = limits_range(spec, decision)
        n = len(spec.limits)
        lo = p[: len(p) - n] + tuple(llo)
        hi = p[: len(p) - n] + tuple(lhi)
        self._insert_box(key, lo, hi, normalize(decision, spec))

    def _insert_box(self, key, lo, hi, decision) -> None:
        self._need(key)
        self._file_staged(key)
        if any(b[3] == decision and _contains(b[1], b[2], lo, hi) for b in self._meeting(key, lo, lo)):
            return  # already answered identically (an earlier equal box covers it)
        seq = self._store_insert(key, lo, hi, decision)
        self._seq = max(self._seq, seq)
        cur = [seq, lo, hi, decision]
        self._file(key, cur)
        merged = True
        while merged:
            merged = False
            for b in list(self._neighbours(key, cur[1], cur[2])):
                if b is cur or b[3] != decision:
                    continue
                m = _union_box(b[1], b[2], cur[1], cur[2])
                if m is None:
                    continue
                first = min(b[0], cur[0])
                if any(
                    c[3] != decision and c[0] > first and _intersects(c[1], c[2], *m) for c in self._meeting(key, *m)
                ):
                    continue
                keep, drop = (b, cur) if b[0] < cur[0] else (cur, b)
                self._unfile(key, drop)
                self._unfile(key, keep)
                keep[1], keep[2] = m
                self._file(key, keep)
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
        self._need_all()
        for key in list(self._staged):
            self._file_staged(key)
        for key, g in self._g.items():
            seen = set()
            for bs in g.values():
                for b in bs:
                    if id(b) not in seen:
                        seen.add(id(b))
                        seq, lo, hi, d = b
                        yield key, seq, lo, hi, d

    def __len__(self) -> int:
        return sum(1 for _ in self.boxes())


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
    lo = list(alo)
    hi = list(ahi)
    lo[i] = min(alo[i], blo[i])
    hi[i] = max(ahi[i], bhi[i])
    return tuple(lo), tuple(hi)
