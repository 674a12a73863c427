"""Convolutions at batch 1 (issues 15 and 59): synthesized or `conv`-guided programs,
each checked against the declared semantics (and torch's result), then timed in
interleaved rounds beside single-threaded baselines in the same process:

- numpy im2col: the image's windows copied into a (h*w) x (c*fh*fw) matrix, times the
  filters as a (c*fh*fw) x f matrix with OpenBLAS sgemm (the classic way to run a
  convolution on a BLAS), channels-last arrays;
- torch.nn.functional.conv2d (oneDNN on x86) on channels_last tensors, when torch is
  installed (`pip install torch`; not in the bench extra, which CI installs: PyPI's
  wheel brings the CUDA stack).

Tensors are channels-last (image and output [0, 2, 3, 1], filters [2, 3, 1, 0]; a
depthwise layer's filters [1, 2, 0]) in all three. Ratios of medians over rounds
measured back to back are what to read: the machine is shared.

Suites: `resnet` and `small` (stride 1, no padding, some guided), and `resnet50` and
`mobilenetv2`: every distinct convolution of the two networks at 224 x 224 (stems,
strided, padded, depthwise and pointwise layers), synthesized from the spec alone with
the suite's shared memo table. Their rows are checked against
torch.nn.functional.conv2d(stride, padding, groups) on the same channels-last tensors
before they are timed (against the numpy reference when torch is absent, with no torch
column); a padded layer's program runs over the zero-bordered image (docs/convolutions.md,
"Padding"): `C loop` times it on that buffer (as a graph runtime whose producer writes
the interior would run it), `call` from Python on the unpadded image (numpy's
channels-last view of torch's tensor's memory) through `compile_padded` (morello_asp/
padded.py), beside torch's call. Where the copy would be a tenth of the call or more
(depthwise layers) that call is the padded spec cut into regions, each searched in the
same table ("regions (N)": the interior over the caller's image and output, no copy;
`synth s` includes their search); else the bordered program with its copy of the image
("bordered copy"). `benchmarks/padded_call.py` times the two side by side.

The default target is native (this machine's), and the baselines run at the full ISA
of the CPU, as a user's would (benchmarks/host.py). `--hold-back` keeps the variables
that hold them back as set, and with `--target avx2` holds OpenBLAS, oneDNN and MKL
(torch's 1x1 convolutions are MKL matmuls) to AVX2 (OPENBLAS_CORETYPE=Haswell,
ONEDNN_MAX_CPU_ISA=AVX2, MKL_ENABLE_INSTRUCTIONS=AVX2, unless set already). The table
names the target, the CPU and the libraries' ISA.

    python benchmarks/conv.py [--suite resnet|small|resnet50|mobilenetv2] [--only SHAPE ...] [--target avx512]
                              [--mode guided] [--plot conv.png] [--hold-back]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, replace
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
from morello_asp.padded import compile_padded  # noqa: E402
from morello_asp.synthesis import synthesize, synthesize_all  # noqa: E402
from morello_asp.target import as_target  # noqa: E402

DEFAULT_DB = Path(__file__).resolve().parent / ".conv.db"
LAST = "(f32, GL, [0, 2, 3, 1]), (f32, GL, [2, 3, 1, 0]), (f32, GL, [0, 2, 3, 1])"


DW_LAST = "(f32, GL, [0, 2, 3, 1]), (f32, GL, [1, 2, 0]), (f32, GL, [0, 2, 3, 1])"


@dataclass(frozen=True)
class Layer:
    shape: (
        str  # the kind's dimensions: b x f x c x h x w x fh x fw (Morello's order); depthwise b x c x h x w x fh x fw
    )
    mode: str = "synthesized"  # "synthesized" | "guided"
    kind: str = "Conv"  # Conv, ConvS2 (stride 2), DepthwiseConv, DepthwiseConvS2
    pad: int = 0  # torch's padding: the spec's image is the zero-bordered one

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.shape.split("x"))

    @property
    def depthwise(self) -> bool:
        return self.kind.startswith("Depthwise")

    @property
    def stride(self) -> int:
        m = re.search(r"S(\d+)", self.kind.removeprefix("Depthwise").removeprefix("Conv"))
        return int(m.group(1)) if m else 1

    @property
    def name(self) -> str:
        """The row's label: kind (when not Conv), shape, padding."""
        k = "" if self.kind == "Conv" else f"{self.kind} "
        return f"{k}{self.shape}" + (f" p{self.pad}" if self.pad else "")

    @property
    def spec_text(self) -> str:
        # serial: one thread, as torch and numpy are held to (without it the search may
        # parallelise loops over the host's cores)
        return f"{self.kind}({self.shape}, {DW_LAST if self.depthwise else LAST}, serial)"

    @property
    def flops(self) -> int:
        return 2 * math.prod(self.dims)

    @property
    def channels(self) -> tuple[int, int, int, int, int, int, int]:
        """b, f, c, h, w, fh, fw (a depthwise layer's f and c are its channels)."""
        if self.depthwise:
            b, c, h, w, fh, fw = self.dims
            return b, c, c, h, w, fh, fw
        b, f, c, h, w, fh, fw = self.dims
        return b, f, c, h, w, fh, fw

    @property
    def image(self) -> int:
        """The spec's image rows (and columns: square layers): S(h - 1) + fh."""
        _, _, _, h, _, fh, _ = self.channels
        return self.stride * (h - 1) + fh

    @property
    def torch_input(self) -> int:
        """The unpadded input's rows torch is given: h + fh - 1 - 2p at stride 1, S*h at stride S."""
        _, _, _, h, _, fh, _ = self.channels
        return h + fh - 1 - 2 * self.pad if self.stride == 1 else self.stride * h


RESNET = [
    Layer("1x64x64x56x56x3x3", "guided"),
    Layer("1x128x128x28x28x3x3", "guided"),
    Layer("1x256x256x14x14x3x3", "guided"),
    Layer("1x512x512x7x7x3x3", "synthesized"),
    Layer("1x64x256x56x56x1x1", "synthesized"),
    Layer("1x256x64x56x56x1x1", "synthesized"),
]
SMALL = [Layer("1x32x32x14x14x3x3", "guided"), Layer("1x32x64x14x14x1x1", "synthesized")]


def _pw(f: int, c: int, hw: int) -> Layer:
    return Layer(f"1x{f}x{c}x{hw}x{hw}x1x1")


def _resnet50() -> list[Layer]:
    """Every distinct convolution of torchvision's ResNet-50 (v1.5: the stride on the 3x3)
    at 224 x 224, in order of first use, from its stages (width, blocks, first stride):
    the 7x7 stride-2 stem, each bottleneck's 1x1, 3x3 and 1x1, and each stage's first
    block's 1x1 downsample; 23 layers."""
    layers = [Layer("1x64x3x112x112x7x7", kind="ConvS2", pad=3)]
    cin, hw = 64, 56  # after the stem's max pool
    for width, blocks, s in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            kind = "ConvS2" if i == 0 and s == 2 else "Conv"
            out = hw // (s if i == 0 else 1)
            layers += [_pw(width, cin, hw), Layer(f"1x{width}x{width}x{out}x{out}x3x3", kind=kind, pad=1)]
            layers.append(_pw(4 * width, width, out))
            if i == 0:
                layers.append(Layer(f"1x{4 * width}x{cin}x{out}x{out}x1x1", kind=kind))  # downsample
            cin, hw = 4 * width, out
    return list(dict.fromkeys(layers))


RESNET50 = _resnet50()


def _dw(c: int, hw: int, stride: int = 1) -> Layer:
    return Layer(f"1x{c}x{hw}x{hw}x3x3", kind="DepthwiseConv" + ("S2" if stride == 2 else ""), pad=1)


def _mobilenetv2() -> list[Layer]:
    """Every distinct convolution of torchvision's MobileNetV2 at 224 x 224, in order of
    first use, from its inverted-residual settings (expansion t, channels c, repeats n,
    first stride s): the stem, 10 depthwise 3x3 layers (4 of stride 2) and 19 pointwise
    ones; 30 layers."""
    layers = [Layer("1x32x3x112x112x3x3", kind="ConvS2", pad=1)]  # stem
    cin, hw = 32, 112
    for t, c, n, s in (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ):
        for i in range(n):
            stride, hidden = (s if i == 0 else 1), cin * t
            if t != 1:
                layers.append(_pw(hidden, cin, hw))  # expand
            hw //= stride
            layers += [_dw(hidden, hw, stride), _pw(c, hidden, hw)]  # depthwise, project
            cin = c
    layers.append(_pw(1280, cin, hw))
    return list(dict.fromkeys(layers))


MOBILENETV2 = _mobilenetv2()
SUITES = {"resnet": RESNET, "small": SMALL, "resnet50": RESNET50, "mobilenetv2": MOBILENETV2}
# the suites whose rows are checked against torch and timed through fn.padded
NETWORKS = ("resnet50", "mobilenetv2")


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


def checked(layer: Layer, db, target: str | None):
    """The layer's program built (build), compiled and checked against the numpy
    reference: (the compiled program, rewrites by hand, seconds to build)."""
    imp, hand, secs = build(layer, db, target)
    fn = imp.compile()
    err, tol = fn.check(seed=1)
    if not err <= tol:
        raise SystemExit(f"{layer.name}: differs from the reference by {err:.3g} (> {tol:.3g})")
    return fn, hand, secs


def run(layers, db, rounds, log=print, target: str | None = None) -> list[Row]:
    rows = []
    for layer in layers:
        log(f"[{layer.shape}] {layer.mode} ...")
        fn, hand, secs = checked(layer, db, target)
        g, r, t, v1, v2 = time_layer(fn, layer, rounds)
        rows.append(Row(layer, hand, secs, g, r, t, v1, v2))
        log(f"[{layer.shape}] synthesis {secs:.0f} s, {g:.1f} GFLOP/s, im2col {r:.1f}, torch {t or '-'}")
    return rows


@dataclass
class NetRow:
    layer: Layer
    synth_s: float  # the layer's spec and, for a split padded call, its regions' specs
    gflops: float  # the C loop, on the bordered image
    call: float  # GFLOP/s through fn.padded (or fn) from Python on the unpadded image (numpy)
    torch: float | None
    vs_torch: float | None  # median over rounds of C loop / torch, measured back to back
    vs_torch_call: float | None  # ... of call / torch
    how: str = "-"  # how a padded call pads: "regions (N)" (no copy) or "bordered copy"


def torch_case(layer: Layer, torch):
    """Torch's tensors for the layer (channels-last input of torch's size, its weight),
    torch's result (conv2d with the layer's stride, padding and groups), and ours: the
    call (through fn.padded where the layer pads) and its inputs (numpy arrays: the image
    a view of torch's input's memory), filters in the spec's layout (copied once, as a
    model's constants are)."""
    b, f, c, h, w, fh, fw = layer.channels
    n, s, p = layer.torch_input, layer.stride, layer.pad
    rng = np.random.default_rng(0)
    x = rng.random((b, n, n, c), dtype=np.float32) - 0.5  # NHWC memory
    groups = c if layer.depthwise else 1
    wt = rng.random((f, c // groups, fh, fw), dtype=np.float32) - 0.5
    tx, tw = torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(wt)  # NCHW views, channels-last memory
    want = torch.nn.functional.conv2d(tx, tw, stride=s, padding=p, groups=groups).numpy()
    if layer.depthwise:
        filt = np.ascontiguousarray(wt[:, 0].transpose(1, 2, 0)).transpose(2, 0, 1)  # [1, 2, 0]
    else:
        filt = np.ascontiguousarray(wt.transpose(2, 3, 1, 0)).transpose(3, 2, 0, 1)  # [2, 3, 1, 0]
    hi = zeros_after(layer)
    # ours is called on numpy's view of the same memory (what a numpy user passes; a torch
    # tensor would first go through np.asarray on every call)
    nx = x.transpose(0, 3, 1, 2)
    img = nx if hi >= 0 else nx[:, :, : n + hi, : n + hi]
    return (tx, tw, groups), want, img, filt, max(hi, 0)


def check_against_torch(layer: Layer, got, want) -> None:
    """Exit naming the layer unless `got` is torch's result within f32 rounding over the
    layer's sums (fh * fw terms, times c for a dense convolution)."""
    _, _, c, _, _, fh, fw = layer.channels
    if not np.allclose(got, want, rtol=1e-3, atol=1e-4 * (1 if layer.depthwise else c) * fh * fw):
        raise SystemExit(f"{layer.name}: differs from torch by {np.abs(got - want).max():.3g}")


def zeros_after(layer: Layer) -> int:
    """Zeros after torch's input along h and w; < 0: its last rows are read by no output."""
    return layer.image - layer.torch_input - layer.pad


def padded_call(fn, layer: Layer, db, target: str | None):
    """What a user calls on torch's unpadded input: the program itself, or (padded)
    compile_padded's call (the padded spec cut into regions, no copy of the image, where
    the copy would cost a tenth of the call; else the bordered copy), its regions searched
    in `db`: (the call,
    seconds of search and compiling, how it pads)."""
    p, hi = layer.pad, max(zeros_after(layer), 0)
    if not p and not hi:
        return fn, 0.0, "-"
    t0 = time.perf_counter()
    call = compile_padded(fn.spec, [(p, hi), (p, hi)], target=target, db=db)
    parts = getattr(call, "parts", None)
    how = f"regions ({len(parts)})" if parts else "bordered copy"
    return call, time.perf_counter() - t0, how


def time_network_layer(fn, layer: Layer, rounds: int, call=None):
    """Check the program against torch (or numpy's reference without torch), then time
    it in rounds: (C loop, call, torch GFLOP/s, C loop / torch, call / torch). `call`:
    what a user calls on the unpadded input (padded_call); fn itself if None."""
    torch = _torch()
    p = layer.pad
    call = call or fn
    if torch is None:
        err, tol = call.check(seed=1)
        if not err <= tol:
            raise SystemExit(f"{layer.name}: differs from the reference by {err:.3g} (> {tol:.3g})")
        ours = [layer.flops / fn.benchmark(reps=3, min_time=0.05).seconds / 1e9 for _ in range(rounds)]
        return statistics.median(ours), 0.0, None, None, None
    (tx, tw, groups), want, img, filt, hi = torch_case(layer, torch)

    def run():
        return call(img, filt)

    check_against_torch(layer, run(), want)
    s = layer.stride

    def tcall():
        return torch.nn.functional.conv2d(tx, tw, stride=s, padding=p, groups=groups)

    c_loop, called, tor, r1, r2 = [], [], [], [], []
    for _ in range(rounds):
        g = layer.flops / fn.benchmark(reps=3, min_time=0.05).seconds / 1e9
        gc = layer.flops / time_python(run, reps=3, min_time=0.05) / 1e9
        tt = layer.flops / time_python(tcall, reps=3, min_time=0.05) / 1e9
        c_loop.append(g)
        called.append(gc)
        tor.append(tt)
        r1.append(g / tt)
        r2.append(gc / tt)
    med = statistics.median
    return med(c_loop), med(called), med(tor), med(r1), med(r2)


def run_network(layers, db, rounds, log=print, target: str | None = None) -> list[NetRow]:
    return [network_row(layer, db, rounds, log, target) for layer in layers]


def network_row(layer: Layer, db, rounds: int, log, target: str | None) -> NetRow:
    """One layer of a network suite: synthesized, checked, then timed beside torch."""
    log(f"[{layer.name}] synthesizing ...")
    fn, _, secs = checked(layer, db, target)
    call, split_s, how = padded_call(fn, layer, db, target)
    secs += split_s
    g, gc, t, v1, v2 = time_network_layer(fn, layer, rounds, call)
    log(
        f"[{layer.name}] synthesis {secs:.0f} s, {g:.1f} GFLOP/s (call {gc:.1f}, {how}), torch {t or '-'}"
        + (f", C loop / torch {v1:.2f}, call / torch {v2:.2f}" if v1 and v2 else "")
    )
    return NetRow(layer, secs, g, gc, t, v1, v2, how)


def print_network_table(rows: list[NetRow], suite: str, target: str | None = None) -> None:
    print(
        f"{suite}: f32 convolutions, batch 1, one thread, channels-last, every layer synthesized from its spec "
        f"(no guide, one memo table), {title(target)}; {libraries()}; load {os.getloadavg()[0]:.1f}"
    )
    print(
        "| layer (kind, shape, padding) | synth s | GFLOP/s (C loop) | GFLOP/s (call) | padded call | torch "
        "| C loop / torch | call / torch |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        tor = f"{r.torch:.1f}" if r.torch else "-"
        v1 = f"{r.vs_torch:.2f}" if r.vs_torch else "-"
        v2 = f"{r.vs_torch_call:.2f}" if r.vs_torch_call else "-"
        print(f"| {r.layer.name} | {r.synth_s:.0f} | {r.gflops:.1f} | {r.call:.1f} | {r.how} | {tor} | {v1} | {v2} |")
    if rows and all(r.vs_torch and r.vs_torch_call for r in rows):
        for label, pick in (("C loop", lambda r: r.vs_torch), ("call", lambda r: r.vs_torch_call)):
            vals = [pick(r) for r in rows]
            gm = math.exp(statistics.mean(math.log(v) for v in vals))
            print(f"geometric mean of {label} / torch: {gm:.2f} (min {min(vals):.2f})")
        dw = [r for r in rows if r.layer.depthwise]
        if dw:
            print(
                "depthwise layers, call / torch: "
                + ", ".join(f"{r.vs_torch_call:.2f}" for r in dw)
                + f" (C loop / torch {min(r.vs_torch or 0 for r in dw):.2f} to {max(r.vs_torch or 0 for r in dw):.2f})"
            )
    elif _torch() is None:
        print("torch is not installed: checked against numpy's reference, no torch column (pip install torch)")
    print(f"cold synthesis: {sum(r.synth_s for r in rows):.0f} s in all, at most {max(r.synth_s for r in rows):.0f} s")


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
    p.add_argument(
        "--kinds",
        nargs="+",
        metavar="KIND",
        help="only the suite's layers of these kinds, e.g. DepthwiseConv DepthwiseConvS2",
    )
    args = p.parse_args(argv)
    layers = SUITES[args.suite]
    if args.mode:
        layers = [replace(x, mode=args.mode) for x in layers]
    if args.only:
        unknown = sorted(set(args.only) - {x.shape for x in layers})
        if unknown:
            print(f"conv.py: error: not in suite {args.suite}: {', '.join(unknown)}", file=sys.stderr)
            return 2
        layers = [x for x in layers if x.shape in args.only]
    if args.kinds:
        layers = [x for x in layers if x.kind in args.kinds]
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    name = as_target(args.target).name
    db = args.db or str(DEFAULT_DB if name == "avx2" else DEFAULT_DB.with_name(f".conv-{name}.db"))
    if args.suite in NETWORKS:
        net = run_network(layers, db, args.rounds, log=log, target=args.target)
        print_network_table(net, args.suite, args.target)
        return 0
    rows = run(layers, db, args.rounds, log=log, target=args.target)
    print_table(rows, args.target)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    sys.exit(run_script(main, Path(__file__).name))
