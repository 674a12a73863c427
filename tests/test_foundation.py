"""Foundation: spec text, layouts, the paper's Figure 1 schedule and its cost, rewrite errors."""
from __future__ import annotations

import itertools
from math import prod

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from morello_asp import Layout, ScheduleError, SpecError, SpecSyntaxError, parse_spec
from morello_asp.cli_schedule import FIGURE1, figure1
from morello_asp.dtypes import Dtype
from morello_asp.ir import Alloc, KernelApp, Loop, loop_regions
from morello_asp.layout import PhysDim
from morello_asp.serialize import from_json, to_json

LAYOUTS3 = ["row_major", "col_major", "[0, 2, 1, 2 p(8)]", "[0, 1, 2, 2 oe(8)]", "[1, 0, 2]"]


@st.composite
def specs(draw):
    kind = draw(st.sampled_from(["Matmul", "MatmulAccum", "Zero", "Move"]))
    if kind.startswith("Matmul"):
        shape = [1] + [draw(st.sampled_from([8, 16, 32])) for _ in range(3)]
        nops = 3
    else:
        shape = [1, draw(st.sampled_from([8, 16])), draw(st.sampled_from([8, 16]))]
        nops = 1 if kind == "Zero" else 2
    ops = []
    for _ in range(nops):
        level = draw(st.sampled_from(["GL", "L1", "VRF", "RF"]))
        dt = draw(st.sampled_from(["f32", "i32"] if level == "VRF" else ["f32", "i32", "u8", "bf16", "i16"]))
        lay = draw(st.sampled_from(LAYOUTS3))
        parts = [dt, level, lay]
        if level not in ("RF", "VRF") and draw(st.booleans()):
            parts.append("ua")
        if draw(st.booleans()):
            parts.append(f"c{draw(st.integers(0, 2))}")
        if level == "VRF":
            parts.append(draw(st.sampled_from(["v4", "v8"])))
        ops.append("(" + ", ".join(parts) + ")")
    serial = ", serial" if draw(st.booleans()) else ""
    lims = [draw(st.sampled_from([0, 1, 4, 16])), draw(st.sampled_from([0, 8, 16])), draw(st.sampled_from([16, 1024])), 1 << 20]
    dims = draw(st.sampled_from(["x", "×"])).join(map(str, shape))
    return f"({kind}({dims}, {', '.join(ops)}{serial}), [{', '.join(map(str, lims))}])"


@settings(max_examples=150, deadline=None)
@given(specs())
def test_parse_print_round_trip(text):
    s = parse_spec(text)
    assert parse_spec(s.text()) == s
    assert s.text() == parse_spec(s.text()).text()


def test_paper_example_and_sugar():
    t = ("(MatmulAccum(1x4x128x16, (bf16, L1, row_major), (bf16, L1, col_major, ua, c0), "
         "(f32, VRF, row_major, v8), serial), [64, 1024, 32768, 1073741824])")
    s = parse_spec(t)
    assert s.text() == t and s.operands[1].contig == 0 and not s.operands[1].aligned
    sugar = parse_spec("Matmul(64×32×16, f32)")
    assert sugar.shape == (1, 64, 32, 16) and all(o.level == "GL" for o in sugar.operands) and sugar.serial


@pytest.mark.parametrize("text,where,what", [
    ("(MatmulAccum(1x4x4x16, (f33, RF, row_major)", "column 25", "dtype"),
    ("Matmul(4x4x, f32)", "column 12", "dimension size"),
    ("(Matmul(1x4x4x4, (f32, GL, row_major, zz), (f32, GL, row_major), (f32, GL, row_major)), [1,1,1,1])", "column", "ua, cN or vN"),
])
def test_syntax_errors_name_position_and_expectation(text, where, what):
    with pytest.raises(SpecSyntaxError) as e:
        parse_spec(text)
    assert where in str(e.value) and what in str(e.value)


@pytest.mark.parametrize("text,msg", [
    ("Matmul(4x4, f32)", "4 dimensions"),
    ("(Matmul(1x4x4x4, (f32, VRF, row_major, v3), (f32, GL, row_major), (f32, GL, row_major)), [1,2,3,4])", "vector registers hold"),
    ("(Matmul(1x2x2x2, (f32, VRF, row_major, v8), (f32, GL, row_major), (f32, GL, row_major)), [1,2,3,4])", "does not divide"),
    ("(Matmul(1x2x2x2, (f32, GL, row_major), (f32, GL, row_major)), [1,2,3,4])", "3 tensor specs"),
])
def test_spec_errors(text, msg):
    with pytest.raises((SpecError, SpecSyntaxError), match=msg):
        parse_spec(text)


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
    offs = np.sort((np.asarray(lay.buffer_expr(shape, names).eval(dict(zip(names, grids)))) * np.ones(tile, dtype=int)).ravel())
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


# ---------------------------------------------------------------- schedules and cost


def test_figure1_program_and_hand_computed_cost():
    imp = figure1()
    assert isinstance(imp, Loop) and imp.tile_shape == (1, 1, 1, 16) and imp.trips == 16
    alloc = imp.body
    assert isinstance(alloc, Alloc) and alloc.new.level == "VRF" and alloc.new.vector_size == 8
    assert [c.kernel for c in alloc.children] == ["VectorAssign", "BroadcastVecMultAdd", "VectorAssign"]
    # Paper 3 by hand. tout = 1x1x16 f32 in L1, contiguous: 64 B = 1 line, weight 2 -> m = 2;
    # vout in VRF -> m = 0. VectorAssign moves 16/8 = 2 vectors: cost 2 each.
    # BroadcastVecMultAdd: 2 * (16/8) + 1 = 5 (lhs in RF adds m = 0).
    # alloc = 2 + 0 + 2 + 5 + 2 = 11; the loop runs 4 (m) x 4 (k) = 16 trips: 176.
    assert imp.cost.main == 16 * (2 + 0 + 2 + 5 + 2) == 176
    assert imp.cost.peak[1] == 2  # two vector registers
    text = str(imp)
    assert "tile (tlhs: (1×1×1, f32, RF) ← lhs" in text and "alloc vout" in text
    assert from_json(to_json(imp)).cost == imp.cost and str(from_json(to_json(imp))) == text


def test_default_child_and_errors():
    spec = parse_spec(FIGURE1)
    imp = spec.tile([1, 1, 1, 16]).move_param(2, "VRF", "row_major", vector_size=8)
    with pytest.raises(ScheduleError, match="sole non-Move"):
        parse_spec("Matmul(8x8x8, f32)").to_accum().tile([1, 4, 4, 4])
    with pytest.raises(ScheduleError, match="does not apply"):
        imp.select("MultAdd")
    with pytest.raises(ScheduleError, match="vector size does not divide"):
        parse_spec("Matmul(2x2x2, f32)").move_param(2, "L1").move_param(2, "VRF", vector_size=8)
    with pytest.raises(ScheduleError, match="reduction"):
        parse_spec("Matmul(8x8x8, f32)").tile([1, 8, 4, 8])
    with pytest.raises(ScheduleError, match="serial-only"):
        parse_spec("Matmul(8x8x8, f32)").tile([1, 4, 8, 8], parallel=True)
    with pytest.raises(ScheduleError, match="4 sizes|dimensions"):
        parse_spec("Matmul(8x8x8, f32)").tile([4, 8])
    done = imp.select("BroadcastVecMultAdd")
    assert isinstance(done.body.body, KernelApp)


def test_non_dividing_tile_leaves_boundaries_that_partition():
    spec = parse_spec("Matmul(7x8x5, f32)")
    imp = spec.tile([1, 3, 8, 2])
    regs = loop_regions(spec.shape, (1, 3, 8, 2))
    covered = np.zeros(spec.shape, dtype=int)
    main = [r for r in regs if r[2]][0]
    for idx in itertools.product(*[range(s) for s in imp.steps]):
        sl = tuple(slice(i * t, (i + 1) * t) for i, t in zip(idx, imp.tile_shape))
        covered[sl] += 1
    for (off, shp), child in zip(imp.regions(), imp.boundaries):
        assert child.spec.shape == shp
        covered[tuple(slice(o, o + s) for o, s in zip(off, shp))] += 1
    assert (covered == 1).all() and main[0] == (0, 0, 0, 0) and main[1] == (1, 3, 8, 2)


def test_parallel_sugar_allows_parallel_tiles():
    imp = parse_spec("Matmul(8x8x8, f32, parallel)").tile([1, 4, 8, 8], parallel=True)
    assert imp.parallel and imp.body.spec.serial
