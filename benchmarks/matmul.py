"""GFLOP/s of f32 matmul programs next to numpy, measured side by side in one run,
both single-threaded.

    python benchmarks/matmul.py --sizes 256 512 1024 [--plot out.png]   # hand schedule
    python benchmarks/matmul.py --suite standard [--db F] [--plot out.png]  # synthesized / guided
    python benchmarks/matmul.py --suite automatic|rectangular [--db F]     # nothing by hand
    python benchmarks/matmul.py --target avx512 [--suite standard]          # another target

Programs are built from what the target declares (its register block: vector width and
register count, `morello_asp.recipes.register_block`). Where this machine cannot run
the target's programs (a CPU flag it lacks, a missing emulator), they are still
synthesized and compiled with the target's compiler, and one line says why they are not
run (exit 0). A target whose programs run under an emulator is checked against numpy
and not timed (no speed claims from an emulator). The default target is native (this
machine's; $MORELLO_ASP_TARGET names another), and numpy runs at the full ISA of the CPU
(benchmarks/host.py: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed) unless --hold-back.

Each table also gives both sides as a share of one core's f32 FMA peak with the target's
vectors, measured in the same run (independent FMA chains, `timing.fma_peak_gflops`):
near the peak, a ratio to numpy can only move by its distance from it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from host import HOLD_BACK_HELP, full_isa, libraries, title

full_isa(sys.argv)  # must precede numpy's import

import numpy as np  # noqa: E402
from timing import fma_peak_gflops, peak_line  # noqa: E402

from morello_asp.codegen.baseline import time_python  # noqa: E402
from morello_asp.codegen.ctarget import get_ctarget  # noqa: E402
from morello_asp.codegen.standalone import build_executable  # noqa: E402
from morello_asp.errors import ScheduleError  # noqa: E402
from morello_asp.recipes import fast_matmul, register_block  # noqa: E402
from morello_asp.target import as_target, default_target  # noqa: E402


def why_not_timed(target: str) -> str:
    """Why this machine does not time the target's programs ("" if it does)."""
    ct = get_ctarget(target)
    why = ct.cannot_run()
    if why:
        return f"cannot run here: {why}"
    if ct.emulator:
        return f"runs under {ct.emulator[0]}: checked against numpy, not timed (no speed claims from an emulator)"
    return ""


def compile_only(imps, target: str, what: str) -> str:
    """Compile each program with the target's compiler (nothing is run); the one line
    that says so and why they are not run."""
    for imp in imps:
        build_executable(imp, target)
    return f"{target}: {what} and compiled; {why_not_timed(target)}"


def run(sizes, check: bool = True, target: str = "avx2"):
    rows = []
    rng = np.random.default_rng(0)
    for s in sizes:
        imp = fast_matmul(s, s, s, target=target)
        fn = imp.compile()
        a = rng.random((s, s), dtype=np.float32)
        b = rng.random((s, s), dtype=np.float32)
        if check:
            err = float(np.abs(fn(a, b) - a @ b).max())
            if err > 1e-3 * s:
                raise SystemExit(f"size {s}: result differs from numpy by {err}")
        ours = fn.benchmark()
        c = np.empty((s, s), dtype=np.float32)
        np_gf = 2 * s**3 / time_python(lambda a=a, b=b, c=c: np.matmul(a, b, out=c)) / 1e9
        rows.append((s, ours.gflops, np_gf))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="f32 matmul: morello-asp vs numpy, single-threaded")
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024], help="n^3, hand schedule")
    ap.add_argument(
        "--suite",
        choices=["standard", "automatic", "rectangular"],
        help="standard: synthesized / user-guided programs; automatic: every square size synthesized; "
        "rectangular: the standard suite's rectangular sizes, all synthesized",
    )
    ap.add_argument(
        "--rules",
        nargs="+",
        default=[],
        metavar="RULES",
        help="extra rule files or optional rule sets for the suite, e.g. a path to a .lp file",
    )
    ap.add_argument("--only", nargs="+", metavar="SIZE", help="suite sizes to run, e.g. 256 18x32x96 (m x n x k)")
    ap.add_argument("--db", help="memo table shared by the suite's sizes (default benchmarks/.suite.db)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds per size")
    ap.add_argument(
        "--recipe-check",
        type=int,
        nargs="*",
        metavar="N",
        default=None,
        help="also compare the synthesized n^3 program with the hand recipe (default n = 64)",
    )
    ap.add_argument("--plot", help="write a bar chart to this PNG")
    ap.add_argument("--target", default=None, help="target name or entry file (default: native, this machine's)")
    ap.add_argument("--hold-back", action="store_true", help=HOLD_BACK_HELP)
    args = ap.parse_args(argv)
    args.target = args.target or default_target()
    core = os.environ.get("OPENBLAS_CORETYPE", "auto-detected")
    blk = register_block(args.target)
    print(f"{title(args.target)}; {libraries()}", flush=True)
    print(
        f"target {args.target}: {blk.rows} x {blk.cols} f32 register block "
        f"({blk.lanes}-lane vectors, {get_ctarget(args.target).target.vector_levels[0].capacity} registers)",
        flush=True,
    )
    if args.suite:
        return suite_main(args, core)
    bad = [s for s in args.sizes if s % blk.cols]
    if bad:
        raise SystemExit(f"--sizes {' '.join(map(str, bad))}: the hand schedule needs multiples of {blk.cols}")
    # A register block taller than the cache level has ways cannot stay there as it is
    # where its rows alias (avx512's 14 rows of a 1024-wide C, 4 KB apart): the rules
    # refuse that move, so the hand schedule does not apply at that size.
    sizes = []
    for s in args.sizes:
        try:
            fast_matmul(s, s, s, target=args.target)
        except ScheduleError as e:
            print(f"{args.target}: no hand schedule for N = {s}: {str(e).splitlines()[0]}", flush=True)
        else:
            sizes.append(s)
    if not sizes:
        return 1
    args.sizes = sizes
    why = why_not_timed(args.target)
    if why and not why.startswith("runs under"):
        progs = [fast_matmul(s, s, s, target=args.target) for s in args.sizes]
        print(compile_only(progs, args.target, "hand-scheduled NxNxN built for N = " + " ".join(map(str, args.sizes))))
        return 0
    if why:  # an emulator: check, do not time
        for s in args.sizes:
            err, tol = fast_matmul(s, s, s, target=args.target).compile().check()
            if not err <= tol:
                raise SystemExit(f"size {s}: result differs from numpy by {err:.3g} (> {tol:.3g})")
        print(f"{args.target}: hand-scheduled NxNxN for N = {' '.join(map(str, args.sizes))} match numpy; {why}")
        return 0
    rows = run(args.sizes, target=args.target)
    print(
        f"f32 Matmul NxNxN, single thread, {title(args.target)}; numpy = OpenBLAS with OPENBLAS_CORETYPE={core}"
        f"{' (Haswell: AVX2 kernels)' if core.lower() == 'haswell' else ''}"
    )
    peak = fma_peak_gflops(args.target)
    print(peak_line(args.target, peak))
    head = f"{'N':>6} {'morello-asp GFLOP/s':>20} {'numpy GFLOP/s':>14} {'ratio':>7}"
    print(head + f" {'% peak':>7} {'numpy %':>8}")
    for s, ours, ref in rows:
        share = f" {100 * ours / peak:>7.0f} {100 * ref / peak:>8.0f}"
        print(f"{s:>6} {ours:>20.2f} {ref:>14.2f} {ours / ref:>7.2f}{share}")
    if args.plot:
        plot(
            args.plot,
            [(str(s), ours, ref) for s, ours, ref in rows],
            f"morello-asp (hand schedule, {args.target})",
            core,
            "N (f32 NxNxN matmul, 1 thread)",
        )
    return 0


def suite_main(args, core: str) -> int:
    import matmul_suite as ms

    sizes = ms.SUITES[args.suite]
    if args.only:
        want = set(args.only)
        sizes = [s for s in sizes if s.label in want or f"{s.m}x{s.n}x{s.k}" in want]
        if not sizes:
            raise SystemExit(f"--only {' '.join(args.only)}: no such size in suite {args.suite}")
    # a table is tied to its logic files, so each rule set gets its own default table
    # (and to its target)
    name = as_target(args.target).name
    tag = "".join(f"-{Path(r).stem}" for r in [*args.rules, *([name] if name != "avx2" else [])])
    default = ms.DEFAULT_DB.with_name(".suite" + tag + ".db")
    db = args.db or str(default)
    print(f"memo table: {db}; extra rules: {', '.join(args.rules) or 'none'}", flush=True)
    log = lambda t: print(t, file=sys.stderr, flush=True)  # noqa: E731
    why = why_not_timed(args.target)
    if why:
        imps = [ms.build(s, db, tuple(args.rules), args.target)[0] for s in sizes]
        if not why.startswith("runs under"):
            print(compile_only(imps, args.target, f"{len(imps)} suite programs synthesized"))
            return 0
        rng = np.random.default_rng(0)
        for s, imp in zip(sizes, imps):
            ms.checked(imp, s, rng, tuple(args.rules))
        print(f"{args.target}: {len(imps)} suite programs match numpy; {why}")
        return 0
    rows = ms.run_suite(sizes, db, args.rounds, log=log, rules=tuple(args.rules), target=args.target)
    ms.print_table(rows, core, args.target, fma_peak_gflops(args.target))
    if args.recipe_check is not None:
        print("\nsearch space check: the synthesizer's n^3 program vs the hand recipe (examples/fast_matmul.py)")
        print(f"{'n':>5} {'program':>12} {'cost':>12} {'in search space':>16} {'GFLOP/s':>8} {'numpy':>7} {'ratio':>6}")
        for n in args.recipe_check or [64]:
            for r in ms.recipe_check(n, db, args.rounds):
                why = "yes" if r["in_space"] else "no: " + "; ".join(f"{a} on {sp}" for _, sp, a in r["outside"][:2])
                print(
                    f"{n:>5} {r['program']:>12} {r['cost']:>12,} {why:>16} {r['gflops']:>8.1f} {r['numpy']:>7.1f} "
                    f"{r['gflops'] / r['numpy']:>6.2f}"
                )
    if args.plot:
        plot(
            args.plot,
            [(f"{r.size.label}\n{r.mode[0]}", r.gflops, r.numpy_gflops) for r in rows],
            f"morello-asp (s: synthesized, g: user-guided; {args.target})",
            core,
            "m x n x k (square: n)",
        )
    return 0


def plot(path: str, bars, ours_label: str, core: str, xlabel: str) -> None:
    """Bar chart of (label, ours, numpy) GFLOP/s."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install -e '.[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(bars))
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(bars)), 3.8))
    ax.bar(x - 0.2, [b[1] for b in bars], 0.4, label=ours_label)
    ax.bar(x + 0.2, [b[2] for b in bars], 0.4, label=f"numpy / OpenBLAS ({core})")
    ax.set_xticks(x, [b[0] for b in bars], fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GFLOP/s")
    ax.set_ylim(0, 1.35 * max(max(b[1], b[2]) for b in bars))
    ax.legend(loc="upper center", ncols=1, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    from morello_asp.cli import run_script

    sys.exit(run_script(main, Path(__file__).name))
