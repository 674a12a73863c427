"""Layouts: maps from logical tensor coordinates to buffer offsets (book, *Data Layouts*).

A layout is a tuple of physical dimensions, slowest first. Each names a logical
dimension and is either the whole (remaining) dimension (`dyn`), a fixed-size pack
`p(s)`, or an odd-even shuffled pack `oe(s)`. The buffer indexing expression is built
back to front: each physical dimension adds `alpha * ((d // v) mod s)`, where `alpha` is
the volume already covered and `v` the part of logical dimension `d` already covered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

from morello_asp.expr import Const, Expr, Var, floordiv, lift, mod

MAX_INT32 = 2**31 - 1  # pack sizes reach the logic files, whose integers are 32-bit


class LayoutError(ValueError):
    """A layout that cannot describe a tensor of the given shape, or bad layout text."""


@dataclass(frozen=True)
class PhysDim:
    dim: int
    kind: str = "dyn"  # "dyn" | "pack" | "oe"
    size: int = 0  # pack size; 0 for dyn

    def __str__(self) -> str:
        if self.kind == "dyn":
            return str(self.dim)
        return f"{self.dim} {'p' if self.kind == 'pack' else 'oe'}({self.size})"


def odd_even(s: int, x: Expr) -> Expr:
    """Offset of value x (0 <= x < s) in an odd-even strip of s: the even values first,
    then the odd ones, floor(x/2) + (s/2)*(x mod 2), as Morello's code (layout.rs) has it.
    The paper (2.4.2) prints the inverse permutation, sigma(s, x) = 2*(x mod s/2) +
    floor(2x/s). With this order, a vector of 2v bf16 words read as v 32-bit lanes gives
    the even values by a 16-bit shift and the odd ones by a mask, lane for lane against
    an f32 strip in this layout (the interleaved bf16 dot product, avx2)."""
    return floordiv(x, 2) + lift(s // 2) * mod(x, 2)


@dataclass(frozen=True)
class Layout:
    pdims: tuple[PhysDim, ...]

    def __hash__(self) -> int:
        try:
            return self._hash  # type: ignore[attr-defined]  # set below, once
        except AttributeError:
            pass
        h = hash(self.pdims)
        object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self):  # the cached hash is per process (string hashing is salted)
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    # ---- construction and text -------------------------------------------------
    @staticmethod
    def row_major(rank: int) -> Layout:
        return Layout(tuple(PhysDim(i) for i in range(rank)))

    @staticmethod
    def col_major(rank: int) -> Layout:
        """Batched column-major: the last two logical dimensions swapped."""
        order = list(range(rank))
        if rank >= 2:
            order[-1], order[-2] = order[-2], order[-1]
        return Layout(tuple(PhysDim(i) for i in order))

    @staticmethod
    def parse(text: str, rank: int, validate: bool = True) -> Layout:
        text = text.strip()
        if text == "row_major":
            return Layout.row_major(rank)
        if text == "col_major":
            return Layout.col_major(rank)
        m = re.fullmatch(r"\[(.*)\]", text)
        if not m:
            raise LayoutError(f"expected row_major, col_major or [d, d p(s), ...], got {text!r}")
        pdims = []
        for part in m.group(1).split(","):
            part = part.strip()
            pm = re.fullmatch(r"([0-9]+)(?:\s+(p|oe)\(([0-9]+)\))?", part)  # ASCII digits only
            if not pm:
                raise LayoutError(f"bad physical dimension {part!r} in layout {text!r}")
            d = int(pm.group(1))
            if d > MAX_INT32:
                raise LayoutError(f"layout {text!r} names dimension {d}")
            if pm.group(2):
                kind = "pack" if pm.group(2) == "p" else "oe"
                size = int(pm.group(3))
                if not 1 <= size <= MAX_INT32:
                    raise LayoutError(f"layout {text!r}: a pack size must be from 1 to {MAX_INT32}, got {size}")
                pdims.append(PhysDim(d, kind, size))
            else:
                pdims.append(PhysDim(d))
        lay = Layout(tuple(pdims))
        if validate:
            lay.validate(rank)
        return lay

    def validate(self, rank: int) -> None:
        dyn = [p.dim for p in self.pdims if p.kind == "dyn"]
        for p in self.pdims:
            if not 0 <= p.dim < rank:
                raise LayoutError(f"layout {self} names dimension {p.dim} of a rank-{rank} tensor")
            if p.kind != "dyn" and p.size < 1:
                raise LayoutError(f"layout {self}: pack size must be positive")
            if p.kind == "oe" and p.size % 2:
                raise LayoutError(f"layout {self}: odd-even pack size must be even")
        if sorted(dyn) != list(range(rank)):
            raise LayoutError(
                f"layout {self} must map each of the {rank} logical dimensions exactly once as a whole (dyn) dimension"
            )

    def __str__(self) -> str:
        # Every spec class's table key names its layouts: computed once per object.
        text = self.__dict__.get("_text")
        if text is None:
            rank = self.rank
            if self == Layout.row_major(rank):
                text = "row_major"
            elif self == Layout.col_major(rank):
                text = "col_major"
            else:
                text = "[" + ", ".join(str(p) for p in self.pdims) + "]"
            object.__setattr__(self, "_text", text)
        return text

    @property
    def rank(self) -> int:
        return 1 + max(p.dim for p in self.pdims) if self.pdims else 0

    @property
    def is_packed(self) -> bool:
        return any(p.kind != "dyn" for p in self.pdims)

    # ---- geometry ---------------------------------------------------------------
    def _covers(self, shape) -> list[tuple[int, int, PhysDim]]:
        """(before, extent, physical dim) per physical dim, innermost first: `before` is
        the part of its logical dimension already covered by inner physical dims."""
        covered = [1] * len(shape)
        out: list[tuple[int, int, PhysDim]] = []
        for p in reversed(self.pdims):
            v = covered[p.dim]
            if p.kind == "dyn":
                ext = -(-shape[p.dim] // v)
            else:
                ext = p.size
            out.append((v, ext, p))
            covered[p.dim] = v * ext
        return out

    def buffer_ok(self, shape) -> bool:
        """True if a buffer of this shape in this layout has no padding: every pack
        divides its dimension. The one rule for padded layouts: specs (Spec.validate),
        moves and proofs all refuse a layout that fails it."""
        if len(shape) != self.rank:
            return False
        covered = [1] * len(shape)
        for p in reversed(self.pdims):
            if p.kind != "dyn":
                covered[p.dim] *= p.size
                if shape[p.dim] % covered[p.dim]:
                    return False
        return True

    def buffer_volume(self, shape) -> int:
        return prod(ext for _, ext, _ in self._covers(shape))

    def buffer_expr(self, shape, names) -> Expr:
        """Offset of logical coordinate `names` (variable names or Exprs) in a buffer of `shape`."""
        coords = [n if isinstance(n, Expr) else Var(n) for n in names]
        alpha = 1
        total: Expr = Const(0)
        for v, ext, p in self._covers(shape):
            x = floordiv(coords[p.dim], v)
            if p.kind == "pack":
                x = mod(x, ext)
            elif p.kind == "oe":
                x = odd_even(ext, mod(x, ext))
            total = total + lift(alpha) * x
            alpha *= ext
        return total

    def tile_extents(self, shape, tile) -> list[tuple[int, int]]:
        """(parent extent, tile extent) per physical dim, innermost first."""
        out = []
        for v, ext, p in self._covers(shape):
            t = tile[p.dim]
            if t >= v * ext:
                te = ext
            elif t > v:
                te = -(-t // v)
            else:
                te = 1
            out.append((ext, te))
        return out

    def full_contiguity(self) -> int:
        return len(self.pdims)

    def tile_contiguity(self, shape, tile, contig: int) -> int:
        """Contiguousness of a tile of a view with contiguousness `contig` (paper 2.4.3),
        as tile.lp computes it: adjacency breaks at the first physical dim the tile
        spans more than once where an inner dim is partial or the parent was broken."""
        partial_seen = False
        for q, (pe, te) in enumerate(self.tile_extents(shape, tile)):
            if te > 1 and (partial_seen or q >= contig):
                return q
            if te != pe:
                partial_seen = True
        return self.full_contiguity()

    def contiguous_run(self, shape, contig: int) -> int:
        """Number of adjacent values in the innermost `contig` physical dims of a view."""
        run = 1
        for i, (_, ext, _) in enumerate(self._covers(shape)):
            if i >= contig:
                break
            run *= ext
        return min(run, prod(shape))
