"""The matmul recipes (examples/fast_matmul.py by hand, the blis guide of
morello_asp/guides.py user-guided) and the search-space check: every program is
compiled, run and compared with numpy."""

from __future__ import annotations

import pytest

from morello_asp import ScheduleError, parse_spec
from morello_asp.guides import blis, hand_rewrites
from morello_asp.ir import Loop
from morello_asp.recipes import fast_matmul
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import get_engine
from morello_asp.solver.search.space import outside_search


def check_numpy(imp):
    fn = imp.compile()
    err, tol = fn.check()
    assert err <= tol, f"max error {err} > {tol}"


@pytest.mark.slow
def test_guided_schedule_with_cache_tiles_and_boundaries_matches_numpy():
    """k chunks that leave a remainder (40 = 2 x 16 + 8), row blocks that leave one
    (14 = 12 + 2) and 6-row blocks inside: every open block is synthesized."""
    partial = blis(parse_spec("Matmul(14x40x32, f32)"), kc=16, mc=12)
    kinds = sorted({h.spec.kind for _, h in partial.holes()})
    assert kinds == ["MatmulAccum", "Move", "Zero"]
    shapes = {h.spec.shape for _, h in partial.holes() if h.spec.kind == "MatmulAccum"}
    assert shapes == {(1, 6, 16, 16), (1, 6, 8, 16), (1, 2, 16, 16), (1, 2, 8, 16)}
    assert hand_rewrites(partial) == sum(1 for n in partial.walk() if isinstance(n, Loop)) + 2  # + to_accum, pack
    imp = Search(get_engine(), DictMemo()).complete(partial)
    assert imp.is_complete
    check_numpy(imp)


def test_blis_guide_refuses_specs_it_does_not_fit():
    with pytest.raises(ScheduleError, match="multiple of 16"):
        blis(parse_spec("Matmul(8x8x24, f32)"))
    with pytest.raises(ScheduleError, match="f32 operands"):
        blis(parse_spec("Matmul(8x8x16, i32)"))


@pytest.mark.slow
def test_synth_cli_with_guide_runs_and_benches_against_single_threaded_numpy(tmp_path, capsys):
    """`synth SPEC --guide blis --bench`: the guide's hand part, the rest synthesized, the
    program checked against numpy and timed beside one-thread OpenBLAS; a guide that does
    not apply is a clear error (exit 2), not a traceback."""
    from morello_asp.cli import main

    assert main(["synth", "Matmul(12x32x32, f32)", "--guide", "blis", "--bench", "--db", str(tmp_path / "g.db")]) == 0
    out = capsys.readouterr()
    assert "guide blis:" in out.err and "open specs left to synthesize" in out.err
    assert "checked against numpy" in out.out and ": OK" in out.out
    assert "BLAS threads: 1" in out.out and "ratio (numpy time / ours): C loop" in out.out
    assert "BroadcastVecMultAdd" in out.out and "p(16)" in out.out  # listing: packed B, vector kernels inside
    assert main(["synth", "Matmul(8x8x24, f32)", "--guide", "blis", "-q"]) == 2
    assert "guide 'blis' does not apply" in capsys.readouterr().err
    assert main(["synth", "Matmul(8x8x16, f32)", "--guide", "nope", "-q"]) == 2
    assert "known guides: blis" in capsys.readouterr().err


@pytest.mark.slow
def test_hand_recipe_in_search_space_costs_no_less_than_the_optimum():
    engine = get_engine()
    in_space = fast_matmul(4, 8, 16, mr=2)
    assert outside_search(in_space, engine) == []
    classic = fast_matmul(12, 8, 16, mr=6)  # 6-row tiles: not a power of two
    ((path, spec, action),) = outside_search(classic, engine)
    assert action.name == "tile" and action.args[0] == (1, 6, 8, 16)
    best = Search(engine, DictMemo()).build(in_space.spec)
    assert best.cost.main <= in_space.cost.main
    for imp in (in_space, classic, best):
        check_numpy(imp)
