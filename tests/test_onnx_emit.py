"""A compiled model as one C file (morello_asp/onnx/emit_c.py, `morello-asp onnx --emit c
--standalone`): built by the target's gcc, run on input files, its outputs the session's
(and so onnxruntime's); what the CLI refuses is one line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed (make setup-onnx)")
pytest.importorskip("onnxruntime", reason="the onnx extra is not installed (make setup-onnx)")

from model_executable import run_executable  # noqa: E402

from morello_asp.codegen.views import copy_loops  # noqa: E402
from morello_asp.onnx import InferenceSession  # noqa: E402
from morello_asp.onnx.blocks import attention, bottleneck  # noqa: E402
from morello_asp.onnx.compare import RTOL, onnxruntime_session, random_feed  # noqa: E402
from morello_asp.onnx.emit_c import model_c  # noqa: E402


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return str(tmp_path_factory.mktemp("emit") / "model.db")


@pytest.mark.parametrize(
    "build",
    # ~20 s each, with the slow tests (the default suite keeps to 5 minutes on a Zen 4)
    [pytest.param(attention, marks=pytest.mark.slow), pytest.param(bottleneck, marks=pytest.mark.slow)],
    ids=["attention", "bottleneck"],
)
def test_the_model_as_one_c_program_computes_what_the_session_does(build, db, tmp_path):
    """Attention: a transpose as a view, a folded scale, a fresh output. The bottleneck:
    padded and strided convolutions (the zero border in the arena), channels-last
    tensors, a strided view staged through a copy, a residual add."""
    model = build()
    sess = InferenceSession(model, db=db)
    mc = model_c(sess, standalone=True)
    assert "void model_run(" in mc.text and "int main(" in mc.text
    assert len(mc.weights) >= 4 * sum(np.asarray(c).size for c in sess.plan.consts_out.values())
    feed = random_feed(sess, seed=1)
    got = run_executable(mc, tmp_path, feed)
    want = sess.run(None, feed)
    ref = onnxruntime_session(model).run(None, feed)
    for g, w, r in zip(got, want, ref):
        np.testing.assert_array_equal(g, w)  # the same programs on the same values
        np.testing.assert_allclose(g, r, rtol=0, atol=RTOL * max(1.0, float(np.abs(r).max())))
    assert "main(" not in model_c(sess).text  # without standalone: model_run alone, to link into a program


def test_cli_emits_the_model_and_refuses_what_it_cannot_do_in_one_line(tmp_path, db):
    path = tmp_path / "b.onnx"
    onnx.save(bottleneck(), str(path))
    base = [sys.executable, "-m", "morello_asp.cli", "onnx", str(path), "--db", db, "-q"]
    out = tmp_path / "b.c"
    r = subprocess.run([*base, "--emit", "c", "--standalone", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.exists() and out.with_suffix(".weights.bin").exists()
    assert f"wrote {out}" in r.stdout and "build: " in r.stdout and "run:   " in r.stdout
    for extra, says in [
        (["--emit", "c"], "give --out FILE.c"),
        (["--standalone"], "--standalone needs --emit c"),
        (["--emit", "c", "--out", str(tmp_path / "no" / "such" / "b.c")], "cannot write"),
    ]:
        r = subprocess.run([*base, *extra], capture_output=True, text=True)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_copy_walks_the_destinations_memory_order_in_merged_runs():
    """A channels-last interior (n, c, h, w logical; c innermost in memory) copies rows of
    w x c adjacent values, not one value per innermost loop; dims of one value drop out."""
    # dst: the interior of a 1 x 64 x 10 x 10 channels-last buffer (rows of 10 pixels x 64
    # channels, 12 pixels apart: a border of one); src: a dense 1 x 64 x 8 x 8 channels-last array
    shape = [1, 64, 8, 8]
    dst = [64 * 10 * 10, 1, 64 * 10, 64]
    src = [64 * 8 * 8, 1, 64 * 8, 64]
    assert copy_loops(shape, dst, src) == ([8, 512], [640, 1], [512, 1])
    # both dense in the same order: one run
    assert copy_loops(shape, src, src) == ([4096], [1], [1])
