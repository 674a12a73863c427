"""The subsample rewrite (encodings/rules/subsample.lp): a strided 1 x 1 convolution
copies the pixels it reads into a dense channels-last buffer and runs the stride-1
convolution there, whose pixels then merge into one matmul. Every program is proved by
z3 and checked against the numpy reference."""

from __future__ import annotations

import json

import numpy as np
import pytest

from morello_asp.codegen.reference import random_operands, reference
from morello_asp.errors import ScheduleError
from morello_asp.printer import listing
from morello_asp.serialize import from_json, to_json
from morello_asp.solver.proofs.verify import verify
from morello_asp.solver.search.engine import Engine
from morello_asp.spec import parse_spec
from morello_asp.synthesis import synthesize

LIMITS = "[16, 16, 1024, 33554432]"
LAST = "(f32, GL, [0, 2, 3, 1]), (f32, GL, [2, 3, 1, 0]), (f32, GL, [0, 2, 3, 1])"


def channels_last(kind: str, shape: str) -> str:
    return f"({kind}({shape}, {LAST}, serial), {LIMITS})"


def run_checked(imp, seed=3):
    """Proved, then run against the declared semantics (accumulating into a random output)."""
    rep = verify(imp)
    assert rep.ok, [o for o in rep.obligations if o.status != "proved"][:3]
    spec = imp.spec
    img, filt, out = random_operands(spec, seed)
    fn = imp.compile()
    got = fn(img, filt, out=out.copy()) if spec.k.is_accum else fn(img, filt)
    np.testing.assert_allclose(got, reference(spec, img, filt, out), rtol=1e-5, atol=1e-5)
    return rep


@pytest.mark.parametrize("kind", [pytest.param("ConvS2", marks=pytest.mark.slow), "ConvS3Accum"])  # ConvS2: ~6 s
def test_a_strided_pointwise_conv_subsampled_by_hand(kind):
    """The load reads every S-th pixel (the program's view steps by the stride), the body
    is the stride-1 kind of the same accumulation, and it splits all its rows at once."""
    spec = parse_spec(channels_last(kind, "1x16x8x3x5x1x1"))
    imp = spec.subsample("L1")
    load, body = (c.spec for c in imp.children)
    assert (load.kind, load.shape) == ("Move", (1, 8, 3, 5))
    assert not load.operands[0].is_contiguous() and load.operands[1].is_contiguous()
    assert (body.kind, body.shape) == ("ConvAccum" if "Accum" in kind else "Conv", spec.shape)
    full = imp.synthesize_all()
    assert "spatial_split 1×1 (s" in listing(full)
    rep = run_checked(full)
    assert any("every pixel read lies inside the image" in o.what for o in rep.obligations)
    # the program file round-trips
    again = from_json(json.loads(json.dumps(to_json(full))))
    assert listing(again) == listing(full)


def test_subsample_says_why_not():
    with pytest.raises(ScheduleError, match="strided convolution of one filter position"):
        parse_spec(channels_last("Conv", "1x16x8x3x5x1x1")).subsample()
    with pytest.raises(ScheduleError, match="strided convolution of one filter position"):
        parse_spec(channels_last("ConvS2", "1x16x8x3x5x3x3")).subsample()
    with pytest.raises(ScheduleError, match="memory or a cache"):
        parse_spec(channels_last("ConvS2", "1x16x8x3x5x1x1")).subsample("VRF")


def test_the_search_only_subsamples_a_dense_downsample_into_its_images_level():
    """Over a dense output (whole rows, every channel) the search is offered the subsample
    alone, into the image's level; a tile of fewer output channels, or one pixel, is not
    subsampled and is tiled and split as before."""
    engine = Engine("avx2")
    dense = parse_spec(channels_last("ConvS2", "1x16x8x3x5x1x1"))
    assert [str(e.action) for e in engine.expand(dense)] == ["subsample(GL)"]
    f_tile = parse_spec(channels_last("ConvS2", "1x16x8x3x5x1x1")).tile([1, 8, 8, 3, 5, 1, 1]).children[0].spec
    names = {e.action.name for e in engine.expand(f_tile)}
    assert "subsample" not in names and "tile" in names, names
    one_pixel = parse_spec(channels_last("ConvS2", "1x16x8x1x1x1x1"))
    assert "subsample" not in {e.action.name for e in engine.expand(one_pixel)}


@pytest.mark.slow  # a search and two proofs; the default suite keeps under 5 minutes
def test_a_proof_refutes_a_body_that_is_not_the_stride_1_convolution():
    """A program file edited to run the strided kind on the dense pixels is refuted."""
    spec = parse_spec(channels_last("ConvS2", "1x16x8x3x5x1x1"))
    doc = to_json(spec.subsample("GL").synthesize_all())
    text = json.dumps(doc)
    body = doc["program"]["body"]
    assert body["spec"].startswith("(Conv(")
    body["spec"] = body["spec"].replace("(Conv(", "(ConvS2(", 1)
    assert json.dumps(doc) != text
    rep = verify(from_json(json.loads(json.dumps(doc))))
    assert not rep.ok
    assert any("stride-1 convolution" in o.what and o.status == "refuted" for o in rep.obligations)


@pytest.mark.slow  # a search from the spec alone: about 30 s
def test_the_search_subsamples_a_downsample_and_the_program_runs():
    """From the spec alone the search copies the pixels first (the dense matmul over all
    of them costs less than a matmul per row of strided pixels); proved and checked."""
    spec = parse_spec(channels_last("ConvS2", "1x32x16x8x8x1x1"))
    full = synthesize(spec)
    assert listing(full).startswith("subsample"), listing(full)[:400]
    run_checked(full)
