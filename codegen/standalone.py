"""Standalone programs: the C of a program plus a `main`, compiled to an executable.

Generic machinery, the same for every target (its compiler, flags and emulator come
from the target's facts). The executable's interface:

    ./prog                      deterministic inputs; prints a checksum of the output
    ./prog FILE0 FILE1 ... FILEn  one file per operand, in the spec's operand order

Each file holds the operand's *buffer*: its values in the operand's layout (for
row-major operands, the logical array in C order), raw, native byte order (numpy's
`a.tofile(f)` / `np.fromfile(f, dtype)`). Files of operands the program reads are read
(an accumulating output too); each output's file is written. Then the program is timed
(`kernel_bench`, the function in-process timing calls: the operands copied into one
page-aligned arena, 2 warm-up calls, calls per repetition for 0.05 s, `clock_gettime`)
and two lines go to stderr:

    times: 1.240e-06 1.234e-06 ...   (seconds per call, one per repetition)
    time: 1.234e-06 s/iter (median of 7 reps x 40000 calls)

MORELLO_ASP_REPS=N sets the repetitions (0: no timing). The program's listing is in the
C as a comment (Morello's --include-impl).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from morello_asp.codegen.build import cache_dir, compiler
from morello_asp.codegen.calling import BenchResult, Callable, bench_operands
from morello_asp.codegen.convert import from_buffer, to_buffer
from morello_asp.codegen.ctarget import CTarget
from morello_asp.codegen.emit import generate, inputs_of, param_names, resolve
from morello_asp.codegen.errors import CompileError
from morello_asp.codegen.reference import flops
from morello_asp.errors import CodegenError
from morello_asp.ir import Impl
from morello_asp.target import Target

TIMES_LINE = re.compile(r"^times:((?: \S+)+)$", re.M)  # seconds per call of each repetition
TIME_LINE = re.compile(r"^time: (\S+) s/iter \(median of (\d+) reps x (\d+) calls\)$", re.M)


def _comment(text: str) -> str:
    lines = (" * " + ln.replace("*/", "* /") for ln in text.splitlines())
    return "/*\n" + "\n".join(ln.rstrip() for ln in lines) + "\n */"


def main_function(impl: Impl) -> str:
    """`main` for the program `kernel` (and its timing loop `kernel_bench`)."""
    spec = impl.spec
    names = param_names(spec)
    reads = set(inputs_of(spec))
    n = len(spec.operands)
    L = [
        "#include <stdio.h>",
        "",
        "static void *alloc_buf(size_t bytes)",
        "{",
        "    size_t rounded = (bytes + 63) / 64 * 64;",
        "    void *p = aligned_alloc(64, rounded ? rounded : 64);",
        '    if (!p) { fprintf(stderr, "out of memory\\n"); exit(2); }',
        "    memset(p, 0, rounded ? rounded : 64);",
        "    return p;",
        "}",
        "",
        "static void read_buf(const char *path, void *p, size_t bytes)",
        "{",
        '    FILE *f = fopen(path, "rb");',
        "    if (!f) { perror(path); exit(2); }",
        "    if (fread(p, 1, bytes, f) != bytes || fgetc(f) != EOF) {",
        '        fprintf(stderr, "%s: expected exactly %zu bytes\\n", path, bytes);',
        "        exit(2);",
        "    }",
        "    fclose(f);",
        "}",
        "",
        "static void write_buf(const char *path, const void *p, size_t bytes)",
        "{",
        '    FILE *f = fopen(path, "wb");',
        "    if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f) != 0) { perror(path); exit(2); }",
        "}",
        "",
        "static int cmp_double(const void *a, const void *b)",
        "{",
        "    double x = *(const double *)a, y = *(const double *)b;",
        "    return (x > y) - (x < y);",
        "}",
        "",
        "int main(int argc, char **argv)",
        "{",
        f"    if (argc != 1 && argc != {n + 1}) {{",
        f'        fprintf(stderr, "usage: %s [{" ".join(f"{x.upper()}.bin" for x in names)}]\\n", argv[0]);',
        "        return 2;",
        "    }",
    ]
    for i, (name, ts, shape) in enumerate(zip(names, spec.operands, spec.operand_shapes)):
        vol = ts.layout.buffer_volume(shape)
        ct = ts.dtype.c_type
        L.append(f"    const size_t {name}_bytes = {vol} * sizeof({ct});")
        L.append(f"    {ct} *{name} = alloc_buf({name}_bytes);")
        if i in reads:
            L.append(f"    if (argc > 1) read_buf(argv[{i + 1}], {name}, {name}_bytes);")
            # deterministic small values: exact in every dtype
            L.append(
                f"    else for (size_t k = 0; k < {vol}; k++) {name}[k] = ({ct})((int)((k * 7 + {3 * i}) % 17) - 8);"
            )
    args = ", ".join(names)
    outs = [names[o] for o in spec.outputs]
    L += [f"    kernel({args});", "    if (argc > 1) {"]
    L += [f"        write_buf(argv[{o + 1}], {names[o]}, {names[o]}_bytes);" for o in spec.outputs]
    L += ["    } else {", "        double sum = 0;"]
    L += [f"        for (size_t k = 0; k < {o}_bytes / sizeof *{o}; k++) sum += (double){o}[k];" for o in outs]
    L += [
        '        printf("checksum: %.17g\\n", sum);',
        "    }",
        '    const char *reps_env = getenv("MORELLO_ASP_REPS");',
        "    int reps = reps_env ? atoi(reps_env) : 7;",
        "    if (reps > 0) {",
        "        double *times = malloc(sizeof(double) * (size_t)reps);",
        f"        long iters = kernel_bench({args}, 2, reps, 0.05, times, 0);",
        '        if (iters < 0) { fprintf(stderr, "out of memory\\n"); exit(2); }',
        '        fprintf(stderr, "times:");',
        '        for (int r = 0; r < reps; r++) fprintf(stderr, " %.6e", times[r]);',
        '        fprintf(stderr, "\\n");',
        "        qsort(times, (size_t)reps, sizeof(double), cmp_double);",
        "        double med = reps % 2 ? times[reps / 2] : (times[reps / 2 - 1] + times[reps / 2]) / 2;",
        '        fprintf(stderr, "time: %.6e s/iter (median of %d reps x %ld calls)\\n", med, reps, iters);',
        "        free(times);",
        "    }",
    ]
    L += [f"    free({x});" for x in names]
    L += ["    return 0;", "}"]
    return "\n".join(L)


def standalone_c(impl: Impl, target: str | Target | None = None, rules=()) -> str:
    """A C program with `main` computing `impl` (see the module's docstring), its listing
    in a comment at the top."""
    return standalone_source(impl, resolve(impl, target, rules))[0]


def standalone_source(impl: Impl, ct: CTarget) -> tuple[str, bool]:
    """standalone_c's text, and whether it needs OpenMP."""
    src, omp = generate(impl, ct)
    run = " ".join([*ct.emulator, "./prog"])
    head = _comment(
        f"{impl.spec}\n\n{impl}\n\nbuild: {' '.join(build_command(ct, 'prog.c', 'prog', omp))}\n"
        f"run:   {run} [{' '.join(n.upper() + '.bin' for n in param_names(impl.spec))}]  (codegen/standalone.py)"
    )
    return head + "\n" + src + "\n" + main_function(impl) + "\n", omp


def build_command(ct: CTarget, c_file: str, exe: str, openmp: bool) -> list[str]:
    return [
        ct.compiler_command,
        "-O3",
        "-std=c99",
        *ct.flags,
        *(("-fopenmp",) if openmp else ()),
        c_file,
        "-o",
        exe,
        "-lm",  # the point kernel's operators (expf)
    ]


def build_executable(impl: Impl, target: str | Target | CTarget | None = None, rules=()) -> Path:
    """The standalone executable of `impl`, compiled by the target's compiler (cached by
    a hash of the C, the flags and the compiler's version)."""
    ct = target if isinstance(target, CTarget) else resolve(impl, target, rules)
    src, omp = standalone_source(impl, ct)
    cc, ccver = compiler(ct.compiler_command)
    cmd = build_command(ct, "prog.c", "prog", omp)
    key = hashlib.sha256("\0".join([src, " ".join(cmd), ccver]).encode()).hexdigest()[:20]
    exe = cache_dir() / f"_morello_prog_{key}"
    if exe.exists():
        return exe
    with tempfile.TemporaryDirectory(prefix="morello-build-") as tmp:
        c_file = Path(tmp) / "prog.c"
        c_file.write_text(src)
        out = Path(tmp) / "prog"
        r = subprocess.run(build_command(ct, str(c_file), str(out), omp), capture_output=True, text=True)
        if r.returncode != 0:
            kept = cache_dir() / f"_morello_prog_{key}.c"
            kept.write_text(src)
            raise CompileError(f"{cc} failed (exit {r.returncode}) on the standalone C (kept at {kept}):\n" + r.stderr)
        os.replace(out, exe)
    return exe


class StandaloneProgram(Callable):
    """A program run as its own executable (under the target's emulator, if any): the
    same calls as an in-process Program (`prog(a, b)`, `out=` a tuple for several
    outputs, `check()`, `benchmark()`)."""

    def __init__(self, impl: Impl, ct: CTarget | None = None):
        self.impl, self.spec = impl, impl.spec
        self.ct = ct or resolve(impl)
        why = self.ct.cannot_run()
        if why:
            raise CodegenError(f"cannot run target {self.ct.target.name} programs here: {why}")
        self.exe = build_executable(impl, self.ct)
        self.emulator = self.ct.emulator  # programs run under it (e.g. qemu): their timings are no speed claim
        self.names = param_names(self.spec)

    def run(self, arrays, reps: int = 0) -> tuple[list[np.ndarray], str]:
        """Run on logical arrays (one per operand; outputs' contents are read only if the
        spec accumulates): (each output in logical shape, in spec order; the program's
        stderr)."""
        spec = self.spec
        with tempfile.TemporaryDirectory(prefix="morello-run-") as tmp:
            files = []
            for i, (ts, shape) in enumerate(zip(spec.operands, spec.operand_shapes)):
                f = Path(tmp) / f"{self.names[i]}.bin"
                a = np.asarray(arrays[i], dtype=ts.dtype.np_dtype).reshape(shape)
                to_buffer(a, ts.layout, shape).tofile(f)
                files.append(str(f))
            env = dict(os.environ, MORELLO_ASP_REPS=str(reps))
            r = subprocess.run([*self.ct.emulator, str(self.exe), *files], capture_output=True, text=True, env=env)
            if r.returncode != 0:
                raise CodegenError(f"{self.exe} exited with status {r.returncode}: {r.stderr.strip()}")
            outs = []
            for o in spec.outputs:
                ts, shape = spec.operands[o], spec.operand_shapes[o]
                outs.append(from_buffer(np.fromfile(files[o], dtype=ts.dtype.np_dtype), ts.layout, shape))
            return outs, r.stderr

    def _execute(self, arrays: dict[int, np.ndarray]) -> None:
        got, _ = self.run(arrays)
        for o, g in zip(self.spec.outputs, got):
            np.copyto(arrays[o], g)

    def benchmark(self, reps: int = 7, **_kw):
        spec = self.spec
        _got, err = self.run(bench_operands(spec), reps=max(reps, 1))  # the in-process timing's operands
        m = TIME_LINE.search(err)
        if not m:
            raise CodegenError(f"{self.exe} printed no timing line: {err.strip()!r}")
        sec = float(m.group(1))
        t = TIMES_LINE.search(err)
        times = [float(x) for x in t.group(1).split()] if t else [sec]
        return BenchResult(sec, flops(spec) / sec / 1e9 if sec else 0.0, times, int(m.group(3)))
