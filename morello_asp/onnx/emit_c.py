"""A compiled model as one C file: every distinct program as a function, and a function
`model_run` that runs the session's steps in order on one arena of intermediates and
one blob of weights; with `standalone`, a `main` that reads the weights (and inputs)
from files, writes the outputs and times runs, as codegen/standalone.py's programs do.

The arrays of a session's walk (session.py) are laid out by where their memory lies:
each allocation (numpy's base array) that holds a constant goes into the weights blob,
every other one into the arena, at 64-byte boundaries; an array is then its
allocation's place plus its own offset into it. The arena starts zeroed, so the zero
borders of padded convolutions' kept buffers (never written) stay zero. A copy of a view
(a strided reshape, a padded convolution's interior, an input or an output in another
order) is a loop over its shape with both sides' strides.

The executable's interface:

    ./model WEIGHTS.bin                       inputs of deterministic values; prints a
                                              checksum of each output
    ./model WEIGHTS.bin IN... OUT...          one file per graph input (read) and output
                                              (written), float32 in C order, raw

then the run is timed and `times: ...` and `time: T s/iter (median of R reps x N
calls)` go to stderr (MORELLO_ASP_REPS=N repetitions, 0: none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

import numpy as np

from morello_asp.codegen.convert import ALIGN, aligned_array
from morello_asp.codegen.emit import emit_function, prelude, resolve
from morello_asp.codegen.standalone import build_command
from morello_asp.codegen.views import copy_loops
from morello_asp.errors import CodegenError, InputError


def _root(a: np.ndarray) -> np.ndarray:
    """The allocation an array's memory belongs to."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


@dataclass
class _Places:
    """Allocations by the address of their memory: which blob (weights or arena) holds
    each and where."""

    weights: list[np.ndarray] = field(default_factory=list)
    arena_bytes: int = 0
    weights_bytes: int = 0
    where: dict[int, tuple[str, int, int, int]] = field(default_factory=dict)  # id -> (blob, offset, start, size)

    def add(self, a: np.ndarray, const: bool) -> None:
        r = _root(a)
        if id(r) in self.where:
            return
        if not (r.flags.c_contiguous or r.flags.f_contiguous):
            raise CodegenError("a session array's memory is not one block")
        start, size = r.ctypes.data, r.nbytes
        if const:
            off = self.weights_bytes
            self.weights.append(r)
            self.weights_bytes += -(-size // ALIGN) * ALIGN
            self.where[id(r)] = ("w", off, start, size)
        else:
            off = self.arena_bytes
            self.arena_bytes += -(-size // ALIGN) * ALIGN
            self.where[id(r)] = ("arena", off, start, size)

    def expr(self, a: np.ndarray) -> str:
        """C for a pointer to the array's first value (a char* offset, cast)."""
        blob, off, start, size = self.where[id(_root(a))]
        at = off + a.ctypes.data - start
        assert 0 <= a.ctypes.data - start <= size
        return f"(float *)({blob} + {at})"

    def weights_blob(self) -> bytes:
        parts = []
        for r in self.weights:
            b = (r if r.flags.c_contiguous else r.T).view(np.uint8).reshape(-1).tobytes()  # its memory as it lies
            parts.append(b + bytes(-len(b) % ALIGN))
        return b"".join(parts)


def _strided_copy(dst: str, dst_strides, src: str, src_strides, shape) -> str:
    """C copying view src (pointer expression and element strides) into view dst."""
    sh, ds, ss = copy_loops(list(shape), [s // 4 for s in dst_strides], [s // 4 for s in src_strides])
    text = ", ".join
    return (
        f"    {{ static const long sh[] = {{{text(map(str, sh))}}}, ds[] = {{{text(map(str, ds))}}}, "
        f"ss[] = {{{text(map(str, ss))}}};\n      mo_copy({dst}, ds, {src}, ss, sh, {len(sh)}); }}"
    )


def _copy(places: _Places, dst: np.ndarray, src: np.ndarray) -> str:
    """A copy of view src into view dst (the same shape)."""
    if dst.shape != src.shape:
        raise CodegenError(f"a copy between shapes {src.shape} and {dst.shape}")
    if dst.size == 0:
        return ""
    return _strided_copy(places.expr(dst), dst.strides, places.expr(src), src.strides, dst.shape)


COPY_C = """/* dst[i...] = src[i...] over `shape`: both views' strides in elements; a row whose
   values are adjacent on both sides is one memcpy. */
static void mo_copy(float *dst, const long *ds, const float *src, const long *ss, const long *shape, int nd)
{
    if (nd == 1) {
        if (ds[0] == 1 && ss[0] == 1) {
            memcpy(dst, src, (size_t)shape[0] * sizeof(float));
            return;
        }
        for (long i = 0; i < shape[0]; i++) dst[i * ds[0]] = src[i * ss[0]];
        return;
    }
    for (long i = 0; i < shape[0]; i++) mo_copy(dst + i * ds[0], ds + 1, src + i * ss[0], ss + 1, shape + 1, nd - 1);
}"""


@dataclass
class ModelC:
    """A model's C (text), its weights blob (bytes, the file `main` reads), the graph's
    inputs and outputs (name, shape) in order, and whether it needs OpenMP."""

    text: str
    weights: bytes
    inputs: list[tuple[str, tuple[int, ...]]]
    outputs: list[tuple[str, tuple[int, ...]]]
    openmp: bool
    build: list[str]  # the compiler command, for FILE.c into FILE

    def save(self, path: str | Path) -> tuple[Path, Path]:
        """FILE.c and its weights, FILE.weights.bin beside it."""
        p = Path(path)
        w = p.with_suffix(".weights.bin")
        try:
            p.write_text(self.text)
            w.write_bytes(self.weights)
        except OSError as e:
            raise InputError(f"cannot write {e.filename}: {e.strerror}") from None
        return p, w


def model_c(session: Any, standalone: bool = False) -> ModelC:
    """The session's model as C (module docstring)."""
    steps, static = session.walk()
    consts = {id(_root(np.asarray(c))) for c in session.plan.consts_out.values()}
    consts |= {id(_root(a.const)) for st in session.plan.steps for a in st.args if a.const is not None}
    places = _Places()
    ops: list[tuple] = []
    outputs: dict[str, np.ndarray] = {}
    for ev in steps:
        if ev[0] == "copy":
            ops.append(ev)
            continue
        _, st, fn, args, out = ev
        if out is None:  # a fresh array each run in Python: an arena block here
            out = aligned_array(fn.spec.operand_shapes[fn.spec.output], np.float32)
            outputs[st.out] = out.reshape(st.out_shape)
        if not hasattr(fn, "call_ops"):
            raise CodegenError(f"{st.label}: its program does not run in this process; no C for the model")
        ops += fn.call_ops(args, out)
    for t in session.input_buffers.values():
        places.add(t, False)
    for op in ops:
        if op[0] == "copy":
            for a in op[1:]:
                places.add(a, id(_root(a)) in consts)
        else:
            for a in op[2]:
                places.add(a, id(_root(a)) in consts)
    outs = [(o.name, outputs[o.name] if o.name in outputs else static[o.name]) for o in session.plan.outputs]
    for _, a in outs:
        places.add(a, id(_root(a)) in consts)

    ct = None
    funcs: dict[int, str] = {}
    bodies: list[str] = []
    openmp = False
    for op in ops:
        if op[0] == "call" and id(op[1]) not in funcs:
            prog = op[1]
            ct = ct or resolve(prog.impl)
            name = f"p{len(funcs)}"
            text, omp = emit_function(prog.impl, name, ct)
            openmp |= omp
            funcs[id(prog)] = name
            bodies.append(text)
    if ct is None:
        raise CodegenError("the model has no program to emit")
    lines = ["void model_run(const float *const *in, float *const *out, const char *w, char *arena)", "{"]
    for k, t in enumerate(session.input_buffers.values()):
        lines.append(_io_copy(places, t, k, into=True))
    for op in ops:
        if op[0] == "copy":
            lines.append(_copy(places, op[1], op[2]))
        else:
            prog, arrays = op[1], op[2]
            casts = ", ".join(places.expr(a) for a in arrays)
            lines.append(f"    {funcs[id(prog)]}({casts});  /* {prog.spec.short()} */")
    for k, (_, a) in enumerate(outs):
        lines.append(_io_copy(places, a, k, into=False))
    lines.append("}")
    inputs = [(n, tuple(t.shape)) for n, t in session.input_buffers.items()]
    outputs_l = [(n, tuple(a.shape)) for n, a in outs]
    parts = [
        "\n".join(prelude(ct)),
        "#include <stdio.h>",
        *bodies,
        COPY_C,
        f"enum {{ MO_ARENA_BYTES = {places.arena_bytes}, MO_WEIGHTS_BYTES = {places.weights_bytes} }};",
        "\n".join(lines),
    ]
    if standalone:
        parts.append(_main(inputs, outputs_l))
    head = (
        f"/* {len(session.plan.steps)} steps of an ONNX model, {len(funcs)} programs (morello_asp/onnx/emit_c.py).\n"
        f"   build: {' '.join(build_command(ct, 'model.c', 'model', openmp))}\n"
        f"   run:   ./model model.weights.bin [INPUTS... OUTPUTS...] */"
    )
    return ModelC(
        head + "\n" + "\n\n".join(p for p in parts if p) + "\n",
        places.weights_blob(),
        inputs,
        outputs_l,
        openmp,
        build_command(ct, "{c}", "{exe}", openmp),
    )


def _io_copy(places: _Places, a: np.ndarray, k: int, into: bool) -> str:
    """Graph input k (dense, C order) into its kept array `a` (into), or array `a` out
    to graph output k."""
    dense = [4 * prod(a.shape[j + 1 :]) for j in range(a.ndim)]
    if into:
        return _strided_copy(places.expr(a), a.strides, f"in[{k}]", dense, a.shape)
    return _strided_copy(f"out[{k}]", dense, places.expr(a), a.strides, a.shape)


def _main(inputs: list[tuple[str, tuple[int, ...]]], outputs: list[tuple[str, tuple[int, ...]]]) -> str:
    ni, no = len(inputs), len(outputs)
    sizes_in = ", ".join(str(prod(s)) for _, s in inputs) or "0"
    sizes_out = ", ".join(str(prod(s)) for _, s in outputs) or "0"
    names = " ".join(n.upper() + ".bin" for n, _ in inputs + outputs)
    return f"""#include <sys/mman.h>

static int cmp_double(const void *a, const void *b)
{{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}}

/* Whole 2 MiB pages, transparent huge pages where the kernel has them (as numpy asks for
   its large arrays): the weights are streamed every run, and 4 KiB pages cost a TLB walk
   each. */
static void *big_alloc(size_t bytes)
{{
    size_t n = (bytes + ((size_t)2 << 20) - 1) / ((size_t)2 << 20) * ((size_t)2 << 20);
    void *p = aligned_alloc((size_t)2 << 20, n ? n : (size_t)2 << 20);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}}

static void *read_file(const char *path, size_t bytes)
{{
    char *p = big_alloc(bytes);
    FILE *f = fopen(path, "rb");
    if (!p || !f || fread(p, 1, bytes, f) != bytes) {{
        fprintf(stderr, "cannot read %zu bytes from %s\\n", bytes, path);
        exit(2);
    }}
    fclose(f);
    return p;
}}

int main(int argc, char **argv)
{{
    static const size_t in_n[] = {{{sizes_in}}}, out_n[] = {{{sizes_out}}};
    if (argc != 2 && argc != 2 + {ni} + {no}) {{
        fprintf(stderr, "usage: %s WEIGHTS.bin [{names}]\\n", argv[0]);
        return 2;
    }}
    const char *w = read_file(argv[1], MO_WEIGHTS_BYTES);
    char *arena = big_alloc(MO_ARENA_BYTES);
    if (!arena) {{ fprintf(stderr, "out of memory\\n"); return 2; }}
    memset(arena, 0, MO_ARENA_BYTES);
    float *in[{max(ni, 1)}], *out[{max(no, 1)}];
    for (int k = 0; k < {ni}; k++) {{
        if (argc > 2) in[k] = read_file(argv[2 + k], in_n[k] * sizeof(float));
        else {{
            in[k] = aligned_alloc(64, (in_n[k] * sizeof(float) + 63) / 64 * 64);
            for (size_t i = 0; i < in_n[k]; i++) in[k][i] = (float)((int)((i * 7 + k) % 17) - 8) / 8.0f;
        }}
    }}
    for (int k = 0; k < {no}; k++) out[k] = aligned_alloc(64, (out_n[k] * sizeof(float) + 63) / 64 * 64);
    model_run((const float *const *)in, out, w, arena);
    for (int k = 0; k < {no}; k++) {{
        if (argc > 2) {{
            FILE *f = fopen(argv[2 + {ni} + k], "wb");
            if (!f || fwrite(out[k], sizeof(float), out_n[k], f) != out_n[k]) {{
                fprintf(stderr, "cannot write %s\\n", argv[2 + {ni} + k]);
                return 2;
            }}
            fclose(f);
        }} else {{
            double sum = 0;
            for (size_t i = 0; i < out_n[k]; i++) sum += (double)out[k][i];
            printf("checksum %d: %.17g\\n", k, sum);
        }}
    }}
    const char *reps_env = getenv("MORELLO_ASP_REPS");
    int reps = reps_env ? atoi(reps_env) : 7;
    if (reps > 0) {{
        double *times = malloc(sizeof(double) * (size_t)reps);
        struct timespec t0, t1;
        for (int i = 0; i < 2; i++) model_run((const float *const *)in, out, w, arena);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        model_run((const float *const *)in, out, w, arena);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double once = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        double want = 0.05 / (once > 1e-9 ? once : 1e-9);
        long iters = want < 1 ? 1 : want > 1e7 ? 10000000 : (long)want;
        for (int r = 0; r < reps; r++) {{
            clock_gettime(CLOCK_MONOTONIC, &t0);
            for (long i = 0; i < iters; i++) model_run((const float *const *)in, out, w, arena);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            times[r] = ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / (double)iters;
        }}
        fprintf(stderr, "times:");
        for (int r = 0; r < reps; r++) fprintf(stderr, " %.6e", times[r]);
        fprintf(stderr, "\\n");
        qsort(times, (size_t)reps, sizeof(double), cmp_double);
        double med = reps % 2 ? times[reps / 2] : (times[reps / 2 - 1] + times[reps / 2]) / 2;
        fprintf(stderr, "time: %.6e s/iter (median of %d reps x %ld calls)\\n", med, reps, iters);
        free(times);
    }}
    return 0;
}}"""
