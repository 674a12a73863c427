"""The compressed memo table against the plain dict: coordinates invert, every get
answers identically after random puts, merged boxes never overlap with different values."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from morello_asp.solver.memo.coords import from_coords, to_coords
from morello_asp.solver.memo.table import Decision, DictMemo, RectMemo, _intersects
from morello_asp.solver.search.engine import Action
from morello_asp.spec import parse_spec

BASES = [
    parse_spec(t)
    for t in (
        "Matmul(4x4x4, f32)",
        "Matmul(2x8x4, f32)",
        "Matmul(3x4x4, f32)",
        "Matmul(1x1x1, f32)",
        "Matmul(8x4x4, f32)",
        "Matmul(2x4x4, f32)",
    )
]
LEVELS = ["RF", "VRF", "L1", "GL"]

limits = st.tuples(*[st.integers(0, 9) for _ in range(4)])


@st.composite
def specs(draw):
    s = draw(st.sampled_from(BASES))
    ops = tuple(
        replace(
            o,
            level=draw(st.sampled_from(LEVELS)),
            vector_size=draw(st.sampled_from([None, 8])),
            aligned=draw(st.booleans()),
            contig=draw(st.sampled_from([None, 1])),
            stride=draw(st.sampled_from([None, 6, 9])),
        )
        for o in s.operands
    )
    return replace(s, operands=ops, limits=draw(limits)).canonical()


ACTIONS = [None, Action("tile", ((1, 1, 2, 2), False)), Action("select", ("mult_add",)), Action("to_accum", ())]


@st.composite
def decisions(draw, spec):
    a = draw(st.sampled_from(ACTIONS))
    peak = tuple(draw(st.integers(0, lv)) for lv in spec.limits)
    # costs in proportion to volume make boxes of different shapes merge
    return Decision(a, draw(st.integers(0, 2)) * (spec.volume if draw(st.booleans()) else 1), peak, 1)


@given(specs())
def test_coords_invert(s):
    key, point = to_coords(s, tuple(LEVELS))
    assert from_coords(key, point) == s


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_rect_memo_answers_like_dict(data):
    # few distinct specs, many limit vectors, few values: plenty of merges and overlaps
    base = data.draw(st.lists(specs(), min_size=1, max_size=3))
    d, r = DictMemo(), RectMemo(tuple(LEVELS))
    for _ in range(data.draw(st.integers(1, 40))):
        s = replace(data.draw(st.sampled_from(base)), limits=data.draw(limits))
        if d.get(s) is None:  # the dynamic program only puts after a miss
            dec = data.draw(decisions(s))
            d.put(s, dec)
            r.put(s, dec)
        for _ in range(3):
            q = replace(data.draw(st.sampled_from(base)), limits=data.draw(limits))
            assert d.get(q) == r.get(q)
    # A merged box never overlaps a differently-valued box that existed when it merged
    # (later puts may overlap it; they have higher sequence numbers and lose, as in DictMemo).
    boxes = list(r.boxes())
    for k1, s1, lo1, hi1, v1 in boxes:
        if s1 not in r.merged_at:
            continue
        for k2, s2, lo2, hi2, v2 in boxes:
            if k1 == k2 and v1 != v2 and _intersects(lo1, hi1, lo2, hi2):
                assert s2 < s1 or s2 > r.merged_at[s1]
    assert len(r) <= len(d)


def test_merges_happen():
    s = BASES[0]
    r = RectMemo(tuple(LEVELS))
    dec = Decision(Action("select", ("mult_add",)), 1, (1, 1, 1, 1), 1)
    for lv in range(1, 9):
        r.put(replace(s, limits=(lv, 1, 1, 1)), dec)
    assert len(r) == 1
    assert r.get(replace(s, limits=(5, 1, 1, 1))) == dec
    assert r.get(replace(s, limits=(9, 1, 1, 1))) is None


def test_merges_across_shapes():
    """Costs are stored per unit of volume: the same rewrite costing in proportion to the
    spec's size over M = 1..16 is one box, and each shape gets its own cost back."""
    r = RectMemo(tuple(LEVELS))
    tile = Action("tile", ((1, 1, 4, 4), False))
    for m in (1, 2, 4, 8, 16):
        s = parse_spec(f"Matmul({m}x4x4, f32)")
        r.put(s, Decision(tile, 3 * s.volume, (0, 0, 0, 0), 2))
    assert len(r) == 1
    s = parse_spec("Matmul(8x4x4, f32)")
    assert r.get(s) == Decision(tile, 3 * 128, (0, 0, 0, 0), 2)
    assert r.get(parse_spec("Matmul(32x4x4, f32)")) is None


def test_a_chain_of_sums_is_kept_as_it_is_and_parts_boxes_that_differ_in_it():
    """A decision's open chain of sums (morello_asp/cost.py, node_chain) is not in
    proportion to volume: a box gives it back unscaled, and boxes whose chains differ do
    not merge across shapes (each shape gets its own chain back). It survives the text a
    table file stores."""
    from morello_asp.solver.memo.sqlite import decode_decision, encode_decision

    r = RectMemo(tuple(LEVELS))
    tile = Action("tile", ((1, 1, 4, 4), False))
    for m in (1, 2, 4, 8, 16):
        s = parse_spec(f"Matmul({m}x4x4, f32)")
        r.put(s, Decision(tile, 3 * s.volume, (0, 0, 0, 0), 2, chain=m))
    assert len(r) == 5
    s = parse_spec("Matmul(8x4x4, f32)")
    assert r.get(s) == Decision(tile, 3 * 128, (0, 0, 0, 0), 2, chain=8)
    key = '{"kind":"Matmul","nlimits":4,"rank":4}'
    for chain in (0, 16):
        d = Decision(tile, 3, (0, 0, 0, 0), 2, chain)
        text = encode_decision(d)
        assert ('"n"' in text) == bool(chain)
        assert decode_decision(text, key).chain == chain


def test_db_commands_round_trip(tmp_path):
    """export -> import -> compact keeps every answer; the imported table synthesizes the
    same program without search, and it runs correctly."""
    from morello_asp.cli import main
    from morello_asp.cli.db import stats
    from morello_asp.synthesis import synthesize

    a, b, f = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "a.jsonl"
    imp = synthesize("Matmul(2x2x2, f32)", db=a)
    assert main(["db", "export", str(a), str(f)]) == 0
    assert main(["db", "import", str(b), str(f)]) == 0
    assert main(["db", "compact", str(b)]) == 0
    assert main(["db", "stats", str(b)]) == 0
    sa, sb = stats(str(a)), stats(str(b))
    assert sb["rectangles"] <= sa["rectangles"] and sb["specs_covered"] == sa["specs_covered"]
    again = synthesize("Matmul(2x2x2, f32)", db=b)
    assert str(again) == str(imp) and stats(str(b))["rectangles"] == sb["rectangles"]
    err, tol = again.compile().check()
    assert err <= tol
