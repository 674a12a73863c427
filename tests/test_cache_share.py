"""A view kept in a cache as it is (a cache move) may fill at most a share of it
(rules/aliasing.lp: tgt_cache_share/2, one half by default), so the loop that reads it
keeps its other operands there too."""

from __future__ import annotations

import pytest

from morello_asp import parse_spec
from morello_asp.errors import RuleError
from morello_asp.solver.search.engine import Engine
from morello_asp.synthesis import synthesize

# B of 32 x 256 f32 is 512 lines (all of L1 as avx2 models it: 8 ways x 64 sets); its
# first 16 rows are 256 lines, half of it.
SPEC = "MatmulAccum(1x8x32x256, f32)"
HALF = "MatmulAccum(1x8x16x256, f32)"


def _keeps_rhs_in_l1(engine: Engine, text: str) -> bool:
    """Whether the search offers a cache move of the rhs into L1 in its own layout."""
    spec = parse_spec(text)
    for e in engine.expand(spec):
        a = e.action
        if a.name == "move" and a.args[0] == 1 and a.args[1] == "L1" and a.args[2] == spec.operands[1].layout:
            return True
    return False


def test_a_view_filling_more_than_half_the_cache_is_not_kept_there_as_it_is(tmp_path):
    default = Engine("avx2")
    assert not _keeps_rhs_in_l1(default, SPEC) and _keeps_rhs_in_l1(default, HALF)
    # A target (or a user's file) that lets a view fill all of L1 is offered both.
    whole = tmp_path / "whole_l1.lp"
    whole.write_text("tgt_cache_share(l1, 1).\n")
    everything = Engine("avx2", (str(whole),))
    assert _keeps_rhs_in_l1(everything, SPEC) and _keeps_rhs_in_l1(everything, HALF)
    # A quarter refuses both.
    quarter = tmp_path / "quarter_l1.lp"
    quarter.write_text("tgt_cache_share(l1, 4).\n")
    assert not _keeps_rhs_in_l1(Engine("avx2", (str(quarter),)), HALF)


def test_a_program_whose_b_fills_the_cache_runs():
    imp = synthesize("Matmul(1x32x256, f32)", db=None)  # B: all of L1, so not kept there as it is
    err, tol = imp.compile().check()
    assert err <= tol


def test_the_option_it_replaced_is_retired_with_a_reason():
    with pytest.raises(RuleError, match="rule set cache_half is retired: the default rules keep a view"):
        Engine("avx2", ("cache_half",))
