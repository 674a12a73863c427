"""The op table: ONNX op type -> a function that lowers one node onto programs (declared
kinds: Matmul, BiasAdd, Relu, ElementwiseAdd, MulScalar, DivScalar, Softmax{axis}, Move,
the Conv family) and views. Each takes the importer (its tensors, constants and
strides) and the node; what a function cannot do it refuses with imp.fail(why), which
names the node and its op. docs/onnx.md lists what each op takes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import TYPE_CHECKING, Any

import numpy as np

from morello_asp.kinds import all_kinds
from morello_asp.onnx.plan import Arg, Step, View, dims_text, is_contiguous, layout_text

if TYPE_CHECKING:
    from morello_asp.onnx.importer import Importer


def _flat2(shape: tuple[int, ...]) -> tuple[int, int]:
    """A tensor as rows x columns: the last dimension of size above one against all the
    others."""
    while len(shape) > 1 and shape[-1] == 1:
        shape = shape[:-1]
    if not shape:
        return (1, 1)
    return (prod(shape[:-1]), shape[-1])


def _out(imp: Importer, node, i: int = 0) -> tuple[str, tuple[int, ...]]:
    name = node.output[i]
    return name, imp.shape(name)


def _inputs(imp: Importer, node, n: int) -> list[str]:
    ins = [t for t in node.input if t]
    if len(ins) < n:
        raise imp.fail(f"expected {n} inputs, got {len(ins)}")
    for t in ins[:n]:
        imp.check_float(t)
    return ins


# NCHW's channels-last memory order (torch's channels_last): convolutions read and write it
_CHANNELS_LAST = (0, 2, 3, 1)


def _laid_out_as(order: tuple[int, ...], flat: tuple[int, ...]) -> dict[str, Any]:
    """A step's out_order and out_ops for an output in memory `order` that its program
    writes as the row-major array `flat` of that memory (none for row-major)."""
    if order == tuple(range(len(order))):
        return {}
    return {"out_order": order, "out_ops": [("transpose", order), ("reshape", flat)]}


# ---------------------------------------------------------------- matmuls
def _matmul(imp: Importer, a: str, b: str, out: str, trans_a: bool = False, trans_b: bool = False) -> Step:
    """out = a' @ b' (primes: transposed where asked), batched over the leading
    dimensions; a constant is transposed and broadcast once, at import; an activation's
    transpose is its operand's col_major layout, or a copy."""
    ash, bsh = list(imp.shape(a)), list(imp.shape(b))
    if len(ash) < 2 or len(bsh) < 2:
        raise imp.fail("a 1-D operand is not supported (reshape it to 2-D)")
    if trans_a:
        ash[-2:] = ash[-1], ash[-2]
    if trans_b:
        bsh[-2:] = bsh[-1], bsh[-2]
    m, k, k2, n = ash[-2], ash[-1], bsh[-2], bsh[-1]
    if k != k2:
        raise imp.fail(f"inner dimensions differ: {tuple(ash)} @ {tuple(bsh)}")
    try:
        batch = tuple(np.broadcast_shapes(tuple(ash[:-2]), tuple(bsh[:-2])))
    except ValueError:
        raise imp.fail(f"batch dimensions do not broadcast: {tuple(ash)} @ {tuple(bsh)}") from None
    out_shape = imp.shape(out)
    nb = prod(batch)
    a_batch, b_batch = prod(ash[:-2]), prod(bsh[:-2])
    layouts: dict[int, str] = {}
    args: list[Arg] = []
    if imp.is_const(b) and b_batch == 1 and not trans_a and nb == a_batch:
        # one weight for every batch: fold the batch into the rows (a must be row-major)
        w = imp.const(b)
        w = w.reshape(w.shape[-2:])
        w = w.T if trans_b else w
        rows = nb * m
        args = [imp.operand(a, (1, rows, k)), Arg(const=np.ascontiguousarray(w, dtype=np.float32).reshape(1, k, n))]
        spec = f"Matmul({dims_text((1, rows, k, n))}, f32)"
        return Step([], [], out, out_shape, spec=spec, args=args, kind="matmul")
    for i, (t, sh, tr, tb) in enumerate(((a, ash, trans_a, a_batch), (b, bsh, trans_b, b_batch))):
        r, c = sh[-2], sh[-1]
        if imp.is_const(t):
            v = imp.const(t)
            if tr:
                v = np.swapaxes(v, -1, -2)
            v = np.broadcast_to(v, batch + (r, c)).reshape(nb, r, c)
            args.append(Arg(const=np.ascontiguousarray(v, dtype=np.float32)))
            continue
        if tb != nb:
            raise imp.fail(f"batch broadcast of an activation is not supported: {tuple(ash)} @ {tuple(bsh)}")
        args.append(_activation_operand(imp, t, tr, (nb, r, c), layouts, i))
    spec = f"Matmul({dims_text((nb, m, k, n))}, f32)"
    return Step([], [], out, out_shape, spec=spec, layouts=layouts, args=args, kind="matmul")


def _activation_operand(
    imp: Importer, t: str, trans: bool, shape: tuple[int, int, int], layouts: dict[int, str], i: int
) -> Arg:
    """Activation t as a matmul operand of logical shape (batch, rows, cols): row-major
    if its memory is, col_major if its memory is the transpose's (a Transpose node, or
    Gemm's transA/B), else copied row-major first."""
    sh, st = imp.shape(t), imp.strides[t]
    if trans:  # the operand is t transposed: its strides are t's, last two swapped
        sh = sh[:-2] + (sh[-1], sh[-2])
        st = st[:-2] + (st[-1], st[-2])
        perm = tuple(range(len(sh) - 2)) + (len(sh) - 1, len(sh) - 2)
    else:
        perm = None
    if is_contiguous(sh, st):
        ops = [("transpose", perm)] if perm else []
        return Arg(tensor=t, ops=[*ops, ("reshape", shape)])
    # col_major: the operand's memory is its transpose's, row-major
    tsh = sh[:-2] + (sh[-1], sh[-2])
    tst = st[:-2] + (st[-1], st[-2])
    if is_contiguous(tsh, tst):
        swap = tuple(range(len(sh) - 2)) + (len(sh) - 1, len(sh) - 2)
        first = [("transpose", perm)] if perm else []
        layouts[i] = "col_major"
        nb, r, c = shape
        return Arg(tensor=t, ops=[*first, ("transpose", swap), ("reshape", (nb, c, r)), ("transpose", (0, 2, 1))])
    if perm:
        return Arg(tensor=imp.materialize(t), ops=[("transpose", perm), ("reshape", shape)])  # copied, then as above
    return Arg(tensor=imp.materialize(t), ops=[("reshape", shape)])


def op_matmul(imp: Importer, node) -> None:
    a, b = _inputs(imp, node, 2)[:2]
    out, _ = _out(imp, node)
    imp.produce(_matmul(imp, a, b, out))


def op_gemm(imp: Importer, node) -> None:
    ins = _inputs(imp, node, 2)
    a, b = ins[0], ins[1]
    alpha, beta = float(imp.attr("alpha", 1.0)), float(imp.attr("beta", 1.0))
    ta, tb = bool(imp.attr("transA", 0)), bool(imp.attr("transB", 0))
    out, out_shape = _out(imp, node)
    has_c = len(ins) > 2 and beta != 0.0
    mm_out = imp.fresh(out) if (has_c or alpha != 1.0) else out
    imp.shapes[mm_out] = out_shape
    step = _matmul(imp, a, b, mm_out, ta, tb)
    imp.produce(step)
    cur = mm_out
    if alpha != 1.0:
        nxt = imp.fresh(out) if has_c else out
        imp.shapes[nxt] = out_shape
        _scale(imp, cur, nxt, alpha, "mul")
        cur = nxt
    if has_c:
        _add(imp, cur, ins[2], out, beta)


# ---------------------------------------------------------------- elementwise
def _elementwise(imp: Importer, xs: list[str], out: str) -> tuple[list[Arg], tuple[int, ...], dict[str, Any]]:
    """The operands of an elementwise op as the rows x columns of their memory, all in
    one order (the first activation's: a channels-last tensor stays so; another order is
    copied into it), their shape, and the step's out_order and out_ops: the output is
    laid out as its inputs are."""
    act = [x for x in xs if not imp.is_const(x)]
    order = imp.dense(act[0], [_CHANNELS_LAST])[1] if act else tuple(range(len(imp.shape(out))))
    args, phys = [], imp.shape(out)
    for x in xs:
        a, phys = imp.in_memory(x, order)
        rc = _flat2(phys)
        if a.const is not None:
            a.const = a.const.reshape(rc)
        elif phys != rc:
            a.ops = [*a.ops, ("reshape", rc)]
        args.append(a)
    rc = _flat2(phys)
    return args, rc, _laid_out_as(order, rc)


def _scale(imp: Importer, x: str, out: str, s: float, how: str) -> None:
    """out = x * s or x / s, s a constant: MulScalar / DivScalar (the fold pass may
    move a power of two into a matmul's weights)."""
    shape = imp.shape(out)
    kind = "MulScalar" if how == "mul" else "DivScalar"
    args, rc, lay = _elementwise(imp, [x], out)
    args.append(Arg(const=np.full((1, 1), s, np.float32)))
    if how == "div":  # x / s = x * (1/s) exactly only for a power of two: fold that one
        m, _ = np.frexp(s)
        if abs(m) == 0.5:
            args[1] = Arg(const=np.full((1, 1), 1.0 / s, np.float32))
            kind = "MulScalar"
    what = "scale" if kind == "MulScalar" else "div"
    imp.produce(Step([], [], out, shape, spec=f"{kind}({dims_text(rc)}, f32)", args=args, kind=what, **lay))


def _add(imp: Importer, x: str, c: str, out: str, scale: float = 1.0) -> None:
    """out = x + scale * c: a bias (a constant varying along one axis) by BiasAdd, two
    activations or a constant of any other form by ElementwiseAdd; in x's memory order."""
    shape = imp.shape(out)
    if imp.shape(x) != shape:
        raise imp.fail(f"operand {imp.shape(x)} is broadcast to {shape}: broadcasting an activation is not supported")
    if imp.is_const(c):
        v = (imp.const(c) * np.float32(scale)).astype(np.float32) if scale != 1.0 else imp.const(c)
        if v.ndim > len(shape):
            raise imp.fail(f"constant {c!r} has more dimensions than the output")
        full = (1,) * (len(shape) - v.ndim) + tuple(v.shape)
        axes = [i for i, d in enumerate(full) if d != 1]
        if len(axes) == 1 and shape:
            x, order = imp.dense(x, [_CHANNELS_LAST])
            a, phys = imp.in_memory(x, order)
            ax = order.index(axes[0])  # the bias's axis in memory
            view = (prod(phys[:ax]), phys[ax], prod(phys[ax + 1 :]), 1)
            a.ops = [*a.ops, ("reshape", view)]
            args = [a, Arg(const=np.ascontiguousarray(v.reshape(-1), dtype=np.float32))]
            spec = f"BiasAdd({dims_text(view)}, f32)"
            imp.produce(Step([], [], out, shape, spec=spec, args=args, kind="bias", **_laid_out_as(order, view)))
            return
        dense = imp.fresh(c)
        imp.consts[dense] = np.ascontiguousarray(np.broadcast_to(v.reshape(full), shape), dtype=np.float32)
        args, rc, lay = _elementwise(imp, [x, dense], out)
        spec = f"ElementwiseAdd({dims_text(rc)}, f32)"
        imp.produce(Step([], [], out, shape, spec=spec, args=args, kind="add", **lay))
        return
    if scale != 1.0:
        raise imp.fail("Gemm's beta with an activation C is not supported")
    if imp.shape(c) != shape:
        raise imp.fail(f"adding {imp.shape(x)} and {imp.shape(c)}: broadcasting two activations is not supported")
    args, rc, lay = _elementwise(imp, [x, c], out)
    imp.produce(Step([], [], out, shape, spec=f"ElementwiseAdd({dims_text(rc)}, f32)", args=args, kind="add", **lay))


def op_add(imp: Importer, node) -> None:
    a, b = _inputs(imp, node, 2)[:2]
    out, _ = _out(imp, node)
    if imp.is_const(a) and imp.is_const(b):
        raise imp.fail("both operands are constants (fold them before export)")
    if imp.is_const(a):
        a, b = b, a
    if not imp.is_const(b) and imp.shape(a) != imp.shape(out):
        a, b = b, a
    _add(imp, a, b, out)


def _mul_or_div(imp: Importer, node, how: str) -> None:
    a, b = _inputs(imp, node, 2)[:2]
    out, _ = _out(imp, node)
    if how == "mul" and imp.is_const(a) and not imp.is_const(b):
        a, b = b, a
    if not imp.is_const(b) or imp.const(b).size != 1:
        raise imp.fail(f"only {'multiplication' if how == 'mul' else 'division'} by a scalar constant is supported")
    if imp.shape(a) != imp.shape(out):
        raise imp.fail(f"the result's shape {imp.shape(out)} is not the operand's {imp.shape(a)}")
    _scale(imp, a, out, float(imp.const(b).reshape(-1)[0]), how)


def op_mul(imp: Importer, node) -> None:
    _mul_or_div(imp, node, "mul")


def op_div(imp: Importer, node) -> None:
    _mul_or_div(imp, node, "div")


# a sum the Relu after it fuses with: its kind, the fused spec's kind and step kind
_RELU_FUSES = {
    "bias": ("BiasAdd(", "BiasAddRelu(", "bias_relu"),
    "add": ("ElementwiseAdd(", "ElementwiseAddRelu(", "add_relu"),
}


def op_relu(imp: Importer, node) -> None:
    """Relu; right after a BiasAdd or ElementwiseAdd whose sum nothing else reads, the
    two become one program (BiasAddRelu, ElementwiseAddRelu: one pass, one call) and the
    Relu's output is a view of it."""
    (x,) = _inputs(imp, node, 1)[:1]
    out, shape = _out(imp, node)
    st = imp.producer.get(x)
    if st is not None and st.kind in _RELU_FUSES and imp.uses.get(x, 0) <= 1 and x not in imp.graph_outputs:
        plain, fused, kind = _RELU_FUSES[st.kind]
        assert st.spec is not None and st.spec.startswith(plain)
        st.spec, st.kind = fused + st.spec[len(plain) :], kind
        st.nodes, st.ops = [*st.nodes, node.name or "(unnamed)"], [*st.ops, "Relu"]
        imp.view(x, out, [])
        return
    args, rc, lay = _elementwise(imp, [x], out)
    imp.produce(Step([], [], out, shape, spec=f"Relu({dims_text(rc)}, f32)", args=args, kind="relu", **lay))


def op_softmax(imp: Importer, node) -> None:
    (x,) = _inputs(imp, node, 1)[:1]
    out, shape = _out(imp, node)
    r = len(shape)
    axis = int(imp.attr("axis", -1 if imp.opset >= 13 else 1))
    if not -r <= axis < r:
        raise imp.fail(f"axis {axis} is out of range for rank {r}")
    axis %= r
    if imp.opset >= 13:  # along one axis: rows x axis x the rest
        view: tuple[int, ...] = (prod(shape[:axis]), shape[axis], prod(shape[axis + 1 :]))
    else:  # opset < 13: over everything from axis on, as one row
        view = (prod(shape[:axis]), prod(shape[axis:]), 1)
    if view[2] == 1:
        view = view[:2]
    args = [imp.operand(x, view)]
    imp.produce(Step([], [], out, shape, spec=f"Softmax1({dims_text(view)}, f32)", args=args, kind="softmax"))


# ---------------------------------------------------------------- convolutions
def _conv_kind(imp: Importer, family: str, stride: int, dilation: int) -> str:
    name = family + (f"S{stride}" if stride > 1 else "") + (f"D{dilation}" if dilation > 1 else "")
    if name not in all_kinds():
        have = sorted(k for k in all_kinds() if k.startswith(family) and not k.endswith("Accum"))
        raise imp.fail(
            f"stride {stride}, dilation {dilation}: no kind {name} is declared (declared: {', '.join(have)}; "
            "another stride or dilation is one conv_family/4 fact, docs/convolutions.md)"
        )
    return name


def _window(
    imp: Importer,
    x: str,
    out_hw: tuple[int, int],
    k_hw: tuple[int, int],
    s: int,
    d: int,
    pads: list,
    orders: Sequence[tuple[int, ...]] = (_CHANNELS_LAST,),
) -> tuple[str, View, tuple[int, int, int, int] | None, tuple[int, ...]]:
    """A windowed op's image (NCHW logically): the dense tensor (row-major or in one of
    `orders`, else copied row-major), the view that crops the rows and columns no output
    reads (a stride that leaves a remainder), the zeros (top, bottom, left, right) the
    padded call writes around it, only those read, and the image's memory order."""
    hh, ww = imp.shape(x)[2:]
    (oh, ow), (fh, fw) = out_hw, k_hw
    # the image rows the spec reads: S(oh - 1) + D(fh - 1) + 1
    need_h, need_w = s * (oh - 1) + d * (fh - 1) + 1, s * (ow - 1) + d * (fw - 1) + 1
    top, left = int(pads[0]), int(pads[1])
    crop_h, crop_w = min(hh, need_h - top), min(ww, need_w - left)
    bottom, right = need_h - top - crop_h, need_w - left - crop_w
    ops: View = [] if (crop_h, crop_w) == (hh, ww) else [("crop", (crop_h, crop_w))]
    pad = None if (top, bottom, left, right) == (0, 0, 0, 0) else (top, bottom, left, right)
    img, order = imp.dense(x, orders)
    return img, ops, pad, order


def _layouts(orders: dict[int, tuple[int, ...]]) -> dict[int, str]:
    """Spec layouts of the operands not in row-major order."""
    return {i: layout_text(o) for i, o in orders.items() if o != tuple(range(len(o)))}


def _after_relu(imp: Importer, x: str) -> bool:
    """Tensor x is a Relu's output (or a view of one): no value below zero."""
    st = imp.producer.get(x)
    while st is not None and st.kind == "view" and st.source is not None:
        st = imp.producer.get(st.source)
    return st is not None and st.kind in ("relu", "bias_relu", "add_relu")


def op_maxpool(imp: Importer, node) -> None:
    """MaxPool{S}: kernel, strides (equal along h and w), pads; the padded call writes
    zeros, which a max over ReLU outputs (never below zero) ignores: padding is taken
    only after a Relu."""
    (x,) = _inputs(imp, node, 1)[:1]
    if len([o for o in node.output if o]) > 1:
        raise imp.fail("the Indices output is not supported")
    out, oshape = _out(imp, node)
    if len(imp.shape(x)) != 4:
        raise imp.fail("only 2-D pooling (NCHW input) is supported")
    kh, kw = imp.attr("kernel_shape")
    strides = list(imp.attr("strides", [1, 1]))
    if strides[0] != strides[1] or list(imp.attr("dilations", [1, 1])) != [1, 1]:
        raise imp.fail(f"strides {strides} must be equal along h and w, dilations 1")
    if imp.attr("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise imp.fail("auto_pad is not supported (export with explicit pads)")
    kind = f"MaxPool{'S' + str(strides[0]) if strides[0] > 1 else ''}"
    if kind not in all_kinds():
        raise imp.fail(f"stride {strides[0]}: no kind {kind} is declared (encodings/kinds/pool.lp)")
    pads = list(imp.attr("pads", [0, 0, 0, 0]))
    img, ops, pad, order = _window(imp, x, (oshape[2], oshape[3]), (kh, kw), strides[0], 1, pads)
    if pad is not None and not _after_relu(imp, x):
        raise imp.fail("padding is supported only on a Relu's output (the padded call writes zeros, not -inf)")
    b, c, oh, ow = oshape
    spec = f"{kind}({dims_text((b, c, oh, ow, kh, kw))}, f32)"
    lay: dict[str, Any] = {} if order == (0, 1, 2, 3) else {"out_order": order, "out_ops": []}
    args = [Arg(tensor=img, ops=ops)]
    layouts = _layouts({0: order, 1: order})
    imp.produce(Step([], [], out, oshape, spec=spec, layouts=layouts, args=args, kind="pool", pad=pad, **lay))


def op_global_average_pool(imp: Importer, node) -> None:
    """SpatialSum (one sum per channel), then MulScalar by 1 / (h w)."""
    (x,) = _inputs(imp, node, 1)[:1]
    out, oshape = _out(imp, node)
    xs = imp.shape(x)
    if len(xs) != 4:
        raise imp.fail("only NCHW input is supported")
    total = imp.fresh(out)
    imp.shapes[total] = oshape
    img, order = imp.dense(x, [_CHANNELS_LAST])
    spec = f"SpatialSum({dims_text(xs)}, f32)"
    args = [Arg(tensor=img)]
    imp.produce(Step([], [], total, oshape, spec=spec, layouts=_layouts({0: order}), args=args, kind="sum"))
    _scale(imp, total, out, 1.0 / (xs[2] * xs[3]), "mul")


def op_conv(imp: Importer, node) -> None:
    """NCHW image, OIHW filters: the declared conv kinds' logical order, row-major.
    strides/dilations (equal along h and w) and group pick the kind (Conv, ConvS2, ...,
    DepthwiseConv for one filter per channel, GroupConv; a pointwise one of one image, a
    Matmul); pads are zeros the call writes
    around the image (codegen/padding.py: a kept zero-bordered buffer); a bias is a
    BiasAdd after it (a BatchNormalization after it is folded into both)."""
    ins = _inputs(imp, node, 2)
    x, w = ins[0], ins[1]
    out, oshape = _out(imp, node)
    if not imp.is_const(w):
        raise imp.fail("the filters must be a constant (an initializer)")
    xs, wv = imp.shape(x), imp.const(w).astype(np.float32)
    if len(xs) != 4:
        raise imp.fail(f"only 2-D convolutions (NCHW input) are supported, not rank {len(xs)}")
    strides = list(imp.attr("strides", [1, 1]))
    dil = list(imp.attr("dilations", [1, 1]))
    group = int(imp.attr("group", 1))
    if imp.attr("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise imp.fail("auto_pad is not supported (export with explicit pads)")
    pads = list(imp.attr("pads", [0, 0, 0, 0]))
    if strides[0] != strides[1] or dil[0] != dil[1]:
        raise imp.fail(f"strides {strides} and dilations {dil} must be equal along h and w")
    s, d = int(strides[0]), int(dil[0])
    b, c, hh, ww = xs
    f, cg, fh, fw = wv.shape
    oh, ow = oshape[2], oshape[3]
    depthwise = group == c and f == c and cg == 1
    cl = [_CHANNELS_LAST] if group == 1 or depthwise else []  # GroupConv's image: row-major
    img, ops, pad, order = _window(imp, x, (oh, ow), (fh, fw), s, d, pads, cl)
    conv_out = out if len(ins) < 3 else imp.fresh(out)
    imp.shapes[conv_out] = oshape
    if group == 1 and (fh, fw, b) == (1, 1, 1) and pad is None:
        # a pointwise convolution of one image is the matmul pixels (hw x c) @ filters
        # (c x f), its output channels-last; the pixels are a free view: a channels-last
        # image's rows, or an NCHW image's channel rows (c x hw) read as col_major. (As a
        # Conv on NCHW, the search moved the image to channels-last and back, 1.9 us for
        # 16 -> 8 channels on 14 x 14 where the matmul takes 0.3.) With a stride, the
        # session copies every s-th pixel into a kept buffer first.
        picked: View = [("stride", (s,)), ("crop", (oh, ow))] if s > 1 else []
        if order == _CHANNELS_LAST:
            pixels = Arg(tensor=img, ops=[*picked, ("transpose", order), ("reshape", (1, oh * ow, c))])
            layouts = {}
        else:
            pixels = Arg(tensor=img, ops=[*picked, ("reshape", (1, c, oh * ow)), ("transpose", (0, 2, 1))])
            layouts = {0: "col_major"}
        args = [pixels, Arg(const=np.ascontiguousarray(wv.reshape(f, c).T).reshape(1, c, f))]
        spec = f"Matmul({dims_text((1, oh * ow, c, f))}, f32)"
        lay = _laid_out_as(_CHANNELS_LAST, (1, oh * ow, f))
        step = Step([], [], conv_out, oshape, spec=spec, layouts=layouts, args=args, kind="conv", filter_axis=2, **lay)
        imp.produce(step)
        _conv_bias(imp, ins, conv_out, out)
        return
    filt_order: tuple[int, ...]
    if group == 1:
        kind = _conv_kind(imp, "Conv", s, d)
        dims: tuple[int, ...] = (b, f, c, oh, ow, fh, fw)
        filt, filt_order = wv, (2, 3, 1, 0)  # HWIO in memory (what the conv suite runs)
    elif depthwise:
        kind = _conv_kind(imp, "DepthwiseConv", s, d)
        dims = (b, c, oh, ow, fh, fw)
        filt, filt_order = wv.reshape(c, fh, fw), (1, 2, 0)
    else:
        kind = _conv_kind(imp, "GroupConv", s, d)
        g = group
        dims = (b, g, f // g, cg, oh, ow, fh, fw)
        filt, filt_order = wv.reshape(g, f // g, cg, fh, fw), (0, 1, 2, 3, 4)
        hw = ops[0][1] if ops else (hh, ww)  # the image after its crop: channels split, a view
        ops = [*ops, ("reshape", (b, g, cg, *hw))]
    args = [Arg(tensor=img, ops=ops), Arg(const=np.ascontiguousarray(filt))]
    spec = f"{kind}({dims_text(dims)}, f32)"
    if group == 1 or depthwise:  # channels-last out: what the next conv reads best
        layouts = _layouts({0: order, 1: filt_order, 2: _CHANNELS_LAST})
        lay = {"out_order": _CHANNELS_LAST, "out_ops": []}
    else:
        layouts, lay = {}, {}
    imp.produce(Step([], [], conv_out, oshape, spec=spec, layouts=layouts, args=args, kind="conv", pad=pad, **lay))
    _conv_bias(imp, ins, conv_out, out)


def _conv_bias(imp: Importer, ins: list[str], conv_out: str, out: str) -> None:
    """A Conv's bias input, if it has one: a BiasAdd of conv_out into out."""
    if len(ins) > 2:  # the bias, one value per output channel (axis 1)
        if not imp.is_const(ins[2]):
            raise imp.fail("the bias must be a constant (an initializer)")
        bias = imp.fresh(ins[2])
        imp.consts[bias] = imp.const(ins[2]).reshape(-1, 1, 1)
        _add(imp, conv_out, bias, out)


def op_batchnorm(imp: Importer, node) -> None:
    """Inference BatchNormalization folded into the Conv before it (its filters scaled
    per output channel, its bias shifted), at import; elsewhere refused."""
    ins = _inputs(imp, node, 5)
    x, out = ins[0], node.output[0]
    if not all(imp.is_const(t) for t in ins[1:5]):
        raise imp.fail("scale, bias, mean and variance must be constants (inference mode)")
    gamma, beta, mean, var = (imp.const(t).astype(np.float64) for t in ins[1:5])
    if len([o for o in node.output if o]) > 1:
        raise imp.fail("training mode (running mean/variance outputs) is not supported")
    eps = float(imp.attr("epsilon", 1e-5))
    scale = gamma / np.sqrt(var + eps)
    shift = beta - mean * scale
    prod_step = imp.producer.get(x)
    bias_step = None
    if prod_step is not None and prod_step.kind == "bias" and imp.uses.get(x, 0) <= 1:
        bias_step, inner = prod_step, prod_step.args[0].tensor
        prod_step = imp.producer.get(inner) if inner is not None else None
        if inner is not None and imp.uses.get(inner, 0) > 1:
            prod_step = None
    if prod_step is None or prod_step.kind != "conv" or imp.uses.get(prod_step.out, 0) > 1:
        raise imp.fail("only a BatchNormalization right after a Conv (folded into it) is supported")
    filt = prod_step.args[prod_step.filters]
    assert filt.const is not None
    f = filt.const.shape
    if len(f) == 5:  # GroupConv's filters: groups x filters per group x ...
        per_out = scale.reshape(f[0], f[1], 1, 1, 1)
    else:
        per_out = scale.reshape([-1 if i == prod_step.filter_axis else 1 for i in range(len(f))])
    filt.const = (filt.const * per_out).astype(np.float32)
    if bias_step is not None:
        bias = bias_step.args[1]
        bias.const = (np.asarray(bias.const) * scale + shift).astype(np.float32)
        imp.view(bias_step.out, out, [])
    else:
        bn_bias = imp.fresh(out)
        imp.consts[bn_bias] = shift.astype(np.float32).reshape(-1, 1, 1)
        _add(imp, prod_step.out, bn_bias, out)
    imp.steps[-1].note = f"folded into {prod_step.label}'s filters and bias"


# ---------------------------------------------------------------- views
def op_transpose(imp: Importer, node) -> None:
    (x,) = _inputs(imp, node, 1)[:1]
    out, shape = _out(imp, node)
    r = len(imp.shape(x))
    perm = tuple(imp.attr("perm", list(reversed(range(r)))))
    if imp.is_const(x):
        imp.consts[out] = np.ascontiguousarray(imp.const(x).transpose(perm))
        return
    imp.view(x, out, [("transpose", perm)])


def op_reshape(imp: Importer, node) -> None:
    x = _inputs(imp, node, 1)[0]
    out, shape = _out(imp, node)
    if imp.is_const(x):
        imp.consts[out] = imp.const(x).reshape(shape)
        return
    x = imp.contiguous(x)
    imp.view(x, out, [("reshape", shape)])


def op_constant(imp: Importer, node) -> None:
    from onnx import numpy_helper  # optional dependency (the onnx extra)

    for a in node.attribute:
        if a.name == "value":
            imp.consts[node.output[0]] = numpy_helper.to_array(a.t)
            return
        if a.name in ("value_float", "value_floats"):
            imp.consts[node.output[0]] = np.array(imp.attr(a.name), np.float32)
            return
        if a.name in ("value_int", "value_ints"):
            imp.consts[node.output[0]] = np.array(imp.attr(a.name), np.int64)
            return
    raise imp.fail("a Constant without a value attribute this importer reads")


OPS: dict[str, Callable[[Importer, Any], None]] = {
    "Add": op_add,
    "BatchNormalization": op_batchnorm,
    "Conv": op_conv,
    "Constant": op_constant,
    "Div": op_div,
    "Dropout": op_reshape,  # inference: the identity
    "Flatten": op_reshape,
    "Gemm": op_gemm,
    "GlobalAveragePool": op_global_average_pool,
    "Identity": op_reshape,
    "MatMul": op_matmul,
    "MaxPool": op_maxpool,
    "Mul": op_mul,
    "Relu": op_relu,
    "Reshape": op_reshape,
    "Softmax": op_softmax,
    "Transpose": op_transpose,
}

__all__ = ["OPS"]
