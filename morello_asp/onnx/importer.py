"""An ONNX graph -> a plan (plan.py): shapes inferred and checked static, constants read,
each node lowered by its op's entry in ops.OPS to programs (specs with their constant
operands prepared) and views, then the fold passes (a scale by a power of two into a
matmul's constant weights).

The importer keeps, for every activation tensor, its element strides relative to the
buffer it lives in (a program's output is row-major; a transpose permutes the strides,
copying nothing). A reshape of a contiguous tensor is a view; a tensor whose strides no
operand layout takes is copied first by a Move program (`materialize`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from morello_asp.errors import InputError
from morello_asp.onnx.ops import OPS
from morello_asp.onnx.plan import (
    Arg,
    ModelError,
    Plan,
    Step,
    TensorInfo,
    View,
    c_strides,
    dims_text,
    is_contiguous,
    layout_text,
    memory_order,
    order_strides,
    stride_order,
)

# ONNX's TensorProto.FLOAT; the only element type the importer takes for now.
FLOAT = 1
MIN_OPSET = 11


def require_onnx():
    """The onnx module; InputError saying how to install it when it is absent."""
    try:
        import onnx  # optional dependency (the onnx extra): only ONNX users need it
    except ImportError:
        raise InputError("ONNX models need the onnx extra: pip install 'morello-asp[onnx]'") from None
    return onnx


def load(model: Any):
    """A ModelProto from a path or a ModelProto; ModelError naming the file otherwise."""
    onnx = require_onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise ModelError(f"model={model!r}: expected an ONNX file path or an onnx.ModelProto")
    path = Path(model)
    if not path.is_file():
        raise ModelError(f"no ONNX model file {path}")
    try:
        return onnx.load(str(path))
    except Exception as e:  # onnx's DecodeError and friends: not a model file
        raise ModelError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from None


class Importer:
    """The state of one import: shapes, constants, strides of activations, the steps
    made so far and which step produced which tensor."""

    def __init__(self, model):
        onnx = require_onnx()
        from onnx import numpy_helper, shape_inference  # optional dependency (the onnx extra)

        try:
            onnx.checker.check_model(model)
            model = shape_inference.infer_shapes(model, strict_mode=True)
        except Exception as e:  # onnx's ValidationError / InferenceError
            raise ModelError(f"the model does not pass onnx's checker or shape inference: {_first_line(e)}") from None
        self.model = model
        g = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        if self.opset < MIN_OPSET:
            raise ModelError(
                f"opset {self.opset} is not supported (opset {MIN_OPSET} or later; onnx.version_converter converts)"
            )
        self.consts: dict[str, np.ndarray] = {}
        for init in g.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.types: dict[str, int] = {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            self._record(vi)
        self.strides: dict[str, tuple[int, ...]] = {}
        self.steps: list[Step] = []
        self.producer: dict[str, Step] = {}
        self.uses: dict[str, int] = {}
        for node in g.node:
            for t in node.input:
                self.uses[t] = self.uses.get(t, 0) + 1
        self.graph_outputs = {o.name for o in g.output}
        self.node: Any = None
        self._fresh = 0

    def _record(self, vi) -> None:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            return
        self.types[vi.name] = tt.elem_type
        if not tt.HasField("shape"):
            return
        if all(d.HasField("dim_value") for d in tt.shape.dim):
            self.shapes[vi.name] = tuple(d.dim_value for d in tt.shape.dim)

    # ------------------------------------------------------------------ errors and names
    def fail(self, why: str) -> ModelError:
        n = self.node
        return ModelError(f"node {n.name or '(unnamed)'} ({n.op_type}): {why}")

    def fresh(self, base: str) -> str:
        self._fresh += 1
        return f"{base}__{self._fresh}"

    def attr(self, name: str, default=None):
        from onnx import helper  # optional dependency (the onnx extra)

        for a in self.node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    # ------------------------------------------------------------------ tensors
    def shape(self, name: str) -> tuple[int, ...]:
        if name in self.consts:
            return tuple(self.consts[name].shape)
        if name not in self.shapes:
            raise self.fail(f"tensor {name!r} has no static shape (shapes must be static: fix the input shapes)")
        return self.shapes[name]

    def is_const(self, name: str) -> bool:
        return name in self.consts

    def const(self, name: str) -> np.ndarray:
        return self.consts[name]

    def check_float(self, name: str) -> None:
        t = self.consts[name].dtype if name in self.consts else None
        if t is not None:
            if t != np.float32:
                raise self.fail(f"constant {name!r} has dtype {t}; only float32 models are supported")
        elif self.types.get(name, FLOAT) != FLOAT:
            raise self.fail(f"tensor {name!r} is not float32; only float32 models are supported")

    def produce(self, step: Step) -> None:
        step.nodes = step.nodes or [self.node.name or "(unnamed)"]
        step.ops = step.ops or [self.node.op_type]
        self.steps.append(step)
        self.producer[step.out] = step
        if step.view is None:
            order = step.out_order
            shape = step.out_shape
            self.strides[step.out] = c_strides(shape) if order is None else order_strides(shape, order)

    def view(self, src: str, out: str, ops: View) -> None:
        """`out` = `src` after reshapes and transposes, no copy: src must be contiguous
        where a reshape is asked (callers check)."""
        shape, strides = self.shape(src), self.strides[src]
        for op, val in ops:
            if op == "transpose":
                shape = tuple(shape[p] for p in val)
                strides = tuple(strides[p] for p in val)
            else:
                assert is_contiguous(shape, strides)
                shape, strides = tuple(val), c_strides(val)
        self.shapes[out] = shape
        step = Step([], [], out, shape, kind="view", view=list(ops), source=src)
        self.produce(step)
        self.strides[out] = strides

    def contiguous(self, name: str) -> str:
        """A tensor holding `name`'s values row-major: itself, or a Move program's copy."""
        if self.is_const(name) or is_contiguous(self.shape(name), self.strides[name]):
            return name
        return self.materialize(name)

    def order(self, name: str) -> tuple[int, ...] | None:
        """The memory order `name` is dense in (the identity: row-major), None if strided."""
        if self.is_const(name):
            return tuple(range(len(self.shape(name))))
        return memory_order(self.shape(name), self.strides[name])

    def dense(self, name: str, orders: Sequence[tuple[int, ...]] = ()) -> tuple[str, tuple[int, ...]]:
        """`name` dense in memory, in its own order if that is row-major or one of
        `orders`, else copied row-major; and that order."""
        order = self.order(name)
        ident = tuple(range(len(self.shape(name))))
        if order is not None and (order == ident or order in orders):
            return name, order
        return self.materialize(name), ident

    def materialize(self, name: str, order: tuple[int, ...] | None = None) -> str:
        """Copy a tensor into a dense one in memory `order` (default row-major) by a Move
        program whose source layout is the tensor's order in memory (so the call passes
        it as it is)."""
        shape, strides = self.shape(name), self.strides[name]
        src = stride_order(strides)
        out = self.fresh(name)
        self.shapes[out] = shape
        layouts = {0: layout_text(src)}
        if order is not None and order != tuple(range(len(shape))):
            layouts[1] = layout_text(order)
        else:
            order = None
        spec = f"Move({dims_text(shape)}, f32)"
        args = [Arg(tensor=name)]
        self.produce(Step([], [], out, shape, spec=spec, layouts=layouts, args=args, kind="move", out_order=order))
        return out

    def in_memory(self, name: str, order: tuple[int, ...]) -> tuple[Arg, tuple[int, ...]]:
        """`name` (dense in memory `order`; a constant: laid out so at import) as the
        row-major array of its memory, and that array's shape: an elementwise op's
        operand."""
        shape = self.shape(name)
        phys = tuple(shape[d] for d in order)
        ident = order == tuple(range(len(shape)))
        if self.is_const(name):
            return Arg(const=np.ascontiguousarray(self.const(name).transpose(order), dtype=np.float32)), phys
        if self.order(name) != order:
            name = self.materialize(name, None if ident else order)
        return Arg(tensor=name, ops=[] if ident else [("transpose", order)]), phys

    def operand(self, name: str, shape: tuple[int, ...]) -> Arg:
        """`name` as a row-major operand of logical shape `shape` (same volume)."""
        if self.is_const(name):
            c = np.ascontiguousarray(self.const(name).reshape(shape), dtype=np.float32)
            return Arg(const=c)
        name = self.contiguous(name)
        ops: View = [] if self.shape(name) == shape else [("reshape", shape)]
        return Arg(tensor=name, ops=ops)

    # ------------------------------------------------------------------ the walk
    def run(self) -> Plan:
        g = self.model.graph
        inputs = []
        for vi in g.input:
            if vi.name in self.consts:
                continue  # an initializer listed as an input (old exporters)
            self.node = _GraphNode(vi.name, "graph input")
            if vi.name not in self.shapes:
                raise self.fail("its shape is not static (every dimension must be a number)")
            self.check_float(vi.name)
            self.strides[vi.name] = c_strides(self.shapes[vi.name])
            inputs.append(TensorInfo(vi.name, self.shapes[vi.name]))
        for node in g.node:
            self.node = node
            if node.domain not in ("", "ai.onnx"):
                raise self.fail(f"domain {node.domain!r} is not supported (only the default ONNX domain)")
            fn = OPS.get(node.op_type)
            if fn is None:
                raise self.fail(f"op {node.op_type} is not supported (supported: {', '.join(sorted(OPS))})")
            for t in node.output:
                if t and t not in self.shapes and node.op_type != "Constant":
                    raise self.fail(f"output {t!r} has no static shape (shapes must be static)")
            fn(self, node)
        outputs, consts_out = [], {}
        for vi in g.output:
            self.node = _GraphNode(vi.name, "graph output")
            if vi.name in self.consts:
                consts_out[vi.name] = self.consts[vi.name]
            outputs.append(TensorInfo(vi.name, self.shape(vi.name)))
        fold_scales(self)
        return Plan(inputs, outputs, self.steps, dict(self.shapes), consts_out)


class _GraphNode:
    """A stand-in node for messages about graph inputs and outputs."""

    def __init__(self, name: str, what: str):
        self.name, self.op_type, self.attribute = name, what, ()


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def fold_scales(imp: Importer) -> None:
    """A scale step by a power of two (exact in f32) whose input only it reads is folded
    into the constant weights of the matmul upstream (through views and matmuls of two
    activations, where scaling either factor scales the product), and removed."""
    steps = imp.steps
    for st in list(steps):
        if st.kind != "scale":
            continue
        s = float(st.args[1].const.reshape(-1)[0])  # type: ignore[union-attr]
        m, e = np.frexp(s)
        if m not in (0.5, -0.5) or not np.isfinite(s):
            continue
        src = st.args[0].tensor
        if src is None or imp.uses.get(src, 0) > 1 or src in imp.graph_outputs:
            continue
        found = _scalable(imp, src)
        if found is None:
            continue
        target, owners = found
        st.note = f"scale {s:g} folded into the constants of {', '.join(owners)}"
        for a in target:
            a.const = (a.const * np.float32(s)).astype(np.float32)  # type: ignore[operator]
        # the scale step becomes a view of its input: the same values now
        st.kind, st.spec, st.args, st.source = "view", None, [], src
        st.view = [] if imp.shape(src) == st.out_shape else [("reshape", st.out_shape)]


def _scalable(imp: Importer, t: str, depth: int = 0) -> tuple[list[Arg], list[str]] | None:
    """The constant args whose scaling scales tensor t (and the steps that own them), or None."""
    st = imp.producer.get(t)
    if st is None or depth > 8:
        return None
    if st.kind == "view" and st.source is not None:
        return _scalable(imp, st.source, depth + 1) if imp.uses.get(st.source, 0) <= 1 else None
    if st.kind == "matmul":
        consts = [a for a in st.args if a.const is not None]
        if consts:
            return consts[:1], [st.label]
        for a in st.args:
            if a.tensor is not None and imp.uses.get(a.tensor, 0) <= 1 and a.tensor not in imp.graph_outputs:
                found = _scalable(imp, a.tensor, depth + 1)
                if found is not None:
                    return found
    if st.kind == "bias":  # (x + b) * s = x * s + b * s
        inner = st.args[0].tensor
        if inner is not None and imp.uses.get(inner, 0) <= 1:
            found = _scalable(imp, inner, depth + 1)
            if found is not None:
                return found[0] + [st.args[1]], found[1] + [st.label]
    return None


def import_model(model: Any) -> Plan:
    """The plan of an ONNX model (a path or a ModelProto): ModelError naming the node,
    its op and why for anything not supported."""
    return Importer(load(model)).run()
