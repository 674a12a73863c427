"""Small models built with onnx.helper, for the tests, the benchmarks and the docs: an
MLP, a single-head attention block and a ResNet bottleneck block, with random weights
(a seed). Each returns an onnx.ModelProto with static shapes (opset 17)."""

from __future__ import annotations

import numpy as np

from morello_asp.onnx.importer import require_onnx


def model(nodes, inputs, outputs, inits=(), opset=17):
    """A float32 model of `nodes`: inputs and outputs as (name, shape) pairs."""
    onnx = require_onnx()
    h, T = onnx.helper, onnx.TensorProto
    g = h.make_graph(
        nodes,
        "m",
        [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
        [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in outputs],
        list(inits),
    )
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def const(name, a):
    """An initializer: `a` as float32."""
    return require_onnx().numpy_helper.from_array(np.asarray(a, np.float32), name)


def mlp(m=4, k=8, hid=16, n=8, seed=0):
    """MatMul + Add (bias) + Relu + MatMul."""
    h = require_onnx().helper
    r = np.random.default_rng(seed)
    nodes = [
        h.make_node("MatMul", ["x", "W1"], ["h0"], name="mm1"),
        h.make_node("Add", ["h0", "b1"], ["h1"], name="add1"),
        h.make_node("Relu", ["h1"], ["h2"], name="relu1"),
        h.make_node("MatMul", ["h2", "W2"], ["y"], name="mm2"),
    ]
    inits = [
        const("W1", r.standard_normal((k, hid))),
        const("b1", r.standard_normal(hid)),
        const("W2", r.standard_normal((hid, n))),
    ]
    return model(nodes, [("x", [m, k])], [("y", [m, n])], inits)


def attention(s=8, d=16, seed=0, scale_op="Mul", scale=None):
    """Single-head attention: Q, K, V projections, Q @ K^T (a Transpose), a scale,
    Softmax along the last axis, then @ V."""
    h = require_onnx().helper
    r = np.random.default_rng(seed)
    sc = scale if scale is not None else (1 / np.sqrt(d) if scale_op == "Mul" else np.sqrt(d))
    nodes = [
        h.make_node("MatMul", ["x", "Wq"], ["q"], name="q_proj"),
        h.make_node("MatMul", ["x", "Wk"], ["k"], name="k_proj"),
        h.make_node("MatMul", ["x", "Wv"], ["v"], name="v_proj"),
        h.make_node("Transpose", ["k"], ["kt"], name="k_t", perm=[1, 0]),
        h.make_node("MatMul", ["q", "kt"], ["s0"], name="scores"),
        h.make_node(scale_op, ["s0", "scale"], ["s1"], name="scale"),
        h.make_node("Softmax", ["s1"], ["p"], name="softmax", axis=-1),
        h.make_node("MatMul", ["p", "v"], ["y"], name="pv"),
    ]
    inits = [const(n, r.standard_normal((d, d)) / np.sqrt(d)) for n in ("Wq", "Wk", "Wv")]
    inits.append(const("scale", sc))
    return model(nodes, [("x", [s, d])], [("y", [s, d])], inits)


def bottleneck(cin=4, cmid=4, cout=8, hw=6, seed=0):
    """A ResNet bottleneck block: 1x1, 3x3 stride 2 padding 1, 1x1, each with a
    BatchNormalization (folded), ReLUs, and a downsampling 1x1 stride-2 residual."""
    h = require_onnx().helper
    r = np.random.default_rng(seed)
    inits, nodes = [], []

    def conv(name, x, ci, co, k, stride=1, pad=0):
        inits.append(const(name + "_w", r.standard_normal((co, ci, k, k)) / np.sqrt(ci * k * k)))
        nodes.append(
            h.make_node(
                "Conv", [x, name + "_w"], [name], name=name, kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4
            )
        )
        stats = {"g": r.uniform(0.5, 1.5, co), "b": r.standard_normal(co), "m": r.standard_normal(co) * 0.1}
        stats["v"] = r.uniform(0.5, 1.5, co)
        inits.extend(const(f"{name}_bn_{p}", v) for p, v in stats.items())
        bn_in = [name] + [f"{name}_bn_{p}" for p in "gbmv"]
        nodes.append(h.make_node("BatchNormalization", bn_in, [name + "_bn"], name=name + "_bn"))
        return name + "_bn"

    a = conv("c1", "x", cin, cmid, 1)
    nodes.append(h.make_node("Relu", [a], ["r1"], name="relu1"))
    b = conv("c2", "r1", cmid, cmid, 3, 2, 1)
    nodes.append(h.make_node("Relu", [b], ["r2"], name="relu2"))
    c = conv("c3", "r2", cmid, cout, 1)
    d = conv("down", "x", cin, cout, 1, 2)
    nodes.append(h.make_node("Add", [c, d], ["sum"], name="residual"))
    nodes.append(h.make_node("Relu", ["sum"], ["y"], name="relu3"))
    o = (hw + 1) // 2
    return model(nodes, [("x", [1, cin, hw, hw])], [("y", [1, cout, o, o])], inits)
