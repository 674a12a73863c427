"""Padded convolutions called from Python on the unpadded image, three ways interleaved
in one process run: the padded spec cut into regions (morello_asp/padded.py: the
interior over the caller's arrays, no copy of the image), the bordered program with its
copy of the image into a kept zero-bordered buffer (`fn.padded`), and torch's conv2d
(oneDNN, one thread, its full ISA, channels-last). Every layer of a network suite that
pads (benchmarks/conv.py's suites), each call checked against torch (or numpy's
reference) first. Ratios of medians of back-to-back rounds are what to read.

    python benchmarks/padded_call.py [--suite mobilenetv2|resnet50] [--kinds DepthwiseConvS2 ...]
                                     [--rounds 5] [--db FILE] [--plot padded.png]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from conv import SUITES, _torch, check_against_torch, checked, torch_case, zeros_after  # noqa: E402
from host import libraries, title  # noqa: E402

from morello_asp.codegen.baseline import time_python  # noqa: E402
from morello_asp.padded import compile_padded  # noqa: E402


def row(layer, db, rounds: int, target, log) -> dict:
    fn, _, secs = checked(layer, db, target)
    p, hi = layer.pad, max(zeros_after(layer), 0)
    t0 = time.perf_counter()
    split = compile_padded(fn.spec, [(p, hi), (p, hi)], target=target, db=db, split=True)
    split_s = time.perf_counter() - t0
    copy = fn.padded([(p, hi), (p, hi)])
    torch = _torch()
    out = {"layer": layer.name, "synth": secs, "regions": len(split.parts), "regions_s": split_s}
    if torch is None:
        for f in (split, copy):
            err, tol = f.check(seed=1)
            if not err <= tol:
                raise SystemExit(f"{layer.name}: differs from the reference by {err:.3g}")
        img = np.random.default_rng(0).random(split.shape(0), dtype=np.float32)
        filt = np.random.default_rng(1).random(fn.spec.operand_shapes[1], dtype=np.float32)
        tcall = None
    else:
        (tx, tw, groups), want, img, filt, _ = torch_case(layer, torch)
        for f in (split, copy):
            check_against_torch(layer, f(img, filt), want)
        s = layer.stride

        def tcall():
            return torch.nn.functional.conv2d(tx, tw, stride=s, padding=p, groups=groups)

    ts, tc, tt = [], [], []
    for _ in range(rounds):
        ts.append(time_python(lambda: split(img, filt), reps=3, min_time=0.05))
        tc.append(time_python(lambda: copy(img, filt), reps=3, min_time=0.05))
        if tcall is not None:
            tt.append(time_python(tcall, reps=3, min_time=0.05))
    med = statistics.median
    out |= {"split_us": med(ts) * 1e6, "copy_us": med(tc) * 1e6, "copy/split": med([c / s for c, s in zip(tc, ts)])}
    if tt:
        out |= {"torch_us": med(tt) * 1e6, "torch/split": med([t / s for t, s in zip(tt, ts)])}
        out["torch/copy"] = med([t / c for t, c in zip(tt, tc)])
    log(f"[{layer.name}] {out}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", choices=["mobilenetv2", "resnet50"], default="mobilenetv2")
    ap.add_argument("--kinds", nargs="*", default=None, help="only the suite's layers of these kinds")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--db", default=None, help="memo table (default: a new one in a temporary directory)")
    ap.add_argument("--target", default=None, help="target (default: native, this machine's)")
    ap.add_argument("--plot", default=None, help="write a bar chart of torch / ours to this file")
    args = ap.parse_args(argv)
    layers = [
        layer
        for layer in SUITES[args.suite]
        if (layer.pad or zeros_after(layer) > 0) and (not args.kinds or layer.kind in args.kinds)
    ]
    if args.db is None:
        import tempfile

        args.db = str(Path(tempfile.mkdtemp(prefix="padded-call-")) / "memo.db")
    rows = [row(layer, args.db, args.rounds, args.target, lambda m: print(m, file=sys.stderr)) for layer in layers]
    print(
        f"{args.suite}: padded layers called on the unpadded image from Python, {title(args.target)}; "
        f"{libraries()}; load {os.getloadavg()[0]:.1f}"
    )
    print(
        "| layer | regions | regions' search s | regions us | bordered copy us | torch us | copy / regions "
        "| torch / regions | torch / copy |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t = r.get("torch_us")
        print(
            f"| {r['layer']} | {r['regions']} | {r['regions_s']:.0f} | {r['split_us']:.0f} | {r['copy_us']:.0f} | "
            + (f"{t:.0f} | " if t else "- | ")
            + f"{r['copy/split']:.2f} | "
            + (f"{r['torch/split']:.2f} | {r['torch/copy']:.2f} |" if t else "- | - |")
        )
    if rows and all("torch/split" in r for r in rows):
        for key in ("torch/split", "torch/copy"):
            vals = [r[key] for r in rows]
            print(f"geometric mean {key}: {math.exp(statistics.mean(map(math.log, vals))):.2f} (min {min(vals):.2f})")
    if args.plot and rows and all("torch/split" in r for r in rows):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.9), 4))
        xs = np.arange(len(rows))
        ax.bar(xs - 0.2, [r["torch/split"] for r in rows], 0.4, label="regions (no copy)")
        ax.bar(xs + 0.2, [r["torch/copy"] for r in rows], 0.4, label="bordered copy")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(xs, [r["layer"] for r in rows], rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("torch time / ours")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
