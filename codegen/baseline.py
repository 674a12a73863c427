"""Timing a Python callable (e.g. numpy's matmul) the way the C harness times programs:
calibrated calls per repetition, median over repetitions, so the two compare fairly."""
from __future__ import annotations

import statistics
import time
from typing import Callable


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
