"""What every compiled program does the same way, however it runs (in this process:
codegen/api.py; as its own executable: codegen/standalone.py): take arrays in logical
shape, check them against the spec, return or fill the outputs, check itself against
the numpy reference, and report its timing."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from morello_asp.codegen.convert import aligned_array, as_array
from morello_asp.codegen.ctarget import CTarget
from morello_asp.codegen.emitter import inputs_of
from morello_asp.codegen.padding import Padded
from morello_asp.codegen.reference import check_call, random_operands, reference
from morello_asp.errors import CodegenError
from morello_asp.spec import Spec


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
        """A fresh array for output o, its data on a 64-byte line (as fastcall.c's): zeros
        if the program accumulates into it, else uninitialised (the program writes every
        value)."""
        spec = self.spec
        return aligned_array(spec.operand_shapes[o], spec.operands[o].dtype.np_dtype, zero=o in inputs_of(spec))

    def _logical(self, i: int, x, what: str, output: bool = False) -> tuple[np.ndarray, bool]:
        """Argument x as operand i's array in logical shape, and whether it came without
        the leading batch 1 (the call then returns its outputs without it too)."""
        spec = self.spec
        shape = spec.operand_shapes[i]
        dt = spec.operands[i].dtype
        label = f"{what} ({self.names[i]})"
        a = as_array(x, label)
        if output and a is not x and a.base is None and a.flags.owndata:  # np.asarray made a copy
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

    def bind(self, args, out):
        """A call of this program on these arrays, made once: `call()` runs it each time
        they hold new values, writing `out` (or, with out=None, returning a new output).
        The arrays must stay alive and in place."""
        args = tuple(args)
        return lambda: self(*args, out=out)

    def padded(self, pad):
        """This program called on unpadded inputs: a `Padded` (codegen/padding.py) that
        writes each windowed input (a convolution's image) into the interior of a kept
        zero-bordered buffer. `pad`: zeros on both sides of every windowed dimension, or
        one entry (a number or a (before, after) pair) per windowed dimension."""
        return Padded(self, pad)

    def check(self, seed: int = 0) -> tuple[float, float]:
        """Run on random inputs against the numpy reference: (max |error|, tolerance)."""
        ops = random_operands(self.spec, seed)
        return check_call(self, self.spec, ops, reference(self.spec, *ops))


def bench_operands(spec: Spec, seed: int = 0) -> list[np.ndarray]:
    """The operands programs are timed on (in-process and standalone alike): uniform in
    [0, 1) for floats, integers in [-4, 4] otherwise."""
    rng = np.random.default_rng(seed)
    out = []
    for ts, shape in zip(spec.operands, spec.operand_shapes):
        a = rng.random(shape) if ts.dtype.is_float else rng.integers(-4, 5, shape)
        out.append(a.astype(ts.dtype.np_dtype))
    return out
