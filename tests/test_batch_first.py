"""Batch dimensions first (rules/batch_first.lp, kind_batch/2): a batched Matmul is
searched as one loop over its elements around the batch-1 search, so a batch adds few
specs; the programs run and match numpy."""

from __future__ import annotations

import pytest

from morello_asp import parse_spec
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine


def _search(text: str):
    s = Search(Engine("avx2"), DictMemo())
    return s, s.build(parse_spec(text))


def _loops(imp) -> list:
    """The loops of a program, outermost first."""
    from morello_asp.ir import Loop

    out = []

    def walk(node):
        if isinstance(node, Loop):
            out.append(node)
        for c in node.children:
            walk(c)

    walk(imp)
    return out


def test_matmul_declares_its_batch():
    from morello_asp.kinds import kind

    assert kind("Matmul").dims[0] == "b"
    eng = Engine("avx2")
    from morello_asp.solver.logic import clingo_run

    rc, text, _ = clingo_run.answer(eng._files, eng._text([]) + "#show kb(K, N) : kind_batch(K, N).\n")
    assert rc == 30 and {"kb(matmul,b)", "kb(matmul_accum,b)"} <= set(text.split())


@pytest.mark.parametrize("text", ["Matmul(3x5x4x6, f32)", pytest.param("Matmul(2x8x8x8, f32)", marks=pytest.mark.slow)])
def test_a_batched_matmul_loops_over_its_elements_first_and_runs(text):
    search, imp = _search(text)
    first = _loops(imp)[0]
    assert first.tile_shape == (1, *parse_spec(text).shape[1:]), first.tile_shape
    err, tol = imp.compile().check()
    assert err <= tol


@pytest.mark.slow  # ~15 s; the slow part of CI runs it
def test_a_batch_adds_few_specs_to_the_search():
    """Counted, not timed: the batch-4 search solves the batch-1 specs and a few more."""
    one, imp1 = _search("Matmul(8x8x8, f32)")
    four, imp4 = _search("Matmul(4x8x8x8, f32)")
    assert imp4.cost.main == 4 * imp1.cost.main
    assert four.stats.solved < 1.2 * one.stats.solved, (four.stats.solved, one.stats.solved)
