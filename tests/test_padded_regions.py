"""Padding without a copy (morello_asp/padded.py, codegen/padding.py's regions,
codegen/views.py): programs over regions of the caller's arrays, a padded spec's
iteration space cut into an interior and edges, every region synthesized, compiled, run
and compared with numpy's reference over the zero-padded inputs; the CLI's --split."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest

from morello_asp.codegen.api import compile_impl
from morello_asp.codegen.convert import dense_order
from morello_asp.codegen.padding import borders_for, boxes, regions
from morello_asp.codegen.reference import reference
from morello_asp.errors import CodegenError
from morello_asp.padded import compile_padded
from morello_asp.spec import parse_spec
from morello_asp.synthesis import synthesize

LAST = "(f32, GL, [0, 2, 3, 1])"
DW = f"{LAST}, (f32, GL, [1, 2, 0]), {LAST}"
CONV = f"{LAST}, (f32, GL, [2, 3, 1, 0]), {LAST}"
VIEWS = "Matmul(1x8x16x8, (f32, GL, row_major, c1), (f32, GL, row_major), (f32, GL, row_major, c1), serial)"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return tmp_path_factory.mktemp("padded") / "memo.db"


def in_order(a: np.ndarray, order) -> np.ndarray:
    """`a`'s values in an array whose memory lies in `order` (outermost first)."""
    return np.ascontiguousarray(a.transpose(order)).transpose(np.argsort(order))


def test_a_program_over_views_reads_and_writes_regions_of_the_callers_arrays(db):
    """Operands compiled as regions of larger arrays: the call passes the views' memory
    (no copy), the program indexes with the arrays' strides, and nothing outside the
    output's region is written; the Python path and the C timing loop agree."""
    fn = compile_impl(synthesize(VIEWS, db=db), buffer_shapes={0: (1, 12, 20), 2: (1, 10, 11)})
    rng = np.random.default_rng(0)
    big_a = rng.random((1, 12, 20), dtype=np.float32)
    b = rng.random((1, 16, 8), dtype=np.float32)
    big_o = np.zeros((1, 10, 11), np.float32)
    a, o = big_a[:, 2:10, 3:19], big_o[:, 1:9, 2:10]
    assert fn(a, b, out=o) is o
    np.testing.assert_allclose(o, a @ b, rtol=1e-5)
    rest = big_o.copy()
    rest[:, 1:9, 2:10] = 0
    assert not rest.any(), "the program wrote outside its region"
    fresh = fn(a, b)  # a new output: the corner of a new array of the region's array's shape
    np.testing.assert_allclose(fresh, a @ b, rtol=1e-5)
    np.testing.assert_allclose(fn(np.ascontiguousarray(a), b), a @ b, rtol=1e-5)  # copied into a region
    fn._fast = None  # the Python path (no compiled call path)
    o[...] = 0
    fn(a, b, out=o)
    np.testing.assert_allclose(o, a @ b, rtol=1e-5)
    assert fn.benchmark(reps=1, min_time=0.001).seconds > 0


def test_a_region_claiming_more_contiguity_than_it_has_is_refused(db):
    imp = synthesize("Matmul(1x8x16x8, f32)", db=db)
    why = r"claims contiguousness 3, but as a region of a \(1, 10, 11\) array it has 1"
    with pytest.raises(CodegenError, match=why):
        compile_impl(imp, buffer_shapes={2: (1, 10, 11)})
    with pytest.raises(CodegenError, match="is no region of an array of shape"):
        compile_impl(imp, buffer_shapes={2: (1, 4, 11)})


@pytest.mark.parametrize(
    "spec, pad",
    [
        (f"DepthwiseConvS2(1x16x8x8x3x3, {DW}, serial)", [(1, 0), (1, 0)]),
        (f"DepthwiseConv(1x16x8x8x3x3, {DW}, serial)", 1),
        (f"Conv(1x8x4x6x5x3x3, {CONV}, serial)", [(2, 0), (0, 1)]),
        (f"ConvS2(1x8x4x5x5x7x7, {CONV}, serial)", 3),
    ],
)
def test_the_boxes_cover_the_iteration_space_once_and_only_the_last_reads_no_border(spec, pad):
    s = parse_spec(spec)
    borders = borders_for(s, pad)
    bx = boxes(s, borders)
    assert bx is not None
    seen = np.zeros(s.shape, np.int32)
    for box in bx:
        seen[tuple(slice(lo, hi) for lo, hi in box)] += 1
    assert (seen == 1).all()
    rs = regions(s, borders)
    assert rs is not None and [r.interior for r in rs] == [False] * (len(rs) - 1) + [True]


@pytest.mark.parametrize(
    "spec, pad",
    [
        (f"DepthwiseConvS2(1x16x8x8x3x3, {DW}, serial)", [(1, 0), (1, 0)]),
        pytest.param(f"DepthwiseConv(1x16x8x8x3x3, {DW}, serial)", 1, marks=pytest.mark.slow),
        pytest.param(f"Conv(1x8x4x6x5x3x3, {CONV}, serial)", 1, marks=pytest.mark.slow),
        pytest.param(f"Conv(1x8x4x6x5x3x3, {CONV}, serial)", [(2, 0), (0, 1)], marks=pytest.mark.slow),
    ],
)
def test_the_regions_compute_what_the_bordered_program_does(db, spec, pad):
    """Each region synthesized and compiled (the interior over views of the caller's
    image and output, edges over small bordered copies); the call on unpadded arrays
    against numpy's reference over them zero-padded, into a fresh output, into an out=
    in the output's layout (written in place) and into one that is not (copied)."""
    fn = compile_padded(spec, pad, db=db, split=True)
    err, tol = fn.check(seed=3)
    assert err <= tol, (err, tol)
    s = fn.spec
    rng = np.random.default_rng(1)
    img = rng.random(fn.shape(0), dtype=np.float32)
    filt = rng.random(s.operand_shapes[1], dtype=np.float32)
    sides = [fn.borders[0].get(j, (0, 0)) for j in range(img.ndim)]
    want = reference(s, np.pad(img, sides), filt, np.zeros(s.operand_shapes[2], np.float32))
    np.testing.assert_allclose(fn(img, filt), want, rtol=1e-4, atol=1e-4)
    out = np.zeros(s.operand_shapes[2], np.float32).transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)
    assert fn(img, filt, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    c_order = np.zeros(s.operand_shapes[2], np.float32)
    fn(img, filt, out=c_order)
    np.testing.assert_allclose(c_order, want, rtol=1e-4, atol=1e-4)
    # arrays in the operands' memory orders (torch's channels-last tensors): the driver's
    # one call from C, with no Python between the regions
    img_l, filt_l = (in_order(a, dense_order(t.layout, a.shape)) for a, t in zip((img, filt), s.operands))
    got = fn._run(fn._fast, (img_l, filt_l), None)
    assert got is not NotImplemented
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(CodegenError, match="has shape"):
        fn(img[..., 1:], filt)


@pytest.mark.slow
def test_small_inputs_keep_the_bordered_copy_and_cut_shapes_are_refused(db):
    dense = f"Conv(1x64x32x4x4x3x3, {CONV}, serial)"  # 128 FLOPs per byte of image: the copy is cheap
    assert type(compile_padded(dense, 1, db=db)).__name__ == "Padded"
    spec = f"DepthwiseConv(1x16x8x8x3x3, {DW}, serial)"  # 3 FLOPs per byte: cut
    assert type(compile_padded(spec, 1, db=db)).__name__ == "SplitPadded"
    assert boxes(parse_spec(spec), borders_for(parse_spec(spec), 4)) is None  # a 2 x 2 image: no 3 x 3 window inside
    with pytest.raises(CodegenError, match="cannot be cut into an interior and edges"):
        compile_padded(spec, 4, db=db, split=True)


def test_synth_split_checks_the_copy_free_call_and_refuses_split_without_pad(db):
    spec = f"DepthwiseConvS2(1x16x8x8x3x3, {DW}, serial)"
    synth = [sys.executable, "-m", "morello_asp.cli", "synth", spec, "-q", "--run", "--db", str(db)]
    r = subprocess.run(
        [*synth, "--pad", "1,0", "--split"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "OK" in r.stdout and "regions: 3 programs" in r.stderr, r.stdout + r.stderr
    r = subprocess.run(
        [*synth, "--split"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "give --pad P too" in r.stderr, r.stderr


def test_region_geometry_of_every_small_depthwise_padding():
    """Every (before, after) padding up to 2 of a stride-1 and a stride-2 depthwise spec
    either cuts into boxes that tile the space once or is refused (no interior)."""
    pads = itertools.product(range(3), repeat=2)
    for kind, (p0, p1) in itertools.product(("DepthwiseConv", "DepthwiseConvS2"), pads):
        s = parse_spec(f"{kind}(1x4x6x6x3x3, {DW}, serial)")
        if p0 + p1 == 0:
            continue
        bx = boxes(s, borders_for(s, [(p0, p1), (p1, p0)]))
        if bx is None:
            continue
        seen = np.zeros(s.shape, np.int32)
        for box in bx:
            seen[tuple(slice(lo, hi) for lo, hi in box)] += 1
        assert (seen == 1).all(), (kind, p0, p1)
