"""Chains one Compose spec expresses, fused where the search prices the fused program
lower (morello_asp/onnx/fusion.py, `InferenceSession(fuse=True)`, `morello-asp onnx
--fuse`): which chains are found, what the session decides and why, and that the fused
model still computes what onnxruntime does, through the session and as one C program."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed (make setup-onnx)")
pytest.importorskip("onnxruntime", reason="the onnx extra is not installed (make setup-onnx)")

from model_executable import run_executable  # noqa: E402
from onnx import helper as h  # noqa: E402

from morello_asp.onnx import InferenceSession  # noqa: E402
from morello_asp.onnx.blocks import attention  # noqa: E402
from morello_asp.onnx.blocks import const as _const  # noqa: E402
from morello_asp.onnx.blocks import model as _model  # noqa: E402
from morello_asp.onnx.compare import RTOL, onnxruntime_session, random_feed  # noqa: E402
from morello_asp.onnx.emit_c import model_c  # noqa: E402
from morello_asp.onnx.fusion import FUSE_RULES, chains, fused_table  # noqa: E402
from morello_asp.onnx.importer import import_model  # noqa: E402
from morello_asp.synthesis import synthesize  # noqa: E402
from morello_asp.target import as_target  # noqa: E402


def _scores_softmax(axis=-1, scores_out=False):
    """x @ W, then Softmax along `axis`; with scores_out the scores are an output too."""
    w = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    outs = [("p", [4, 16])] + ([("s", [4, 16])] if scores_out else [])
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["s"], name="mm"),
        h.make_node("Softmax", ["s"], ["p"], name="sm", axis=axis),
    ]
    return _model(nodes, [("x", [4, 8])], outs, [_const("w", w)])


def test_the_scores_and_their_softmax_are_one_chain_through_the_folded_scale():
    plan = import_model(attention(8, 16))
    (ch,) = chains(plan, as_target(None))
    assert plan.steps[ch.producer].nodes == ["scores"] and plan.steps[ch.consumer].nodes == ["softmax"]
    assert [plan.steps[k].nodes for k in ch.views] == [["scale"]]  # the scale folded into q_proj: a view
    assert ch.fused.spec == "Compose((Softmax2, Matmul), [1x8x16, 1x16x8], f32)"
    assert ch.fused.layouts == {1: "col_major"}  # K^T read in place, as the scores' Matmul read it
    assert ch.fused.out == "p" and ch.fused.nodes == ["scores", "scale", "softmax"]


def test_no_chain_where_the_intermediate_is_needed_or_the_softmax_runs_across():
    tgt = as_target(None)
    assert len(chains(import_model(_scores_softmax()), tgt)) == 1
    assert chains(import_model(_scores_softmax(scores_out=True)), tgt) == []  # the scores are an output
    assert chains(import_model(_scores_softmax(axis=0)), tgt) == []  # along the rows, not each row


def test_the_fused_table_is_another_file_beside_a_named_one(tmp_path):
    assert fused_table(str(tmp_path / "m.db")) == f"{tmp_path / 'm.db'}.{FUSE_RULES}"
    assert fused_table(None) is None


@pytest.mark.slow  # ~25 s: the fused spec's own search, and a gcc build of the model
def test_a_fused_session_matches_onnxruntime_and_says_why(tmp_path):
    db = str(tmp_path / "m.db")
    model = attention(8, 16)
    sess = InferenceSession(model, db=db, fuse=True)
    (f,) = sess.fusions
    # the costs it compared are the two specs' and the Compose's, each as searched alone
    scores = "Matmul(1x8x16x8, (f32, GL, row_major), (f32, GL, col_major), (f32, GL, row_major), serial)"
    parts = [synthesize(s, db=db).cost.main for s in (scores, "Softmax1(8x8, f32)")]
    assert f.separate_cost == sum(parts)
    compose = (
        "Compose((Softmax2, Matmul), [(1x8x16, f32, GL, row_major), (1x16x8, f32, GL, col_major), "
        "out=(1x8x8, f32, GL, row_major)], serial)"
    )
    assert f.fused_cost == synthesize(compose, db=fused_table(db), rules=(FUSE_RULES,)).cost.main
    assert f.taken == (f.fused_cost < f.separate_cost)
    kinds = [st.kind for st in sess.plan.steps if st.spec is not None]
    assert ("softmax_matmul" in kinds) == f.taken and ("softmax" in kinds) != f.taken
    assert len(sess.programs) == len({p.spec.text() for p in sess.step_program if p is not None})
    feed = random_feed(sess, seed=2)
    got = sess.run(None, feed)
    want = onnxruntime_session(model).run(None, feed)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=RTOL * max(1.0, float(np.abs(w).max())))
    # the model as one C program runs the fused program too
    mc = model_c(sess, standalone=True)
    for e, g in zip(run_executable(mc, tmp_path, feed), got):
        np.testing.assert_array_equal(e, g)
    # the CLI says what it found, on the same tables (nothing searched again)
    path = tmp_path / "a.onnx"
    onnx.save(model, str(path))
    r = subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", "onnx", str(path), "--db", db, "--fuse", "--run", "-q"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    verdict = "fused" if f.taken else "kept separate"
    line = (
        "fusion: scores (MatMul), scale (Mul), softmax (Softmax): "
        f"fused cost {f.fused_cost} against {f.separate_cost} separate"
    )
    assert line in r.stdout and r.stdout.rstrip().endswith("OK") and f"): {verdict}\n" in r.stdout
