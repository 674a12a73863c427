"""Spec fields no rule reads do not split spec classes: alignment unless a file declares
track_alignment/0 (rules/base.lp), a stride only at a level stride_read/1 holds for
(rules/aliasing.lp). Dropping them must leave every optimal cost as it was: each search
here runs with and without the declaration and compares, and the programs run against
numpy."""

from __future__ import annotations

import pytest

from morello_asp import parse_spec
from morello_asp.solver.dp import Search
from morello_asp.solver.engine import Engine
from morello_asp.solver.memo import DictMemo

SPECS = ["Matmul(4x8x8, f32)", "Matmul(2x4x4x4, f32)"]


def search(spec: str, rules=()):
    engine = Engine("avx2", tuple(rules))
    s = Search(engine, DictMemo())
    imp = s.build(parse_spec(spec))
    return engine, imp


def operands(engine):
    return [o for c in engine._class_cache for o in c.operands]


def test_the_shipped_rules_read_neither_alignment_nor_strides_at_l1():
    engine = Engine("avx2")
    assert not engine.tracks_alignment
    assert engine.stride_levels == frozenset({"GL"})  # the one level with a move into a cache


@pytest.mark.parametrize("spec", SPECS)
def test_alignment_is_kept_only_under_track_alignment(tmp_path, spec):
    declared = tmp_path / "track.lp"
    declared.write_text("track_alignment.\n")
    plain, a = search(spec)
    tracked, b = search(spec, [declared])
    assert tracked.tracks_alignment
    assert all(o.aligned for o in operands(plain))
    assert any(not o.aligned for o in operands(tracked))
    assert len(plain._class_cache) <= len(tracked._class_cache)
    assert a.cost.main == b.cost.main
    for imp in (a, b):
        err, tol = imp.compile().check()
        assert err <= tol


@pytest.mark.parametrize("spec", SPECS)
def test_a_stride_is_kept_only_where_a_rule_reads_it(tmp_path, spec):
    declared = tmp_path / "strides.lp"
    declared.write_text("stride_read(l1). stride_read(vrf).\n")
    plain, a = search(spec)
    everywhere, b = search(spec, [declared])
    assert everywhere.stride_levels == frozenset({"GL", "L1", "VRF"})
    assert all(o.stride is None for o in operands(plain) if o.level != "GL")
    assert any(o.stride is not None for o in operands(plain) if o.level == "GL")
    assert any(o.stride is not None for o in operands(everywhere) if o.level == "L1")
    assert len(plain._class_cache) <= len(everywhere._class_cache)
    assert a.cost.main == b.cost.main
    err, tol = a.compile().check()
    assert err <= tol
