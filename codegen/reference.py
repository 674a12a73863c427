"""numpy semantics of every spec kind: the oracle programs are checked against.

Each function takes the inputs in logical shape (see `inputs_of`) and the current
output (for accumulating kinds) and returns the new output.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from morello_asp.errors import CodegenError
from morello_asp.spec import Spec


def _matmul(spec, lhs, rhs, out):
    return np.matmul(lhs, rhs).astype(out.dtype)


def _matmul_accum(spec, lhs, rhs, out):
    return (out + np.matmul(lhs, rhs)).astype(out.dtype)


def _zero(spec, out):
    return np.zeros_like(out)


def _move(spec, src, dst):
    return src.astype(dst.dtype).copy()


REFERENCE: dict[str, Callable] = {
    "Matmul": _matmul,
    "MatmulAccum": _matmul_accum,
    "Zero": _zero,
    "Move": _move,
}

FLOPS: dict[str, Callable[[Spec], int]] = {
    "Matmul": lambda s: 2 * s.volume,
    "MatmulAccum": lambda s: 2 * s.volume,
}


def reference(spec: Spec, *args: np.ndarray) -> np.ndarray:
    """All operands in logical shape (the output's current contents last); returns the
    output a correct program leaves."""
    try:
        fn = REFERENCE[spec.kind]
    except KeyError:
        raise CodegenError(f"no numpy reference semantics for {spec.kind}") from None
    return fn(spec, *args)


def flops(spec: Spec) -> int:
    """Arithmetic operations one run performs (0 for pure data movement)."""
    return FLOPS.get(spec.kind, lambda s: 0)(spec)


def tolerance(spec: Spec, want: np.ndarray) -> float:
    """Largest acceptable |got - want|: exact for integers; for floats, rounding that
    grows with the number of terms summed into each output value."""
    if not np.issubdtype(want.dtype, np.floating):
        return 0.0
    terms = 1
    for d in spec.k.reduction(len(spec.shape)):
        terms *= spec.shape[d]
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
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
