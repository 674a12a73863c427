"""Compose specs (paper 2.1; Morello's LogicalSpec::Compose): a chain of kinds whose
head's output is the result. Components are listed head first, as Morello prints them:
`Compose((Softmax2, Matmul), ...)` is softmax(A @ B). Each component's first input is
the next component's output; every other operand is an operand of the Compose, in
Morello's order (the head's other inputs, then each middle component's, then every
input of the innermost component, then the head's output).

A Compose is a `Kind` of its own (morello_asp/kinds/compose.py builds it), so the
generic machinery applies unchanged: operand shapes, tiling (a tile of the Compose tiles
every component with one loop: fusion), moves, the memo table's coordinates, and loops
in C. A dimension that some component reduces or reads whole (a softmax's row, a
matmul's k) is never tiled (`Kind.scans`). This module holds what a Compose *spec*
needs beyond its kind: its components as specs, and their numpy semantics chained.
"""

from __future__ import annotations

from morello_asp.layout import Layout
from morello_asp.spec import Spec, TensorSpec


# ------------------------------------------------------------------ semantics
def component_specs(spec: Spec) -> list[Spec]:
    """The components as plain specs (head first) on the Compose's shape; intermediates
    have the output's dtype and live where the output does."""
    info = spec.k.components
    assert info is not None
    src = {s: j for j, s in enumerate(info.sources)}
    out_ts = spec.operands[-1]
    out = []
    for c, p in enumerate(info.parts):
        shape = tuple(spec.shape[d] for d in p.dims)
        shapes = p.kind.operand_shapes(shape)
        ops = []
        for j in range(len(p.kind.params)):
            if (c, j) in src:
                ops.append(spec.operands[src[(c, j)]])
            else:
                ops.append(TensorSpec(out_ts.dtype, out_ts.level, Layout.row_major(len(shapes[j]))))
        out.append(Spec(p.kind.name, shape, tuple(ops), spec.serial, spec.limits, spec.target))
    return out


def reference_chain(spec: Spec, args, reference):
    """numpy semantics: each component's reference, innermost first, on the previous
    component's output (held in the output's dtype)."""
    import numpy as np

    info = spec.k.components
    assert info is not None
    src = {s: j for j, s in enumerate(info.sources)}
    specs = component_specs(spec)
    prev = np.zeros(0)
    for c in range(len(info.parts) - 1, -1, -1):
        cs = specs[c]
        arrays = []
        for j in range(len(cs.operands)):
            if (c, j) in src:
                arrays.append(np.asarray(args[src[(c, j)]]))
            elif j == 0 and c < len(info.parts) - 1:
                arrays.append(prev)
            else:  # the component's own output: computed anew
                arrays.append(np.zeros(cs.operand_shapes[j], dtype=cs.operands[j].dtype.np_dtype))
        got = reference(cs, *arrays)
        prev = got[0] if isinstance(got, tuple) else got
    return prev


def chain_terms(spec: Spec) -> int:
    """Values summed into each output value along the chain, for the tolerance: the
    sum over the components of the sizes they reduce or read whole."""
    info = spec.k.components
    assert info is not None
    total = 0
    for p in info.parts:
        t = 1
        for d in set(p.kind.reduction(p.rank)) | set(p.kind.scans(p.rank)):
            t *= spec.shape[p.dims[d]]
        total += t
    return total
