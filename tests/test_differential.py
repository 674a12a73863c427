"""Differential tests: random valid specs and random hand schedules, each proved with z3,
compiled and checked against numpy. The default run draws a few examples; the slow
(night) variants draw many more (`make test-all`, CI)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from morello_asp import parse_spec
from morello_asp.recipes import complete, scalar
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.proofs.verify import verify
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import get_engine

LAYOUTS = ["row_major", "col_major"]
SHARED = DictMemo()  # later examples reuse earlier sub-specs, as a memo table would


@st.composite
def matmul_specs(draw, max_dim: int):
    m, k, n = (draw(st.integers(1, max_dim)) for _ in range(3))
    dt = draw(st.sampled_from(["f32", "i32"]))
    lay = [draw(st.sampled_from(LAYOUTS)) for _ in range(3)]
    ops = ", ".join(f"({dt}, GL, {x})" for x in lay)
    return parse_spec(f"(Matmul(1x{m}x{k}x{n}, {ops}, serial), [16, 16, 1024, 33554432])")


@st.composite
def hand_schedules(draw, max_dim: int):
    """A random hand schedule: to_accum, the fill down to scalars, one random tiling of
    the accumulation (and maybe one of its body), the rest down to scalar kernels."""
    spec = draw(matmul_specs(max_dim))
    imp = spec.to_accum().subschedule([0], scalar)
    shape = spec.shape
    tile = tuple([1] + [draw(st.integers(1, d)) for d in shape[1:]])
    if tile != shape:
        imp = imp.tile(tile)
        body = tile
        inner = tuple([1] + [draw(st.integers(1, d)) for d in body[1:]])
        if inner != body:
            imp = imp.subschedule([1, 0], lambda b, t=inner: b.tile(t))
    return complete(imp, scalar)


def _check(imp):
    rep = verify(imp)
    assert rep.ok, f"{imp.spec}\n{rep}"
    err, tol = imp.compile().check(seed=3)
    assert err <= tol, f"{imp.spec}: max error {err} > {tol}\n{imp}"


def _hand(n: int):
    @settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(hand_schedules(max_dim=7))
    def run(imp):
        _check(imp)

    run()


def _synth(n: int, max_dim: int):
    search = Search(get_engine(), SHARED)

    @settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(matmul_specs(max_dim))
    def run(spec):
        _check(search.build(spec))

    run()


@pytest.mark.slow  # ~10 s or more on idle cores; the slow part of CI runs it
def test_random_hand_schedules_match_numpy():
    _hand(8)


def test_random_specs_synthesize_programs_that_match_numpy():
    _synth(3, max_dim=3)


@pytest.mark.slow
def test_many_random_hand_schedules_match_numpy():
    _hand(120)


@pytest.mark.slow
def test_many_random_specs_synthesize_programs_that_match_numpy():
    _synth(25, max_dim=6)
