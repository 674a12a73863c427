"""Lower a complete implementation tree to one C99 function, with the entry Python
calls (`kernel_call`) and the timing loop (`kernel_bench`) beside it. The nodes' C is
written by their rewrite families through the emitter (codegen/emitter.py)."""

from __future__ import annotations

import re

from morello_asp.codegen.ctarget import CTarget, get_ctarget
from morello_asp.codegen.emitter import Emitter, inputs_of, param_names, parameter_views
from morello_asp.codegen.views import check_buffer_shapes, span
from morello_asp.errors import CodegenError
from morello_asp.ir import Impl
from morello_asp.rewrites import for_node
from morello_asp.spec import Spec
from morello_asp.target import Target


# -------------------------------------------------------------------- whole programs
def prelude(ct: CTarget) -> list[str]:
    lines = [
        "#define _GNU_SOURCE",
        "#include <stdint.h>",
        "#include <stdlib.h>",
        "#include <string.h>",
        "#include <time.h>",
    ]
    lines += [f"#include <{h}>" for h in ct.headers if h not in ("string.h", "stdlib.h", "stdint.h", "time.h")]
    return lines


def signature(spec: Spec, fname: str) -> str:
    ins = set(inputs_of(spec))
    params = []
    for i, (n, t) in enumerate(zip(param_names(spec), spec.operands)):
        const = "const " if i in ins and i not in spec.outputs else ""
        params.append(f"{const}{t.dtype.c_type} *restrict {n}")
    return f"void {fname}({', '.join(params)})"


def emit_function(
    impl: Impl, fname: str, ct: CTarget, buffer_shapes: dict[int, tuple[int, ...]] | None = None
) -> tuple[str, bool]:
    """C text of one function computing `impl` on buffers in the operands' layouts
    (`buffer_shapes`: operands that are regions of larger arrays, codegen/views.py),
    and whether it needs OpenMP."""
    if not impl.is_complete:
        path, hole = impl.holes()[0]
        raise CodegenError(f"the program is incomplete: open spec at child path {list(path)}: {hole.spec}")
    em = Emitter(ct, for_node)
    spec = impl.spec
    views, pre, post = parameter_views(em, spec, check_buffer_shapes(spec, buffer_shapes))
    for line in pre:
        em.out(line)
    em.emit(impl, views)
    for line in post:
        em.out(line)
    head = [f"#include <{h}>" for h in em.headers if h not in ct.headers]
    head += helper_code(ct, em.helpers)
    head += [f"/* {spec.text()} */", "__attribute__((noinline))", signature(spec, fname), "{"]
    return "\n".join(head + em.lines + ["}"]), em.uses_omp


def helper_code(ct: CTarget, names: list[str]) -> list[str]:
    """The target's C helpers (tgt_c_helper/2) the kernels emitted call, each guarded so
    that one C file with several programs defines it once."""
    out = []
    for n in names:
        if n not in ct.helpers:
            raise CodegenError(
                f"target {ct.target.name} names helper {n} (tgt_c_kernel_helper/2) but has no tgt_c_helper({n}, ...)"
            )
        guard = "MORELLO_HELPER_" + re.sub(r"\W", "_", n).upper()
        out += [f"#ifndef {guard}", f"#define {guard}", ct.helpers[n], "#endif"]
    return out


def resolve(impl: Impl, target: str | Target | None = None, rules=()) -> CTarget:
    """The C target a public entry point works for (a name, an entry file or a Target;
    None: the program's own), resolved once: everything below takes the CTarget."""
    return get_ctarget(target or impl.spec.target, rules)


def generate(impl: Impl, ct: CTarget, buffer_shapes: dict[int, tuple[int, ...]] | None = None) -> tuple[str, bool]:
    """Readable C for `impl` (prelude, the program function `kernel`, its entry from
    Python `kernel_call` and its timing loop `kernel_bench`) and whether it needs OpenMP.
    `buffer_shapes`: operands that are regions of larger arrays (codegen/views.py)."""
    body, omp = emit_function(impl, "kernel", ct, buffer_shapes)
    spans = spans_of(impl.spec, buffer_shapes)
    parts = [body, call_function(impl.spec, "kernel", spans), bench_function(impl.spec, "kernel", spans)]
    return "\n".join(prelude(ct)) + "\n\n" + "\n\n".join(parts) + "\n", omp


def call_signature(spec: Spec, fname: str = "kernel") -> str:
    return f"int {fname}_call(void **p)"


def spans_of(spec: Spec, buffer_shapes: dict[int, tuple[int, ...]] | None = None) -> list[int]:
    """Per operand, the values from its first to its last, one past (codegen/views.py)."""
    shapes = check_buffer_shapes(spec, buffer_shapes)
    return [span(spec, i, shapes.get(i)) for i in range(len(spec.operands))]


def call_function(spec: Spec, fname: str = "kernel", spans: list[int] | None = None) -> str:
    """The entry Python calls (codegen/api.py, fastcall.c): the program on an array of
    untyped pointers, run only if no output overlaps another operand, since every
    parameter is `restrict`.
    Returns 0 when it ran, 1 when an output overlaps an input (the caller copies that
    input and calls again), 2 when two outputs overlap. Comparing addresses here costs
    nanoseconds; numpy's overlap test costs a fraction of a microsecond per pair."""
    n = len(spec.operands)
    spans = spans or spans_of(spec)
    L = [call_signature(spec, fname), "{"]
    for i, ts in enumerate(spec.operands):
        nbytes = spans[i] * ts.dtype.nbytes
        L.append(f"    const uintptr_t a{i} = (uintptr_t)p[{i}], e{i} = a{i} + {nbytes}u;")
    for o in spec.outputs:
        for j in range(n):
            if j != o and (j not in spec.outputs or j < o):
                code = 2 if j in spec.outputs else 1
                L.append(f"    if (a{o} < e{j} && a{j} < e{o}) return {code};")
    casts = ", ".join(
        f"({'const ' if i not in spec.outputs else ''}{ts.dtype.c_type} *)p[{i}]" for i, ts in enumerate(spec.operands)
    )
    L += [f"    {fname}({casts});", "    return 0;", "}"]
    return "\n".join(L)


def to_c(impl: Impl, target: str | Target | None = None, rules=()) -> str:
    """`rules`: extra logic files whose kernels the program uses (tgt_kernel_c facts)."""
    return generate(impl, resolve(impl, target, rules))[0]


def bench_signature(spec: Spec, fname: str = "kernel") -> str:
    sig = signature(spec, fname + "_bench")
    return "long" + sig[len("void") : -1] + ", int warmup, int reps, double min_time, double *times, int shift)"


BENCH_GAP = 192  # bytes between operands in the timing arena (below)


def bench_function(spec: Spec, fname: str = "kernel", spans: list[int] | None = None) -> str:
    """The timing loop, in C so no Python call is measured; in-process timing (cffi) and
    standalone programs call this same function, so both time the same thing the same
    way. It copies the operands into one page-aligned arena at fixed offsets (each
    64-byte aligned plus `shift` bytes, BENCH_GAP bytes apart so that equal-sized operands
    do not start at the same 4 KiB offset), so the buffers' placement is the same in
    every process (`shift` = 16 places them as numpy places its arrays); runs
    `warmup` calls; times one call to choose the calls per repetition (enough for
    `min_time` seconds, 1 to 10^7; a compiler barrier after each call keeps gcc from
    merging the calls); then times `reps` repetitions with
    clock_gettime(CLOCK_MONOTONIC), seconds per call in `times`. Returns the calls per
    repetition (-1 if the arena cannot be allocated). An operand that is a region of a
    larger array (`spans`, codegen/views.py) is copied from its first value to its last."""
    names = param_names(spec)
    spans = spans or spans_of(spec)
    offs, at = [], 0
    for ts, sp in zip(spec.operands, spans):
        offs.append(at)
        nbytes = sp * ts.dtype.nbytes
        at += -(-nbytes // 64) * 64 + BENCH_GAP
    total = -(-(at + 64) // 4096) * 4096  # room for a shift of up to 64 bytes
    bargs = ", ".join(f"b_{n}" for n in names)
    # Each call must do its work: with `kernel` inlined here (it is in the same module),
    # gcc may hoist a register-resident program's loads and sink its stores out of the
    # loop, leaving it empty (0.2 ps per "call"). An empty asm that may read and write
    # every operand's memory after each call forbids that, and emits no instruction.
    barrier = '__asm__ __volatile__("" : : ' + ", ".join(f'"r"(b_{n})' for n in names) + ' : "memory");'
    L = [
        bench_signature(spec, fname),
        "{",
        f"    char *arena = aligned_alloc(4096, {total});",
        "    if (!arena) return -1;",
        "    shift = shift < 0 || shift > 64 ? 0 : shift;",
    ]
    for n, ts, sp, off in zip(names, spec.operands, spans, offs):
        ct = ts.dtype.c_type
        L.append(f"    {ct} *b_{n} = ({ct} *)(arena + {off} + shift);")
        L.append(f"    memcpy(b_{n}, {n}, {sp} * sizeof({ct}));")
    L += [
        "    struct timespec t0, t1;",
        f"    for (int w = 0; w < warmup; w++) {fname}({bargs});",
        "    clock_gettime(CLOCK_MONOTONIC, &t0);",
        f"    {fname}({bargs});",
        "    clock_gettime(CLOCK_MONOTONIC, &t1);",
        "    double once = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);",
        "    double want = min_time / (once > 1e-9 ? once : 1e-9);",
        "    long iters = want < 1 ? 1 : want > 1e7 ? 10000000 : (long)want;",
        "    for (int r = 0; r < reps; r++) {",
        "        clock_gettime(CLOCK_MONOTONIC, &t0);",
        f"        for (long i = 0; i < iters; i++) {{ {fname}({bargs}); {barrier} }}",
        "        clock_gettime(CLOCK_MONOTONIC, &t1);",
        "        double t = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);",
        "        times[r] = t / (double)iters;",
        "    }",
        "    free(arena);",
        "    return iters;",
        "}",
    ]
    return "\n".join(L)
