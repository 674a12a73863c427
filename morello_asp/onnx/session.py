"""InferenceSession: an ONNX model run by synthesized programs, with onnxruntime's
interface (get_inputs, get_outputs, run).

At construction the model is imported (importer.py: a plan of programs and views), each
distinct spec is searched once with one memo table for the whole model (the `db`
argument; default the user's default table, as `synthesize` uses), compiled, and the
intermediate tensors are given buffers: liveness over the plan's order, a dead tensor's
buffer reused by a later tensor that fits in it (best fit), allocated once for the
session. `run` then calls the programs on those buffers.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from morello_asp.codegen import fastcall
from morello_asp.codegen.convert import aligned_array, aligned_empty, dense_order, in_order
from morello_asp.default_table import DEFAULT_TABLE
from morello_asp.errors import InputError, NoImplementationError
from morello_asp.layout import Layout
from morello_asp.onnx import fusion
from morello_asp.onnx.importer import import_model, load
from morello_asp.onnx.plan import Plan, Step, View
from morello_asp.onnx.specs import step_spec
from morello_asp.synthesis import make_search
from morello_asp.target import as_target


@dataclass(frozen=True)
class NodeArg:
    """A graph input or output as onnxruntime describes it."""

    name: str
    shape: list[int]
    type: str = "tensor(float)"


@dataclass
class Program:
    """One distinct spec of the model: its program, cost, search time and the steps it serves."""

    spec: Any
    impl: Any
    fn: Any
    seconds: float


def _apply(a: np.ndarray, ops: View, copies: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The view `ops` make of kept array `a`. A reshape numpy can only make by copying (of
    a strided or cropped view) reshapes a kept buffer instead, and (buffer, view) joins
    `copies`: each run copies the view's values into it before the steps that read it."""
    for op, val in ops:
        if op == "transpose":
            a = a.transpose(val)
        elif op == "crop":  # the last two dimensions' first rows and columns
            a = a[..., : val[0], : val[1]]
        elif op == "stride":  # every val[0]-th row and column of the last two dimensions
            a = a[..., :: val[0], :: val[0]]
        else:
            try:
                r = a.view()
                r.shape = val  # raises rather than copy
            except AttributeError:
                kept = aligned_array(a.shape, np.float32)
                copies.append((kept, a))
                r = kept.reshape(val)
            a = r
    return a


class _Chain:
    """Consecutive steps called from C one after another (fastcall.c's chain), with no
    Python between them. A step whose program refuses its buffers (an input overlapping
    its output: nothing of it ran) runs its own way (its bound call, which copies), and
    the chain resumes after it."""

    def __init__(self, run, capsule, fallbacks: list[Any]):
        self._run, self._capsule, self._fallbacks = run, capsule, fallbacks

    def __call__(self) -> None:
        i = self._run(self._capsule, 0)
        while i >= 0:
            self._fallbacks[i]()
            i = self._run(self._capsule, i + 1)


class InferenceSession:
    """An ONNX model (a path or an onnx.ModelProto) compiled to synthesized programs for
    `target` (default: the native one, or $MORELLO_ASP_TARGET), searched with memo
    table `db` (a path, a table object, None for none; default the user's default
    table). Raises ModelError (an InputError) naming the node, its op and why for a
    model it cannot take. With `fuse`, each chain of two programs that one Compose spec
    expresses (fusion.py) is also searched fused, and the fused program replaces the two
    where the search prices it lower (`fusions` says what it found)."""

    def __init__(
        self,
        model: Any,
        target: Any = None,
        db: Any = DEFAULT_TABLE,
        rules: Sequence[str] = (),
        progress: Any = None,
        fuse: bool = False,
    ):
        self.model = load(model)
        self.plan: Plan = import_model(self.model)
        self.target = as_target(target)
        self.programs: dict[str, Program] = {}
        self.step_program: list[Program | None] = []
        self.fusions: list[fusion.Fusion] = []
        search = make_search(self.target, rules, db, progress)
        try:
            for st in self.plan.steps:
                self.step_program.append(None if st.spec is None else self._program(search, st))
        finally:
            _close(search, db)
        if fuse:
            self._fuse(rules, db, progress)
        for st, prog in zip(self.plan.steps, self.step_program):  # constants as their programs read them, once
            for i, a in enumerate(st.args):
                if a.const is not None:
                    a.const = _laid_out(a.const, prog.spec.operands[i].layout if prog else None)
        # a padded convolution's call writes its image into a kept zero-bordered buffer
        self.step_fn = [
            None if p is None else (p.fn.padded([st.pad[:2], st.pad[2:]]) if st.pad else p.fn)
            for st, p in zip(self.plan.steps, self.step_program)
        ]
        self._lock = threading.Lock()
        self._plan_buffers()

    def _fuse(self, rules: Sequence[str], db: Any, progress: Any) -> None:
        """Each chain searched as one Compose spec (rule set fusion.FUSE_RULES, its own
        table); taken where it costs less than its two programs."""
        found = fusion.chains(self.plan, self.target)
        if not found:
            return
        fdb = fusion.fused_table(db)
        search = make_search(self.target, (*rules, fusion.FUSE_RULES), fdb, progress)
        taken: dict[int, Program] = {}  # a taken chain's consumer -> the fused program
        try:
            for ch in found:
                parts = [self.step_program[ch.producer], self.step_program[ch.consumer]]
                separate = sum(p.impl.cost.main for p in parts if p is not None)
                spec = step_spec(ch.fused, self.target)
                t0 = time.perf_counter()
                try:
                    imp = search.build(spec)
                except NoImplementationError:
                    imp = None
                search.forget()
                secs = time.perf_counter() - t0
                cost = None if imp is None else imp.cost.main
                ok = cost is not None and cost < separate
                self.fusions.append(fusion.Fusion(ch.fused.label, cost, separate, ok, secs))
                if ok:
                    key = spec.text()
                    if key not in self.programs:
                        self.programs[key] = Program(spec, imp, imp.compile(), secs)
                    taken[ch.consumer] = self.programs[key]
        finally:
            _close(search, fdb)
        if taken:
            self.plan, origin = fusion.apply(self.plan, [ch for ch in found if ch.consumer in taken])
            self.step_program = [taken.get(i, self.step_program[i]) for i in origin]
            # the programs the steps now call (a chain's two may serve other steps too)
            used = {p.spec.text() for p in self.step_program if p is not None}
            self.programs = {k: p for k, p in self.programs.items() if k in used}

    def _program(self, search, st: Step) -> Program:
        spec = step_spec(st, self.target)  # what precompute's model_specs fills a table with
        key = spec.text()
        if key not in self.programs:
            t0 = time.perf_counter()
            imp = search.build(spec)
            search.forget()  # its answers are in the table: memory stays one spec's, not the model's
            secs = time.perf_counter() - t0
            self.programs[key] = Program(spec, imp, imp.compile(), secs)
        return self.programs[key]

    # ------------------------------------------------------------------ memory
    def _plan_buffers(self) -> None:
        """Every intermediate a program writes gets a slot of a shared buffer: slots
        are freed after their tensor's last reader and reused best fit."""
        plan = self.plan
        last = plan.last_use()
        outputs = {o.name for o in plan.outputs}
        sizes: list[int] = []  # buffer -> elements
        free: list[int] = []
        self.slot: dict[str, int] = {}
        frees: list[list[int]] = [[] for _ in range(len(plan.steps) + 1)]
        for i, st in enumerate(plan.steps):
            if st.spec is None or st.out in outputs:
                continue
            need = prod(st.out_shape)
            fits = [b for b in free if sizes[b] >= need]
            if fits:
                b = min(fits, key=lambda b: sizes[b])
                free.remove(b)
            else:
                b = len(sizes)
                sizes.append(need)
            self.slot[st.out] = b
            frees[last.get(st.out, i)].append(b)
            for f in frees[i]:
                free.append(f)
            frees[i] = []
        # on a 64-byte line, as the call's own outputs (numpy's would be 16 or 48 bytes past)
        self.buffers = [aligned_empty(n, np.float32) for n in sizes]
        # each input is copied into a kept buffer of its own at the start of a run, and each
        # output a program writes is kept too (run returns copies): every step's arguments
        # are then fixed arrays, and its call is made once (_bind)
        self._kept_in = {t.name: aligned_array(t.shape, np.float32) for t in plan.inputs}
        self._out_names = [o.name for o in plan.outputs]
        self._out_set = set(self._out_names)
        # an output no step reads is the call's own new array each run (no copy)
        read = {a.tensor for st in plan.steps for a in st.args} | {st.source for st in plan.steps}
        self._fresh = {
            st.out
            for st in plan.steps
            if st.spec is not None and st.out in outputs and st.out not in read and st.out_order is None
        }
        self._kept_out = {
            st.out: aligned_empty(prod(st.out_shape), np.float32)
            for st in plan.steps
            if st.spec is not None and st.out not in self.slot and st.out not in self._fresh
        }
        self._bind()
        self.intermediate_bytes = sum(sizes) * 4
        self.unplanned_bytes = 4 * sum(prod(st.out_shape) for st in plan.steps if st.out in self.slot)

    @property
    def input_buffers(self) -> dict[str, np.ndarray]:
        """Each graph input's kept buffer (logical shape, C order): a run copies the
        caller's array into it first."""
        return self._kept_in

    # ------------------------------------------------------------------ onnxruntime's interface
    def get_inputs(self) -> list[NodeArg]:
        return [NodeArg(t.name, list(t.shape), t.type) for t in self.plan.inputs]

    def get_outputs(self) -> list[NodeArg]:
        return [NodeArg(t.name, list(t.shape), t.type) for t in self.plan.outputs]

    def run(
        self, output_names: Iterable[str] | None, input_feed: Mapping[str, Any], run_options=None
    ) -> list[np.ndarray]:
        """The outputs named (None: all, in the graph's order) for the inputs given by
        name, as numpy arrays (float32, the graph's static shapes)."""
        plan = self.plan
        if output_names is None:
            names = self._out_names
        else:
            names = list(output_names)
            for n in names:
                if n not in self._out_set:
                    known = ", ".join(sorted(self._out_set))
                    raise InputError(f"no output {n!r} in the model (outputs: {known})")
        if not isinstance(input_feed, Mapping):
            raise InputError(f"input_feed: expected a mapping of names to arrays, not {type(input_feed).__name__}")
        arrays = []
        for t in plan.inputs:
            if t.name not in input_feed:
                raise InputError(f"input {t.name!r} is missing from input_feed")
            a = input_feed[t.name]
            if type(a) is not np.ndarray:
                a = np.asarray(a)
            if a.dtype != np.float32:
                raise InputError(f"input {t.name!r} has dtype {a.dtype}; the model takes float32")
            if a.shape != t.shape:
                raise InputError(f"input {t.name!r} has shape {a.shape}; the model takes {tuple(t.shape)}")
            arrays.append(a)
        if len(input_feed) != len(arrays):
            extra = set(input_feed) - {t.name for t in plan.inputs}
            raise InputError(f"input_feed names {', '.join(sorted(extra))}, not inputs of the model")
        with self._lock:  # the kept buffers are one run's
            for kept, a in zip(self._kept_in.values(), arrays):
                np.copyto(kept, a)
            self._made: dict[str, np.ndarray] = {}
            for call in self._calls:
                call()
            made, self._made = self._made, {}
            return [made[n] if n in made else self._static[n].copy() for n in names]

    def _new_output(self, name: str, shape: tuple[int, ...], call) -> None:
        self._made[name] = call().reshape(shape)

    def walk(self) -> tuple[list[tuple], dict[str, np.ndarray]]:
        """A run's steps on the session's arrays: ("copy", dst, src) where a view is
        staged through a kept buffer, and ("step", step, fn, args, out) for each program
        call, `out` None where the output is a fresh array each run; and every tensor's
        array as the steps leave it (inputs, views, outputs). Every argument is a kept
        buffer (an input's, an intermediate's slot, an output's), a view of one, or a
        constant. Each walk makes its own staging buffers: what `_bind` binds, and what a
        model's C (emit_c.py) lays out."""
        static: dict[str, np.ndarray] = dict(self._kept_in)
        static.update((n, np.asarray(c, dtype=np.float32)) for n, c in self.plan.consts_out.items())
        steps: list[tuple] = []
        for st, prog, fn in zip(self.plan.steps, self.step_program, self.step_fn):
            copies: list[tuple[np.ndarray, np.ndarray]] = []
            if prog is None:
                assert st.source is not None
                static[st.out] = _apply(static[st.source], st.view or [], copies)
                steps += [("copy", dst, src) for dst, src in copies]
                continue
            spec = prog.spec
            oshape = tuple(spec.operand_shapes[spec.output])
            args = [a.const if a.const is not None else _apply(static[str(a.tensor)], a.ops, copies) for a in st.args]
            steps += [("copy", dst, src) for dst, src in copies]
            if st.out in self._fresh:
                steps.append(("step", st, fn, args, None))
                continue
            kept = self.buffers[self.slot[st.out]] if st.out in self.slot else self._kept_out[st.out]
            kept = kept[: prod(oshape)]
            if st.out_order is None:
                out = kept.reshape(oshape)
                static[st.out] = out.reshape(st.out_shape)
            else:  # the tensor in its memory order; the program's output a view of it
                tensor = in_order(kept, st.out_shape, st.out_order)
                static[st.out] = tensor
                made: list[tuple[np.ndarray, np.ndarray]] = []
                out = _apply(tensor, st.out_ops or [], made)
                assert not made and out.shape == oshape, f"{st.label}: its output is no view of its tensor"
            steps.append(("step", st, fn, args, out))
        return steps, static

    def _bind(self) -> None:
        """Each step's call made once, on the arrays of a walk, so each program runs on
        fixed arrays (Program.bind: the compiled call alone). Consecutive steps whose
        arrays lie as their operands do are one chain (Program.chain_entry): a run calls
        them from C in turn, about a third of a microsecond less per step."""
        self._calls: list[Any] = []
        fast = fastcall.module()
        chained: list[tuple[tuple[int, tuple[int, ...]], Any]] = []  # (entry, its bound call) not yet in _calls

        def flush() -> None:
            if len(chained) > 1 and fast is not None:
                self._calls.append(_Chain(fast.run_chain, fast.chain([e for e, _ in chained]), [c for _, c in chained]))
            else:
                self._calls.extend(c for _, c in chained)
            chained.clear()

        def call(c) -> None:
            flush()
            self._calls.append(c)

        steps, self._static = self.walk()
        for ev in steps:
            if ev[0] == "copy":
                call(functools.partial(np.copyto, ev[1], ev[2]))
                continue
            _, st, fn, args, out = ev
            if out is None:
                call(functools.partial(self._new_output, st.out, st.out_shape, fn.bind(args, None)))
                continue
            entry = getattr(fn, "chain_entry", lambda a, o: None)(args, out)
            if entry is None:
                call(fn.bind(args, out))
            else:
                chained.append((entry, fn.bind(args, out)))
        flush()

    # ------------------------------------------------------------------ what was made
    def describe(self) -> list[tuple[str, str, str, int | None, float | None]]:
        """Per step: (its ONNX nodes, what it became, the spec text or view, cost, search seconds)."""
        rows: list[tuple[str, str, str, int | None, float | None]] = []
        seen: set[str] = set()
        for st, prog in zip(self.plan.steps, self.step_program):
            if prog is None:
                rows.append((st.label, st.out, st.note or "view " + _view_text(st.view or []), None, None))
                continue
            key = prog.spec.text()
            secs = None if key in seen else prog.seconds
            seen.add(key)
            rows.append((st.label, st.out, prog.spec.text(), prog.impl.cost.main, secs))
        return rows


def _close(search, db: Any) -> None:
    """A search's table flushed, and closed if it was opened from a path here."""
    memo = search.memo
    if memo is not None:
        memo.flush()
        if memo is not db and hasattr(memo, "close"):
            memo.close()
    if search.progress:
        search.progress.done()


def _laid_out(c: np.ndarray, layout: Layout | None) -> np.ndarray:
    """Constant c (logical shape) in float32 with its memory in `layout`'s order (where
    it only orders dimensions), so the compiled call reads it as it lies."""
    order = dense_order(layout, c.shape) if layout is not None else None
    out = aligned_array(c.shape, np.float32, order=order)  # on a line, as every buffer the session keeps
    out[...] = c
    return out


def _view_text(ops: View) -> str:
    if not ops:
        return "(identity)"
    return ", ".join(f"{op} {list(v)}" for op, v in ops)
