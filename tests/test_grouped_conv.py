"""Depthwise and grouped convolutions (kinds/grouped_conv.lp), padding (codegen/padding.py)
and the bias + ReLU epilogue (kinds/epilogue.lp): the declared semantics against
sliding-window einsums, programs synthesized, compiled, run and compared with numpy and
with torch.nn.functional.conv2d where torch is installed; torch's channels-last memory
passed with no copy; padding's and the CLI's refusals in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from morello_asp.codegen.reference import flops, random_operands, reference
from morello_asp.errors import CodegenError
from morello_asp.spec import parse_spec
from morello_asp.synthesis import synthesize

# channels-last image and output (torch's NHWC), filters (fh, fw, c): the vector kernel's
DW_LAST = "(f32, GL, [0, 2, 3, 1]), (f32, GL, [1, 2, 0]), (f32, GL, [0, 2, 3, 1])"
# grouped: image [b, H, W, (g c)] and output [b, H, W, (g f)] as torch lays them out
# channels-last; filters torch's [(g f), c, fh, fw] as they are (row-major)
G_LAST = "(f32, GL, [0, 3, 4, 1, 2]), (f32, GL, row_major), (f32, GL, [0, 3, 4, 1, 2])"


def windows(img, fh, fw):
    """img's (fh, fw) windows over its last two dims: (..., h, w, fh, fw), in float64."""
    return np.lib.stride_tricks.sliding_window_view(img.astype(np.float64), (fh, fw), axis=(-2, -1))


def depthwise(img, filters):
    """out[b, c, h, w] = sum img[b, c, h + i, w + j] * filters[c, i, j]."""
    fh, fw = filters.shape[1:]
    return np.einsum("bchwij,cij->bchw", windows(img, fh, fw), filters.astype(np.float64))


def grouped(img, filters):
    """out[b, g, f, h, w] = sum img[b, g, c, h + i, w + j] * filters[g, f, c, i, j]."""
    fh, fw = filters.shape[3:]
    return np.einsum("bgchwij,gfcij->bgfhw", windows(img, fh, fw), filters.astype(np.float64))


def torch_or_skip():
    return pytest.importorskip("torch", reason="torch is not installed (CI does not install it)")


@pytest.mark.parametrize("shape", ["1x3x2x4x3x3", "2x5x3x2x1x2", "1x16x1x1x3x1"])
def test_depthwise_semantics_match_a_sliding_window(shape):
    spec = parse_spec(f"DepthwiseConv({shape}, f32)")
    b, c, h, w, fh, fw = spec.shape
    assert spec.operand_shapes == ((b, c, h + fh - 1, w + fw - 1), (c, fh, fw), (b, c, h, w))
    assert flops(spec) == 2 * b * c * h * w * fh * fw
    img, filt, out = random_operands(spec, seed=1)
    np.testing.assert_allclose(reference(spec, img, filt, out), depthwise(img, filt), rtol=1e-5, atol=1e-5)
    acc = parse_spec(f"DepthwiseConvAccum({shape}, f32)")
    np.testing.assert_allclose(reference(acc, img, filt, out + 1), out + 1 + depthwise(img, filt), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", ["1x2x3x2x2x3x3x3", "2x3x1x2x1x2x2x1"])
def test_grouped_semantics_match_a_sliding_window(shape):
    spec = parse_spec(f"GroupConv({shape}, f32)")
    b, g, f, c, h, w, fh, fw = spec.shape
    assert spec.operand_shapes == ((b, g, c, h + fh - 1, w + fw - 1), (g, f, c, fh, fw), (b, g, f, h, w))
    img, filt, out = random_operands(spec, seed=2)
    np.testing.assert_allclose(reference(spec, img, filt, out), grouped(img, filt), rtol=1e-5, atol=1e-5)
    acc = parse_spec(f"GroupConvAccum({shape}, f32)")
    np.testing.assert_allclose(reference(acc, img, filt, out), out + grouped(img, filt), rtol=1e-5, atol=1e-5)


def test_grouped_semantics_are_torchs_groups():
    """torch's conv2d(groups=g) on NCHW is GroupConv on the same memory: channels (g c)
    split group first."""
    torch = torch_or_skip()
    b, g, f, c, h, w = 1, 3, 2, 4, 5, 6
    x = torch.randn(b, g * c, h + 2, w + 2)
    wt = torch.randn(g * f, c, 3, 3)
    want = torch.nn.functional.conv2d(x, wt, groups=g).numpy()
    spec = parse_spec(f"GroupConv({b}x{g}x{f}x{c}x{h}x{w}x3x3, f32)")
    img = x.numpy().reshape(b, g, c, h + 2, w + 2)
    got = reference(spec, img, wt.numpy().reshape(g, f, c, 3, 3), np.zeros((b, g, f, h, w), np.float32))
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-4)


def dw_spec(c, h, w, fh=3, fw=3):
    return f"DepthwiseConv(1x{c}x{h}x{w}x{fh}x{fw}, {DW_LAST})"


@pytest.mark.slow  # the search: ~20 s on idle cores
def test_depthwise_channels_last_uses_the_vector_kernel_and_matches_torch_padded():
    """A channels-last depthwise 3x3 with padding 1 (MobileNet's): synthesized, its C the
    vector kernel's FMAs, called on torch's channels-last tensor through fn.padded(1)
    (which writes it into a zero-bordered buffer), against conv2d(padding=1, groups=c)."""
    c, h, w = 32, 4, 8
    imp = synthesize(dw_spec(c, h, w))
    assert "DepthwiseVecMultAdd" in str(imp) and "_fmadd_ps" in imp.to_c()
    fn = imp.compile()
    err, tol = fn.check(seed=3)
    assert err <= tol
    padded = fn.padded(1)
    err, tol = padded.check(seed=4)
    assert err <= tol
    rng = np.random.default_rng(5)
    x = rng.random((1, h, w, c), dtype=np.float32) - 0.5  # NHWC memory
    filt = rng.random((c, 3, 3), dtype=np.float32) - 0.5  # torch's weight [c, 1, 3, 3]
    got = padded(x.transpose(0, 3, 1, 2), filt)
    try:
        import torch
    except ImportError:
        want = depthwise(np.pad(x.transpose(0, 3, 1, 2), [(0, 0), (0, 0), (1, 1), (1, 1)]), filt)
    else:
        tx = torch.from_numpy(x).permute(0, 3, 1, 2)  # channels-last NCHW view of the same memory
        want = torch.nn.functional.conv2d(tx, torch.from_numpy(filt)[:, None], padding=1, groups=c).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow  # the search: ~20 s on idle cores
def test_conv_padded_matches_torch_and_a_producer_writes_the_interior():
    """Conv with padding 1 through fn.padded: torch's channels-last tensors in (no copy
    of the output: it is returned in the spec's layout), and a call handed the buffer's
    interior (where a producer wrote) leaves the border zero and copies nothing."""
    spec = "Conv(1x8x4x6x5x3x3, (f32, GL, [0, 2, 3, 1]), (f32, GL, [2, 3, 1, 0]), (f32, GL, [0, 2, 3, 1]))"
    fn = synthesize(spec).compile()
    padded = fn.padded(1)
    rng = np.random.default_rng(6)
    x = rng.random((1, 4, 6, 5), dtype=np.float32) - 0.5
    wt = rng.random((8, 4, 3, 3), dtype=np.float32) - 0.5
    want = sliding = np.einsum(
        "bchwij,fcij->bfhw", windows(np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)]), 3, 3), wt.astype(np.float64)
    )
    try:
        import torch
    except ImportError:
        pass
    else:
        tx = torch.from_numpy(x).contiguous(memory_format=torch.channels_last)
        want = torch.nn.functional.conv2d(tx, torch.from_numpy(wt), padding=1).numpy()
        np.testing.assert_allclose(want, sliding, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(padded(tx, wt), want, rtol=1e-4, atol=1e-4)
    # each call's kept buffer starts on a cache line, as the program's own buffers do
    assert all(b.ctypes.data % 64 == 0 for _ in range(8) for b in fn.padded(1).buffers())
    inner = padded.interior(0)
    assert inner.shape == (1, 4, 6, 5)
    inner[...] = x  # as a producer would
    (buf,) = padded.buffers()
    before = buf.copy()
    got = padded(inner, wt)
    assert np.array_equal(buf, before)  # nothing copied over it, border still zero
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_padding_refusals_name_the_input():
    fn = synthesize("Matmul(2x2x2, f32)").compile()
    with pytest.raises(CodegenError, match="no operand has a windowed dimension"):
        fn.padded(1)


@pytest.mark.slow  # the search: ~15 s on idle cores
def test_padded_call_refuses_a_wrong_shape_and_too_much_padding():
    fn = synthesize("Conv(1x2x2x3x3x2x2, f32)").compile()
    with pytest.raises(CodegenError, match=r"leaves no value inside"):
        fn.padded(2)
    with pytest.raises(CodegenError, match=r"2 windowed dimension\(s\) to pad, got 3"):
        fn.padded((1, 1, 1))
    p = fn.padded([(0, 1), 1])
    assert p.shape(0) == (1, 2, 3, 2)
    with pytest.raises(CodegenError, match=r"argument 1 has shape \(1, 2, 4, 4\); .* needs \(1, 2, 3, 2\)"):
        p(np.zeros((1, 2, 4, 4), np.float32), np.zeros((2, 2, 2, 2), np.float32))
    err, tol = p.check(seed=1)
    assert err <= tol


def test_run_pads_a_saved_or_synthesized_convolution_on_the_command_line():
    r = subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", "run", "Conv(1x2x2x2x2x2x2, f32)", "--pad", "1,0"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "(inputs padded by 1, 0 with zeros)" in r.stdout and "OK" in r.stdout, r.stderr


@pytest.mark.parametrize(
    "pad, why",
    [("1", "no operand has a windowed dimension"), ("-1", "--pad"), ("1,x", "expected a number of zeros")],
)
def test_pad_on_the_command_line_is_one_line_with_exit_status_2(pad, why):
    r = subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", "synth", "Matmul(2x2x2, f32)", "-q", "--run", f"--pad={pad}"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and why in r.stderr, r.stderr


def bias_relu_case(f: int, img_shape: tuple[int, ...], seed: int, pad: int = 0):
    """Random bias, image and 3x3 filters for f output channels, and relu(conv2d(img, filters,
    padding=pad) + bias) in float64."""
    rng = np.random.default_rng(seed)
    bias = rng.random(f, dtype=np.float32) - 0.5
    img = rng.random(img_shape, dtype=np.float32) - 0.5
    filt = rng.random((f, img_shape[1], 3, 3), dtype=np.float32) - 0.5
    bordered = np.pad(img, [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    conv = np.einsum("bchwij,fcij->bfhw", windows(bordered, 3, 3), filt.astype(np.float64))
    return (bias, img, filt), np.maximum(conv + bias[None, :, None, None], 0)


@pytest.mark.slow  # the search: ~60 s on idle cores
def test_bias_relu_epilogue_after_a_conv_is_synthesized_and_matches():
    """Compose((Relu, BiasAdd, Conv)): relu(conv(img, filters) + bias) as one spec, run
    against numpy (and torch)."""
    text = "Compose((Relu, BiasAdd, Conv), [4, 1x3x5x5, 4x3x3x3, out=1x4x3x3], f32)"
    imp = synthesize(text)
    fn = imp.compile()
    err, tol = fn.check(seed=2)
    assert err <= tol
    (bias, img, filt), want = bias_relu_case(4, (1, 3, 5, 5), seed=7)
    got = fn(bias, img, filt)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert (got == 0).any() and (got > 0).any()  # the relu did something either way


@pytest.mark.slow  # ~1 min on idle cores: three small layers searched, checked, timed once
def test_network_suite_rows_are_checked_and_timed(benchmark_script, tmp_path, capsys, monkeypatch):
    """benchmarks/conv.py's network suites on three small layers of their kinds (a padded
    stride-2 stem, a depthwise 3x3 with padding, a pointwise layer): each row checked
    against torch (or numpy's reference without torch) before it is timed; the table
    names the target and ends with the geometric means."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "benchmarks"))  # its host.py
    monkeypatch.setattr(sys, "argv", ["conv.py", "--hold-back"])  # leave the ISA variables as they are
    conv = benchmark_script("conv")
    layers = [
        conv.Layer("1x8x3x4x4x3x3", kind="ConvS2", pad=1),
        conv.Layer("1x16x4x4x3x3", kind="DepthwiseConv", pad=1),
        conv.Layer("1x8x16x4x4x1x1"),
    ]
    assert [x.torch_input for x in layers] == [8, 4, 4] and [x.image for x in layers] == [9, 6, 4]
    rows = conv.run_network(layers, str(tmp_path / "t.db"), 1, log=lambda m: None)
    conv.print_network_table(rows, "tiny")
    out = capsys.readouterr().out
    assert "DepthwiseConv 1x16x4x4x3x3 p1" in out and "cold synthesis" in out
    assert all(r.gflops > 0 for r in rows)
    try:
        import torch  # noqa: F401
    except ImportError:
        assert "torch is not installed" in out
    else:
        assert all(r.vs_torch and r.vs_torch_call for r in rows) and "geometric mean of call / torch" in out


@pytest.mark.slow  # the search: ~1-4 min (a fused pipeline over a channels-last conv)
def test_padded_channels_last_conv_with_bias_and_relu():
    """The layer issue 60 imports: Compose((Relu, BiasAdd, Conv)) over channels-last
    tensors, called through fn.padded(1) on an unpadded image (the Compose's image is its
    windowed operand), against relu(conv2d(x, w, padding=1) + bias)."""
    text = (
        "Compose((Relu, BiasAdd, Conv), [(8, f32, GL, row_major), (1x4x6x6, f32, GL, [0, 2, 3, 1]), "
        "(8x4x3x3, f32, GL, [2, 3, 1, 0]), out=(1x8x4x4, f32, GL, [0, 2, 3, 1])], serial)"
    )
    fn = synthesize(text).compile()
    padded = fn.padded(1)
    assert padded.borders == {1: {2: (1, 1), 3: (1, 1)}}
    err, tol = padded.check(seed=3)
    assert err <= tol
    (bias, x, filt), want = bias_relu_case(8, (1, 4, 4, 4), seed=8, pad=1)
    np.testing.assert_allclose(padded(bias, x, filt), want, rtol=1e-4, atol=1e-4)


def test_network_suites_describe_the_networks_layers(benchmark_script, monkeypatch):
    """Every layer of benchmarks/conv.py's resnet50 and mobilenetv2 suites is a spec whose
    image is what torch reads of its padded input: torch's output size
    (H + 2p - fh) / S + 1 is the spec's, and the zeros after the input (the image less
    the input and the zeros before it) are at most p (at -1, the last row is read by no
    output and is cropped)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "benchmarks"))
    monkeypatch.setattr(sys, "argv", ["conv.py", "--hold-back"])
    conv = benchmark_script("conv")
    assert (len(conv.RESNET50), len(conv.MOBILENETV2)) == (23, 30)
    assert sum(x.depthwise for x in conv.MOBILENETV2) == 10
    for layer in conv.RESNET50 + conv.MOBILENETV2:
        spec = parse_spec(layer.spec_text)
        _, f, c, h, w, fh, fw = layer.channels
        img = spec.operand_shapes[0]
        assert img[-2:] == (layer.image, layer.image) and h == w and fh == fw, layer.name
        n, p, s = layer.torch_input, layer.pad, layer.stride
        assert (n + 2 * p - fh) // s + 1 == h, layer.name
        assert -1 <= layer.image - n - p <= p, layer.name
        assert spec.operand_shapes[-1] == ((1, c, h, w) if layer.depthwise else (1, f, h, w))
