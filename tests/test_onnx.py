"""ONNX models in (morello_asp.onnx, `morello-asp onnx`): models built with onnx.helper,
run through InferenceSession.run and compared with onnxruntime; what the importer cannot
take is refused in one line naming the node, its op and why. Shapes are tiny: the
search is the slow part (one memo table for the file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed (make setup-onnx)")
ort = pytest.importorskip("onnxruntime", reason="the onnx extra is not installed (make setup-onnx)")

from onnx import helper as h  # noqa: E402

from morello_asp.codegen.padding import Padded  # noqa: E402
from morello_asp.onnx import InferenceSession, ModelError  # noqa: E402
from morello_asp.onnx.blocks import attention, bottleneck, mlp  # noqa: E402
from morello_asp.onnx.blocks import const as _const  # noqa: E402
from morello_asp.onnx.blocks import model as _model  # noqa: E402
from morello_asp.onnx.compare import RTOL, check, onnxruntime_session, random_feed  # noqa: E402


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return str(tmp_path_factory.mktemp("onnx") / "model.db")


def _plan_of_matching(model, db) -> dict:
    """A session of the model that matches onnxruntime; its steps by first node (a node
    lowered to several steps, GlobalAveragePool's SpatialSum then MulScalar: the first;
    every step under None)."""
    sess = InferenceSession(model, db=db)
    _matches(sess, model)
    assert sess.intermediate_bytes <= sess.unplanned_bytes
    # every array a program reads whole starts on a cache line (numpy's allocator would put
    # a large one 16 bytes past it, and each vector load would then split two lines):
    # the constants as laid out, a padded call's bordered buffers
    consts = [a.const for st in sess.plan.steps for a in st.args if a.const is not None]
    bordered = [b for f in sess.step_fn if isinstance(f, Padded) for b in f.buffers()]
    assert all(a.ctypes.data % 64 == 0 for a in consts + bordered)
    steps: dict = {None: sess.plan.steps}
    for st in sess.plan.steps:
        steps.setdefault(st.nodes[0], st)
    return steps


def _matches(sess, model, seed=0):
    feed = random_feed(sess, seed)
    got = sess.run(None, feed)
    want = onnxruntime_session(model).run(None, feed)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.float32 and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=0, atol=RTOL * max(1.0, float(np.abs(w).max())))
    return got


def test_mlp_matches_onnxruntime(db):
    model = mlp()
    sess = InferenceSession(model, db=db)
    assert [(i.name, i.shape, i.type) for i in sess.get_inputs()] == [("x", [4, 8], "tensor(float)")]
    assert [(o.name, o.shape) for o in sess.get_outputs()] == [("y", [4, 8])]
    _matches(sess, model)
    kinds = [p.spec.k.name for p in sess.programs.values()]
    # the bias and the Relu after it are one program; the Relu's tensor is a view of it
    assert sorted(kinds) == ["BiasAddRelu", "Matmul", "Matmul"]
    assert sess.intermediate_bytes <= sess.unplanned_bytes
    # a second run on other inputs, and outputs by name
    feed = random_feed(sess, 1)
    (y,) = sess.run(["y"], feed)
    np.testing.assert_allclose(y, onnxruntime_session(model).run(["y"], feed)[0], atol=1e-4 * max(1, np.abs(y).max()))


def test_runs_are_independent_and_threads_may_share_a_session(db):
    """Each run copies its inputs into the session's kept buffers and returns copies of
    its outputs: an output kept from one run is not changed by the next, an input changed
    after a run changes nothing, and runs from several threads at once each get their
    own inputs' result (they take turns)."""
    import threading

    model = mlp()
    sess = InferenceSession(model, db=db)
    ref = onnxruntime_session(model)
    feeds = [random_feed(sess, s) for s in range(6)]
    want = [ref.run(None, f)[0] for f in feeds]
    first = sess.run(None, feeds[0])[0]
    feeds[0]["x"][...] = 0  # the caller's array, after the run
    second = sess.run(None, feeds[1])[0]
    np.testing.assert_allclose(first, want[0], atol=1e-4 * max(1, np.abs(want[0]).max()))
    np.testing.assert_allclose(second, want[1], atol=1e-4 * max(1, np.abs(want[1]).max()))
    got: dict = {}
    wrong: list = []

    def worker(k):
        for _ in range(200):
            got[k] = sess.run(None, feeds[k])[0]
            if np.abs(got[k] - want[k]).max() > 1e-4 * max(1, np.abs(want[k]).max()):
                wrong.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == [1, 2, 3, 4, 5] and not wrong, f"runs of threads {sorted(set(wrong))} got another's result"


@pytest.mark.slow  # ~18 s; the MLP test keeps the default suite's MatMul path
def test_attention_block_matches_onnxruntime(db):
    model = attention()
    sess = InferenceSession(model, db=db)
    _matches(sess, model)
    plan = {st.nodes[0]: st for st in sess.plan.steps}
    assert plan["k_t"].spec is None  # the transpose copies nothing: scores' rhs is col_major
    assert plan["scores"].layouts == {1: "col_major"}
    assert plan["scale"].spec is None and "folded" in plan["scale"].note  # 1/4: exact in f32
    # three projections of one shape: one program
    assert len({p.spec.text() for p in sess.programs.values()}) == len(sess.programs) == 4
    # dead intermediates share buffers: q and k are dead once the scores are made, and the
    # softmax's probabilities (8 x 8) take q's slot (8 x 16)
    assert sess.intermediate_bytes < sess.unplanned_bytes
    # the five steps before the last (a fresh output each run) are one chain, called from C
    # (what _matches ran above)
    assert [type(c).__name__ for c in sess._calls] == ["_Chain", "partial"]


def test_a_scale_that_is_no_power_of_two_is_a_program(db):
    model = attention(scale_op="Div", scale=3.0)
    sess = InferenceSession(model, db=db)
    _matches(sess, model)
    assert "DivScalar" in {p.spec.k.name for p in sess.programs.values()}


def test_residual_gemm_block(db):
    """Gemm with transB and bias, Relu, Gemm, and a residual Add reading the input."""
    r = np.random.default_rng(3)
    nodes = [
        h.make_node("Gemm", ["x", "W1", "b1"], ["h1"], name="fc1", transB=1),
        h.make_node("Relu", ["h1"], ["h2"], name="relu"),
        h.make_node("Gemm", ["h2", "W2", "b2"], ["h3"], name="fc2", alpha=0.5, beta=2.0),
        h.make_node("Add", ["h3", "x"], ["y"], name="residual"),
    ]
    inits = [
        _const("W1", r.standard_normal((16, 8))),  # transB: [N, K]
        _const("b1", r.standard_normal(16)),
        _const("W2", r.standard_normal((16, 8))),
        _const("b2", r.standard_normal((1, 8))),
    ]
    model = _model(nodes, [("x", [4, 8])], [("y", [4, 8])], inits)
    sess = InferenceSession(model, db=db)
    _matches(sess, model)
    assert "ElementwiseAdd" in {p.spec.k.name for p in sess.programs.values()}


def _lstm_model():
    r = np.random.default_rng(0)
    nodes = [h.make_node("LSTM", ["x", "W", "R"], ["y"], name="rnn", hidden_size=4)]
    inits = [_const("W", r.standard_normal((1, 16, 3))), _const("R", r.standard_normal((1, 16, 4)))]
    return _model(nodes, [("x", [2, 1, 3])], [("y", [2, 1, 1, 4])], inits)


def test_an_unsupported_op_is_refused_naming_the_node(tmp_path):
    with pytest.raises(ModelError, match=r"^node rnn \(LSTM\): op LSTM is not supported \(supported: Add, "):
        InferenceSession(_lstm_model(), db=None)
    path = tmp_path / "lstm.onnx"
    onnx.save(_lstm_model(), str(path))
    r = subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", "onnx", str(path), "--no-db"], capture_output=True, text=True
    )
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("morello-asp: error: node rnn (LSTM): op LSTM is not supported")


def test_a_dynamic_shape_is_refused():
    nodes = [h.make_node("Relu", ["x"], ["y"], name="r")]
    model = _model(nodes, [("x", ["n", 4])], [("y", ["n", 4])])
    with pytest.raises(ModelError, match=r"^node x \(graph input\): its shape is not static"):
        InferenceSession(model, db=None)


def test_what_the_importer_cannot_take_is_one_line(tmp_path):
    nodes = [h.make_node("Mul", ["x", "x"], ["y"], name="square")]
    with pytest.raises(ModelError, match=r"^node square \(Mul\): only multiplication by a scalar constant"):
        InferenceSession(_model(nodes, [("x", [2, 4])], [("y", [2, 4])]), db=None)
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a model")
    with pytest.raises(ModelError, match="bad.onnx: not an ONNX model"):
        InferenceSession(str(bad), db=None)
    with pytest.raises(ModelError, match="no ONNX model file"):
        InferenceSession(str(tmp_path / "missing.onnx"), db=None)


def test_run_refuses_bad_feeds(db):
    sess = InferenceSession(mlp(), db=db)
    with pytest.raises(Exception, match=r"input 'x' has shape \(4, 9\); the model takes \(4, 8\)"):
        sess.run(None, {"x": np.zeros((4, 9), np.float32)})
    with pytest.raises(Exception, match="input 'x' is missing"):
        sess.run(None, {})
    with pytest.raises(Exception, match="no output 'z'"):
        sess.run(["z"], {"x": np.zeros((4, 8), np.float32)})


def test_cli_prints_the_plan_and_checks(tmp_path, db):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), str(path))
    r = subprocess.run(
        [sys.executable, "-m", "morello_asp.cli", "onnx", str(path), "--db", db, "--run", "-q"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "mm1 (MatMul) -> h0: (Matmul(1x4x8x16," in r.stdout
    assert "add1 (Add), relu1 (Relu) -> h1: (BiasAddRelu(4x16x1x1," in r.stdout
    assert "checked against onnxruntime: max |error|" in r.stdout and r.stdout.rstrip().endswith("OK")
    assert check(InferenceSession(str(path), db=db)).ok
    assert Path(db).exists()


@pytest.mark.slow
def test_resnet_bottleneck_block_matches_onnxruntime(db):
    plan = _plan_of_matching(bottleneck(), db)
    # padding 1 on a 6x6 image: the 3x3 output reads a 7x7 one, so the bottom and right
    # zeros ONNX names are never read: (top, bottom, left, right) = (1, 0, 1, 0)
    assert plan["c2"].spec == "ConvS2(1x4x4x3x3x3x3, f32)" and plan["c2"].pad == (1, 0, 1, 0)
    # ... reading c1's channels-last output, writing channels-last
    assert plan["c2"].layouts == {0: "[0, 2, 3, 1]", 1: "[2, 3, 1, 0]", 2: "[0, 2, 3, 1]"}
    assert plan["c2"].out_order == (0, 2, 3, 1)
    # the strided 1x1 downsample: a matmul on every other pixel (a 6x6 image: 3x3 picked) of
    # the NCHW input, its channel rows read as col_major pixels: channels-last out
    assert plan["down"].spec == "Matmul(1x9x4x8, f32)" and plan["down"].layouts == {0: "col_major"}
    picked = [("stride", (2,)), ("crop", (3, 3)), ("reshape", (1, 4, 9)), ("transpose", (0, 2, 1))]
    assert plan["down"].args[0].ops == picked
    # the residual reads c3's tensor, computed before, both channels-last (9 pixels x 8
    # channels in memory); the Relu after it is the same program
    assert plan["residual"].spec == "ElementwiseAddRelu(9x8, f32)" and plan["residual"].out_order == (0, 2, 3, 1)
    # the pointwise convs of one image are matmuls, pixels @ filters (BatchNorm folded in)
    assert plan["c1"].spec == "Matmul(1x36x4x4, f32)" and plan["c3"].spec == "Matmul(1x9x4x8, f32)"
    assert plan["c3"].layouts == {}  # c2's channels-last output: row-major pixels
    assert not [st for st in plan[None] if st.kind == "move"]


def test_conv_attributes_it_cannot_take_are_refused():
    w = _const("w", np.ones((2, 2, 3, 3)))
    for attrs, out, why in [
        (dict(strides=[1, 2]), [1, 2, 10, 5], r"strides \[1, 2\] and dilations \[1, 1\] must be equal along h and w"),
        (dict(auto_pad="SAME_UPPER"), [1, 2, 12, 12], "auto_pad is not supported"),
        (dict(strides=[5, 5]), [1, 2, 2, 2], r"stride 5, dilation 1: no kind ConvS5 is declared \(declared: Conv, "),
    ]:
        node = h.make_node("Conv", ["x", "w"], ["y"], name="cv", kernel_shape=[3, 3], **attrs)
        model = _model([node], [("x", [1, 2, 12, 12])], [("y", out)], [w])
        with pytest.raises(ModelError, match=r"^node cv \(Conv\): " + why):
            InferenceSession(model, db=None)


def stem_and_head(seed=0):
    """A ResNet stem and head, tiny: Conv 3x3 stride 2 padding 1 (bias), Relu, MaxPool 3x3
    stride 2 padding 1, GlobalAveragePool, Flatten, Gemm."""
    r = np.random.default_rng(seed)
    nodes = [
        h.make_node("Conv", ["x", "w", "b"], ["c"], name="stem", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
        h.make_node("Relu", ["c"], ["r"], name="relu"),
        h.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
        h.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        h.make_node("Flatten", ["g"], ["f"], name="flatten"),
        h.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="fc", transB=1),
    ]
    inits = [
        _const("w", r.standard_normal((4, 3, 3, 3))),
        _const("b", r.standard_normal(4)),
        _const("fc_w", r.standard_normal((3, 4))),
        _const("fc_b", r.standard_normal(3)),
    ]
    return _model(nodes, [("x", [1, 3, 8, 8])], [("y", [1, 3])], inits)


@pytest.mark.slow
def test_stem_maxpool_and_global_average_pool(db):
    plan = _plan_of_matching(stem_and_head(), db)
    # the stem reads the NCHW input and writes channels-last; its bias and Relu, the
    # pooling and the sum keep that order: no step copies between layouts
    assert plan["stem"].layouts == {1: "[2, 3, 1, 0]", 2: "[0, 2, 3, 1]"}
    (bias,) = [st for st in plan[None] if st.kind == "bias_relu"]
    assert bias.spec == "BiasAddRelu(16x4x1x1, f32)"  # 4 x 4 pixels x 4 channels
    assert plan["pool"].spec == "MaxPoolS2(1x4x2x2x3x3, f32)" and plan["pool"].pad == (1, 0, 1, 0)
    assert plan["pool"].layouts == {0: "[0, 2, 3, 1]", 1: "[0, 2, 3, 1]"}
    assert plan["gap"].spec == "SpatialSum(1x4x2x2, f32)" and plan["gap"].layouts == {0: "[0, 2, 3, 1]"}
    assert not [st for st in plan[None] if st.kind == "move"]


@pytest.mark.slow
def test_depthwise_then_pointwise_stay_channels_last(db):
    """MobileNet's pair: a depthwise 3x3 (padding 1) then a pointwise conv; the depthwise
    conv reads the NCHW input and writes channels-last, which the pointwise matmul reads
    as row-major pixels; a grouped conv after them reads a row-major copy."""
    r = np.random.default_rng(3)
    nodes = [
        h.make_node("Conv", ["x", "dw"], ["d"], name="dw", kernel_shape=[3, 3], pads=[1] * 4, group=4),
        h.make_node("Relu", ["d"], ["dr"], name="relu"),
        h.make_node("Conv", ["dr", "pw"], ["p"], name="pw", kernel_shape=[1, 1]),
        h.make_node("Conv", ["p", "gw"], ["y"], name="grouped", kernel_shape=[1, 1], group=2),
    ]
    inits = [
        _const("dw", r.standard_normal((4, 1, 3, 3))),
        _const("pw", r.standard_normal((6, 4, 1, 1))),
        _const("gw", r.standard_normal((4, 3, 1, 1))),
    ]
    model = _model(nodes, [("x", [1, 4, 5, 5])], [("y", [1, 4, 5, 5])], inits)
    plan = _plan_of_matching(model, db)
    assert plan["dw"].spec == "DepthwiseConv(1x4x5x5x3x3, f32)" and plan["dw"].out_order == (0, 2, 3, 1)
    assert plan["dw"].layouts == {1: "[1, 2, 0]", 2: "[0, 2, 3, 1]"}
    assert plan["relu"].spec == "Relu(25x4, f32)"
    assert plan["pw"].spec == "Matmul(1x25x4x6, f32)" and plan["pw"].layouts == {}
    moves = [st for st in plan[None] if st.kind == "move"]
    assert len(moves) == 1 and moves[0].layouts == {0: "[0, 2, 3, 1]"}  # to row-major for the GroupConv


def test_a_padded_maxpool_not_after_a_relu_is_refused():
    node = h.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    with pytest.raises(ModelError, match=r"^node mp \(MaxPool\): padding is supported only on a Relu's output"):
        InferenceSession(_model([node], [("x", [1, 2, 6, 6])], [("y", [1, 2, 3, 3])]), db=None)


def test_batched_matmuls(db):
    """A weight shared by every batch (folded into the rows: Matmul(1x8x8x16)), then a
    batched product of two activations, one transposed (its col_major rhs), and a
    Reshape of the result."""
    r = np.random.default_rng(5)
    nodes = [
        h.make_node("MatMul", ["x", "W"], ["q"], name="proj"),
        h.make_node("Transpose", ["q"], ["qt"], name="qt", perm=[0, 2, 1]),
        h.make_node("MatMul", ["q", "qt"], ["s"], name="gram"),
        h.make_node("Reshape", ["s", "shape"], ["y"], name="flat"),
    ]
    shape = onnx.numpy_helper.from_array(np.array([2, 16], np.int64), "shape")
    model = _model(nodes, [("x", [2, 4, 8])], [("y", [2, 16])], [_const("W", r.standard_normal((8, 16))), shape])
    sess = InferenceSession(model, db=db)
    _matches(sess, model)
    plan = {st.nodes[0]: st for st in sess.plan.steps}
    assert plan["proj"].spec == "Matmul(1x8x8x16, f32)"
    assert plan["gram"].spec == "Matmul(2x4x16x4, f32)" and plan["gram"].layouts == {1: "col_major"}
    assert plan["flat"].spec is None  # a view
