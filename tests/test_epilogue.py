"""Layer epilogues and scales in vector registers (encodings/targets/avx2/epilogue_kernels.lp) and a
Compose's intermediate in its output's layout (rules/bufferize.lp): each searched
program compiled, run and compared with numpy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from morello_asp import parse_spec, synthesize
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.errors import ScheduleError
from morello_asp.solver.proofs.verify import verify


def _runs_here(target: str) -> None:
    missing = get_ctarget(target).missing_cpu_flags()
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}, which {target} programs need")


@pytest.mark.parametrize(
    "text, kernel, target",
    [
        ("BiasAddRelu(6x32x1x1, f32)", "VectorBiasAddRelu(", "avx2"),
        ("BiasAddRelu(2x48x1x1, f32)", "VectorBiasAddRelu(", "avx512"),
        ("BiasAdd(3x48x1x1, f32)", "VectorBiasAdd(", "avx2"),
        ("Relu(4x32, f32)", "VectorRelu(", "avx2"),
        ("ElementwiseAdd(4x32, f32)", "VectorAdd(", "avx2"),
        ("ElementwiseAddRelu(2x64, f32)", "VectorAddRelu(", "avx512"),
        ("MulScalar(4x32, f32)", "VectorMulScalar(", "avx2"),
        ("DivScalar(2x48, f32)", "VectorDivScalar(", "avx512"),
        ("BatchMulScalar(2x3x32, f32)", "VectorMulScalar(", "avx2"),
    ],
)
def test_epilogue_passes_run_in_vector_registers(text, kernel, target):
    """A separate bias, Relu or residual pass loads a vector, adds and takes the maximum
    in registers and stores it: the vector kernels, not the point kernel on each value."""
    imp = synthesize(parse_spec(text, target))
    listing = str(imp)
    assert kernel in listing and "Point(" not in listing, listing
    _runs_here(target)
    err, tol = imp.compile().check(seed=5)
    assert err <= tol


def test_relu_kernel_agrees_with_the_point_kernel_on_nan_and_signed_zero():
    """maxps returns its second operand (zero) for a NaN, as the point kernel's
    `x > 0 ? x : 0` does; -0.0 becomes +0.0 both ways."""
    _runs_here("avx2")
    fn = synthesize(parse_spec("BiasAddRelu(1x16x1x1, f32)", "avx2")).compile()
    x = np.array([np.nan, -0.0, -1.0, 2.0] * 4, np.float32).reshape(1, 16, 1, 1)
    out = fn(x, np.zeros(16, np.float32))
    np.testing.assert_array_equal(out.reshape(-1), np.array([0.0, 0.0, 0.0, 2.0] * 4, np.float32))
    assert not np.signbit(out).any()


CHANNELS_LAST_COMPOSE = (
    "Compose((BiasAddRelu, Conv), [(32, f32, GL, row_major), (1x32x3x10, f32, GL, [0, 2, 3, 1]), "
    "(32x32x3x3, f32, GL, [2, 3, 1, 0]), out=(1x32x1x8, f32, GL, [0, 2, 3, 1])], serial)"
)


def test_compose_intermediate_may_take_the_outputs_layout():
    """bufferize offers the intermediate row-major and in the Compose's output layout
    (channels-last here), at a cache level and in vector registers along the channels;
    a layout that is neither is refused with the rule's reason."""
    s = parse_spec(CHANNELS_LAST_COMPOSE, "avx512")
    for args in [(0, "L1"), (0, "L1", "[0, 2, 3, 1]"), (0, "VRF", "[0, 2, 3, 1]", 16)]:
        impl = s.bufferize(*args)
        assert "bufferize" in str(impl)
    conv = str(s.bufferize(0, "L1", "[0, 2, 3, 1]")).splitlines()[1]
    assert "(f32, L1, [0, 2, 3, 1])" in conv, conv
    with pytest.raises(ScheduleError, match="laid out row-major or in a layout the rewrite offers"):
        s.bufferize(0, "L1", "[0, 3, 2, 1]")


@pytest.mark.slow  # the search: ~1 min
def test_fused_bias_and_relu_read_the_conv_tile_channels_last():
    """relu(conv + bias) from the Compose spec alone: the conv's tile goes to an L1
    intermediate in channels-last order and the bias and Relu run on it in vectors,
    where a row-major intermediate left them a scalar pass through a transposing copy."""
    imp = synthesize(parse_spec(CHANNELS_LAST_COMPOSE, "avx2"))
    listing = str(imp)
    assert "bufferize(0, L1, [0, 2, 3, 1])" in listing and "VectorBiasAddRelu(" in listing, listing
    assert "Point(" not in listing and "ValueAssign(" not in listing, listing
    rep = verify(imp)
    assert rep.ok, str(rep)
    _runs_here("avx2")
    err, tol = imp.compile().check(seed=2)
    assert err <= tol


def test_conv_register_tile_splits_into_matmuls_on_its_registers():
    """spatial_split takes a ConvAccum whose output is a whole register tile: the matmul
    child keeps the vectors (the accumulators of a fused epilogue)."""
    spec = parse_spec(
        "ConvAccum(1x16x32x1x2x3x3, (f32, L1, [0, 2, 3, 1]), (f32, L1, [2, 3, 1, 0]), "
        "(f32, VRF, [0, 2, 3, 1], v8), serial)",
        "avx2",
    )
    split = str(spec.spatial_split())
    assert "(f32, VRF, row_major, v8)" in split, split
    imp = synthesize(spec)
    assert "BroadcastVecMultAdd(" in str(imp)
    _runs_here("avx2")
    err, tol = imp.compile().check(seed=1)
    assert err <= tol


@pytest.mark.slow  # the search: ~10-20 s
def test_bias_and_relu_fuse_into_the_conv_register_tile():
    """At a register tile's size the search keeps the intermediate in vector registers:
    the conv accumulates into them and the bias and Relu run on them before the one
    store, no intermediate in memory."""
    text = (
        "Compose((BiasAddRelu, Conv), [(16, f32, L1, row_major), (1x32x3x6, f32, L1, [0, 2, 3, 1]), "
        "(16x32x3x3, f32, L1, [2, 3, 1, 0]), out=(1x16x1x4, f32, L1, [0, 2, 3, 1])], serial)"
    )
    imp = synthesize(parse_spec(text, "avx2"))
    listing = str(imp)
    assert "bufferize(0, VRF, [0, 2, 3, 1], v8)" in listing and "VectorBiasAddRelu(" in listing, listing
    assert "MemsetZero" not in listing and "VectorZero(" in listing, listing
    rep = verify(imp)
    assert rep.ok, str(rep)
    _runs_here("avx2")
    err, tol = imp.compile().check(seed=4)
    assert err <= tol


@pytest.mark.slow  # three searches, the Compose's ~1 min
def test_epilogue_benchmark_prints_its_table():
    """benchmarks/epilogue.py checks both programs against numpy, then prints the table."""
    _runs_here("avx2")
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "epilogue.py"
    r = subprocess.run(
        [sys.executable, str(script), "--layer", "16", "16", "2", "2", "--rounds", "1", "--target", "avx2"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr
    assert "| fused |" in r.stdout and "| separate (conv, then bias) |" in r.stdout and "target avx2" in r.stdout
