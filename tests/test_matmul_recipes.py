"""The matmul recipes of examples/ (hand and user-guided) and the search-space check:
every program is compiled, run and compared with numpy."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from fast_matmul import fast_matmul  # noqa: E402
from guided_matmul import guided_schedule, hand_rewrites  # noqa: E402

from morello_asp.ir import Loop  # noqa: E402
from morello_asp.solver.dp import Search  # noqa: E402
from morello_asp.solver.engine import get_engine  # noqa: E402
from morello_asp.solver.memo import DictMemo  # noqa: E402
from morello_asp.solver.search_space import outside_search  # noqa: E402


def check_numpy(imp):
    fn = imp.compile()
    err, tol = fn.check()
    assert err <= tol, f"max error {err} > {tol}"


def test_guided_schedule_with_cache_tiles_and_boundaries_matches_numpy():
    """k chunks that leave a remainder (40 = 2 x 16 + 8), row blocks that leave one
    (14 = 12 + 2) and 6-row blocks inside: every open block is synthesized."""
    partial = guided_schedule(14, 40, 32, kc=16, mc=12)
    kinds = sorted({h.spec.kind for _, h in partial.holes()})
    assert kinds == ["MatmulAccum", "Move", "Zero"]
    shapes = {h.spec.shape for _, h in partial.holes() if h.spec.kind == "MatmulAccum"}
    assert shapes == {(1, 6, 16, 16), (1, 6, 8, 16), (1, 2, 16, 16), (1, 2, 8, 16)}
    assert hand_rewrites(partial) == sum(1 for n in partial.walk() if isinstance(n, Loop)) + 2  # + to_accum, pack
    imp = Search(get_engine(), DictMemo()).complete(partial)
    assert imp.is_complete
    check_numpy(imp)


def test_guided_schedule_refuses_n_not_a_multiple_of_the_panel():
    with pytest.raises(ValueError, match="multiple of 16"):
        guided_schedule(8, 8, 24)


def test_hand_recipe_in_search_space_costs_no_less_than_the_optimum():
    engine = get_engine()
    in_space = fast_matmul(4, 8, 16, mr=2)
    assert outside_search(in_space, engine) == []
    classic = fast_matmul(12, 8, 16, mr=6)  # 6-row tiles: not a power of two
    (path, spec, action), = outside_search(classic, engine)
    assert action.name == "tile" and action.args[0] == (1, 6, 8, 16)
    best = Search(engine, DictMemo()).build(in_space.spec)
    assert best.cost.main <= in_space.cost.main
    for imp in (in_space, classic, best):
        check_numpy(imp)
