"""Chains of a plan's steps that one Compose spec expresses, and the step that fuses them:
what `InferenceSession(fuse=True)` asks the search about. The session searches the
Compose under the `fuse_in_cache` rule set (its intermediate kept in the cache nearest
the registers: encodings/options/fuse_in_cache.lp) and takes it only where its cost is
below the two programs' (docs/onnx.md, "Fusion").

A chain is a producer step whose output only the consumer reads, the consumer reading it
whole and in order (a reshape at most), both outputs row-major. Which pairs of step kinds
fuse, and as which Compose head, is the table below; what each computes is in the kinds'
declarations.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from morello_asp.onnx.plan import Plan, Step, dims_text
from morello_asp.onnx.specs import step_spec
from morello_asp.target import Target

# (producer kind, consumer kind) -> the Compose's head kind, for a producer Matmul over
# (batch, m, k, n) and a consumer along the last axis of its (batch·m) x n output
_COMPOSE_HEAD = {("matmul", "softmax"): "Softmax2"}

# the rule set the fused spec is searched under (encodings/options/)
FUSE_RULES = "fuse_in_cache"


@dataclass(frozen=True)
class Chain:
    """Steps `producer` then `consumer` of a plan, and the one step doing both."""

    producer: int
    consumer: int
    fused: Step
    views: tuple[int, ...] = ()  # the reshaping views between them, gone with the intermediate


@dataclass(frozen=True)
class Fusion:
    """What the search said of a chain: its steps' label, the fused spec's cost and the
    two programs' together, whether the fused one was taken, its search seconds."""

    label: str
    fused_cost: int | None  # None: the search found no fused program
    separate_cost: int
    taken: bool
    seconds: float


def _reads(plan: Plan) -> dict[str, int]:
    """Tensor -> how many steps read it (an argument or a view's source)."""
    n: dict[str, int] = {}
    for st in plan.steps:
        for t in [a.tensor for a in st.args] + [st.source]:
            if t is not None:
                n[t] = n.get(t, 0) + 1
    return n


def chains(plan: Plan, target: Target) -> list[Chain]:
    """Every chain of `plan` the table above fuses; no step is in two."""
    reads = _reads(plan)
    outputs = {o.name for o in plan.outputs}
    made = {st.out: i for i, st in enumerate(plan.steps) if st.spec is not None}
    # a view that only reshapes (or is a step folded away, such as a scale): its source
    reshaped = {
        st.out: (v, st.source)
        for v, st in enumerate(plan.steps)
        if st.spec is None and st.source is not None and all(op == "reshape" for op, _ in st.view or [])
    }
    found: list[Chain] = []
    used: set[int] = set()
    for j, c in enumerate(plan.steps):
        if c.spec is None or len(c.args) != 1 or c.args[0].tensor is None:
            continue
        if any(op != "reshape" for op, _ in c.args[0].ops):
            continue
        # the tensors from the consumer's argument back to a program's output, and the views
        t, path, views = c.args[0].tensor, [], []
        while t in reshaped:
            path.append(t)
            v, t = reshaped[t]
            views.append(v)
        path.append(t)
        if t not in made or any(reads.get(x, 0) != 1 or x in outputs for x in path):
            continue
        i = made[t]
        p = plan.steps[i]
        head = _COMPOSE_HEAD.get((p.kind, c.kind))
        if head is None or i in used:
            continue
        # both outputs row-major, the consumer reading its input as it lies
        if p.out_order or p.out_ops or c.out_order or c.out_ops or c.layouts:
            continue
        ps, cs = step_spec(p, target), step_spec(c, target)
        if ps.output in p.layouts:  # the Compose's output is the consumer's, row-major
            continue
        b, m, k, n = ps.shape
        if tuple(cs.operand_shapes[cs.output]) != (b * m, n):  # along the last axis, rows in order
            continue
        spec = f"Compose(({head}, {ps.kind}), [{dims_text((b, m, k))}, {dims_text((b, k, n))}], f32)"
        between = [plan.steps[v] for v in sorted(views)]
        fused = Step(
            [*p.nodes, *(node for st in between for node in st.nodes), *c.nodes],
            [*p.ops, *(op for st in between for op in st.ops), *c.ops],
            c.out,
            c.out_shape,
            spec=spec,
            layouts=dict(p.layouts),  # the Compose's inputs are the Matmul's, in its order
            args=list(p.args),
            kind=f"{c.kind}_{p.kind}",
        )
        found.append(Chain(i, j, fused, tuple(sorted(views))))
        used |= {i, j}
    return found


def fused_table(db: Any) -> Any:
    """Where the fused specs' search keeps its work: another rule set, another table. A
    path's sibling (`T.db` -> `T.db.fuse_in_cache`); the default table and None as they
    are (the default is one file per rule set already); a table object: none."""
    if db is None or isinstance(db, (str, os.PathLike)):
        return None if db is None else f"{os.fspath(db)}.{FUSE_RULES}"
    if hasattr(db, "get") and hasattr(db, "put"):
        return None
    return db  # DEFAULT_TABLE


def apply(plan: Plan, taken: list[Chain]) -> tuple[Plan, list[int]]:
    """The plan with each taken chain's two steps replaced by its fused step (at the
    consumer's place: everything the producer read is still there), and for each new step
    the index of the old one it stands in for (the fused step: its consumer's)."""
    drop = {ch.producer for ch in taken} | {k for ch in taken for k in ch.views}
    at = {ch.consumer: ch.fused for ch in taken}
    steps: list[Step] = []
    origin: list[int] = []
    for i, st in enumerate(plan.steps):
        if i in drop:
            continue
        steps.append(at.get(i, st))
        origin.append(i)
    return replace(plan, steps=steps), origin
