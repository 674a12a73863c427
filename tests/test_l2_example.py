"""examples/avx2_l2.lp, the five-level target README's "Declaring the L2" measured: a user
can pass it by path, and what it synthesizes goes through L2 and matches numpy."""

from __future__ import annotations

from pathlib import Path

from morello_asp import parse_spec
from morello_asp.solver.dp import Search
from morello_asp.solver.engine import get_engine
from morello_asp.solver.memo import DictMemo
from morello_asp.solver.verify import verify
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
