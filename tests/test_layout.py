"""Layouts: buffer expressions are bijections; tile contiguity vs brute force."""

from __future__ import annotations

import itertools
from math import prod

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from morello_asp import Layout
from morello_asp.layout import PhysDim

LAYOUTS3 = ["row_major", "col_major", "[0, 2, 1, 2 p(8)]", "[0, 1, 2, 2 oe(8)]", "[1, 0, 2]"]


# ---------------------------------------------------------------- layouts


def random_layout(draw, rank, shape):
    order = draw(st.permutations(range(rank)))
    pdims = [PhysDim(d) for d in order]
    d = draw(st.integers(0, rank - 1))
    divisors = [s for s in (2, 4, 8) if shape[d] % s == 0]
    if divisors and draw(st.booleans()):
        kind = draw(st.sampled_from(["pack", "oe"]))
        pdims.append(PhysDim(d, kind, draw(st.sampled_from(divisors))))
    return Layout(tuple(pdims))


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_layout_is_a_bijection_onto_its_buffer(data):
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.sampled_from([1, 2, 3, 4, 8])) for _ in range(rank))
    lay = random_layout(data.draw, rank, shape)
    if not lay.buffer_ok(shape):
        return
    grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    names = [f"d{i}" for i in range(rank)]
    offs = np.asarray(lay.buffer_expr(shape, names).eval(dict(zip(names, grids)))) * np.ones(shape, dtype=int)
    assert sorted(offs.ravel().tolist()) == list(range(lay.buffer_volume(shape))) == list(range(prod(shape)))


def test_layout_c_expression_and_text():
    lay = Layout.parse("[0, 2, 1, 2 p(16)]", 3)
    assert str(lay) == "[0, 2, 1, 2 p(16)]"
    c = lay.buffer_expr((1, 4, 32), ["b", "k", "n"]).to_c()
    assert "n" in c and "%" in c
    assert str(Layout.parse("col_major", 3)) == "col_major"


def brute_contiguity(lay, shape, tile):
    """Inner physical dims whose values are adjacent in a tile at the origin: the largest c
    such that walking the tile's values in layout order, each run over the innermost c
    physical dims is consecutive in the buffer."""
    names = [f"d{i}" for i in range(len(shape))]
    grids = np.meshgrid(*[np.arange(t) for t in tile], indexing="ij")
    offs = np.sort(
        (np.asarray(lay.buffer_expr(shape, names).eval(dict(zip(names, grids)))) * np.ones(tile, dtype=int)).ravel()
    )
    ext = [te for _, te in lay.tile_extents(shape, tile)]
    best = 0
    for c in range(1, len(ext) + 1):
        run = prod(ext[:c])
        ok = all(offs[i + run - 1] - offs[i] == run - 1 for i in range(0, len(offs), run))
        if ok:
            best = c
        else:
            break
    return best


@pytest.mark.parametrize("lay", ["row_major", "col_major", "[0, 2, 1, 2 p(4)]"])
def test_tile_contiguity_matches_brute_force(lay):
    shape = (1, 8, 8)
    layout = Layout.parse(lay, 3)
    full = layout.full_contiguity()
    for tile in itertools.product([1], [1, 2, 4, 8], [1, 2, 4, 8]):
        c = layout.tile_contiguity(shape, tile, full)
        brute = brute_contiguity(layout, shape, tile)
        # the analysis may be conservative but never claims adjacency that is not there
        assert c <= brute or c == full and brute == full, (tile, c, brute)
        if c == full:
            assert brute == full
