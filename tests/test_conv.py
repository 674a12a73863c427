"""Convolutions (kinds/conv.lp): the declared semantics against a sliding-window einsum,
small convolutions synthesized by the search, proved by z3 and checked against numpy,
the spatial_split rewrite (a filter-position loop over MatmulAccum views), the conv
guide, and the oneDNN-style register block in the search space."""

from __future__ import annotations

import numpy as np
import pytest

from morello_asp.codegen.reference import flops, random_operands, reference
from morello_asp.errors import ScheduleError
from morello_asp.guides import hand_rewrites
from morello_asp.printer import listing
from morello_asp.solver.proofs.verify import verify
from morello_asp.solver.search.engine import Engine
from morello_asp.spec import parse_spec
from morello_asp.synthesis import synthesize

LIMITS = "[16, 16, 1024, 33554432]"
LAST = "(f32, GL, [0, 2, 3, 1]), (f32, GL, [2, 3, 1, 0]), (f32, GL, [0, 2, 3, 1])"


def channels_last(shape: str, kind: str = "Conv") -> str:
    return f"({kind}({shape}, {LAST}, serial), {LIMITS})"


def sliding_conv(img, filters):
    """Direct convolution: out[b, f, h, w] = sum img[b, c, h + i, w + j] * filters[f, c, i, j]."""
    fh, fw = filters.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(img, (fh, fw), axis=(2, 3))
    return np.einsum("bchwij,fcij->bfhw", win.astype(np.float64), filters.astype(np.float64))


@pytest.mark.parametrize("shape", ["1x3x2x4x5x3x3", "2x2x3x3x4x2x1", "1x4x1x2x2x1x1", "2x5x3x6x3x1x3"])
def test_declared_semantics_match_a_sliding_window(shape):
    spec = parse_spec(f"Conv({shape}, f32)")
    b, f, c, h, w, fh, fw = spec.shape
    assert spec.operand_shapes == ((b, c, h + fh - 1, w + fw - 1), (f, c, fh, fw), (b, f, h, w))
    assert flops(spec) == 2 * b * f * c * h * w * fh * fw
    img, filt, out = random_operands(spec, seed=3)
    np.testing.assert_allclose(reference(spec, img, filt, out), sliding_conv(img, filt), rtol=1e-5, atol=1e-5)
    acc = parse_spec(f"ConvAccum({shape}, f32)")
    out = out + 1
    np.testing.assert_allclose(reference(acc, img, filt, out), out + sliding_conv(img, filt), rtol=1e-5, atol=1e-5)


def check(imp, seed=0):
    rep = verify(imp)
    assert rep.ok, [o for o in rep.obligations if o.status != "proved"][:3]
    fn = imp.compile()
    img, filt, _ = random_operands(imp.spec, seed)
    got = fn(img, filt)
    np.testing.assert_allclose(got, sliding_conv(img, filt).reshape(got.shape), rtol=1e-4, atol=1e-4)


@pytest.mark.slow  # ~10 s or more on idle cores; the slow part of CI runs it
def test_a_small_convolution_synthesizes_proves_and_runs():
    check(synthesize(channels_last("1x8x3x2x3x3x1")))


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        "Conv(1x2x2x3x3x2x2, f32)",  # row-major: copied into channels-last by the search
        "Conv(2x3x2x3x2x1x1, f32)",
        "Conv(1x3x5x3x5x3x3, f32)",
        channels_last("2x8x4x3x5x2x3"),
        channels_last("1x16x8x4x6x3x3"),
        channels_last("1x8x16x3x7x1x1"),
    ],
)
def test_more_convolutions_synthesize_prove_and_run(text):
    check(synthesize(text))


def test_spatial_split_by_hand():
    """Filter positions loop over a MatmulAccum(1 x w x c x f) whose views reorder the
    channels-last operands; the whole program proved and checked, boundary included."""
    spec = parse_spec(channels_last("1x8x4x1x3x3x2", "ConvAccum"))
    imp = spec.spatial_split()
    body = imp.children[0].spec
    assert (body.kind, body.shape) == ("MatmulAccum", (1, 3, 4, 8))
    assert body.operand_shapes == ((1, 3, 4), (1, 4, 8), (1, 3, 8))
    full = imp.synthesize_all()
    rep = verify(full)
    assert rep.ok and any("filter position's views stay inside" in o.what for o in rep.obligations)
    fn = full.compile()
    img, filt, out = random_operands(spec, seed=5)
    want = out + sliding_conv(img, filt)
    np.testing.assert_allclose(fn(img, filt, out=out.copy()), want, rtol=1e-4, atol=1e-4)
    assert "_mm256_fmadd_ps" in full.to_c()  # the matmul's vector kernels serve the convolution


@pytest.mark.slow  # ~10 s
def test_a_pointwise_split_takes_all_rows_at_once():
    """A 1x1 ConvAccum over dense channels-last tiles splits all its rows at once: one
    MatmulAccum(1 x h*w x c x f) on the pixels (the image and output read as rows of
    pixels); proved, and checked against the sliding window. A tile of fewer channels
    than the image has is not dense: it splits only row by row."""
    spec = parse_spec(channels_last("1x16x8x3x5x1x1", "ConvAccum"))
    imp = spec.spatial_split()
    body = imp.children[0].spec
    assert (body.kind, body.shape) == ("MatmulAccum", (1, 15, 8, 16))
    full = imp.synthesize_all()
    rep = verify(full)
    assert rep.ok and any("dense runs of pixels" in o.what for o in rep.obligations)
    img, filt, out = random_operands(spec, seed=7)
    np.testing.assert_allclose(
        full.compile()(img, filt, out=out.copy()), out + sliding_conv(img, filt), rtol=1e-4, atol=1e-4
    )
    half = spec.tile([1, 16, 4, 3, 5, 1, 1])
    with pytest.raises(ScheduleError, match="needs b = 1 and h = 1"):
        half.subschedule([0], lambda a: a.spatial_split())


def test_a_pointwise_conv_is_one_matmul_and_only_split():
    """A 1x1 Conv over dense channels-last tensors is offered spatial_split alone
    (rules/conv_search.lp): it is one matmul of its pixels, which tiles, moves and packs
    itself. As a Conv (not a ConvAccum) it splits into a Matmul, which initialises its
    output itself: no Zero pass over the output before it (the slow test below
    synthesizes it, proves it and checks it against the sliding window). A Conv of more
    than one filter position is not split."""
    spec = parse_spec(channels_last("1x16x8x3x5x1x1"))
    assert {e.action.name for e in Engine("avx2").expand(spec)} == {"spatial_split"}
    acc = parse_spec(channels_last("1x16x8x3x5x1x1", "ConvAccum"))
    assert {e.action.name for e in Engine("avx2").expand(acc)} == {"spatial_split"}
    # a 3x3 convolution is tiled as before
    assert "tile" in {e.action.name for e in Engine("avx2").expand(parse_spec(channels_last("1x16x8x3x5x3x3")))}
    body = spec.spatial_split().children[0].spec
    assert (body.kind, body.shape) == ("Matmul", (1, 15, 8, 16))
    with pytest.raises(ScheduleError, match="or a Conv of one filter position"):
        parse_spec(channels_last("1x8x4x1x4x3x3")).spatial_split()


@pytest.mark.slow  # a search and its proof: about 20 s
def test_a_pointwise_conv_synthesizes_as_one_matmul_proves_and_runs():
    spec = parse_spec(channels_last("1x16x8x3x5x1x1"))
    full = synthesize(spec)
    assert full.children[0].spec.kind == "Matmul" and "MemsetZero" not in listing(full)
    rep = verify(full)
    split = [o.what for o in rep.obligations if o.what.startswith("spatial_split")]
    assert rep.ok and any("the body is Matmul " in w for w in split), split
    img, filt, _ = random_operands(spec, seed=11)
    got = full.compile()(img, filt)
    np.testing.assert_allclose(got, sliding_conv(img, filt).reshape(got.shape), rtol=1e-4, atol=1e-4)


def test_spatial_split_says_why_not():
    with pytest.raises(ScheduleError, match="needs b = 1 and h = 1"):
        parse_spec(channels_last("1x8x4x2x4x3x3", "ConvAccum")).spatial_split()
    with pytest.raises(ScheduleError, match="needs channels-last operands"):
        parse_spec(
            f"(ConvAccum(1x8x4x1x4x3x3, f32, f32, f32), {LIMITS})".replace("f32, f32, f32", "f32")
        ).spatial_split()
    with pytest.raises(ScheduleError, match="only a ConvAccum"):
        parse_spec("Matmul(4x4x4, f32)").spatial_split()


def test_spatial_split_of_a_one_pixel_row_major_tile_sees_no_adjacent_channels():
    """Issue 57: a 1 x F x 1 x 1 tile of a row-major output (or image) passes for
    channels-last, but its channels are h * w values apart; its contiguousness (c2)
    covers h and w only. The split's views of it have no adjacent values (c0), where the
    rule gave them c1 and a vector move then read 8 channels 25 values apart as one."""
    spec = parse_spec(
        f"(ConvAccum(1x16x8x5x5x1x1, (f32, GL, row_major), (f32, GL, [2, 3, 1, 0]), (f32, GL, row_major), serial), "
        f"{LIMITS})"
    )
    imp = spec.tile([1, 16, 8, 1, 1, 1, 1])
    assert [t.contig for t in imp.children[0].spec.operands] == [2, 4, 2]
    imp = imp.subschedule([0], lambda a: a.spatial_split())
    body = imp.children[0].children[0].spec
    assert [t.contig for t in body.operands] == [0, 3, 0]
    # a channels-last tile of the same pixel keeps its channels adjacent
    spec = parse_spec(f"(ConvAccum(1x16x8x5x5x1x1, {LAST}, serial), {LIMITS})")
    imp = spec.tile([1, 16, 8, 1, 1, 1, 1]).subschedule([0], lambda a: a.spatial_split())
    assert [t.is_contiguous() for t in imp.children[0].children[0].spec.operands] == [True] * 3


# The held-out 1x1 convolutions of issue 57: the first five were proved and refused by
# codegen (the split's view of a one-pixel row-major output tile claimed adjacent channels)
HELD_OUT = [
    "1x8x4x2x2x1x1",
    "1x16x8x2x1x1x1",
    "1x8x8x5x5x1x1",
    "1x16x3x5x5x1x1",
    "1x16x8x5x5x1x1",
    "1x8x4x1x1x1x1",
    "1x16x8x1x5x1x1",
    "1x7x8x5x5x1x1",
]


@pytest.mark.slow  # ~5 s each
@pytest.mark.parametrize("shape", HELD_OUT)
def test_held_out_pointwise_convolutions_synthesize_prove_and_run(shape):
    check(synthesize(f"Conv({shape}, f32)"))


@pytest.mark.slow
def test_conv_guide_blocks_and_splits():
    spec = parse_spec(channels_last("1x32x8x2x9x3x3"))
    from morello_asp.guides import guided

    partial = guided(spec, "conv")
    kinds = sorted({h.spec.kind for _, h in partial.holes()})
    assert kinds == ["MatmulAccum", "Zero"]
    assert hand_rewrites(partial) >= 4
    imp = synthesize(spec, guide="conv")
    check(imp, seed=2)


def test_conv_guide_refuses_what_it_cannot_block():
    with pytest.raises(ScheduleError, match="channels-last layouts"):
        synthesize("Conv(1x16x8x2x6x3x3, f32)", guide="conv")


@pytest.mark.slow
def test_register_block_recipe_is_in_the_search_space():
    """The oneDNN-style recipe (16 output channels in two vectors, a row of output pixels
    in registers, channels innermost) is reachable by the search, and the search finds a
    program that costs no more."""
    from morello_asp.solver.memo.table import DictMemo
    from morello_asp.solver.search.dp import Search
    from morello_asp.solver.search.engine import get_engine
    from morello_asp.solver.search.space import outside_search

    spec = parse_spec(channels_last("1x16x8x2x4x3x3"))
    recipe = synthesize(spec, guide="conv")
    assert outside_search(recipe, get_engine()) == []
    best = Search(get_engine(), DictMemo()).build(spec)
    assert best.cost.main <= recipe.cost.main
    check(recipe)
    check(best)


@pytest.mark.slow  # ~7 s
def test_spatial_split_over_filters_packed_by_output_channel():
    """Filters blocked by 16 output channels ([0, 2, 3, 1, 0 p(16)], as the conv guide
    packs them): a 16-channel block's (c, f) planes are row-major, so spatial_split
    applies; the whole program (the packing copy included) proved and checked."""
    from morello_asp.guides import filter_pack

    spec = parse_spec(channels_last("1x32x4x1x3x3x2", "ConvAccum"))
    with pytest.raises(ScheduleError, match="needs channels-last operands"):
        spec.move_param(1, "GL", filter_pack(16)).subschedule([1], lambda a: a.spatial_split())
    imp = spec.move_param(1, "GL", filter_pack(16)).subschedule([1], lambda a: a.tile([1, 16, 4, 1, 3, 3, 2]))
    imp = imp.subschedule([1, 0], lambda a: a.spatial_split())
    body = imp.children[1].children[0].children[0].spec
    assert (body.kind, body.shape) == ("MatmulAccum", (1, 3, 4, 16))
    full = imp.synthesize_all()
    rep = verify(full)
    assert rep.ok, [o for o in rep.obligations if o.status != "proved"][:3]
    img, filt, out = random_operands(spec, seed=7)
    want = out + sliding_conv(img, filt)
    np.testing.assert_allclose(full.compile()(img, filt, out=out.copy()), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("w, t", [(7, 4), (14, 5), (28, 6), (56, 6), (6, 6), (3, 3), (9, 5)])
def test_pixel_blocks_leave_no_block_of_one_or_two(w, t):
    from morello_asp.guides import pixel_block

    assert pixel_block(w, 6) == t
