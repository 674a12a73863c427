"""A conv layer's bias and Relu fused into it, against the conv and the bias pass run
one after the other: what the search's fusion buys, measured.

    python benchmarks/epilogue.py [--layer F C H W] [--rules fuse_in_registers] [--db F] [--rounds 11]

Three programs of relu(conv3x3(img, filters) + bias), channels-last, padding 1 (the image
is (H + 2) x (W + 2) pixels), one thread: the Compose `Compose((BiasAddRelu, Conv))`
synthesized from its spec alone ("fused"), and the `Conv` and the `BiasAddRelu` over its
output synthesized on their own and called one after the other ("separate", what the
ONNX importer runs). Each is synthesized (from the memo table --db when it has it),
compiled and checked against numpy before it is timed in interleaved rounds (each
contender once per round, median per contender, on the same arrays). The table gives
each one's search time, cost and microseconds, and separate / fused (> 1: fusing is
faster). The default layer is small so that the Compose's search (many times the conv's:
a new producer spec at every tile size and level) stays within minutes;
docs/results/conv.md records a ResNet-50 layer.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from host import cpu_name, full_isa

full_isa(sys.argv)  # must precede numpy's import

import numpy as np  # noqa: E402
from timing import best_time  # noqa: E402

CL, HWIO = "[0, 2, 3, 1]", "[2, 3, 1, 0]"


def specs(f: int, c: int, h: int, w: int) -> tuple[str, str, str]:
    img, out = f"1x{c}x{h + 2}x{w + 2}", f"1x{f}x{h}x{w}"
    fused = (
        f"Compose((BiasAddRelu, Conv), [({f}, f32, GL, row_major), ({img}, f32, GL, {CL}), "
        f"({f}x{c}x3x3, f32, GL, {HWIO}), out=({out}, f32, GL, {CL})], serial)"
    )
    conv = f"Conv(1x{f}x{c}x{h}x{w}x3x3, (f32, GL, {CL}), (f32, GL, {HWIO}), (f32, GL, {CL}), serial)"
    bias = f"BiasAddRelu({h * w}x{f}x1x1, f32)"  # the conv's output, pixels by channels
    return fused, conv, bias


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layer", type=_positive, nargs=4, default=[64, 64, 14, 14], metavar=("F", "C", "H", "W"))
    p.add_argument("--rules", action="append", default=[], help="extra rule set for all three (e.g. fuse_in_registers)")
    p.add_argument("--db", default=None, help="memo table (default: a new one in memory)")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--target", default=None)
    a = p.parse_args(argv)

    from morello_asp import parse_spec, synthesize
    from morello_asp.errors import MorelloError
    from morello_asp.target import as_target

    f, c, h, w = a.layer
    target = as_target(a.target)
    texts = specs(f, c, h, w)
    progs, rows = {}, {}
    for name, text in zip(("fused", "conv", "bias"), texts):
        t0 = time.perf_counter()
        try:
            imp = synthesize(parse_spec(text, target), rules=a.rules, db=a.db)
        except MorelloError as e:  # a rule file, a table or a target that does not serve: one line
            print(f"epilogue.py: {name}: {str(e).splitlines()[0]}", file=sys.stderr)
            return 2
        rows[name] = [time.perf_counter() - t0, imp.cost.main]
        progs[name] = imp.compile(a.rules)
        print(f"{name}: synthesized in {rows[name][0]:.1f} s, cost {imp.cost.main:,}", file=sys.stderr, flush=True)

    rng = np.random.default_rng(0)
    img = rng.standard_normal((1, h + 2, w + 2, c)).astype(np.float32)  # channels-last in memory
    flt = rng.standard_normal((3, 3, c, f)).astype(np.float32)  # HWIO in memory
    bias = rng.standard_normal(f).astype(np.float32)
    out, mid = np.empty((1, h, w, f), np.float32), np.empty((1, h, w, f), np.float32)
    img_l, flt_l = img.transpose(0, 3, 1, 2), flt.transpose(3, 2, 0, 1)  # the specs' logical orders
    out_l, mid_l = out.transpose(0, 3, 1, 2), mid.transpose(0, 3, 1, 2)

    def fused():
        progs["fused"](bias, img_l, flt_l, out=out_l)

    def separate():
        progs["conv"](img_l, flt_l, out=mid_l)
        progs["bias"](mid.reshape(h * w, f, 1, 1), bias, out=out.reshape(h * w, f, 1, 1))

    win = np.lib.stride_tricks.sliding_window_view(img, (3, 3), axis=(1, 2))  # b h w c fh fw
    want = np.maximum(np.einsum("bhwcij,ijcf->bhwf", win, flt) + bias, 0)
    tol = 1e-4 * c * 9
    for name, fn in (("fused", fused), ("separate", separate)):
        fn()
        err = float(np.abs(out - want).max())
        if not err <= tol:
            print(f"epilogue.py: {name} differs from numpy by {err:.3g} (tolerance {tol:.3g})", file=sys.stderr)
            return 1
    times: dict[str, list[float]] = {"fused": [], "separate": []}
    for _ in range(a.rounds):
        for name, fn in (("separate", separate), ("fused", fused)):
            times[name].append(best_time(fn))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"relu(conv3x3 + bias), layer 1x{f}x{c}x{h}x{w}x3x3 channels-last, target {target.name}, {cpu_name()}")
    print(f"rules: default{''.join(' + ' + r for r in a.rules)}; median of {a.rounds} interleaved rounds")
    print("| program | synth s | cost | us | separate / this |")
    print("|---|---|---|---|---|")
    sep_cost = rows["conv"][1] + rows["bias"][1]
    ratio = med["separate"] / med["fused"]
    print(f"| fused | {rows['fused'][0]:.1f} | {rows['fused'][1]:,} | {med['fused'] * 1e6:.1f} | {ratio:.3f} |")
    print(
        f"| separate (conv, then bias) | {rows['conv'][0] + rows['bias'][0]:.1f} | {sep_cost:,} | "
        f"{med['separate'] * 1e6:.1f} | 1.000 |"
    )
    return 0


def _positive(text: str) -> int:
    n = int(text) if text.isdigit() else 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size of at least 1")
    return n


if __name__ == "__main__":
    sys.exit(main())
