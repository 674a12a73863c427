"""Softmax and softmax(A @ B): synthesized programs beside numpy and torch, one thread.

    python benchmarks/softmax.py --suite standard [--db F] [--plot softmax.png]
    python benchmarks/softmax.py --only 128x1024 softmax128x64x1024
    python benchmarks/softmax.py --suite search --search-fused

Every spec is synthesized (from the memo table --db when it has it), compiled, checked
against a float64 softmax (or float64 softmax(A @ B)) within the tolerance of
codegen/reference.py, then timed in interleaved rounds (each contender once per round,
median per contender) beside numpy (exp and sum along the row, OpenBLAS on one thread)
and torch.softmax (torch.set_num_threads(1)). For softmax(A @ B) a fourth contender is
the same two specs synthesized separately (Matmul, then Softmax2 on its output) and run
one after the other: what fusing them buys, measured. Its Matmul is the faster, in each
round, of the one searched from the spec and the `blis` guide's. With --search-fused, softmax(A @ B)
is also synthesized from the Compose spec alone (no guide; rule set fuse_in_cache) and
timed as "searched" (and the separate pair against it). With --in-cache, one band's Matmul
and Softmax2, each timed alone with its operands in cache, times the bands: the separate
pair over that is roughly what keeping the intermediate in cache can gain on this CPU
(roughly: a band's Matmul tiles differently from the whole). Times are medians; the table
gives ratios, other contender's time over ours (> 1: ours is faster), and names the
target (default native, this machine's; --target names another) and the CPU. numpy and
torch run at the full ISA of the CPU unless --hold-back (benchmarks/host.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from host import HOLD_BACK_HELP, cpu_name, full_isa, libraries, title

full_isa(sys.argv)  # must precede numpy's and torch's imports

import numpy as np  # noqa: E402
from timing import best_time  # noqa: E402

from morello_asp.target import as_target  # noqa: E402


@dataclass(frozen=True)
class Case:
    label: str
    rows: int
    cols: int
    k: int = 0  # > 0: softmax(A @ B) with A rows x k, B k x cols

    @property
    def spec(self) -> str:
        if self.k:
            return f"Compose((Softmax2, Matmul), [1x{self.rows}x{self.k}, 1x{self.k}x{self.cols}], f32)"
        return f"Softmax1({self.rows}x{self.cols}, f32)"


SUITES = {
    "standard": [
        Case("1x16384", 1, 16384),
        Case("128x1024", 128, 1024),
        Case("512x512", 512, 512),
        Case("64x4096", 64, 4096),
        Case("softmax128x64x1024", 128, 1024, 64),
        Case("softmax512x64x512", 512, 512, 64),
    ],
    "small": [Case("8x512", 8, 512), Case("softmax16x16x128", 16, 128, 16)],
    # softmax(A @ B) small enough to synthesize from the Compose spec alone (--search-fused)
    "search": [Case("softmax16x16x128", 16, 128, 16), Case("softmax32x16x256", 32, 256, 16)],
}


def load_average() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def softmax64(x: np.ndarray, axis: int) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def numpy_softmax(x: np.ndarray, axis: int, out: np.ndarray) -> np.ndarray:
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=axis, keepdims=True)
    return out


def band_bytes() -> int:
    """The most bytes a band's intermediate may take: MORELLO_ASP_BAND_BYTES, else the
    largest power of two within 2/3 of this host's L1 data cache (the rest for B's panel
    and the output rows), 16 KiB where sysfs does not say. Measured: Zen 3 (32 KiB L1),
    16 KiB bands beat 32 KiB ones (separate / fused 1.29 against 1.08, 2026-11-25); Zen 5
    (48 KiB), 32 KiB bands beat 16 KiB ones (1.085 against 1.058, 2026-11-29)."""
    if "MORELLO_ASP_BAND_BYTES" in os.environ:
        return int(os.environ["MORELLO_ASP_BAND_BYTES"])
    from morello_asp.native import host

    l1 = host().data_cache(1)
    if l1 is None:
        return 16384
    return 1 << ((2 * l1.size // 3).bit_length() - 1)


def band_rows(case: Case) -> int:
    """Rows per band of the guided softmax(A @ B): the band's intermediate (rows x cols
    f32) within band_bytes(), and at least two bands."""
    limit = band_bytes()
    t = 1
    while t * 2 * case.cols * 4 <= limit and t * 2 < case.rows and case.rows % (t * 2) == 0:
        t *= 2
    return t


def synthesize_searched(case: Case, db: str, log):
    """softmax(A @ B) synthesized from the Compose spec alone, no guide, under the
    `fuse_in_cache` rule set (bufferize keeps the intermediate in a cache level), in a
    table of its own (other rules, other table)."""
    from morello_asp.synthesis import synthesize

    t0 = time.perf_counter()
    imp = synthesize(case.spec, db=db + ".fuse_in_cache", rules=("fuse_in_cache",))
    log(
        f"{case.label}: searched from the spec (fuse_in_cache) in {time.perf_counter() - t0:.1f} s, "
        f"cost {imp.cost.main:,}"
    )
    return imp


def synthesize_case(case: Case, db: str, log, full: bool):
    """The program for a case, and for softmax(A @ B) the two specs separately. Rows are
    synthesized whole. softmax(A @ B) by default with a guide (paper 2.3): B packed into
    16-wide panels once, the outer loop over bands of rows and bufferize into L1 by hand
    (fusion), everything inside synthesized; the separate Matmul both from the spec and
    with the `blis` guide (which packs B the same way), the Softmax2 synthesized.
    `full`: every program synthesized from the spec alone (the search takes far longer)."""
    from morello_asp import parse_spec
    from morello_asp.synthesis import synthesize

    t0 = time.perf_counter()
    if case.k and not full:
        spec = parse_spec(case.spec)
        t = band_rows(case)
        fused = spec
        packed = case.cols % 16 == 0
        if packed:  # B packed once into 16-wide panels (as blis does), read by every band
            fused = spec.move_param(1, "GL", "[0, 2, 1, 2 p(16)]")
        imp = fused.subschedule(
            [1] if packed else [],
            lambda s: s.tile([1, t, case.k, case.cols]).subschedule([0], lambda band: band.bufferize(0, "L1")),
        ).synthesize_all(db=db)
        how = f"guided: {'B packed, ' if packed else ''}bands of {t} rows, bufferize(0, L1), the rest synthesized"
    else:
        imp = synthesize(case.spec, db=db)
        how = "synthesized"
    log(f"{case.label}: {how} in {time.perf_counter() - t0:.1f} s, cost {imp.cost.main:,}")
    sep = None
    if case.k:  # the same two specs, synthesized separately
        t0 = time.perf_counter()
        mm_spec = f"Matmul(1x{case.rows}x{case.k}x{case.cols}, f32)"
        # the Matmul from the spec alone and, where B packs into 16-wide panels, the `blis`
        # guide's: whichever runs faster is the separate pair's Matmul
        mms = [synthesize(mm_spec, db=db)]
        if not full and case.cols % 16 == 0:
            mms.append(synthesize(mm_spec, db=db, guide="blis"))
        sm = synthesize(f"Softmax2(1x{case.rows}x{case.cols}, f32)", db=db)
        sep = (mms, sm)
        log(
            f"{case.label}: separate Matmul ({' and '.join(['synthesized', 'blis'][: len(mms)])}) "
            f"and Softmax2 in {time.perf_counter() - t0:.1f} s"
        )
    return imp, sep


def synthesize_band(case: Case, db: str):
    """One band's Matmul and Softmax2 (band_rows(case) rows), searched from their specs:
    timed repeatedly, their operands stay in cache, so rows / band times their sum is
    about what a fused program takes whose parts run as fast as they do alone."""
    from morello_asp.synthesis import synthesize

    t = band_rows(case)
    return [
        synthesize(f"Matmul(1x{t}x{case.k}x{case.cols}, f32)", db=db),
        synthesize(f"Softmax2(1x{t}x{case.cols}, f32)", db=db),
    ]


def run_case(
    case: Case,
    db: str,
    rounds: int,
    use_torch: bool,
    log,
    full: bool = False,
    searched: bool = False,
    in_cache: bool = False,
):
    from morello_asp.codegen.api import compile_many
    from morello_asp.codegen.reference import tolerance

    imp, sep = synthesize_case(case, db, log, full)
    found = synthesize_searched(case, db, log) if searched and case.k else None
    mms, sm = sep if sep is not None else ([], None)
    band = synthesize_band(case, db) if in_cache and case.k else []
    progs = compile_many([imp, *mms, *([sm] if sm is not None else []), *([found] if found else []), *band])
    if band:
        band_progs, progs = progs[-2:], progs[:-2]
    fn = progs[0]
    rng = np.random.default_rng(0)
    if case.k:
        a = (rng.random((case.rows, case.k), dtype=np.float32) * 2 - 1).astype(np.float32)
        b = (rng.random((case.k, case.cols), dtype=np.float32) * 2 - 1).astype(np.float32)
        inputs = (a, b)
        want = softmax64(a.astype(np.float64) @ b, 1)
    else:
        x = (rng.random((case.rows, case.cols), dtype=np.float32) * 20 - 10).astype(np.float32)
        inputs = (x,)
        want = softmax64(x, 1)
    out = np.empty((case.rows, case.cols), np.float32)
    got = fn(*inputs).reshape(case.rows, case.cols)
    tol = float(tolerance(imp.spec, want.astype(np.float32)))
    err = float(np.abs(got.astype(np.float64) - want).max())
    if not err <= tol:
        raise SystemExit(f"{case.label}: differs from float64 softmax by {err:.3g} > {tol:.3g}")
    contenders: dict[str, object] = {}
    # ours through the C timing loop (no Python call in the timing); the separate pair as
    # the sum of its two programs' times, each timed the same way, with the faster Matmul
    contenders["ours"] = lambda: fn.benchmark(reps=3, min_time=0.02).seconds
    if sep is not None:
        mmfs, smf = progs[1 : 1 + len(mms)], progs[1 + len(mms)]
        for mmf in mmfs:
            mid = smf(mmf(*inputs))
            if not float(np.abs(mid.astype(np.float64) - want).max()) <= tol:
                raise SystemExit(f"{case.label}: the separately synthesized pair differs from float64")
        contenders["separate"] = lambda: (
            min(f.benchmark(reps=3, min_time=0.02).seconds for f in mmfs) + smf.benchmark(reps=3, min_time=0.02).seconds
        )
        contenders["numpy"] = lambda: best_time(lambda: numpy_softmax(np.matmul(*inputs, out=out), 1, out))
    else:
        contenders["numpy"] = lambda: best_time(lambda: numpy_softmax(inputs[0], 1, out))
    if found is not None:
        ff = progs[-1]
        ferr = float(np.abs(ff(*inputs).reshape(case.rows, case.cols).astype(np.float64) - want).max())
        if not ferr <= tol:
            raise SystemExit(f"{case.label}: the searched program differs from float64 by {ferr:.3g} > {tol:.3g}")
        contenders["searched"] = lambda: ff.benchmark(reps=3, min_time=0.02).seconds
    if band:
        bands = case.rows // band_rows(case)
        contenders["in-cache"] = lambda: bands * sum(p.benchmark(reps=3, min_time=0.02).seconds for p in band_progs)
    if use_torch:
        import torch

        tin = [torch.from_numpy(x) for x in inputs]
        tout = torch.from_numpy(out)
        if case.k:
            tmid = torch.empty((case.rows, case.cols), dtype=torch.float32)
            tfn = lambda: torch.softmax(torch.matmul(tin[0], tin[1], out=tmid), 1, out=tout)  # noqa: E731
        else:
            tfn = lambda: torch.softmax(tin[0], 1, out=tout)  # noqa: E731
        np.testing.assert_allclose(tfn().numpy(), want, atol=1e-5)
        contenders["torch"] = lambda: best_time(tfn)
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(rounds):
        for k, f in contenders.items():
            times[k].append(f())  # type: ignore[operator]
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"case": case, "err": err, "tol": tol, "times": med, "program": imp, "searched": found}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="softmax: morello-asp vs numpy and torch, single-threaded")
    ap.add_argument("--suite", choices=sorted(SUITES), default="standard")
    ap.add_argument("--only", nargs="+", metavar="LABEL", help="cases to run, e.g. 128x1024 softmax128x64x1024")
    ap.add_argument("--db", help="memo table (default: benchmarks/.softmax.db, one per target)")
    ap.add_argument("--target", help="target name or entry file (default: native, this machine's)")
    ap.add_argument("--hold-back", action="store_true", help=HOLD_BACK_HELP)
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    ap.add_argument("--no-torch", action="store_true", help="compare with numpy only")
    ap.add_argument("--plot", help="write a bar chart of the ratios to this PNG")
    ap.add_argument("--show", action="store_true", help="print each synthesized program")
    ap.add_argument(
        "--full-search",
        action="store_true",
        help="synthesize softmax(A @ B) and its separate Matmul from the spec alone (no guide; much slower)",
    )
    ap.add_argument(
        "--in-cache",
        action="store_true",
        help="also time one band's Matmul and Softmax2 with their operands in cache (what fusing could save, roughly)",
    )
    ap.add_argument(
        "--search-fused",
        action="store_true",
        help="also synthesize softmax(A @ B) from the Compose spec alone (rule set fuse_in_cache) and time it",
    )
    args = ap.parse_args(argv)
    if args.target:
        os.environ["MORELLO_ASP_TARGET"] = args.target  # the default target of every synthesis below
    name = as_target(None).name
    default_db = os.path.join(os.path.dirname(__file__), ".softmax.db" if name == "avx2" else f".softmax-{name}.db")
    args.db = args.db or default_db
    cases = SUITES[args.suite]
    if args.only:
        cases = list({c.label: c for v in SUITES.values() for c in v if c.label in set(args.only)}.values())
        if not cases:
            raise SystemExit(f"--only {' '.join(args.only)}: no such case")
    use_torch = not args.no_torch
    if use_torch:
        try:
            import torch

            torch.set_num_threads(1)
        except ImportError:
            print("torch is not installed (pip install -e '.[bench]'): comparing with numpy only", file=sys.stderr)
            use_torch = False

    def log(t):
        print(t, file=sys.stderr, flush=True)

    print(f"{title()}; {libraries()}; one thread each; median of {args.rounds} interleaved rounds", flush=True)
    head = f"{'case':>20} {'ours':>11} {'numpy/ours':>10}"
    head += f" {'torch/ours':>10}" if use_torch else ""
    head += f" {'separate/ours':>13}"
    if args.search_fused:
        head += f" {'searched':>11} {'searched/ours':>13}" + (f" {'torch/searched':>14}" if use_torch else "")
        head += f" {'separate/searched':>17}"
    if args.in_cache:
        head += f" {'separate/in-cache':>17}"
    head += f" {'max |err|':>9} {'tolerance':>9} {'load':>14}"
    print(head, flush=True)
    results = []
    for c in cases:
        r = run_case(c, args.db, args.rounds, use_torch, log, args.full_search, args.search_fused, args.in_cache)
        results.append(r)
        t = r["times"]
        line = f"{r['case'].label:>20} {t['ours'] * 1e6:>8.1f} us {t['numpy'] / t['ours']:>10.2f}"
        line += f" {t['torch'] / t['ours']:>10.2f}" if use_torch else ""
        sep = f"{t['separate'] / t['ours']:.2f}" if "separate" in t else "-"
        line += f" {sep:>13}"
        if args.search_fused:
            if "searched" in t:
                line += f" {t['searched'] * 1e6:>8.1f} us {t['searched'] / t['ours']:>13.2f}"
                line += f" {t['torch'] / t['searched']:>14.2f}" if use_torch else ""
                line += f" {t['separate'] / t['searched']:>17.2f}"
            else:
                line += f" {'-':>11} {'-':>13}" + (f" {'-':>14}" if use_torch else "") + f" {'-':>17}"
        if args.in_cache:
            line += f" {t['separate'] / t['in-cache']:>17.2f}" if "in-cache" in t else f" {'-':>17}"
        line += f" {r['err']:>9.2g} {r['tol']:>9.2g} {load_average():>14}"
        print(line, flush=True)
        if args.show:
            print(r["program"])
            if r["searched"] is not None:
                print(r["searched"])
    if args.plot:
        plot(args.plot, results, use_torch)
    return 0


def plot(path: str, results, use_torch: bool) -> None:
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install -e '.[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ["numpy"] + (["torch"] if use_torch else []) + ["separate"]
    x = np.arange(len(results))
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(results)), 3.8))
    w = 0.8 / len(keys)
    for i, k in enumerate(keys):
        vals = [r["times"][k] / r["times"]["ours"] if k in r["times"] else 0 for r in results]
        ax.bar(x + (i - (len(keys) - 1) / 2) * w, vals, w, label=f"{k} time / ours")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, [r["case"].label for r in results], fontsize=7, rotation=15)
    ax.set_ylabel("speed-up of morello-asp")
    ax.set_title(cpu_name(), fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    from morello_asp.cli import run_script

    sys.exit(run_script(main, Path(__file__).name))
