"""examples/avx2_l2.lp, the five-level target docs/default_matmul.md's "Declaring the L2" measured: a user
can pass it by path, and what it synthesizes goes through L2 and matches numpy."""

from __future__ import annotations

from pathlib import Path

import pytest

from morello_asp import parse_spec
from morello_asp.errors import ScheduleError, SpecError
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.proofs.verify import verify
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import get_engine
from morello_asp.target import get_target

L2_TARGET = Path(__file__).parent.parent / "examples" / "avx2_l2.lp"


def test_the_l2_example_target_synthesizes_through_l2():
    t = get_target(str(L2_TARGET))
    assert t.level_names == ["RF", "VRF", "L1", "L2", "GL"]
    impl = Search(get_engine(t), DictMemo()).build(parse_spec("Matmul(4x4x4, f32)", t))
    assert impl.cost.levels == ("RF", "VRF", "L1", "L2", "GL")
    assert impl.cost.peak[3] > 0  # the operands pass through L2 on their way to L1
    assert "L2" in str(impl)
    rep = verify(impl)
    assert rep.ok, str(rep)
    err, tol = impl.compile().check()
    assert err <= tol


L2_PACKED = Path(__file__).parent.parent / "examples" / "avx2_l2_packed.lp"


def test_the_packed_l2_example_holds_only_packed_copies_in_l2():
    """examples/avx2_l2_packed.lp (docs/default_matmul.md, "What does close most of it"): B packed into
    its L2 is allowed, and the rest of the program is synthesized and matches numpy; a
    cache move of a view into that L2 is not offered, nor a copy of one that fits in L1
    (rules/copy_levels.lp)."""
    t = get_target(str(L2_PACKED))
    assert t.level_names == ["RF", "VRF", "L1", "L2", "GL"]
    small = parse_spec("Matmul(4x4x16, f32)", t)  # B: 64 values, 4 of L1's 1024 lines
    with pytest.raises(ScheduleError, match="does not apply"):
        small.to_accum().subschedule([1], lambda a: a.move_param(1, "L2", "[0, 2, 1, 2 p(16)]"))
    spec = parse_spec("Matmul(1x128x160, f32)", t)  # B: 1,280 lines
    with pytest.raises(ScheduleError, match="does not apply"):
        spec.to_accum().subschedule([1], lambda a: a.move_param(1, "L2"))
    partial = spec.to_accum().subschedule([1], lambda a: a.move_param(1, "L2", "[0, 2, 1, 2 p(16)]"))
    impl = Search(get_engine(t), DictMemo()).complete(partial)
    assert impl.cost.peak[3] > 0 and "L2, [0, 2, 1, 2 p(16)]" in str(impl)
    rep = verify(impl)
    assert rep.ok, str(rep)
    err, tol = impl.compile().check()
    assert err <= tol


def test_a_spec_of_another_target_is_refused_in_one_line():
    """A spec parsed for avx2 has avx2's four limits; a search for a five-level target
    refuses it by name (it used to end in an IndexError inside the search)."""
    search = Search(get_engine(get_target(str(L2_PACKED))), DictMemo())
    spec = parse_spec("Matmul(4x4x4, f32)")
    for call in (search.build, search.solve, search.explain):
        with pytest.raises(SpecError, match="spec for target avx2, this search is for avx2_l2_packed"):
            call(spec)
