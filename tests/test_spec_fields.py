"""Spec fields no rule reads do not split spec classes: alignment unless a file declares
track_alignment/0 (rules/base.lp), a stride only at a level stride_read/1 holds for and
of a view with more runs than stride_read_runs/1 says (rules/aliasing.lp). Dropping them
must leave every optimal cost as it was: each search here runs with and without the
declaration and compares, and the programs run against numpy."""

from __future__ import annotations

import functools

import pytest

from morello_asp import parse_spec
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine
from morello_asp.solver.search.facts import _runs

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


def strided(engine):
    """(operand, its runs) of every operand with a stride in the search's classes."""
    return [(o, _runs(o, s)) for c in engine._class_cache for o, s in zip(c.operands, c.operand_shapes) if o.stride]


def test_the_shipped_rules_read_neither_alignment_nor_strides_at_l1():
    engine = Engine("avx2")
    assert not engine.tracks_alignment
    assert engine.stride_levels == frozenset({"GL"})  # the one level with a move into a cache
    assert engine.stride_runs == 4  # avx2's L1 is 8-way, half of it a view's: 4 runs fit whatever their stride


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
    plain, everywhere = with_and_without(tmp_path, spec, "stride_read(l1). stride_read(vrf). stride_read_runs(0).")
    assert everywhere.stride_levels == frozenset({"GL", "L1", "VRF"})
    assert all(o.stride is None for o in operands(plain) if o.level != "GL")
    assert any(o.stride is not None for o in operands(everywhere) if o.level == "GL")
    assert any(o.stride is not None for o in operands(everywhere) if o.level == "L1")


def test_a_stride_is_kept_only_where_more_runs_than_ways(tmp_path):
    """A view of at most 4 rows fits in its half of 8-way L1 whatever their stride (the
    stride of each view of it that breaks adjacency elsewhere is worked out anew), so its
    stride is dropped; 12 rows of A keep theirs. stride_read_runs(0) keeps every stride."""
    plain, kept = with_and_without(tmp_path, "Matmul(12x2x2, f32)", "stride_read_runs(0).")
    assert kept.stride_runs == 0
    assert strided(plain) and all(runs > 4 for _, runs in strided(plain))
    assert any(runs <= 4 for _, runs in strided(kept))


def test_a_stride_read_runs_that_is_not_a_number_is_refused(tmp_path):
    from morello_asp.errors import RuleError

    bad = tmp_path / "bad.lp"
    bad.write_text("stride_read_runs(many).\n")
    with pytest.raises(RuleError, match="stride_read_runs/1 takes a number"):
        Engine("avx2", (bad,))
