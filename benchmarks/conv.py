"""ResNet-50 convolutions at batch 1 (issue 15): synthesized or `conv`-guided programs,
each checked against the declared semantics, then timed in interleaved rounds beside
single-threaded baselines in the same process:

- numpy im2col: the image's windows copied into a (h*w) x (c*fh*fw) matrix, times the
  filters as a (c*fh*fw) x f matrix with OpenBLAS sgemm (the classic way to run a
  convolution on a BLAS), channels-last arrays;
- torch.nn.functional.conv2d (oneDNN on x86) on channels_last tensors, when torch is
  installed (`pip install torch`; not in the bench extra, which CI installs: PyPI's
  wheel brings the CUDA stack).

Tensors are channels-last (image and output [0, 2, 3, 1], filters [2, 3, 1, 0]) in all
three. Ratios of medians over rounds measured back to back are what to read: the machine
is shared.

The default target is native (this machine's), and the baselines run at the full ISA
of the CPU, as a user's would (benchmarks/host.py). `--hold-back` keeps the variables
that hold them back as set, and with `--target avx2` holds OpenBLAS, oneDNN and MKL
(torch's 1x1 convolutions are MKL matmuls) to AVX2 (OPENBLAS_CORETYPE=Haswell,
ONEDNN_MAX_CPU_ISA=AVX2, MKL_ENABLE_INSTRUCTIONS=AVX2, unless set already). The table
names the target, the CPU and the libraries' ISA.

    python benchmarks/conv.py [--suite resnet|small] [--only SHAPE ...] [--target avx512]
                              [--mode guided] [--plot conv.png] [--hold-back]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from host import HOLD_BACK_HELP, full_isa, libraries, title


def _target_arg(argv: list[str]) -> str | None:
    """--target's value, read before numpy and torch are imported (they read the ISA
    variables when they load)."""
    for i, a in enumerate(argv):
        if a == "--target" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--target="):
            return a.split("=", 1)[1]
    return None


# --hold-back with --target avx2 holds the baselines to AVX2, the target's ISA
BASELINE_ISA = {"OPENBLAS_CORETYPE": "Haswell", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
full_isa(sys.argv, BASELINE_ISA if _target_arg(sys.argv[1:]) == "avx2" else None)  # before numpy and torch

import numpy as np  # noqa: E402

from morello_asp import parse_spec  # noqa: E402
from morello_asp.codegen.baseline import time_python  # noqa: E402
from morello_asp.guides import guided, hand_rewrites  # noqa: E402
from morello_asp.synthesis import synthesize, synthesize_all  # noqa: E402
from morello_asp.target import as_target  # noqa: E402

DEFAULT_DB = Path(__file__).resolve().parent / ".conv.db"
LAST = "(f32, GL, [0, 2, 3, 1]), (f32, GL, [2, 3, 1, 0]), (f32, GL, [0, 2, 3, 1])"


@dataclass(frozen=True)
class Layer:
    shape: str  # b x f x c x h x w x fh x fw (Morello's order)
    mode: str  # "synthesized" | "guided"

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.shape.split("x"))

    @property
    def spec_text(self) -> str:
        return f"Conv({self.shape}, {LAST})"

    @property
    def flops(self) -> int:
        return 2 * math.prod(self.dims)


RESNET = [
    Layer("1x64x64x56x56x3x3", "guided"),
    Layer("1x128x128x28x28x3x3", "guided"),
    Layer("1x256x256x14x14x3x3", "guided"),
    Layer("1x512x512x7x7x3x3", "synthesized"),
    Layer("1x64x256x56x56x1x1", "synthesized"),
    Layer("1x256x64x56x56x1x1", "synthesized"),
]
SMALL = [Layer("1x32x32x14x14x3x3", "guided"), Layer("1x32x64x14x14x1x1", "synthesized")]
SUITES = {"resnet": RESNET, "small": SMALL}


@dataclass
class Row:
    layer: Layer
    hand: int
    synth_s: float
    gflops: float
    im2col: float
    torch: float | None
    vs_im2col: float  # median over rounds of ours / im2col, measured back to back
    vs_torch: float | None


def build(layer: Layer, db, target: str | None = None):
    t0 = time.perf_counter()
    spec = parse_spec(layer.spec_text, target)
    if layer.mode == "synthesized":
        return synthesize(spec, db=db), 0, time.perf_counter() - t0
    partial = guided(spec, "conv")
    return synthesize_all(partial, db=db), hand_rewrites(partial), time.perf_counter() - t0


def im2col_conv(img_nhwc, filt_hwcf):
    """Channels-last direct convolution through one sgemm (numpy, OpenBLAS)."""
    fh, fw, c, f = filt_hwcf.shape
    b, hi, wi, _ = img_nhwc.shape
    h, w = hi - fh + 1, wi - fw + 1
    win = np.lib.stride_tricks.sliding_window_view(img_nhwc, (fh, fw), axis=(1, 2))  # b h w c fh fw
    cols = np.ascontiguousarray(win.transpose(0, 1, 2, 4, 5, 3)).reshape(b * h * w, fh * fw * c)
    return (cols @ filt_hwcf.reshape(fh * fw * c, f)).reshape(b, h, w, f)


def _torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


def time_layer(fn, layer: Layer, rounds: int):
    b, f, c, h, w, fh, fw = layer.dims
    rng = np.random.default_rng(0)
    img = rng.random((b, h + fh - 1, w + fw - 1, c), dtype=np.float32) - 0.5
    filt = rng.random((fh, fw, c, f), dtype=np.float32) - 0.5
    want = im2col_conv(img, filt)
    torch = _torch()
    if torch is not None:
        ti = torch.from_numpy(img.transpose(0, 3, 1, 2).copy()).contiguous(memory_format=torch.channels_last)
        tf = torch.from_numpy(filt.transpose(3, 2, 0, 1).copy()).contiguous(memory_format=torch.channels_last)
        got = torch.nn.functional.conv2d(ti, tf).permute(0, 2, 3, 1).numpy()
        if not np.allclose(got, want, atol=1e-3 * c * fh * fw):
            raise SystemExit(f"{layer.shape}: torch and im2col disagree")
    ours, ref, tor, r1, r2 = [], [], [], [], []
    for _ in range(rounds):
        g = layer.flops / fn.benchmark(reps=3, min_time=0.05).seconds / 1e9
        r = layer.flops / time_python(lambda: im2col_conv(img, filt), reps=3, min_time=0.05) / 1e9
        ours.append(g)
        ref.append(r)
        r1.append(g / r)
        if torch is not None:
            t = layer.flops / time_python(lambda: torch.nn.functional.conv2d(ti, tf), reps=3, min_time=0.05) / 1e9
            tor.append(t)
            r2.append(g / t)
    med = statistics.median
    return med(ours), med(ref), (med(tor) if tor else None), med(r1), (med(r2) if r2 else None)


def run(layers, db, rounds, log=print, target: str | None = None) -> list[Row]:
    rows = []
    for layer in layers:
        log(f"[{layer.shape}] {layer.mode} ...")
        imp, hand, secs = build(layer, db, target)
        fn = imp.compile()
        err, tol = fn.check(seed=1)
        if not err <= tol:
            raise SystemExit(f"{layer.shape}: differs from the reference by {err:.3g} (> {tol:.3g})")
        g, r, t, v1, v2 = time_layer(fn, layer, rounds)
        rows.append(Row(layer, hand, secs, g, r, t, v1, v2))
        log(f"[{layer.shape}] synthesis {secs:.0f} s, {g:.1f} GFLOP/s, im2col {r:.1f}, torch {t or '-'}")
    return rows


def print_table(rows: list[Row], target: str | None = None) -> None:
    print(
        f"f32 convolution, batch 1, one thread, channels-last, {title(target)}; "
        f"{libraries()}; load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'b f c h w fh fw':>22} {'program':>12} {'by hand':>7} {'synth s':>8} {'GFLOP/s':>8} "
        f"{'im2col':>7} {'torch':>7} {'/im2col':>8} {'/torch':>7}"
    )
    for r in rows:
        t = f"{r.torch:7.1f}" if r.torch else f"{'-':>7}"
        vt = f"{r.vs_torch:7.2f}" if r.vs_torch else f"{'-':>7}"
        print(
            f"{r.layer.shape.replace('x', ' '):>22} {r.layer.mode:>12} {r.hand:>7} {r.synth_s:8.0f} {r.gflops:8.1f} "
            f"{r.im2col:7.1f} {t} {r.vs_im2col:8.2f} {vt}"
        )
    gm = math.exp(statistics.mean(math.log(r.vs_im2col) for r in rows))
    print(f"geometric mean of ours / im2col: {gm:.2f}")
    if all(r.vs_torch for r in rows):
        gt = math.exp(statistics.mean(math.log(r.vs_torch) for r in rows if r.vs_torch))
        print(f"geometric mean of ours / torch: {gt:.2f}")
    elif _torch() is None:
        print("torch is not installed: no torch column (pip install torch)")


def plot(rows: list[Row], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r.layer.shape for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(x - 0.25, [r.gflops for r in rows], 0.25, label="morello-asp")
    ax.bar(x, [r.im2col for r in rows], 0.25, label="numpy im2col + sgemm")
    if all(r.torch for r in rows):
        ax.bar(x + 0.25, [r.torch for r in rows], 0.25, label="torch conv2d")
    ax.set_xticks(x, labels, rotation=20, fontsize=7)
    ax.set_ylabel("GFLOP/s (one thread)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", choices=sorted(SUITES), default="resnet")
    p.add_argument("--db", help=f"memo table shared by the layers (default: {DEFAULT_DB}, one per target)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--plot", help="write a bar chart to this file")
    p.add_argument("--target", default=None, help="target to synthesize for (default: native, this machine's)")
    p.add_argument("--hold-back", action="store_true", help=HOLD_BACK_HELP + "; with --target avx2, AVX2")
    p.add_argument(
        "--only", nargs="+", metavar="SHAPE", help="only these layers of the suite, e.g. 1x256x256x14x14x3x3"
    )
    p.add_argument(
        "--mode", choices=("guided", "synthesized"), help="build every layer this way (default: as the suite says)"
    )
    args = p.parse_args(argv)
    layers = SUITES[args.suite]
    if args.mode:
        layers = [Layer(x.shape, args.mode) for x in layers]
    if args.only:
        unknown = sorted(set(args.only) - {x.shape for x in layers})
        if unknown:
            print(f"conv.py: error: not in suite {args.suite}: {', '.join(unknown)}", file=sys.stderr)
            return 2
        layers = [x for x in layers if x.shape in args.only]
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    name = as_target(args.target).name
    db = args.db or str(DEFAULT_DB if name == "avx2" else DEFAULT_DB.with_name(f".conv-{name}.db"))
    rows = run(layers, db, args.rounds, log=log, target=args.target)
    print_table(rows, args.target)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    sys.exit(run_script(main, Path(__file__).name))
