"""The standard f32 matmul suite (issue 7): synthesized or user-guided programs timed
beside numpy (single-threaded OpenBLAS) in one process.

Each size is either *synthesized* (`synthesize(spec, db=...)`, nothing by hand) or
*guided* (the `blis` guide of morello_asp/guides.py: the outer Goto/BLIS loops by
hand, then `synthesize_all(db=...)`). All sizes share one memo table, so later sizes reuse
earlier ones' decisions. Every program is checked against numpy before it is timed.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from timing import peak_line

from morello_asp import parse_spec
from morello_asp.codegen.baseline import time_python
from morello_asp.guides import blis, hand_rewrites
from morello_asp.ir import Impl
from morello_asp.recipes import fast_matmul
from morello_asp.synthesis import synthesize, synthesize_all

DEFAULT_DB = Path(__file__).resolve().parent / ".suite.db"


@dataclass(frozen=True)
class Size:
    m: int
    n: int
    k: int
    mode: str  # "synthesized" | "guided"
    square: bool

    @property
    def label(self) -> str:
        return str(self.m) if self.square else f"{self.m}x{self.n}x{self.k}"

    def spec(self, target: str = "avx2"):
        return parse_spec(self.spec_text, target)

    @property
    def spec_text(self) -> str:
        return f"Matmul({self.m}x{self.k}x{self.n}, f32)"  # the spec's order is m x k x n

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


def _sq(n, mode):
    return Size(n, n, n, mode, True)


def _rect(text, mode):
    m, n, k = (int(x) for x in text.split("x"))  # the order: m x n x k
    return Size(m, n, k, mode, False)


# Fully synthesized where the search from the shared table takes a few minutes;
# guided (a few outer rewrites by hand) above that.
STANDARD = [
    _sq(64, "synthesized"),
    _sq(128, "synthesized"),
    _sq(256, "guided"),
    _sq(512, "guided"),
    _sq(1024, "guided"),
    _sq(2048, "guided"),
    _rect("18x32x96", "synthesized"),
    _rect("24x64x96", "synthesized"),
    _rect("48x64x128", "synthesized"),
    _rect("192x64x128", "guided"),
    _rect("480x512x16", "guided"),
    _rect("384x256x256", "guided"),
    _rect("784x128x512", "guided"),
    _rect("1020x1152x1152", "guided"),
]
# Every square size with nothing by hand, the default rules (which see strides: a tile of
# B whose rows alias in L1 is packed), and sizes that are not powers of two.
AUTOMATIC = [_sq(n, "synthesized") for n in (64, 96, 128, 200, 256, 320, 512, 1024, 2048)] + [
    _rect("129x257x65", "synthesized")
]
# The standard suite's rectangular sizes with nothing by hand (issue 18 asks their
# geometric mean ratio to numpy).
RECTANGULAR = [Size(s.m, s.n, s.k, "synthesized", False) for s in STANDARD if not s.square]
SUITES = {"standard": STANDARD, "automatic": AUTOMATIC, "rectangular": RECTANGULAR}


@dataclass
class Row:
    size: Size
    mode: str
    hand: int  # rewrites applied by hand (0 when synthesized)
    synth_s: float
    cost: int
    gflops: float
    numpy_gflops: float
    paired_ratio: float  # median over rounds of ours/numpy measured back to back

    @property
    def ratio(self) -> float:
        return self.gflops / self.numpy_gflops


def build(size: Size, db, rules=(), target: str = "avx2") -> tuple[Impl, int, float]:
    """The program for one size on `target`, how many rewrites were by hand, and
    synthesis seconds."""
    t0 = time.perf_counter()
    if size.mode == "synthesized":
        return synthesize(size.spec(target), db=db, rules=rules), 0, time.perf_counter() - t0
    partial = blis(size.spec(target))
    t0 = time.perf_counter()
    imp = synthesize_all(partial, db=db, rules=rules)
    return imp, hand_rewrites(partial), time.perf_counter() - t0


def checked(imp: Impl, size: Size, rng, rules=()):
    """The compiled program and its inputs, after comparing its result with numpy's."""
    fn = imp.compile(rules=rules)
    a = rng.random((size.m, size.k), dtype=np.float32) - 0.5
    b = rng.random((size.k, size.n), dtype=np.float32) - 0.5
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.abs(fn(a, b) - ref).max())
    tol = 1e-5 * size.k
    if not err <= tol:
        raise SystemExit(f"{size.label}: result differs from numpy by {err:.3g} (> {tol:.3g})\n{imp}")
    return fn, a, b


def time_pair(fn, a, b, flops: int, rounds: int) -> tuple[float, float, float]:
    """Best GFLOP/s of ours and numpy over interleaved rounds, and the median ratio of
    the two measured back to back in each round (the machine is shared: the best of
    several rounds is the least disturbed, pairs see the same load)."""
    out = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
    ours, ref, ratios = [], [], []
    min_time = 0.03
    for _ in range(rounds):
        g = flops / fn.benchmark(reps=3, min_time=min_time).seconds / 1e9
        r = flops / time_python(lambda: np.matmul(a, b, out=out), reps=3, min_time=min_time) / 1e9
        ours.append(g)
        ref.append(r)
        ratios.append(g / r)
    return max(ours), max(ref), statistics.median(ratios)


def run_suite(sizes: list[Size], db, rounds: int = 7, log=print, rules=(), target: str = "avx2") -> list[Row]:
    rng = np.random.default_rng(0)
    rows = []
    for s in sizes:
        log(f"[{s.label}] {s.mode}: {s.spec_text} ...")
        imp, hand, secs = build(s, db, rules, target)
        fn, a, b = checked(imp, s, rng, rules)
        g, r, pr = time_pair(fn, a, b, s.flops, rounds)
        rows.append(Row(s, s.mode, hand, secs, imp.cost.main, g, r, pr))
        log(f"[{s.label}] synthesis {secs:.1f} s, {g:.1f} GFLOP/s, numpy {r:.1f}, ratio {g / r:.2f}")
    return rows


def recipe_check(n: int, db, rounds: int = 7) -> list[dict]:
    """Part 1: the synthesizer's program for n^3 next to the hand recipe
    (examples/fast_matmul.py, 6-row and in-space 4-row register blocks) under the same
    cost model: cost, whether the search offers every rewrite, GFLOP/s, numpy GFLOP/s."""
    from morello_asp.solver.search.engine import get_engine
    from morello_asp.solver.search.space import outside_search

    size = _sq(n, "synthesized")
    rng = np.random.default_rng(1)
    progs = [
        ("synthesized", synthesize(size.spec_text, db=db)),
        ("hand 6x16", fast_matmul(n, n, n, mr=6)),
        ("hand 4x16", fast_matmul(n, n, n, mr=4)),
    ]
    out = []
    for name, imp in progs:
        fn, a, b = checked(imp, size, rng)
        g, r, _ = time_pair(fn, a, b, size.flops, rounds)
        outside = outside_search(imp, get_engine())
        out.append(
            {
                "n": n,
                "program": name,
                "cost": imp.cost.main,
                "in_space": not outside,
                "outside": outside,
                "gflops": g,
                "numpy": r,
            }
        )
    return out


def geomean(xs) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def print_table(rows: list[Row], core: str, target: str = "avx2", peak: float = 0.0) -> None:
    """The suite's table; with `peak` (one core's FMA peak, GFLOP/s), each side's share of it."""
    print(
        f"f32 matmul, single thread, target {target}; numpy = OpenBLAS, OPENBLAS_CORETYPE={core}; "
        "GFLOP/s = best of interleaved rounds"
    )
    if peak:
        print(peak_line(target, peak))
    head = (
        f"{'m x n x k':>15} {'program':>12} {'by hand':>7} {'synth s':>8} {'cost':>13} "
        f"{'GFLOP/s':>8} {'numpy':>8} {'ratio':>6} {'paired':>7}"
    )
    print(head + (f" {'% peak':>7} {'numpy %':>8}" if peak else ""))
    for r in rows:
        s = r.size
        dims = f"{s.m}x{s.n}x{s.k}"
        print(
            f"{dims:>15} {r.mode:>12} {r.hand:>7} {r.synth_s:>8.1f} {r.cost:>13,} "
            f"{r.gflops:>8.1f} {r.numpy_gflops:>8.1f} {r.ratio:>6.2f} {r.paired_ratio:>7.2f}"
            + (f" {100 * r.gflops / peak:>7.0f} {100 * r.numpy_gflops / peak:>8.0f}" if peak else "")
        )
    rect = [r for r in rows if not r.size.square]
    if rect:
        print(
            f"geometric mean ratio over the rectangular sizes: {geomean([r.ratio for r in rect]):.2f} "
            f"(paired {geomean([r.paired_ratio for r in rect]):.2f})"
        )
