"""The optional rule set cache_half (encodings/options/cache_half.lp): a view kept in a
cache as it is may fill at most half of it."""

from __future__ import annotations

from morello_asp import parse_spec
from morello_asp.solver.engine import Engine
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


def test_a_view_filling_more_than_half_the_cache_is_not_kept_there_as_it_is():
    default, half = Engine("avx2"), Engine("avx2", ("cache_half",))
    assert _keeps_rhs_in_l1(default, SPEC) and not _keeps_rhs_in_l1(half, SPEC)
    assert _keeps_rhs_in_l1(default, HALF) and _keeps_rhs_in_l1(half, HALF)


def test_programs_under_cache_half_run():
    imp = synthesize("Matmul(8x8x8, f32)", rules=["cache_half"], db=None)
    err, tol = imp.compile().check()
    assert err <= tol
