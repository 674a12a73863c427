"""The conv search's packed filters (rules/conv_pack.lp): channels-last filters may be
copied into blocks of the target's register-block width of output channels, [0, 2, 3,
1, 0 p(W)] (W = two widest vectors: 16 f32 on avx2, 32 on avx512), where there is more
than one block and the filters are reused; the search takes the copy where the model
says it pays, and the program is proved and checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.codegen.reference import random_operands, reference
from morello_asp.solver.proofs.verify import verify
from morello_asp.solver.search.engine import Engine
from morello_asp.spec import parse_spec
from morello_asp.synthesis import synthesize

LIMITS = "[16, 16, 1024, 33554432]"
LAST = "(f32, GL, [0, 2, 3, 1]), (f32, GL, [2, 3, 1, 0]), (f32, GL, [0, 2, 3, 1])"


def channels_last(shape: str, kind: str = "Conv") -> str:
    return f"({kind}({shape}, {LAST}, serial), {LIMITS})"


def packs(engine: Engine, text: str) -> set[tuple[int, str, str]]:
    """(operand, level, layout) of every packed move the search offers the spec."""
    spec = parse_spec(text, engine.target)
    return {
        (e.action.args[0], str(e.action.args[1]), str(e.action.args[2]))
        for e in engine.expand(spec)
        if e.action.name == "move" and e.action.args[2].is_packed
    }


def test_packed_filters_offered_by_the_targets_block_width():
    avx2 = Engine("avx2")
    # 3x3: a pointwise convolution over dense tiles is only split (rules/conv_search.lp),
    # and its matmul packs its own operands
    assert packs(avx2, channels_last("1x32x8x2x4x3x3")) == {
        (1, "GL", "[0, 2, 3, 1, 0 p(16)]"),
        (1, "L1", "[0, 2, 3, 1, 0 p(16)]"),
    }
    assert {lay for _, _, lay in packs(Engine("avx512"), f"Conv(1x64x8x2x4x3x3, {LAST}, serial)")} == {
        "[0, 2, 3, 1, 0 p(32)]"
    }
    # the ConvAccum the search zeroes and accumulates is offered the same copy
    assert (1, "GL", "[0, 2, 3, 1, 0 p(16)]") in packs(avx2, channels_last("1x32x8x1x4x3x3", "ConvAccum"))


@pytest.mark.parametrize(
    "shape, why",
    [
        ("1x16x8x2x4x3x3", "one block of output channels: the layout is the channels-last one"),
        ("1x24x8x2x4x3x3", "16 does not divide 24"),
        ("1x32x8x1x1x3x3", "one output pixel: each filter value is read once"),
    ],
)
def test_no_packed_filters_where_they_cannot_pay(shape, why):
    assert packs(Engine("avx2"), channels_last(shape)) == set(), why


def test_packed_filters_are_not_unpacked_again():
    packed = "(f32, GL, [0, 2, 3, 1]), (f32, GL, [0, 2, 3, 1, 0 p(16)]), (f32, GL, [0, 2, 3, 1])"
    text = f"(Conv(1x32x8x2x4x3x3, {packed}, serial), {LIMITS})"
    engine = Engine("avx2")
    spec = parse_spec(text, engine.target)
    moves = [e.action for e in engine.expand(spec) if e.action.name == "move" and e.action.args[0] == 1]
    assert all(m.args[2].is_packed or str(m.args[1]) in {"VRF", "RF"} for m in moves), moves


@pytest.mark.slow  # about two minutes on a loaded machine
def test_the_search_weighs_packed_filters_and_the_program_runs():
    """64 output channels over 16 input channels, 8 x 8 pixels and 3 x 3 filters on
    avx512: the search is offered the filters packed into blocks of 32 output channels
    (in L1 and in memory) and takes what costs least; the program is proved and, where
    the CPU has AVX-512, matches numpy. (A pointwise layer, the test until 2026-11-29,
    is only split now: its matmul packs its own operands, rules/conv_search.lp.)"""
    spec = parse_spec(f"Conv(1x64x16x8x8x3x3, {LAST}, serial)", "avx512")
    assert (1, "L1", "[0, 2, 3, 1, 0 p(32)]") in packs(Engine("avx512"), spec.text())
    imp = synthesize(spec)
    rep = verify(imp)
    assert rep.ok, [o for o in rep.obligations if o.status != "proved"][:3]
    missing = get_ctarget("avx512").missing_cpu_flags()
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}: the program was proved, not run")
    img, filt, _ = random_operands(imp.spec, 3)
    got = imp.compile()(img, filt)
    want = reference(imp.spec, img, filt, np.zeros_like(got))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
