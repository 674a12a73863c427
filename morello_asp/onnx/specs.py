"""The specs an ONNX model is searched as: what `InferenceSession` builds a program for
and what `precompute` fills a memo table with (docs/precompute.md). Both go through
`step_spec`, so a table precomputed from `model_specs` answers every spec the session
asks for."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from morello_asp.layout import Layout
from morello_asp.onnx.importer import import_model
from morello_asp.onnx.plan import Step
from morello_asp.spec import Spec, parse_spec
from morello_asp.target import Target, as_target


def step_spec(step: Step, target: Target) -> Spec:
    """The Spec a program step is searched as: its spec text (the sugar form: GL,
    row-major, the target's whole memory) read for `target`, then each operand the
    importer gave another layout (a transposed operand read as col_major) set to it."""
    if step.spec is None:
        raise ValueError(f"step {step.label} is a view: it has no spec")
    spec = parse_spec(step.spec, target)
    for i, lay in step.layouts.items():
        rank = len(spec.operand_shapes[i])
        spec = spec.with_operand(i, replace(spec.operands[i], layout=Layout.parse(lay, rank)))
    return spec


def model_specs(model: Any, target: Any = None) -> list[str]:
    """The distinct spec texts of a model's plan (a path or an onnx.ModelProto), in plan
    order, for `target` (a name, a path, a Target; None: the default, as the session's):
    `precompute(model_specs(m, t), db=..., target=t)` fills a table an
    `InferenceSession(m, target=t, db=...)` then searches nothing in. The full text
    (every operand's level and layout, the memory limits) is what keeps a col_major
    operand; each one is read back to check that it names the same spec. ModelError for
    a model the importer cannot take."""
    tgt = as_target(target)
    out: dict[str, None] = {}
    for st in import_model(model).steps:
        if st.spec is None:
            continue
        spec = step_spec(st, tgt)
        text = spec.text()
        if text not in out:
            if parse_spec(text, tgt) != spec:  # a field the text form loses: precompute would fill the wrong spec
                raise RuntimeError(f"step {st.label}: spec text {text} does not read back as the spec it was made from")
            out[text] = None
    return list(out)
