"""Spec fields no rule reads do not split spec classes: alignment unless a file declares
track_alignment/0 (rules/base.lp), a stride only at a level stride_read/1 holds for
(rules/aliasing.lp). Dropping them must leave every optimal cost as it was: each search
here runs with and without the declaration and compares, and the programs run against
numpy."""

from __future__ import annotations

import functools

import pytest

from morello_asp import parse_spec
from morello_asp.solver.dp import Search
from morello_asp.solver.engine import Engine
from morello_asp.solver.memo import DictMemo

# The first takes ~10 s: the slow part of CI runs it.
SPECS = [pytest.param("Matmul(4x8x8, f32)", marks=pytest.mark.slow), "Matmul(2x4x4x4, f32)"]


@functools.cache
def search(spec: str, rules=()):
    """A fresh engine's search (the shipped rules' searches are shared by the tests)."""
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


def with_and_without(tmp_path, spec: str, declaration: str):
    """The search of `spec` under the shipped rules and with `declaration` added: both
    find the same cost, and dropping the field never adds a class."""
    declared = tmp_path / "declared.lp"
    declared.write_text(declaration + "\n")
    plain, a = search(spec)
    other, b = search(spec, (declared,))
    assert a.cost.main == b.cost.main
    assert len(plain._class_cache) <= len(other._class_cache)
    err, tol = a.compile().check()
    assert err <= tol
    return plain, other


@pytest.mark.parametrize("spec", SPECS)
def test_alignment_is_kept_only_under_track_alignment(tmp_path, spec):
    plain, tracked = with_and_without(tmp_path, spec, "track_alignment.")
    assert tracked.tracks_alignment
    assert all(o.aligned for o in operands(plain))
    assert any(not o.aligned for o in operands(tracked))


@pytest.mark.parametrize("spec", SPECS)
def test_a_stride_is_kept_only_where_a_rule_reads_it(tmp_path, spec):
    plain, everywhere = with_and_without(tmp_path, spec, "stride_read(l1). stride_read(vrf).")
    assert everywhere.stride_levels == frozenset({"GL", "L1", "VRF"})
    assert all(o.stride is None for o in operands(plain) if o.level != "GL")
    assert any(o.stride is not None for o in operands(plain) if o.level == "GL")
    assert any(o.stride is not None for o in operands(everywhere) if o.level == "L1")
