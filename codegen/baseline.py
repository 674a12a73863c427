"""Timing a Python callable (e.g. numpy's matmul) the way the C harness times programs:
calibrated calls per repetition, median over repetitions, so the two compare fairly."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from morello_asp.compose import component_specs
from morello_asp.kinds import kind


def time_python(fn: Callable[[], object], reps: int = 7, min_time: float = 0.05, warmup: int = 2) -> float:
    """Median seconds per call of fn()."""
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-9)
    iters = max(1, int(min_time / once))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter() - t0) / iters)
    return statistics.median(times)


# ------------------------------------------------------------- numpy beside any spec
NUMPY_HELPERS = (
    "def softmax(x, d):\n"
    "    e = np.exp(x - x.max(axis=d, keepdims=True))\n"
    "    e /= e.sum(axis=d, keepdims=True)\n"
    "    return e\n"
)


def numpy_expression(spec) -> str | None:
    """The spec as numpy idioms on its inputs `a0, a1, ...` (logical shapes), for timing
    beside a program: each kind's kind_numpy/2 declaration (encodings/kinds/), and Compose
    chains of kinds that have one; None for others."""
    k = spec.k
    if k.is_compose:
        info = k.components
        assert info is not None
        src = {s: j for j, s in enumerate(info.sources)}
        specs = component_specs(spec)
        prev = ""
        for c in range(len(info.parts) - 1, -1, -1):
            args = [
                f"a{src[(c, j)]}" if (c, j) in src else prev
                for j in range(len(specs[c].operands))
                if j not in specs[c].outputs
            ]
            e = _kind_expression(specs[c].k, args)
            if e is None:
                return None
            prev = e
        return prev
    return _kind_expression(k, [f"a{i}" for i in range(len(spec.operands)) if i not in spec.outputs])


def _kind_expression(k, args: list[str]) -> str | None:
    """k's kind_numpy/2 expression on `args` (its inputs, in operand order); an
    accumulating kind's is its base kind's (what a user computes it with from zeros)."""
    if k.numpy is None and k.accum_of:
        k = kind(k.accum_of)
    if k.numpy is None:
        return None
    names = [n for i, n in enumerate(k.params) if i not in k.outputs]
    text = k.numpy.replace("{axis}", str(k.numpy_axis))
    for n, a in zip(names, args):
        text = text.replace("{" + n + "}", a)
    return text


def numpy_seconds(spec, threads: int | None = 1) -> float | None:
    """Median seconds per call of the spec's numpy expression (numpy_expression) on f32
    inputs, BLAS on `threads` threads, in a fresh interpreter; None if it has none."""
    import os
    import subprocess
    import sys

    expr = numpy_expression(spec)
    if expr is None:
        return None
    ins = [i for i in range(len(spec.operands)) if i not in spec.outputs]
    env = dict(os.environ)
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(threads)
    shapes = {i: spec.operand_shapes[i] for i in ins}
    code = (
        "import numpy as np\nfrom morello_asp.codegen.baseline import time_python\n"
        + NUMPY_HELPERS
        + "rng = np.random.default_rng(0)\n"
        + "".join(f"a{i} = rng.random({tuple(s)}, dtype=np.float32)\n" for i, s in shapes.items())
        + f"print(time_python(lambda: {expr}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(r.stdout.strip().splitlines()[-1])
