"""Levels belong to the target: a copy of avx2 with every level renamed (rf -> sreg,
vrf -> vreg, l1 -> cache1, gl -> dram; tests/fixtures/renamed_target/) synthesizes,
proves, compiles and runs the same programs, with nothing in Python or the generic rules
knowing any level name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from morello_asp import parse_spec
from morello_asp.cli.schedule import figure1
from morello_asp.solver.memo.table import DictMemo, RectMemo
from morello_asp.solver.proofs.verify import verify
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import get_engine
from morello_asp.target import get_target

RENAMED = Path(__file__).parent / "fixtures" / "renamed_target" / "renamed.lp"
TO_AVX2 = {"SREG": "RF", "VREG": "VRF", "CACHE1": "L1", "DRAM": "GL"}


def _as_avx2(text: str) -> str:
    return re.sub(r"\b(SREG|VREG|CACHE1|DRAM)\b", lambda m: TO_AVX2[m.group(1)], text)


@pytest.fixture(scope="module")
def renamed():
    return get_target(str(RENAMED))


def test_the_renamed_target_has_its_own_levels_and_roles(renamed):
    assert renamed.level_names == ["SREG", "VREG", "CACHE1", "DRAM"]
    assert [lv.name for lv in renamed.vector_levels] == ["VREG"]
    assert renamed.memory_level.name == "DRAM"
    assert renamed.prefix("DRAM") == "m" and renamed.prefix("CACHE1") == "c"


@pytest.mark.parametrize("shape", [pytest.param("4x4x8", marks=pytest.mark.slow), "3x5x7"])
def test_synthesizes_the_same_program_as_avx2_up_to_renaming(renamed, shape):
    text = f"Matmul({shape}, f32)"
    ours = Search(get_engine(renamed), DictMemo()).build(parse_spec(text, renamed))
    base = Search(get_engine("avx2"), DictMemo()).build(parse_spec(text))
    assert ours.spec.operands[0].level == "DRAM"
    assert ours.cost.main == base.cost.main
    assert ours.cost.levels == ("SREG", "VREG", "CACHE1", "DRAM")
    # the same decisions: listings agree once levels (and buffer-name prefixes) are mapped
    strip = lambda s: re.sub(r"\b[a-z]*(lhs|rhs|out)\d*\b", r"\1", s)  # noqa: E731
    assert strip(_as_avx2(str(ours))) == strip(str(base))
    rep = verify(ours)
    assert rep.ok, str(rep)
    err, tol = ours.compile().check()
    assert err <= tol
    c = ours.to_c()
    assert "/* (Matmul(" in c and "DRAM" in c


def test_hand_schedule_and_memo_table_on_the_renamed_target(renamed):
    imp = figure1(renamed)  # the paper's figure with this target's levels
    assert imp.spec.operands[1].level == "VREG"
    assert verify(imp).ok
    err, tol = imp.compile().check()
    assert err <= tol
    # the compressed memo table keys by the target's level names
    memo = RectMemo(tuple(renamed.level_names))
    spec = parse_spec("Matmul(2x2x4, f32)", renamed)
    got = Search(get_engine(renamed), memo).build(spec)
    assert memo.get(spec) is not None and got.is_complete
    err, tol = got.compile().check()
    assert err <= tol
