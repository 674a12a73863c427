"""Time many programs fairly on a noisy machine: compile them in a few shared modules,
check each against numpy, then time them in interleaved rounds (every program once
per round) and keep each one's median, so slow drifts of the machine hit all alike."""

from __future__ import annotations

import statistics
import sys
import time

from morello_asp.codegen.api import compile_many
from morello_asp.codegen.build import build
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.ir import Impl
from morello_asp.target import Target


def compile_checked(impls: list[Impl], target: str | Target = "avx2", chunk: int = 40, label: str = "") -> list:
    """Programs compiled for `target` (a Target, a name or a .lp path: its C, flags
    included); every one is run on random inputs and compared with numpy."""
    fns = []
    for i in range(0, len(impls), chunk):
        fns += compile_many(impls[i : i + chunk], target if isinstance(target, Target) else str(target))
        status(f"{label}compiled {len(fns)}/{len(impls)}")
    for j, f in enumerate(fns):
        err, tol = f.check()
        if not err <= tol:
            raise SystemExit(f"{label}program {j} differs from numpy: max |error| {err:.3g} > {tol:.3g}\n{impls[j]}")
    return fns


def best_time(fn, min_time: float = 0.02) -> float:
    """Seconds per call of fn() (any callable: a library's call, or several programs in a
    row): calls repeated for min_time, best of three."""
    fn()
    t0 = time.perf_counter()
    fn()
    iters = max(1, int(min_time / max(time.perf_counter() - t0, 1e-9)))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def median_times(fns: list, rounds: int = 5, reps: int = 3, min_time: float = 0.004, label: str = "") -> list[float]:
    """Median seconds per call of each compiled program over `rounds` interleaved rounds."""
    times: list[list[float]] = [[] for _ in fns]
    for r in range(rounds):
        for i, f in enumerate(fns):
            times[i].append(f.benchmark(reps=reps, min_time=min_time).seconds)
        status(f"{label}timing round {r + 1}/{rounds}")
    status("", end=True)
    return [statistics.median(t) for t in times]


_PEAK_CHAINS = 12  # independent accumulators: more than FMA latency x FMA pipes on x86 cores


def beside_numpy_matmul(fns: list, shape: tuple[int, ...], rounds: int, min_time: float = 0.02):
    """Seconds per call of each compiled Matmul program and of numpy's matmul of the same
    (b, m, k, n) shape on random f32 inputs, in `rounds` interleaved rounds: ([[per round]
    per program], [numpy's per round]). numpy runs as the caller set OpenBLAS up."""
    import numpy as np

    from morello_asp.codegen.baseline import time_python

    b, m, k, n = shape
    rng = np.random.default_rng(0)
    x = rng.random((b, m, k), dtype=np.float32)
    y = rng.random((b, k, n), dtype=np.float32)
    ours: list[list[float]] = [[] for _ in fns]
    theirs: list[float] = []
    for _ in range(rounds):
        for i, f in enumerate(fns):
            ours[i].append(f.benchmark(reps=3, min_time=min_time).seconds)
        theirs.append(time_python(lambda: np.matmul(x, y), reps=3, min_time=min_time))
    return ours, theirs


def fma_peak_gflops(target: str | Target = "avx2", rounds: int = 5, seconds: float = 0.1) -> float:
    """One core's f32 multiply-add peak in GFLOP/s with the target's widest f32 vectors,
    best of `rounds`: independent FMA chains and nothing else, compiled with the target's
    flags (fp-contract makes each `a * b + c` one FMA; without -ffast-math the compiler
    may not fold a chain). A program's GFLOP/s over this is how near the ceiling it is."""
    ct = get_ctarget(target)
    nbytes = max(b for (d, b) in ct.vector_types if d == "f32")
    accs = [f"a{i}" for i in range(_PEAK_CHAINS)]
    source = f"""
#include <time.h>
typedef float vec __attribute__((vector_size({nbytes})));
#pragma GCC optimize("fp-contract=fast")
double fma_chains(long iters)
{{
    vec b = {{0}}, c = {{0}};
    for (int i = 0; i < {nbytes // 4}; i++) {{ b[i] = 1.0000001f; c[i] = 1e-7f; }}
    vec {", ".join(f"{a} = b * {i}.0f" for i, a in enumerate(accs))};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < iters; i++) {{
        {" ".join(f"{a} = {a} * b + c;" for a in accs)}
    }}
    clock_gettime(CLOCK_MONOTONIC, &t1);
    vec s = {" + ".join(accs)};
    volatile float sink = s[0];
    (void)sink;
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}}
"""
    lib = build(source, "double fma_chains(long iters);", ct.flags, cc=ct.compiler or None).lib
    flops_per_iter = 2 * _PEAK_CHAINS * nbytes // 4
    iters = 1000
    while (t := lib.fma_chains(iters)) < seconds / 4:
        iters *= 4
    iters = max(1, int(iters * seconds / t))
    return max(flops_per_iter * iters / lib.fma_chains(iters) / 1e9 for _ in range(rounds))


def peak_line(target: str, peak: float) -> str:
    """The line a table prints above its shares of the peak."""
    return f"one core's f32 FMA peak with {target}'s vectors (timing.fma_peak_gflops): {peak:.1f} GFLOP/s"


def status(text: str, end: bool = False) -> None:
    """A progress line on stderr (a terminal only)."""
    if sys.stderr.isatty():
        sys.stderr.write("\r" + text.ljust(60) + ("\n" if end and text else ""))
        if end and not text:
            sys.stderr.write("\r" + " " * 60 + "\r")
        sys.stderr.flush()


def plot_median_bars(path: str, times: dict[str, list[float]], xlabel: str, height: float = 3) -> None:
    """A horizontal bar per entry of `times` (name -> seconds of each round): its median."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, height))
    ax.barh(list(times), [statistics.median(ts) for ts in times.values()])
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    fig.savefig(path)


def spearman(xs, ys) -> float:
    """Spearman's rank correlation (ties get their average rank)."""

    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for t in range(i, j + 1):
                r[order[t]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(list(xs)), ranks(list(ys))
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5 if sxx and syy else 0.0
