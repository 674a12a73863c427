"""A second implementation of every shipped spec kind's semantics (issue 57, item 4), to
check the numpy reference that morello_asp derives from the declarations
(codegen/reference.py over morello_asp/kinds/declared.py) against: a wrong declaration
must not hide behind its own reference.

Written from each kind's documented meaning (the comments of encodings/kinds/*.lp,
Morello's kinds, torch's operators), not from declared.py: hand-written numpy in float64
(int64 for integer outputs, which wrap on the store as C's do), and torch where it is
importable (`torch_outputs`). Nothing here reads a kind's declaration, except the
shape of its spec (its dimensions, which the spec text states) and its operands' arrays.

A new kind brings its second implementation here: a row of FAMILIES (a regular
expression of kind names, its outputs from the inputs, how its accumulating variant
combines old and new, the dtypes it takes, how to draw a shape) and, for a torch
version, a row of TORCH. tests/test_second_reference.py fails for a kind with none.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np

Arrays = tuple[np.ndarray, ...]
BF16 = np.dtype(ml_dtypes.bfloat16)

# Dtype combinations a family takes: one dtype for every operand, or one per operand.
FLOATS = [("f32",), ("bf16",)]
EVERY = [("f32",), ("bf16",), ("i32",), ("i16",), ("i8",), ("u8",), ("u16",), ("u32",)]
PRODUCTS = [
    ("f32",),
    ("i32",),
    ("bf16", "bf16", "f32"),
    ("f32", "bf16", "f32"),
    ("u8", "i8", "i16"),
    ("i8", "i8", "i32"),
]
MOVES = [*EVERY, ("bf16", "f32"), ("i8", "i16"), ("i8", "i32"), ("u8", "i16"), ("u8", "u32"), ("i16", "i32")]


def wide(a: np.ndarray, out_dtype) -> np.ndarray:
    """`a` in the dtype this module computes in for an output of `out_dtype`."""
    floating = np.issubdtype(np.dtype(out_dtype), np.floating) or np.dtype(out_dtype) == BF16
    return np.asarray(a).astype(np.float64 if floating else np.int64)


# ------------------------------------------------------------------ per family
def _axis(name: str) -> int:
    return int(re.search(r"(\d+)$", name).group(1))  # type: ignore[union-attr]


def _matmul(name, shape, ins, outs):
    lhs, rhs = (wide(a, outs[0].dtype) for a in ins)
    b, m, k, n = shape
    out = np.zeros((b, m, n), lhs.dtype)
    for kk in range(k):  # a sum of outer products, k by k
        out += lhs[:, :, kk, None] * rhs[:, None, kk, :]
    return (out,)


def _conv_geometry(name: str) -> tuple[int, int]:
    """Stride and dilation of a convolution kind from its name (ConvS2D2: 2, 2)."""
    m = re.fullmatch(r"(?:Conv|DepthwiseConv|GroupConv)(?:S(\d))?(?:D(\d))?(?:Accum)?", name)
    assert m, name
    return int(m.group(1) or 1), int(m.group(2) or 1)


def _extent(n: int, nf: int, s: int, d: int) -> int:
    """Image rows n output rows read through nf filter rows at stride s, dilation d."""
    return s * (n - 1) + d * (nf - 1) + 1


def _conv(name, shape, ins, outs):
    """out[b, f, h, w] = sum over c, fh, fw of img[b, c, S h + D fh, S w + D fw] * filters[f, c, fh, fw]."""
    s, d = _conv_geometry(name)
    img, flt = (wide(a, outs[0].dtype) for a in ins)
    b, f, c, h, w, fh, fw = shape
    assert img.shape == (b, c, _extent(h, fh, s, d), _extent(w, fw, s, d)), (name, shape, img.shape)
    assert flt.shape == (f, c, fh, fw), (name, flt.shape)
    out = np.zeros((b, f, h, w), img.dtype)
    for i in range(fh):
        for j in range(fw):
            win = img[:, :, d * i : d * i + s * (h - 1) + 1 : s, d * j : d * j + s * (w - 1) + 1 : s]  # b c h w
            out += np.tensordot(win, flt[:, :, i, j], axes=([1], [1])).transpose(0, 3, 1, 2)
    return (out,)


def _depthwise(name, shape, ins, outs):
    """out[b, c, h, w] = sum over fh, fw of img[b, c, S h + D fh, S w + D fw] * filters[c, fh, fw]."""
    s, d = _conv_geometry(name)
    img, flt = (wide(a, outs[0].dtype) for a in ins)
    b, c, h, w, fh, fw = shape
    assert img.shape == (b, c, _extent(h, fh, s, d), _extent(w, fw, s, d)), (name, shape, img.shape)
    assert flt.shape == (c, fh, fw), (name, flt.shape)
    out = np.zeros((b, c, h, w), img.dtype)
    for i in range(fh):
        for j in range(fw):
            win = img[:, :, d * i : d * i + s * (h - 1) + 1 : s, d * j : d * j + s * (w - 1) + 1 : s]
            out += win * flt[None, :, i, j, None, None]
    return (out,)


def _group_conv(name, shape, ins, outs):
    """g convolutions side by side: group gi's output channels see only its input channels."""
    s, d = _conv_geometry(name)
    img, flt = ins
    b, g, f, c, h, w, fh, fw = shape
    assert img.shape == (b, g, c, _extent(h, fh, s, d), _extent(w, fw, s, d)), (name, shape, img.shape)
    assert flt.shape == (g, f, c, fh, fw), (name, flt.shape)
    conv = "Conv" + (f"S{s}" if s > 1 else "") + (f"D{d}" if d > 1 else "")
    per = [_conv(conv, (b, f, c, h, w, fh, fw), (img[:, gi], flt[gi]), outs)[0] for gi in range(g)]
    return (np.stack(per, axis=1),)


def _max_pool(name, shape, ins, outs):
    """out[b, c, h, w] = max over fh, fw of img[b, c, S h + fh, S w + fw]."""
    s = int(re.fullmatch(r"MaxPool(?:S(\d))?(?:Accum)?", name).group(1) or 1)  # type: ignore[union-attr]
    (img,) = (wide(a, outs[0].dtype) for a in ins)
    b, c, h, w, fh, fw = shape
    assert img.shape == (b, c, _extent(h, fh, s, 1), _extent(w, fw, s, 1)), (name, shape, img.shape)
    wins = [img[:, :, i : i + s * (h - 1) + 1 : s, j : j + s * (w - 1) + 1 : s] for i in range(fh) for j in range(fw)]
    return (np.max(np.stack(wins), axis=0),)


def _spatial_sum(name, shape, ins, outs):
    """out[b, c, 0, 0] = sum over h, w of x[b, c, h, w]."""
    (x,) = (wide(a, outs[0].dtype) for a in ins)
    return (x.sum(axis=(2, 3), keepdims=True),)


def _softmax(name, shape, ins, outs):
    (x,) = (wide(a, outs[0].dtype) for a in ins)
    e = np.exp(x - x.max(axis=_axis(name), keepdims=True))
    return (e / e.sum(axis=_axis(name), keepdims=True),)


def _max(name, shape, ins, outs):
    (x,) = (wide(a, outs[0].dtype) for a in ins)
    return (x.max(axis=_axis(name), keepdims=True),)


def _denominator(name, shape, ins, outs):
    x, xmax = (wide(a, outs[0].dtype) for a in ins)
    return (np.exp(x - xmax).sum(axis=_axis(name), keepdims=True),)


def _denominator_and_max(name, shape, ins, outs):
    (x,) = (wide(a, outs[0].dtype) for a in ins)
    m = x.max(axis=_axis(name), keepdims=True)
    return m, np.exp(x - m).sum(axis=_axis(name), keepdims=True)


def _denominator_and_unscaled(name, shape, ins, outs):
    (x,) = (wide(a, outs[0].dtype) for a in ins)
    e = np.exp(x - x.max(axis=_axis(name), keepdims=True))
    return e.sum(axis=_axis(name), keepdims=True), e


def _denominator_and_unscaled_from_max(name, shape, ins, outs):
    x, xmax = (wide(a, outs[0].dtype) for a in ins)
    e = np.exp(x - xmax)
    return e.sum(axis=_axis(name), keepdims=True), e


def _complete(name, shape, ins, outs):
    x, xmax, denom = (wide(a, outs[0].dtype) for a in ins)
    return (np.exp(x - xmax) / denom,)


def _divide(name, shape, ins, outs):
    x, y = (wide(a, outs[0].dtype) for a in ins)
    return (x / y,)  # y broadcast along its unit dimension (DivideVecScalar, DivScalar)


def _broadcast(name, shape, ins, outs):
    (x,) = (wide(a, outs[0].dtype) for a in ins)
    return (np.broadcast_to(x, outs[0].shape),)


def _zero(name, shape, ins, outs):
    return (np.zeros(outs[0].shape),)


def _fill_neg_inf(name, shape, ins, outs):
    dt = outs[0].dtype
    low = -np.inf if (np.issubdtype(dt, np.floating) or dt == BF16) else np.iinfo(dt).min
    return (np.full(outs[0].shape, low),)


def _move(name, shape, ins, outs):
    (src,) = ins
    return (wide(src, outs[0].dtype),)


def _relu(name, shape, ins, outs):
    (x,) = (wide(a, outs[0].dtype) for a in ins)
    return (np.where(x > 0, x, 0),)


def _add(name, shape, ins, outs):
    x, y = (wide(a, outs[0].dtype) for a in ins)
    return (x + y,)


def _mul_scalar(name, shape, ins, outs):
    x, s = (wide(a, outs[0].dtype) for a in ins)
    return (x * s[0, 0],)


def _batch_mul_scalar(name, shape, ins, outs):
    x, s = (wide(a, outs[0].dtype) for a in ins)
    return (x * s[0, 0, 0],)


def _div_scalar(name, shape, ins, outs):
    x, s = (wide(a, outs[0].dtype) for a in ins)
    return (x / s[0, 0],)


def _bias_add(name, shape, ins, outs):
    x, bias = (wide(a, outs[0].dtype) for a in ins)
    return (x + bias[None, :, None, None],)


def _bias_add_relu(name, shape, ins, outs):
    (s,) = _bias_add(name, shape, ins, outs)
    return (np.where(s > 0, s, 0),)


def _add_relu(name, shape, ins, outs):
    x, y = (wide(a, outs[0].dtype) for a in ins)
    return (np.where(x + y > 0, x + y, 0),)


def _max_pool(name, shape, ins, outs):
    """out[b, c, h, w] = max over fh, fw of img[b, c, S h + fh, S w + fw] (MaxPool, MaxPoolS2, ...)."""
    m = re.fullmatch(r"MaxPool(?:S(\d))?(?:Accum)?", name)
    assert m, name
    s = int(m.group(1) or 1)
    (img,) = (wide(a, outs[0].dtype) for a in ins)
    b, c, h, w, fh, fw = shape
    assert img.shape == (b, c, _extent(h, fh, s, 1), _extent(w, fw, s, 1)), (name, shape, img.shape)
    out = np.full((b, c, h, w), -np.inf)
    for i in range(fh):
        for j in range(fw):
            out = np.maximum(out, img[:, :, i : i + s * (h - 1) + 1 : s, j : j + s * (w - 1) + 1 : s])
    return (out,)


def _spatial_sum(name, shape, ins, outs):
    """out[b, c, 0, 0] = sum over h, w of x[b, c, h, w]."""
    (x,) = (wide(a, outs[0].dtype) for a in ins)
    return (x.sum(axis=(2, 3), keepdims=True),)


# ------------------------------------------------- accumulating variants, by hand
def _add_old(old: Arrays, new: Arrays) -> Arrays:
    return tuple(o + n for o, n in zip(old, new))


def _max_old(old: Arrays, new: Arrays) -> Arrays:
    return tuple(np.maximum(o, n) for o, n in zip(old, new))


def _online_softmax(old: Arrays, new: Arrays) -> Arrays:
    """The online softmax's merge of a part (its max and denominator) into the running pair."""
    (om, od), (nm, nd) = old, new
    m = np.maximum(om, nm)
    with np.errstate(invalid="ignore"):
        return m, od * np.exp(om - m) + nd * np.exp(nm - m)


def _denominator_only(old: Arrays, new: Arrays) -> Arrays:
    """The denominator accumulates; the unscaled values are overwritten."""
    return old[0] + new[0], new[1]


# ------------------------------------------------------------------ shapes
SIZES = (1, 2, 3, 5, 7, 8, 11, 16, 17)  # ones, primes, a vector width, one more


def any_rank(lo: int) -> Callable[[np.random.Generator], tuple[int, ...]]:
    def draw(rng):
        rank = int(rng.integers(lo, 5))
        return tuple(int(rng.choice(SIZES)) for _ in range(rank))

    return draw


def dims(*caps: int) -> Callable[[np.random.Generator], tuple[int, ...]]:
    def draw(rng):
        return tuple(int(rng.choice([s for s in SIZES if s <= cap])) for cap in caps)

    return draw


@dataclass(frozen=True)
class Family:
    pattern: str  # kind names, without Accum (a regular expression, matched whole)
    outputs: Callable  # (name, spec shape, inputs, outputs' current arrays) -> new outputs
    dtypes: list  # dtype combinations it takes (one for all operands, or one per operand)
    shape: Callable[[np.random.Generator], tuple[int, ...]]  # a random spec shape
    accum: Callable[[Arrays, Arrays], Arrays] | None = None  # how its Accum variant combines
    rank_from_name: bool = False  # a softmax-family kind: rank above the axis in its name


FAMILIES = [
    Family("Matmul", _matmul, PRODUCTS, dims(3, 17, 17, 17), _add_old),
    Family(r"Conv(S\d)?(D\d)?", _conv, PRODUCTS, dims(2, 5, 5, 5, 5, 3, 3), _add_old),
    Family(r"DepthwiseConv(S\d)?(D\d)?", _depthwise, PRODUCTS[:2], dims(2, 5, 5, 5, 3, 3), _add_old),
    Family(r"GroupConv(S\d)?(D\d)?", _group_conv, PRODUCTS[:2], dims(2, 3, 3, 3, 5, 5, 3, 3), _add_old),
    Family(r"MaxPool(S\d)?", _max_pool, FLOATS + [("i32",)], dims(2, 5, 5, 5, 3, 3), _max_old),
    Family("SpatialSum", _spatial_sum, FLOATS + [("i32",)], dims(2, 5, 7, 7), _add_old),
    Family(r"Softmax\d", _softmax, FLOATS, any_rank(1), rank_from_name=True),
    Family(r"Max\d", _max, EVERY, any_rank(1), _max_old, rank_from_name=True),
    Family(r"SoftmaxDenominator\d", _denominator, FLOATS, any_rank(1), _add_old, rank_from_name=True),
    Family(r"SoftmaxDenominatorAndMax\d", _denominator_and_max, FLOATS, any_rank(1), _online_softmax, True),
    Family(r"SoftmaxDenominatorAndUnscaled\d", _denominator_and_unscaled, FLOATS, any_rank(1), rank_from_name=True),
    Family(
        r"SoftmaxDenominatorAndUnscaledFromMax\d",
        _denominator_and_unscaled_from_max,
        FLOATS,
        any_rank(1),
        _denominator_only,
        True,
    ),
    Family(r"SoftmaxComplete\d", _complete, FLOATS, any_rank(1), rank_from_name=True),
    Family(r"DivideVecScalar\d", _divide, FLOATS, any_rank(1), rank_from_name=True),
    Family(r"Broadcast\d", _broadcast, EVERY, any_rank(1), rank_from_name=True),
    Family("DivideVec", _divide, FLOATS, any_rank(1)),
    Family("Zero", _zero, EVERY, any_rank(1)),
    Family("FillNegInf", _fill_neg_inf, EVERY, any_rank(1)),
    Family("Move", _move, MOVES, any_rank(1)),
    Family("Relu", _relu, EVERY[:3], any_rank(1)),
    Family("ElementwiseAdd", _add, EVERY[:3], any_rank(1)),
    Family("ElementwiseAddRelu", _add_relu, EVERY[:3], any_rank(1)),
    Family("MulScalar", _mul_scalar, FLOATS + [("i32",)], dims(17, 17)),
    Family("DivScalar", _div_scalar, FLOATS, dims(17, 17)),
    Family("BatchMulScalar", _batch_mul_scalar, FLOATS, dims(3, 17, 17)),
    Family("BiasAdd", _bias_add, FLOATS + [("i32",)], dims(3, 17, 7, 7)),
    Family("BiasAddRelu", _bias_add_relu, FLOATS + [("i32",)], dims(3, 17, 7, 7)),
    Family(r"MaxPool(S\d)?", _max_pool, FLOATS, dims(2, 5, 5, 5, 3, 3), _max_old),
    Family("SpatialSum", _spatial_sum, FLOATS, dims(2, 5, 7, 7), _add_old),
]

WHERE = (
    "add its second implementation to tests/second_reference.py: a Family row in FAMILIES "
    "(its name pattern, its outputs computed by hand from the kind's documented meaning in "
    "numpy, not from morello_asp/kinds/declared.py, how its Accum variant combines, its dtypes "
    "and a shape drawer), and optionally a torch version in TORCH"
)


def family_of(name: str) -> Family | None:
    """The family of kind `name` (its Accum variant's too), or None."""
    base = re.sub(r"Accum(\d*)$", r"\1", name)
    for f in FAMILIES:
        if re.fullmatch(f.pattern, base):
            return f
    return None


def second_outputs(name: str, shape: tuple[int, ...], args: list[np.ndarray], outputs: tuple[int, ...]) -> Arrays:
    """Every output of a kind `name` spec of `shape` run on `args` (all operands, outputs
    with their current contents), in float64 or int64: this module's semantics."""
    fam = family_of(name)
    assert fam is not None, f"kind {name} has no second implementation: {WHERE}"
    ins = tuple(a for i, a in enumerate(args) if i not in outputs)
    outs = tuple(args[i] for i in outputs)
    new = tuple(np.asarray(v) for v in fam.outputs(name, shape, ins, outs))
    if re.search(r"Accum\d*$", name):
        assert fam.accum is not None, f"{name}: its family states no accumulation ({WHERE})"
        old = tuple(wide(o, o.dtype) for o in outs)
        new = fam.accum(old, new)
    return tuple(np.broadcast_to(v, o.shape) for v, o in zip(new, outs))


# ------------------------------------------------------------------ torch
def _torch_conv(name, shape, ins, outs):
    import torch

    s, d = _conv_geometry(name)
    img, flt = (torch.from_numpy(wide(a, outs[0].dtype).astype(np.float64)) for a in ins)
    return (torch.nn.functional.conv2d(img, flt, stride=s, dilation=d).numpy(),)


def _torch_group_conv(name, shape, ins, outs):
    import torch

    s, d = _conv_geometry(name)
    img, flt = (torch.from_numpy(wide(a, outs[0].dtype).astype(np.float64)) for a in ins)
    b, g, f, c, h, w, fh, fw = shape
    got = torch.nn.functional.conv2d(
        img.reshape(b, g * c, *img.shape[3:]), flt.reshape(g * f, c, fh, fw), stride=s, dilation=d, groups=g
    )
    return (got.reshape(b, g, f, h, w).numpy(),)


def _torch_depthwise(name, shape, ins, outs):
    import torch

    s, d = _conv_geometry(name)
    img, flt = (torch.from_numpy(wide(a, outs[0].dtype).astype(np.float64)) for a in ins)
    c = flt.shape[0]
    return (torch.nn.functional.conv2d(img, flt[:, None], stride=s, dilation=d, groups=c).numpy(),)


def _torch_matmul(name, shape, ins, outs):
    import torch

    lhs, rhs = (torch.from_numpy(wide(a, outs[0].dtype).astype(np.float64)) for a in ins)
    return (torch.bmm(lhs, rhs).numpy(),)


def _torch_softmax(name, shape, ins, outs):
    import torch

    (x,) = (torch.from_numpy(wide(a, outs[0].dtype).astype(np.float64)) for a in ins)
    return (torch.softmax(x, dim=_axis(name)).numpy(),)


def _torch_denominator_and_max(name, shape, ins, outs):
    import torch

    (x,) = (torch.from_numpy(wide(a, outs[0].dtype).astype(np.float64)) for a in ins)
    m = torch.amax(x, dim=_axis(name), keepdim=True)
    return m.numpy(), torch.logsumexp(x - m, dim=_axis(name), keepdim=True).exp().numpy()


def _torch_max_pool(name, shape, ins, outs):
    import torch

    s = int(re.fullmatch(r"MaxPool(?:S(\d))?", name).group(1) or 1)  # type: ignore[union-attr]
    (img,) = (torch.from_numpy(wide(a, outs[0].dtype).astype(np.float64)) for a in ins)
    return (torch.nn.functional.max_pool2d(img, kernel_size=shape[4:], stride=s).numpy(),)


# Families with a torch version (float64 in torch, on float dtypes): Matmul's and the
# convolutions' integer dtypes are exact in float64 at these sizes too.
TORCH = {
    "Matmul": _torch_matmul,
    r"Conv(S\d)?(D\d)?": _torch_conv,
    r"DepthwiseConv(S\d)?(D\d)?": _torch_depthwise,
    r"GroupConv(S\d)?(D\d)?": _torch_group_conv,
    r"Softmax\d": _torch_softmax,
    r"MaxPool(S\d)?": _torch_max_pool,
    r"SoftmaxDenominatorAndMax\d": _torch_denominator_and_max,
}


def torch_outputs(name: str, shape, args: list[np.ndarray], outputs: tuple[int, ...]) -> Arrays | None:
    """The outputs by torch (before any accumulation), or None if torch is not importable
    or the family has no torch version."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    fam = family_of(name)
    fn = TORCH.get(fam.pattern) if fam is not None else None
    if fn is None:
        return None
    ins = tuple(a for i, a in enumerate(args) if i not in outputs)
    outs = tuple(args[i] for i in outputs)
    return tuple(np.asarray(v) for v in fn(name, shape, ins, outs))


# ------------------------------------------------------------------ Compose
def shape_from(name: str, ins: Arrays) -> tuple[int, ...]:
    """The spec shape of a component of kind `name` given its inputs (a Compose states
    only its operands): Matmul's b, m, k, n; a convolution's from its image and filters;
    BiasAdd's the activation's; any-rank kinds' their first input's."""
    base = re.sub(r"Accum(\d*)$", r"\1", name)
    if base == "Matmul":
        (b, m, k), n = ins[0].shape, ins[1].shape[2]
        return b, m, k, n
    if re.fullmatch(r"Conv(S\d)?(D\d)?", base):
        s, d = _conv_geometry(base)
        (b, c, ih, iw), (f, _, fh, fw) = ins[0].shape, ins[1].shape
        return b, f, c, (ih - d * (fh - 1) - 1) // s + 1, (iw - d * (fw - 1) - 1) // s + 1, fh, fw
    return tuple(ins[0].shape)


def compose_outputs(components: list[str], args: list[np.ndarray]) -> np.ndarray:
    """A Compose's output: its components (head first) run innermost first, each on the
    previous one's output as its first input, the intermediate held in the output's
    dtype. Its operands are, head first, each component's inputs but the first (which
    is the previous output), then all the innermost one's, then the output."""
    out = args[-1]
    arity = {"Matmul": 2, "ElementwiseAdd": 2, "ElementwiseAddRelu": 2, "BiasAdd": 2, "BiasAddRelu": 2, "DivideVec": 2}
    arity["BatchMulScalar"] = 2
    n_in = [arity.get(c, 2 if re.fullmatch(r"Conv(S\d)?(D\d)?", c) else 1) for c in components]
    pos, extra = 0, []
    for n in n_in[:-1]:
        extra.append(args[pos : pos + n - 1])
        pos += n - 1
    prev = tuple(args[pos : pos + n_in[-1]])
    for i in range(len(components) - 1, -1, -1):
        ins = prev if i == len(components) - 1 else (prev[0], *extra[i])
        name = components[i]
        shape = shape_from(name, ins)
        fam = family_of(name)
        assert fam is not None, f"kind {name} has no second implementation: {WHERE}"
        (v,) = fam.outputs(name, shape, ins, (np.zeros(0, out.dtype),))
        prev = (np.asarray(v).astype(out.dtype),)
    return prev[0]
