"""Timing a Python callable (e.g. numpy's matmul) the way the C harness times programs:
calibrated calls per repetition, median over repetitions, so the two compare fairly."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


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


def numpy_matmul_seconds(b: int, m: int, k: int, n: int, threads: int | None = 1) -> float:
    """Median seconds per f32 np.matmul of (b, m, k) by (b, k, n), with OpenBLAS on
    `threads` threads (None: its default, all cores). OpenBLAS fixes its thread count
    when it loads, and numpy is loaded here already, so this runs in a fresh interpreter."""
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(threads)
    code = (
        "import sys, numpy as np\n"
        "from morello_asp.codegen.baseline import time_python\n"
        "b, m, k, n = map(int, sys.argv[1:])\n"
        "rng = np.random.default_rng(0)\n"
        "x = rng.random((b, m, k), dtype=np.float32); y = rng.random((b, k, n), dtype=np.float32)\n"
        "out = np.empty((b, m, n), dtype=np.float32)\n"
        "print(time_python(lambda: np.matmul(x, y, out=out)))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(b), str(m), str(k), str(n)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(r.stdout.strip().splitlines()[-1])
