"""GFLOP/s of the hand-scheduled f32 matmul (examples/fast_matmul.py) next to numpy,
measured side by side in one run, both single-threaded.

    python benchmarks/matmul.py --sizes 256 512 1024 [--plot out.png]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # must precede numpy's import
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from fast_matmul import fast_matmul  # noqa: E402

from morello_asp.codegen.baseline import time_python  # noqa: E402


def run(sizes, check: bool = True):
    rows = []
    rng = np.random.default_rng(0)
    for s in sizes:
        imp = fast_matmul(s, s, s)
        fn = imp.compile()
        a = rng.random((s, s), dtype=np.float32)
        b = rng.random((s, s), dtype=np.float32)
        if check:
            err = float(np.abs(fn(a, b) - a @ b).max())
            if err > 1e-3 * s:
                raise SystemExit(f"size {s}: result differs from numpy by {err}")
        ours = fn.benchmark()
        c = np.empty((s, s), dtype=np.float32)
        np_gf = 2 * s**3 / time_python(lambda: np.matmul(a, b, out=c)) / 1e9
        rows.append((s, ours.gflops, np_gf))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="f32 matmul: morello-asp hand schedule vs numpy, single-threaded")
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    ap.add_argument("--plot", help="write a bar chart to this PNG")
    args = ap.parse_args(argv)
    rows = run(args.sizes)
    core = os.environ.get("OPENBLAS_CORETYPE", "auto-detected")
    print(f"f32 Matmul NxNxN, single thread; numpy = OpenBLAS with OPENBLAS_CORETYPE={core}"
          f"{' (Haswell: AVX2 kernels, like ours)' if core.lower() == 'haswell' else ''}")
    print(f"{'N':>6} {'morello-asp GFLOP/s':>20} {'numpy GFLOP/s':>14} {'ratio':>7}")
    for s, ours, ref in rows:
        print(f"{s:>6} {ours:>20.2f} {ref:>14.2f} {ours / ref:>7.2f}")
    if args.plot:
        try:
            import matplotlib
        except ImportError:
            raise SystemExit("--plot needs matplotlib: pip install -e '.[bench]'") from None
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        x = np.arange(len(rows))
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar(x - 0.2, [r[1] for r in rows], 0.4, label="morello-asp (hand schedule, AVX2)")
        ax.bar(x + 0.2, [r[2] for r in rows], 0.4, label=f"numpy / OpenBLAS ({core})")
        ax.set_xticks(x, [str(r[0]) for r in rows])
        ax.set_xlabel("N (f32 NxNxN matmul, 1 thread)")
        ax.set_ylabel("GFLOP/s")
        ax.set_ylim(0, 1.35 * max(max(r[1], r[2]) for r in rows))
        ax.legend(loc="upper center", ncols=1, fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
