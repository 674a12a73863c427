"""Python face of codegen: `impl.to_c()`, `impl.compile()`, `impl.benchmark()`.

Calling convention: positional arguments are the spec's operands other than the
output, in order, as numpy arrays in *logical* shape (lhs b×m×k, rhs b×k×n for
Matmul; a batch-1 operand may be passed as 2-D). `out=` is the output array; for
accumulating kinds its contents are accumulated into (zeros when omitted). Arrays are
converted to and from each operand's layout (packed, col_major, ...) here, so callers
never see physical buffers. Dtypes must match the spec exactly.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from morello_asp.errors import CodegenError
from morello_asp.ir import Impl
from morello_asp.spec import Spec
from morello_asp.target import Target

from .build import build
from .convert import from_buffer, is_aligned, to_buffer
from .ctarget import CTarget, get_ctarget
from .emit import bench_function, bench_signature, emit_function, generate, param_names, prelude, signature
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

    def _logical(self, i: int, a, what: str) -> np.ndarray:
        spec = self.spec
        shape = spec.operand_shapes[i]
        dt = spec.operands[i].dtype
        a = np.asarray(a)
        if a.dtype != dt.np_dtype and a.dtype == dt.raw_dtype:
            a = a.view(dt.np_dtype)  # bf16 as its raw 16-bit words (uint16)
        if a.dtype != dt.np_dtype:
            hint = (
                ".astype(ml_dtypes.bfloat16), or its raw bits as uint16"
                if dt.raw_dtype != dt.np_dtype
                else f".astype(np.{dt.np_dtype})"
            )
            raise CodegenError(
                f"{what} ({self.names[i]}) has dtype {a.dtype}; {spec.short()} needs {dt.np_dtype} (use {hint})"
            )
        if a.shape != shape:
            if len(shape) >= 1 and shape[0] == 1 and a.shape == shape[1:]:
                a = a.reshape(shape)
            else:
                raise CodegenError(f"{what} ({self.names[i]}) has shape {a.shape}; {spec.short()} needs {shape}")
        return a

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
        arrays = {i: self._logical(i, a, f"argument {k + 1}") for k, (i, a) in enumerate(zip(ins, args))}
        squeeze = any(np.ndim(a) < len(spec.operand_shapes[i]) for i, a in zip(ins, args))
        for k, o in enumerate(outs):
            if given is not None:
                arrays[o] = self._logical(o, given[k], "out")
                if not arrays[o].flags.writeable:
                    raise CodegenError("out is read-only")
            else:
                arrays[o] = np.zeros(spec.operand_shapes[o], dtype=spec.operands[o].dtype.np_dtype)
        for i in ins:  # the C function's pointers are restrict: never let out alias an input
            if any(np.shares_memory(arrays[i], arrays[o]) for o in outs):
                arrays[i] = arrays[i].copy()
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


class Program(Callable):
    """A compiled program loaded in this process: call it on numpy arrays, or time it."""

    def __init__(self, impl: Impl, target: str | Target | None = None, rules=(), _built=None):
        self.impl = impl
        self.spec: Spec = impl.spec
        if _built is None:
            self.source, self.openmp = generate(impl, target, rules)
            ct = loadable(get_ctarget(target or impl.spec.target, rules))
            cdef = signature(self.spec, "kernel") + ";\n" + bench_signature(self.spec, "kernel") + ";"
            _built = (build(self.source, cdef, ct.flags, self.openmp, cc=ct.compiler_command), "kernel")
        self.module, fname = _built
        self._fn = getattr(self.module.lib, fname)
        self._bench = getattr(self.module.lib, fname + "_bench")
        self.names = param_names(self.spec)

    def _buffer(self, i: int, a: np.ndarray) -> np.ndarray:
        ts = self.spec.operands[i]
        shape = self.spec.operand_shapes[i]
        if (
            str(ts.layout) == "row_major"
            and a.flags.c_contiguous
            and is_aligned(a)
            and ts.layout.buffer_volume(shape) == a.size
        ):
            return a.reshape(-1)
        return to_buffer(a, ts.layout, shape)

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

    def _execute(self, arrays: dict[int, np.ndarray]) -> None:
        spec = self.spec
        bufs = [self._buffer(i, arrays[i]) for i in range(len(spec.operands))]
        self._fn(*self._ptrs(bufs))
        for o in spec.outputs:
            if not np.shares_memory(bufs[o], arrays[o]):
                from_buffer(bufs[o], spec.operands[o].layout, spec.operand_shapes[o], out=arrays[o])

    # ------------------------------------------------------------ timing
    def benchmark(self, reps: int = 7, min_time: float = 0.05, warmup: int = 2, seed: int = 0) -> BenchResult:
        """Median time per call over `reps` repetitions, each long enough (>= min_time s)
        that the clock's resolution does not matter; the loop runs in C (`kernel_bench`,
        the same function a standalone program times itself with)."""
        spec = self.spec
        bufs = [
            to_buffer(a, ts.layout, s)
            for a, ts, s in zip(bench_operands(spec, seed), spec.operands, spec.operand_shapes)
        ]
        times = self.module.ffi.new("double[]", max(reps, 1))
        iters = self._bench(*self._ptrs(bufs), warmup, reps, min_time, times)
        if iters < 0:
            raise CodegenError(f"{spec.short()}: out of memory for the timing buffers")
        per = [times[r] for r in range(reps)]
        med = statistics.median(per)
        return BenchResult(med, flops(spec) / med / 1e9, per, iters)


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
    bodies, cdefs, omp = [], [], False
    for i, impl in enumerate(impls):
        body, uses_omp = emit_function(impl, f"kernel_{i}", target, rules)
        omp |= uses_omp
        bodies += [body, bench_function(impl.spec, f"kernel_{i}")]
        cdefs += [signature(impl.spec, f"kernel_{i}") + ";", bench_signature(impl.spec, f"kernel_{i}") + ";"]
    source = "\n".join(prelude(ct)) + "\n\n" + "\n\n".join(bodies) + "\n"
    module = build(source, "\n".join(cdefs), ct.flags, omp, cc=ct.compiler_command)
    progs = [Program(impl, target, rules, (module, f"kernel_{i}")) for i, impl in enumerate(impls)]
    for p in progs:
        p.source, p.openmp = source, omp
    return progs
