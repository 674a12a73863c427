"""The search leaves no garbage to Python's cyclic collector and gives it back as it
found it. A reference cycle through clingo's futures once kept every parsed answer alive
until a full collection, and full collections of the search's ever-growing heap were a
third of the main process's time (docs/search_speed.md, "Python's cyclic garbage collector")."""

from __future__ import annotations

import gc

import pytest

from morello_asp import parse_spec
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine


def _search(n: int, engine: Engine | None = None):
    return Search(engine or Engine("avx2"), DictMemo()).build(parse_spec(f"Matmul({n}x{n}x{n}, f32)"))


@pytest.mark.slow  # ~14 s: with the slow tests, so the default suite stays under 5 minutes
def test_a_search_leaves_almost_no_cyclic_garbage():
    engine = Engine("avx2")
    _search(2, engine)  # imports, worker processes: what a first search sets up
    gc.collect()
    gc.disable()
    try:
        impl = _search(8, engine)  # 15 clingo calls, about 3,000 classes
        cyclic = gc.collect()
    finally:
        gc.enable()
    # With the cycle, the 8^3 search left 113,000 objects of parsed answers here; now none.
    assert cyclic < 1000, cyclic
    err, tol = impl.compile().check()
    assert err <= tol


def test_the_collector_is_handed_back_after_a_search_and_after_a_failed_one():
    assert gc.get_freeze_count() == 0
    impl = _search(4)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    err, tol = impl.compile().check()
    assert err <= tol
    eng = Engine("avx2")
    search = Search(eng, DictMemo())

    def fail(*_a, **_k):
        raise RuntimeError("stopped in the middle")

    search.progress.update = fail  # the first batch's progress report raises
    try:
        search.build(parse_spec("Matmul(4x4x8, f32)"))
    except RuntimeError:
        pass
    else:
        raise AssertionError("the search should have stopped")
    assert gc.isenabled() and gc.get_freeze_count() == 0
