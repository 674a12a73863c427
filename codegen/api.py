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
from dataclasses import dataclass, field

import numpy as np

from morello_asp.errors import CodegenError
from morello_asp.ir import Impl
from morello_asp.spec import Spec
from morello_asp.target import Target

from . import fastcall
from .build import build
from .convert import dense_order, from_buffer, to_buffer
from .ctarget import CTarget, get_ctarget
from .emit import (
    bench_function,
    bench_signature,
    call_function,
    call_signature,
    emit_function,
    generate,
    inputs_of,
    param_names,
    prelude,
    signature,
)
from .reference import flops, random_operands, reference, tolerance


def max_error(got: np.ndarray, want: np.ndarray) -> float:
    """Largest |got - want|, equal values (infinities included: FillNegInf) counting 0."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.where(g == w, 0.0, np.abs(g - w))
    return float(np.nan_to_num(diff, nan=np.inf).max(initial=0.0))


def per_call(seconds: float) -> str:
    """Microseconds for tiny programs, milliseconds for big ones."""
    return f"{seconds * 1e6:.3f} us" if seconds < 1e-3 else f"{seconds * 1e3:.3f} ms"


@dataclass
class BenchResult:
    seconds: float  # median seconds per call
    gflops: float  # from the median; 0 for specs that do no arithmetic
    times: list[float] = field(default_factory=list)  # seconds per call, one per repetition
    iters: int = 0  # calls per repetition

    def __str__(self) -> str:
        per = per_call(self.seconds)
        return f"{per}/iter, {self.gflops:.2f} GFLOP/s (median of {len(self.times)} reps x {self.iters} calls)"


def loadable(ct: CTarget) -> CTarget:
    """`ct` if its programs can be loaded into this process; else a CodegenError saying why
    (a module with instructions this CPU lacks would kill Python with SIGILL)."""
    if ct.run_mode != "inprocess" or ct.emulator:
        raise CodegenError(
            f"target {ct.target.name} runs its programs as standalone executables, not in this process "
            "(tgt_run_mode/tgt_run_emulator)"
        )
    missing = ct.missing_cpu_flags()
    if missing:
        raise CodegenError(
            f"cannot run target {ct.target.name} programs here: this CPU lacks {', '.join(missing)} "
            "(/proc/cpuinfo); the C still compiles (to_c, --emit c)"
        )
    return ct


# DLPack device types (dlpack.h's DLDeviceType) a user may hand us, for the refusal message
_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm", 14: "oneapi"}


def as_array(x, what: str) -> np.ndarray:
    """`x` as a numpy array sharing its memory where it has any: an ndarray as is; a
    DLPack producer (torch CPU tensors, jax and cupy arrays, ...) through np.from_dlpack;
    anything with `__array_interface__`, `__array__` or the buffer protocol through
    np.asarray. A tensor on another device is refused, naming the device."""
    if isinstance(x, np.ndarray):
        return x
    device = getattr(x, "__dlpack_device__", None)
    if device is not None:
        try:
            kind = int(device()[0])
        except Exception as e:  # a producer's own error, whatever its class
            raise CodegenError(f"{what}: cannot ask {type(x).__name__} for its device ({e})") from None
        if kind != 1:
            raise CodegenError(
                f"{what} is on device {_DEVICES.get(kind, kind)}; programs run on the CPU (copy it there first)"
            )
        try:
            return np.from_dlpack(x)
        except (BufferError, TypeError, RuntimeError, ValueError):
            pass  # e.g. a dtype DLPack cannot carry: try numpy's other protocols
    try:
        return np.asarray(x)
    except Exception as e:
        raise CodegenError(f"{what}: cannot read a {type(x).__name__} as an array ({e})") from None


class Callable:
    """What every compiled program does the same way, however it runs: take inputs in
    logical shape (checked against the spec), return the output(s) or write them into
    `out=`, and check itself against the numpy reference. Subclasses run the program
    (`_execute`)."""

    spec: Spec
    names: list[str]

    def _execute(self, arrays: dict[int, np.ndarray]) -> None:
        """Run on logical arrays (one per operand), writing the outputs' arrays in place."""
        raise NotImplementedError

    def _new_output(self, o: int) -> np.ndarray:
        """A fresh array for output o: zeros if the program accumulates into it, else
        uninitialised (the program writes every value)."""
        spec = self.spec
        make = np.zeros if o in inputs_of(spec) else np.empty
        return make(spec.operand_shapes[o], dtype=spec.operands[o].dtype.np_dtype)

    def _logical(self, i: int, x, what: str, output: bool = False) -> tuple[np.ndarray, bool]:
        """Argument x as operand i's array in logical shape, and whether it came without
        the leading batch 1 (the call then returns its outputs without it too)."""
        spec = self.spec
        shape = spec.operand_shapes[i]
        dt = spec.operands[i].dtype
        label = f"{what} ({self.names[i]})"
        a = as_array(x, label)
        if output and a is not x and not isinstance(x, np.ndarray) and a.base is None and a.flags.owndata:
            raise CodegenError(f"{label} is a {type(x).__name__}, not an array the result can be written into")
        if a.dtype != dt.np_dtype and a.dtype == dt.raw_dtype:
            a = a.view(dt.np_dtype)  # bf16 as its raw 16-bit words (uint16)
        if a.dtype != dt.np_dtype:
            hint = (
                ".astype(ml_dtypes.bfloat16), or its raw bits as uint16"
                if dt.raw_dtype != dt.np_dtype
                else f".astype(np.{dt.np_dtype})"
            )
            raise CodegenError(f"{label} has dtype {a.dtype}; {spec.short()} needs {dt.np_dtype} (use {hint})")
        squeezed = False
        if a.shape != shape:
            if len(shape) >= 1 and shape[0] == 1 and a.shape == shape[1:]:
                a, squeezed = a.reshape(shape), True  # a view: the batch-1 dimension added
            else:
                raise CodegenError(f"{label} has shape {a.shape}; {spec.short()} needs {shape}")
        if output and not a.flags.writeable:
            raise CodegenError(f"{label} is read-only")
        return a, squeezed

    def __call__(self, *args, out=None):
        """Inputs in order; the output(s) returned, or written into `out=` (a tuple of
        arrays for a kind with several outputs)."""
        spec = self.spec
        outs = list(spec.outputs)
        ins = [i for i in range(len(spec.operands)) if i not in outs]
        if len(args) != len(ins):
            want = ", ".join(self.names[i] for i in ins) or "no positional arguments"
            raise CodegenError(f"{spec.short()} takes {len(ins)} input array(s) ({want}) and out=, got {len(args)}")
        given = None if out is None else (list(out) if len(outs) > 1 else [out])
        if given is not None and len(given) != len(outs):
            raise CodegenError(f"{spec.short()} has {len(outs)} outputs; out= needs a tuple of {len(outs)} arrays")
        arrays, squeeze = {}, False
        for k, (i, a) in enumerate(zip(ins, args)):
            arrays[i], sq = self._logical(i, a, f"argument {k + 1}")
            squeeze |= sq
        for k, o in enumerate(outs):
            arrays[o] = self._new_output(o) if given is None else self._logical(o, given[k], "out", output=True)[0]
        self._execute(arrays)
        if out is not None:
            return out
        res = [
            arrays[o].reshape(spec.operand_shapes[o][1:]) if squeeze and spec.operand_shapes[o][0] == 1 else arrays[o]
            for o in outs
        ]
        return res[0] if len(res) == 1 else tuple(res)

    def check(self, seed: int = 0) -> tuple[float, float]:
        """Run on random inputs against the numpy reference: (max |error|, tolerance)."""
        spec = self.spec
        ops = random_operands(spec, seed)
        outs = spec.outputs
        want = reference(spec, *ops)
        wants = list(want) if len(outs) > 1 else [want]
        given = tuple(ops[o].copy() for o in outs)
        got = self(*[a for i, a in enumerate(ops) if i not in outs], out=given if len(outs) > 1 else given[0])
        gots = list(got) if len(outs) > 1 else [got]
        err = max(max_error(g, w) for g, w in zip(gots, wants))
        return err, max(tolerance(spec, w) for w in wants)


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


class Program(Callable):
    """A compiled program loaded in this process: call it on numpy arrays, or time it.

    A call passes the arrays' own memory to C whatever their alignment (the program
    assumes none for its parameters; codegen/emit.py's Buffer.align), allocates an output
    with np.empty (np.zeros only for one it accumulates into), and releases the GIL while
    C runs (cffi does for every call). Only arrays whose memory is not in the operand's
    layout are copied: a strided slice, a layout that packs (copied in and out through
    convert.py), or an input that overlaps an output (the parameters are restrict)."""

    def __init__(self, impl: Impl, target: str | Target | None = None, rules=(), _built=None):
        self.impl = impl
        self.spec: Spec = impl.spec
        if _built is None:
            self.source, self.openmp = generate(impl, target, rules)
            ct = loadable(get_ctarget(target or impl.spec.target, rules))
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
            order = dense_order(ts.layout, tuple(shape))
            plans.append(
                OperandPlan(
                    i,
                    np.dtype(ts.dtype.np_dtype),
                    tuple(shape),
                    tuple(shape[1:]) if len(shape) > 1 and shape[0] == 1 else None,
                    order == tuple(range(len(shape))),
                    order,
                    i in spec.outputs and i in reads,
                )
            )
        self._plans = plans
        self._in_plans = [p for p in plans if p.index not in spec.outputs]
        self._out_plans = [p for p in plans if p.index in spec.outputs]
        fast = fastcall.module() if all(p.direct for p in plans) else None
        self._run = fast.run if fast else None
        self._fast = None
        if fast is not None:
            addr = int(self.module.ffi.cast("uintptr_t", self.module.ffi.addressof(lib, fname + "_call")))

            def entry(p: OperandPlan):
                return (p.index, p.dtype, p.shape, p.read)

            self._fast = fast.plan(
                addr, len(plans), tuple(map(entry, self._in_plans)), tuple(map(entry, self._out_plans))
            )

    def __call__(self, *args, out=None):
        """As Callable.__call__; arrays that are already what the program reads (the
        spec's dtype and shape, C-contiguous row-major buffers) go straight to C
        (fastcall.c), everything else through the Python path."""
        if self._fast is not None:
            r = self._run(self._fast, args, out)
            if r is not NotImplemented:
                return r
        return super().__call__(*args, out=out)

    def _new_output(self, o: int) -> np.ndarray:
        p = self._plans[o]
        if p.order is None or p.direct:
            return super()._new_output(o)
        # in buffer order, seen in logical order: the program writes it where it lies
        shp = tuple(p.shape[d] for d in p.order)
        buf = np.zeros(shp, p.dtype) if p.read else np.empty(shp, p.dtype)
        return buf.transpose(np.argsort(p.order))

    def _buffer(self, i: int, a: np.ndarray) -> np.ndarray:
        """Operand i's buffer: the array's own memory when it lies in the operand's
        layout, else a copy in that layout (a strided slice, a packing layout)."""
        p = self._plans[i]
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
                    bufs[i] = bufs[i].copy()
            self._call_on(bufs)
        for o in spec.outputs:
            if not np.shares_memory(bufs[o], arrays[o]):
                from_buffer(bufs[o].reshape(-1), spec.operands[o].layout, spec.operand_shapes[o], out=arrays[o])

    def _call_on(self, bufs: list[np.ndarray]) -> int:
        fb = self._from_buffer
        keep = [fb(b) for b in bufs]  # alive until the call returns
        return self._call(self.module.ffi.new("void *[]", keep))

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
        bufs = [
            to_buffer(a, ts.layout, s)
            for a, ts, s in zip(bench_operands(spec, seed), spec.operands, spec.operand_shapes)
        ]
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


def bench_operands(spec: Spec, seed: int = 0) -> list[np.ndarray]:
    """The operands programs are timed on (in-process and standalone alike): uniform in
    [0, 1) for floats, integers in [-4, 4] otherwise."""
    rng = np.random.default_rng(seed)
    out = []
    for ts, shape in zip(spec.operands, spec.operand_shapes):
        a = rng.random(shape) if ts.dtype.is_float else rng.integers(-4, 5, shape)
        out.append(a.astype(ts.dtype.np_dtype))
    return out


def compile_impl(impl: Impl, target: str | Target | None = None, rules=()) -> Program:
    """The program, loaded in this process or, for targets whose programs run standalone
    (tgt_run_mode(standalone) or an emulator), as an executable with the same calls."""
    ct = get_ctarget(target or impl.spec.target, rules)
    if ct.run_mode == "standalone" or ct.emulator:
        from .standalone import StandaloneProgram

        return StandaloneProgram(impl, target, rules)  # type: ignore[return-value]
    return Program(impl, target, rules)


def compile_many(impls: list[Impl], target: str | Target | None = None, rules=()) -> list[Program]:
    """Many programs in one C module (functions kernel_0, kernel_1, ...): one gcc run
    instead of one per program, which is most of the time for small programs."""
    if not impls:
        return []
    target = target or impls[0].spec.target
    ct = loadable(get_ctarget(target, rules))
    bodies: list[str] = []
    decls: list[str] = []
    omp = False
    for i, impl in enumerate(impls):
        body, uses_omp = emit_function(impl, f"kernel_{i}", target, rules)
        omp |= uses_omp
        bodies += [body, call_function(impl.spec, f"kernel_{i}"), bench_function(impl.spec, f"kernel_{i}")]
        decls.append(cdefs(impl.spec, f"kernel_{i}"))
    source = "\n".join(prelude(ct)) + "\n\n" + "\n\n".join(bodies) + "\n"
    module = build(source, "\n".join(decls), ct.flags, omp, cc=ct.compiler_command)
    progs = [Program(impl, target, rules, (module, f"kernel_{i}")) for i, impl in enumerate(impls)]
    for p in progs:
        p.source, p.openmp = source, omp
    return progs
