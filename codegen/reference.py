"""numpy semantics of every spec kind, derived from its declaration (encodings/kinds/):
the oracle programs are checked against."""

from __future__ import annotations

from math import prod

import ml_dtypes
import numpy as np
from numpy.lib.stride_tricks import as_strided

from morello_asp.compose import chain_terms, component_specs, reference_chain
from morello_asp.errors import CodegenError
from morello_asp.kinds import COMBINERS, NUMPY_OPS, eval_merge, expr_operands, expr_ops, expr_red_dims, numpy_op
from morello_asp.spec import Spec


def reference(spec: Spec, *args: np.ndarray):
    """All operands in logical shape (outputs with their current contents); returns the
    output a correct program leaves (a tuple of them for a kind with several outputs).
    The semantics are the kind's declaration (encodings/kinds/), evaluated generically."""
    k = spec.k
    if len(args) != len(spec.operands):
        raise CodegenError(f"{spec.kind} takes {len(spec.operands)} arrays, got {len(args)}")
    if k.is_compose:
        return reference_chain(spec, args, reference)
    if k.merged:
        return _merged(spec, args)
    outs = tuple(_evaluate(spec, o, args) for o in k.outputs)
    return outs[0] if len(outs) == 1 else outs


def _merged(spec: Spec, args):
    """An accumulating kind with merges (kind_merge/3): every output's value over the
    run's points alone (new), then each merged output from old and new together."""
    k = spec.k
    new = {o: _evaluate(spec, o, args, accumulate=False) for o in k.outputs}
    old = {o: np.asarray(args[o]).astype(new[o].dtype) for o in k.outputs}

    def const(c):
        return _const(c, np.asarray(args[k.output]).dtype)  # the output's lowest value, not the compute dtype's

    outs = []
    for o in k.outputs:
        m, c = k.merge(o), k.combiner(o)
        with np.errstate(invalid="ignore", over="ignore"):
            v = eval_merge(m, old, new, const) if m is not None else _REDUCE[c](old[o], new[o]) if c else new[o]
        outs.append(np.asarray(v).astype(np.asarray(args[o]).dtype))
    return outs[0] if len(outs) == 1 else tuple(outs)


def flops(spec: Spec) -> int:
    """Arithmetic operations one run performs (0 for pure data movement): the operators
    of each output's per-point value, plus one combine per point where values combine."""
    k = spec.k
    if k.is_compose:
        return sum(flops(c) for c in component_specs(spec))
    total = 0
    for o in k.outputs:
        red = k.reduction_of(o, len(spec.shape))
        per = expr_ops(k.value(o)) + (1 if (red or k.is_accum) and k.combiner(o) else 0)
        total += per * spec.volume
    return total


# ----------------------------------------------------------------------- evaluation
_NP_OPS = {name: numpy_op(name) for name in NUMPY_OPS}
_REDUCE = {c: _NP_OPS[c] for c in COMBINERS}  # combiners are binary operators
_CHUNK = 1 << 24  # values of the point grid evaluated at once


def _compute_dtype(out_dtype: np.dtype) -> np.dtype:
    """What the C does its arithmetic in: the output's float type, or wide integers
    (C promotes small integers; wrapping happens on the store). Inputs are converted to
    it exactly, as the programs' casting moves do (issue 17: casts only widen); a bf16
    output is computed in f32 and rounded on the store."""
    if np.dtype(out_dtype) == np.dtype(ml_dtypes.bfloat16):
        return np.dtype(np.float32)
    return np.dtype(out_dtype) if np.issubdtype(out_dtype, np.floating) else np.dtype(np.int64)


def _const(c, dt: np.dtype):
    """Constant `c` of a kind's semantics for an output of dtype `dt`: neg_inf and pos_inf
    are an integer dtype's lowest and highest value (its own: int32's, not those of the
    int64 the arithmetic runs in, which wrapped to 0 on the store; issue 57)."""
    integer = np.dtype(dt).kind in "iu"  # bf16 (ml_dtypes) is no np.floating, and not an integer
    if c == "neg_inf":
        return np.iinfo(dt).min if integer else -np.inf
    if c == "pos_inf":
        return np.iinfo(dt).max if integer else np.inf
    return c


def _grid_view(a: np.ndarray, access, shape) -> np.ndarray:
    """Operand `a` seen on the spec's point grid: axis D of the view is spec dimension D
    (stride 0 where the operand does not depend on it); a dimension indexed by a sum of
    spec dimensions gives each of them its stride times its coefficient (a stride-2
    convolution's image row 2h + fh steps two rows per h), an offset shifts the start."""
    base = a[tuple(slice(x.offset, None) for x in access)] if any(x.offset for x in access) else a
    strides = [0] * len(shape)
    for j, x in enumerate(access):
        for d, c in x.terms:
            strides[d] += c * base.strides[j]
    vshape = [n if strides[d] or any(d in x.dims for x in access) else 1 for d, n in enumerate(shape)]
    strides = [s if n > 1 else 0 for s, n in zip(strides, vshape)]
    return as_strided(base, shape=vshape, strides=strides, writeable=False)


def _evaluate(spec: Spec, o: int, args, accumulate: bool = True) -> np.ndarray:
    """Output o after the run; without `accumulate`, its value over the run's points
    alone, in the compute dtype (what an accumulating kind combines with the old contents)."""
    k = spec.k
    shape = spec.shape
    access = k.access(len(shape))
    out = np.asarray(args[o])
    cdt = _compute_dtype(out.dtype)
    expr = k.value(o)
    red = k.reduction_of(o, len(shape))
    comb = k.combiner(o)
    ins = {i: np.ascontiguousarray(np.asarray(args[i]).astype(cdt)) for i in expr_operands(expr)}
    grid = {i: _grid_view(a, access[i], shape) for i, a in ins.items()}
    fast = _einsum(expr, comb, grid, k.deps(len(shape)), access[o], len(shape)) if red else None
    new = fast if fast is not None else _evaluate_grid(expr, comb, red, grid, shape, cdt, out.dtype)
    # both keep the output's spec dimensions in spec order; the output may list them in
    # another, with dimensions of size one (0 in kind_access/3) between them
    out_axes = [x.dims[0] for x in access[o] if x.dims]  # an output's dimensions are single or unit
    order = sorted(out_axes)
    new = np.asarray(new, dtype=cdt)
    if out_axes != order:
        new = np.transpose(new, [order.index(d) for d in out_axes])
    new = new.reshape(out.shape) if new.size == out.size else np.broadcast_to(new, out.shape)
    if not accumulate:
        return new
    if k.is_accum and comb is not None:
        new = _REDUCE[comb](out.astype(cdt), new)
    return new.astype(out.dtype)  # integers wrap as the C store does


def _einsum(expr, comb, grid, deps, out_access, rank):
    """Sum of a product of operands: one einsum over each operand's strided view of the
    dimensions it depends on (BLAS for a matmul, a sliding window for a convolution)."""
    if comb not in (None, "add"):
        return None
    factors: list[int] = []

    def collect(e) -> bool:
        if e[0] == "op":
            factors.append(e[1])
            return True
        return e[0] == "mul" and collect(e[1]) and collect(e[2])

    letters = "abcdefghijklmnopqrstuvwxyz"
    if not collect(expr) or rank > len(letters):
        return None
    keep = sorted(x.single for x in out_access if x.single is not None)
    views, subs = [], []
    for i in factors:
        g, ds = grid[i], deps[i]
        views.append(as_strided(g, shape=[g.shape[d] for d in ds], strides=[g.strides[d] for d in ds]))
        subs.append("".join(letters[d] for d in ds))
    return np.einsum(",".join(subs) + "->" + "".join(letters[d] for d in keep), *views, optimize=True)


def _evaluate_grid(expr, comb, red, grid, shape, cdt, odt):
    """Any expression: evaluated on the point grid (in dtype `cdt`, constants those of the
    output's dtype `odt`), reduced over the reduction axes, in chunks along the first
    reduction dimension so memory stays bounded."""

    def ev(e, sl):
        if e[0] == "op":
            return grid[e[1]][sl]
        if e[0] == "const":
            return np.asarray(_const(e[1], odt), dtype=cdt)
        if e[0] == "red":  # combine along one whole dimension, keeping it (size one)
            _, c, d, sub = e
            v = np.asarray(ev(sub, sl), dtype=cdt)
            full = list(v.shape) + [1] * (len(shape) - v.ndim)
            v = v.reshape(full)
            full[d] = shape[d]
            return _REDUCE[c].reduce(np.broadcast_to(v, full), axis=d, keepdims=True)
        return _NP_OPS[e[0]](*(ev(a, sl) for a in e[1:]))

    if not red:
        return np.broadcast_to(ev(expr, ()), shape)
    if expr_red_dims(expr):  # a red(...) needs its dimension whole: no chunks
        v = np.broadcast_to(ev(expr, ()), shape)
        return np.squeeze(_REDUCE[comb].reduce(v, axis=tuple(red), keepdims=True), axis=tuple(red))
    d0 = red[0]
    per = max(1, prod(shape) // max(1, shape[d0]))
    step = max(1, _CHUNK // per)
    acc = None
    fn = _REDUCE[comb]
    for lo in range(0, shape[d0], step):
        sl = tuple(slice(lo, lo + step) if d == d0 else slice(None) for d in range(len(shape)))
        part_shape = tuple(min(step, shape[d0] - lo) if d == d0 else n for d, n in enumerate(shape))
        v = np.broadcast_to(ev(expr, sl), part_shape)
        v = fn.reduce(v, axis=tuple(red), keepdims=True)
        acc = v if acc is None else fn(acc, v)
    return np.squeeze(acc, axis=tuple(red))


def tolerance(spec: Spec, want: np.ndarray) -> float:
    """Largest acceptable |got - want|: exact for integers; for floats, rounding that
    grows with the number of terms summed into each output value."""
    if not np.issubdtype(want.dtype, np.floating):
        return 0.0
    terms = 1
    k = spec.k
    rank = len(spec.shape)
    if k.is_compose:
        terms = chain_terms(spec)
    else:  # values summed into each output: its reductions and the dimensions red(...) reads whole
        for d in set(k.reduction(rank)) | set(k.scans(rank)):
            terms *= spec.shape[d]
    scale = max(1.0, float(np.abs(want[np.isfinite(want)]).max(initial=0.0)))  # a -inf fill scales nothing
    return 4 * np.finfo(want.dtype).eps * terms * scale


def random_operands(spec: Spec, seed: int = 0) -> list[np.ndarray]:
    """Random arrays in logical shape for every operand (small integers for int dtypes,
    so integer products never overflow)."""
    rng = np.random.default_rng(seed)
    out = []
    for ts, shape in zip(spec.operands, spec.operand_shapes):
        a = rng.random(shape) * 2 - 1 if ts.dtype.is_float else rng.integers(-8, 9, shape)
        out.append(np.asarray(a).astype(ts.dtype.np_dtype))
    return out


def max_error(got: np.ndarray, want: np.ndarray) -> float:
    """Largest |got - want|, equal values (infinities included: FillNegInf) counting 0."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.where(g == w, 0.0, np.abs(g - w))
    return float(np.nan_to_num(diff, nan=np.inf).max(initial=0.0))


def check_call(fn, spec: Spec, ops: list[np.ndarray], want) -> tuple[float, float]:
    """Call `fn` on the inputs of `ops` (every operand, outputs with their initial
    contents) and compare with `want` (the reference's result): (max |error|, tolerance)."""
    outs = spec.outputs
    wants = list(want) if len(outs) > 1 else [want]
    given = tuple(ops[o].copy() for o in outs)
    got = fn(*[a for i, a in enumerate(ops) if i not in outs], out=given if len(outs) > 1 else given[0])
    gots = list(got) if len(outs) > 1 else [got]
    err = max(max_error(g, w) for g, w in zip(gots, wants))
    return err, max(tolerance(spec, w) for w in wants)
