"""What a call from Python costs: each program timed in its C loop and through `fn(...)`
on ordinary numpy arrays, beside numpy's own call of the same computation.

    python benchmarks/call_overhead.py [--target T] [--sizes 8 16 ... 1024] [--specs SPEC ...]
                                       [--rounds 7] [--db F] [--plot out.png] [--hold-back]

Every spec is synthesized (default memo table, or --db), compiled, checked against the
numpy reference, then timed in interleaved rounds (every contender once per round,
median per contender): the C timing loop (`fn.benchmark()`, operands 64-byte aligned),
the same loop with every operand 16 bytes past a line (`shift=16`, where numpy puts
small arrays), `fn(a, b)` on arrays from `rng.random` as numpy allocates them, the same
on 64-byte-aligned copies, `fn(a, b, out=o)`, and numpy's expression for the spec
(np.matmul, a row softmax; none for other kinds). The columns "call - C" are what the
Python call adds; "numpy / call" and "numpy / C" are the ratios a user sees and the
program's own (> 1: ours is faster).

numpy runs on one thread (OPENBLAS_NUM_THREADS=1) at the full ISA of this CPU:
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which this workplace may set to hold OpenBLAS
back, are removed before numpy loads unless --hold-back; the table names the kernel
OpenBLAS chose (threadpoolctl).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys

from host import HOLD_BACK_HELP, full_isa, libraries, title

full_isa(sys.argv)  # must precede numpy's import

import numpy as np  # noqa: E402
from timing import status  # noqa: E402

from morello_asp import parse_spec  # noqa: E402
from morello_asp.codegen.api import compile_impl  # noqa: E402
from morello_asp.codegen.baseline import NUMPY_HELPERS, numpy_expression, time_python  # noqa: E402
from morello_asp.codegen.convert import aligned_empty  # noqa: E402
from morello_asp.synthesis import synthesize  # noqa: E402

DEFAULT_SIZES = [8, 16, 32, 64, 128, 256, 512, 1024]
DEFAULT_SPECS = ["Softmax1(128x1024, f32)", "Conv(1x16x16x18x18x3x3, f32)"]
COLUMNS = ["C loop", "C @16", "fn(a,b)", "fn aligned", "fn out="]


def blas_kernel() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "OpenBLAS (threadpoolctl not installed: kernel unknown)"
    for info in threadpool_info():
        if info.get("user_api") == "blas":
            return f"{info.get('internal_api')} {info.get('version')}, kernel {info.get('architecture')}"
    return "no BLAS found"


def aligned_copy(a: np.ndarray) -> np.ndarray:
    b = aligned_empty(a.size, a.dtype).reshape(a.shape)
    b[...] = a
    return b


def contenders(spec, fn, rng):
    """name -> a callable timed per round (the C-loop ones return seconds themselves)."""
    ins = [i for i in range(len(spec.operands)) if i not in spec.outputs]
    arrays = [rng.random(spec.operand_shapes[i], dtype=np.float32) for i in ins]
    aligned = [aligned_copy(a) for a in arrays]
    outs = [np.empty(spec.operand_shapes[o], np.float32) for o in spec.outputs]
    out = outs[0] if len(outs) == 1 else tuple(outs)
    runs = {
        "fn(a,b)": lambda: fn(*arrays),
        "fn aligned": lambda: fn(*aligned),
        "fn out=": lambda: fn(*arrays, out=out),
    }
    expr = numpy_expression(spec)
    if expr is not None:
        env: dict = {"np": np}
        exec(NUMPY_HELPERS, env)
        env.update({f"a{i}": a for i, a in zip(ins, arrays)})
        code = compile(expr, "<numpy>", "eval")
        runs["numpy"] = lambda: eval(code, env)
    return runs


def measure(text: str, target: str | None, db, rounds: int) -> dict[str, float]:
    spec = parse_spec(text, target)
    fn = compile_impl(synthesize(spec, db=db) if db else synthesize(spec))
    err, tol = fn.check()
    if not err <= tol:
        raise SystemExit(f"{text}: the program differs from numpy: max |error| {err:.3g} > {tol:.3g}")
    runs = contenders(spec, fn, np.random.default_rng(0))
    times: dict[str, list[float]] = {k: [] for k in [*COLUMNS[:2], *runs]}
    for r in range(rounds):
        times["C loop"].append(fn.benchmark(reps=3, min_time=0.01).seconds)
        times["C @16"].append(fn.benchmark(reps=3, min_time=0.01, shift=16).seconds)
        for name, call in runs.items():
            times[name].append(time_python(call, reps=3, min_time=0.01))
        status(f"{text}: round {r + 1}/{rounds}")
    status("", end=True)
    return {k: statistics.median(v) for k, v in times.items()}


def us(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e6:.2f}" if s < 1e-3 else f"{s * 1e6:.0f}"


def table(rows: dict[str, dict[str, float]]) -> list[str]:
    head = (
        "| spec | " + " | ".join(f"{c} µs" for c in COLUMNS) + " | call − C µs | numpy µs | numpy / call | numpy / C |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for text, t in rows.items():
        npy = t.get("numpy")
        cells = [us(t[c]) for c in COLUMNS]
        extra = us(t["fn(a,b)"] - t["C loop"])
        r_call = f"{npy / t['fn(a,b)']:.2f}" if npy else "—"
        r_c = f"{npy / t['C loop']:.2f}" if npy else "—"
        lines.append(f"| {text} | " + " | ".join(cells) + f" | {extra} | {us(npy)} | {r_call} | {r_c} |")
    return lines


def plot(path: str, rows: dict[str, dict[str, float]]) -> None:
    import matplotlib.pyplot as plt

    names = [k for k, t in rows.items() if "numpy" in t]
    call = [rows[k]["numpy"] / rows[k]["fn(a,b)"] for k in names]
    loop = [rows[k]["numpy"] / rows[k]["C loop"] for k in names]
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(names) + 1.5))
    y = np.arange(len(names))
    ax.barh(y - 0.2, loop, 0.4, label="C loop")
    ax.barh(y + 0.2, call, 0.4, label="fn(a, b)")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(y, names)
    ax.set_xlabel("numpy time / ours (> 1: ours faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="the cost of a call from Python, beside numpy's")
    ap.add_argument("--target", help="target name or entry file (default: native, or $MORELLO_ASP_TARGET)")
    ap.add_argument("--sizes", type=int, nargs="*", default=DEFAULT_SIZES, help="f32 Matmul NxNxN sizes")
    ap.add_argument("--specs", nargs="*", default=DEFAULT_SPECS, help="other specs (a softmax, a conv)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds per spec")
    ap.add_argument("--db", help="memo table (default: the user's default table)")
    ap.add_argument("--plot", help="write a bar chart of both ratios to this PNG")
    ap.add_argument("--hold-back", action="store_true", help=HOLD_BACK_HELP)
    args = ap.parse_args(argv)
    texts = [f"Matmul({n}x{n}x{n}, f32)" for n in args.sizes] + list(args.specs)
    rows = {t: measure(t, args.target, args.db, args.rounds) for t in texts}
    print(
        f"{datetime.date.today()}, {title(args.target)}; numpy {np.__version__} "
        f"on one thread ({blas_kernel()}; {libraries()}); medians of {args.rounds} interleaved rounds"
    )
    print("\n".join(table(rows)))
    if args.plot:
        plot(args.plot, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
