"""Python face of codegen: `impl.to_c()`, `impl.compile()`, `impl.benchmark()`.

Calling convention: positional arguments are the spec's operands other than the
output, in order, as arrays in *logical* shape (lhs b×m×k, rhs b×k×n for Matmul; a
batch-1 operand may be passed as 2-D): numpy arrays, or anything numpy reads without a
copy (DLPack, `__array_interface__`, the buffer protocol). `out=` is the output array;
for accumulating kinds its contents are accumulated into (zeros when omitted). Arrays
whose memory is in the operand's layout (row_major: C-contiguous, at any alignment) are
passed as they are; others are converted to and from the layout (packed, a strided
slice) here, so callers never see physical buffers. Dtypes must match the spec exactly.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from math import prod

import numpy as np

from morello_asp.codegen import fastcall
from morello_asp.codegen.build import build
from morello_asp.codegen.calling import (  # noqa: F401 (per_call: this module's public name too)
    BenchResult,
    Callable,
    bench_operands,
    loadable,
    per_call,
)
from morello_asp.codegen.convert import aligned_array, aligned_empty, dense_order, from_buffer, in_order, to_buffer
from morello_asp.codegen.ctarget import CTarget
from morello_asp.codegen.emit import (
    bench_function,
    bench_signature,
    call_function,
    call_signature,
    emit_function,
    generate,
    prelude,
    resolve,
    signature,
)
from morello_asp.codegen.emitter import inputs_of, param_names
from morello_asp.codegen.reference import flops, max_error  # noqa: F401 (max_error: this module's public name too)
from morello_asp.codegen.standalone import StandaloneProgram
from morello_asp.codegen.views import check_buffer_shapes, element_strides
from morello_asp.errors import CodegenError
from morello_asp.ir import Impl
from morello_asp.spec import Spec
from morello_asp.target import Target


@dataclass(frozen=True)
class OperandPlan:
    """What one operand must be for the call to pass its memory as it is: decided once
    per program, tested with numpy's cheapest attribute reads on every call."""

    index: int
    dtype: np.dtype
    shape: tuple[int, ...]
    squeezed: tuple[int, ...] | None  # the shape without a leading batch 1, also accepted
    direct: bool  # row-major buffer: a C-contiguous array is the buffer itself
    order: tuple[int, ...] | None  # the buffer is arr.transpose(order) in C order (None: packed)
    read: bool  # an output the program accumulates into (so a fresh one is zeroed)
    # the shape of the array the operand is a region of (codegen/views.py); None: its own
    bshape: tuple[int, ...] | None = None

    def full(self, a) -> np.ndarray | None:
        """`a` in the operand's shape (a batch 1 added: a view) if it is an ndarray of
        the operand's dtype and shape; else None."""
        if type(a) is not np.ndarray or a.dtype != self.dtype or a.shape not in (self.shape, self.squeezed):
            return None
        return a.reshape(self.shape) if a.shape != self.shape else a

    def lies(self, t: np.ndarray) -> bool:
        """Array t (the operand's shape) is the operand's buffer as it is: dense in the
        layout's order (for a region, strided as its array), aligned to its element."""
        assert self.order is not None
        if self.bshape is None:
            return t.transpose(self.order).flags.c_contiguous and t.flags.aligned
        want = element_strides(self.bshape, self.order)
        return t.flags.aligned and all(n == 1 or st == w * t.itemsize for n, st, w in zip(t.shape, t.strides, want))

    def entry(self) -> tuple:
        """What fastcall.c's plan reads of this operand."""
        return (self.index, self.dtype, self.shape, self.read, self.order, self.bshape or self.shape)


class Program(Callable):
    """A compiled program loaded in this process: call it on numpy arrays, or time it.

    A call passes the arrays' own memory to C whatever their alignment (the program
    assumes none for its parameters; codegen/emitter.py's Buffer.align), allocates an
    output on a 64-byte line (zeroed only for one it accumulates into), and releases the GIL
    while C runs (fastcall.c; cffi, on the Python path). Only arrays whose memory is not in the operand's
    layout are copied: a strided slice, a layout that packs (copied in and out through
    convert.py), or an input that overlaps an output (the parameters are restrict)."""

    def __init__(self, impl: Impl, ct: CTarget | None = None, _built=None, buffer_shapes=None):
        self.impl = impl
        self.spec: Spec = impl.spec
        # operands that are regions of larger arrays (codegen/views.py): a call takes
        # views strided as those arrays are
        self.buffer_shapes = check_buffer_shapes(self.spec, buffer_shapes)
        if _built is None:
            ct = loadable(ct or resolve(impl))
            self.source, self.openmp = generate(impl, ct, self.buffer_shapes)
            _built = (
                build(self.source, cdefs(self.spec, "kernel"), ct.flags, self.openmp, cc=ct.compiler_command),
                "kernel",
            )
        self.module, fname = _built
        lib = self.module.lib
        self._call = getattr(lib, fname + "_call")
        self._bench = getattr(lib, fname + "_bench")
        self._from_buffer = self.module.ffi.from_buffer
        self.names = param_names(self.spec)
        spec = self.spec
        reads = set(inputs_of(spec))
        plans = []
        for i, (ts, shape) in enumerate(zip(spec.operands, spec.operand_shapes)):
            order = dense_order(ts.layout, tuple(self.buffer_shapes.get(i, shape)))  # a region: its array's
            plans.append(
                OperandPlan(
                    i,
                    np.dtype(ts.dtype.np_dtype),
                    tuple(shape),
                    tuple(shape[1:]) if len(shape) > 1 and shape[0] == 1 else None,
                    order == tuple(range(len(shape))),
                    order,
                    i in spec.outputs and i in reads,
                    self.buffer_shapes.get(i),
                )
            )
        self._plans = plans
        self._in_plans = [p for p in plans if p.index not in spec.outputs]
        self._out_plans = [p for p in plans if p.index in spec.outputs]
        fast = fastcall.module() if all(p.order is not None for p in plans) else None
        self._run = fast.run if fast else None
        self._fast = None
        self._addr: int | None = None
        if fast is not None:
            self._addr = addr = int(self.module.ffi.cast("uintptr_t", self.module.ffi.addressof(lib, fname + "_call")))
            self._fast = fast.plan(
                addr, len(plans), tuple(p.entry() for p in self._in_plans), tuple(p.entry() for p in self._out_plans)
            )

    def __call__(self, *args, out=None):
        """As Callable.__call__; arrays that are already what the program reads (the
        spec's dtype and shape, laid out densely as the operand's layout orders them:
        C-contiguous for row-major, `a.T` of a C-contiguous `a` for col-major) go straight
        to C (fastcall.c), everything else through the Python path."""
        if self._fast is not None:
            r = self._run(self._fast, args, out)
            if r is not NotImplemented:
                return r
        return super().__call__(*args, out=out)

    def bind(self, args, out):
        """As Callable.bind; on the compiled path the call is fastcall.c's alone (a
        session's steps on its kept buffers), its checks repeated in C on every call. An
        input not laid out as its operand is (a cropped view) is copied into a kept
        buffer that is, by each call."""
        if self._fast is None:
            return super().bind(args, out)
        args, copies = list(args), []
        for k, p in enumerate(self._in_plans):
            a = args[k]
            t = p.full(a)
            if t is not None and not p.lies(t):
                # not in the operand's layout (a cropped or strided view): each call copies
                # it into a kept buffer that is, instead of taking the converting path
                kept = self._new_output(p.index).reshape(a.shape)
                copies.append((kept, a))
                args[k] = kept
        run, plan, fixed = self._run, self._fast, tuple(args)

        def call():
            for dst, src in copies:
                np.copyto(dst, src)
            r = run(plan, fixed, out)
            return self(*fixed, out=out) if r is NotImplemented else r  # e.g. an input overlapping out

        return call

    def chain_entry(self, args, out):
        """(the program's entry address, its operands' data pointers in parameter order):
        one call of a chain on these arrays (fastcall.c's chain, a session's steps), made
        from C with nothing of Python around it. None where the call must go through
        `bind`: no compiled call path, no out= (a fresh output each call), or an array not
        laid out as its operand is. The arrays must stay alive and in place."""
        if self._addr is None or out is None:
            return None
        outs = list(out) if isinstance(out, tuple) else [out]
        if len(args) != len(self._in_plans) or len(outs) != len(self._out_plans):
            return None
        ptrs = [0] * len(self._plans)
        pairs = [(p, a, False) for p, a in zip(self._in_plans, args)]
        pairs += [(p, a, True) for p, a in zip(self._out_plans, outs)]
        for p, a, written in pairs:
            t = p.full(a)
            if t is None or not p.lies(t) or (written and not a.flags.writeable):
                return None
            ptrs[p.index] = a.ctypes.data
        return self._addr, tuple(ptrs)

    def call_ops(self, args, out) -> list:
        """This call on these arrays as primitive steps: ("copy", dst, src) for each input
        not laid out as its operand, or overlapping an output (the program's parameters
        are restrict), into a new array that is, then ("call", self, operands in parameter
        order), each operand in its layout. What a whole model's C runs
        (morello_asp/onnx/emit_c.py). `out`: the output array (a tuple for several)."""
        spec = self.spec
        if self._fast is None:
            raise CodegenError(f"{spec.short()}: an operand in a packing layout; its C call cannot take numpy's arrays")
        outs = list(out) if isinstance(out, tuple) else [out]
        operands: list = [None] * len(self._plans)
        for p, o in zip(self._out_plans, outs):
            t = p.full(o)
            if t is None or not p.lies(t):
                raise CodegenError(f"{spec.short()}: its output is not laid out as the program writes it")
            operands[p.index] = t
        steps: list = []
        for p, a in zip(self._in_plans, args):
            t = p.full(a)
            if t is None:
                raise CodegenError(f"{spec.short()}: operand {p.index} is not an array of its dtype and shape")
            if not p.lies(t) or any(np.may_share_memory(t, operands[o]) for o in spec.outputs):
                kept = self._new_output(p.index)
                steps.append(("copy", kept, t))
                t = kept
            operands[p.index] = t
        return [*steps, ("call", self, operands)]

    def _new_output(self, o: int) -> np.ndarray:
        p = self._plans[o]
        if p.bshape is not None:  # a region: the corner of a new array of its array's shape
            assert p.order is not None
            whole = aligned_array(p.bshape, p.dtype, zero=p.read, order=p.order)
            return whole[tuple(slice(0, n) for n in p.shape)]
        if p.order is None or p.direct:
            return super()._new_output(o)
        # in buffer order, seen in logical order: the program writes it where it lies
        return aligned_array(p.shape, p.dtype, zero=p.read, order=p.order)

    def _buffer(self, i: int, a: np.ndarray) -> np.ndarray:
        """Operand i's buffer: the array's own memory when it lies in the operand's
        layout, else a copy in that layout (a strided slice, a packing layout)."""
        p = self._plans[i]
        if p.bshape is not None:
            if p.lies(a):
                return a
            kept = self._new_output(i)  # a region of an array of the right strides
            kept[...] = a
            return kept
        if p.order is not None:
            t = a if p.direct else a.transpose(p.order)
            if t.flags.c_contiguous and t.flags.aligned:
                return t
            return np.ascontiguousarray(t)
        ts = self.spec.operands[i]
        return to_buffer(a, ts.layout, self.spec.operand_shapes[i])

    def _execute(self, arrays: dict[int, np.ndarray]) -> None:
        spec = self.spec
        bufs = [self._buffer(i, arrays[i]) for i in range(len(spec.operands))]
        code = self._call_on(bufs)
        if code == 2:
            raise CodegenError(f"{spec.short()}: two out= arrays share memory")
        if code == 1:  # an input overlaps an output: the program reads a copy of it
            for i in range(len(bufs)):
                if i not in spec.outputs and any(np.may_share_memory(bufs[i], bufs[o]) for o in spec.outputs):
                    bufs[i] = self._buffer(i, bufs[i].copy()) if i in self.buffer_shapes else bufs[i].copy()
            self._call_on(bufs)
        for o in spec.outputs:
            if o in self.buffer_shapes:
                if bufs[o] is not arrays[o]:
                    arrays[o][...] = bufs[o]
            elif not np.shares_memory(bufs[o], arrays[o]):
                from_buffer(bufs[o].reshape(-1), spec.operands[o].layout, spec.operand_shapes[o], out=arrays[o])

    def _call_on(self, bufs: list[np.ndarray]) -> int:
        fb, ffi = self._from_buffer, self.module.ffi
        # alive until the call returns; a region (strided) by its first value's address
        keep = [ffi.cast("void *", b.ctypes.data) if i in self.buffer_shapes else fb(b) for i, b in enumerate(bufs)]
        return self._call(ffi.new("void *[]", keep))

    def _ptrs(self, bufs):
        ffi = self.module.ffi
        return [
            ffi.from_buffer(
                f"{self.spec.operands[i].dtype.c_type}[]",
                b.view(self.spec.operands[i].dtype.raw_dtype),
                require_writable=(i in self.spec.outputs),
            )
            for i, b in enumerate(bufs)
        ]

    # ------------------------------------------------------------ timing
    def benchmark(
        self, reps: int = 7, min_time: float = 0.05, warmup: int = 2, seed: int = 0, shift: int = 0
    ) -> BenchResult:
        """Median time per call over `reps` repetitions, each long enough (>= min_time s)
        that the clock's resolution does not matter; the loop runs in C (`kernel_bench`,
        the same function a standalone program times itself with). `shift`: bytes past
        a 64-byte boundary each operand starts at (16: where numpy puts small arrays)."""
        spec = self.spec
        if not 0 <= shift <= 64 or any(shift % ts.dtype.nbytes for ts in spec.operands):
            raise CodegenError(f"shift={shift}: bytes from 0 to 64, a multiple of every operand's element size")
        bufs = []
        for i, (a, ts, s) in enumerate(zip(bench_operands(spec, seed), spec.operands, spec.operand_shapes)):
            if i in self.buffer_shapes:  # a region at the corner of an array of its array's shape
                p = self._plans[i]
                assert p.order is not None and p.bshape is not None
                flat = aligned_empty(prod(p.bshape), p.dtype, zero=True)
                in_order(flat, p.bshape, p.order)[tuple(slice(0, n) for n in s)] = a
                bufs.append(flat)
                continue
            bufs.append(to_buffer(a, ts.layout, s))
        times = self.module.ffi.new("double[]", max(reps, 1))
        iters = self._bench(*self._ptrs(bufs), warmup, reps, min_time, times, shift)
        if iters < 0:
            raise CodegenError(f"{spec.short()}: out of memory for the timing buffers")
        per = [times[r] for r in range(reps)]
        med = statistics.median(per)
        return BenchResult(med, flops(spec) / med / 1e9, per, iters)


def cdefs(spec: Spec, fname: str) -> str:
    """The cffi declarations of one program's three C functions."""
    return ";\n".join([signature(spec, fname), call_signature(spec, fname), bench_signature(spec, fname)]) + ";"


def compile_impl(
    impl: Impl, target: str | Target | None = None, rules=(), buffer_shapes=None
) -> Program | StandaloneProgram:
    """The program, loaded in this process or, for targets whose programs run standalone
    (tgt_run_mode(standalone) or an emulator), as an executable with the same calls.
    `buffer_shapes`: operands that are regions of larger arrays (codegen/views.py)."""
    ct = resolve(impl, target, rules)
    if ct.run_mode == "standalone" or ct.emulator:
        if check_buffer_shapes(impl.spec, buffer_shapes):
            raise CodegenError(
                f"{impl.spec.short()}: standalone programs take whole arrays, not regions of larger ones"
            )
        return StandaloneProgram(impl, ct)
    return Program(impl, ct, buffer_shapes=buffer_shapes)


def compile_many(impls: list[Impl], target: str | Target | None = None, rules=()) -> list[Program]:
    """Many programs in one C module (functions kernel_0, kernel_1, ...): one gcc run
    instead of one per program, which is most of the time for small programs."""
    if not impls:
        return []
    ct = loadable(resolve(impls[0], target, rules))
    bodies: list[str] = []
    decls: list[str] = []
    omp = False
    for i, impl in enumerate(impls):
        body, uses_omp = emit_function(impl, f"kernel_{i}", ct)
        omp |= uses_omp
        bodies += [body, call_function(impl.spec, f"kernel_{i}"), bench_function(impl.spec, f"kernel_{i}")]
        decls.append(cdefs(impl.spec, f"kernel_{i}"))
    source = "\n".join(prelude(ct)) + "\n\n" + "\n\n".join(bodies) + "\n"
    module = build(source, "\n".join(decls), ct.flags, omp, cc=ct.compiler_command)
    progs = [Program(impl, ct, (module, f"kernel_{i}")) for i, impl in enumerate(impls)]
    for p in progs:
        p.source, p.openmp = source, omp
    return progs
