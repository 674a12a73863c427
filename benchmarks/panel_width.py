"""The square matmul program the default search finds, with its packed panel of B made
wider by hand, timed beside numpy in one process. The avx2 model has no L2: a panel of
B lives in L1 (at most its 1024 declared lines), so the search cannot offer a panel
that is meant to stay in L2. This measures what such panels would give on this CPU.

    python benchmarks/panel_width.py [--size 1024] [--widths 256 512 1024] [--rounds 11]

The program is found (or read from the default memo table) as `synth` finds it; its C
must have the shape the search gives large square sizes today: a loop over panels of B
(around or inside the loop over k blocks), each panel packed into one buffer of 16-wide
columns, then loops over row blocks and the panel's columns. The edit changes the
panel's width in those loops and in the buffer (made static: a wide panel does not fit
the stack), nothing else, and refuses C of another shape. Every variant is compiled
with the target's flags and checked against numpy before it is timed; ratios are paired
medians (numpy time / ours) of interleaved rounds.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from pathlib import Path

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # must precede numpy's import

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import beside_numpy_matmul  # noqa: E402

from morello_asp import parse_spec  # noqa: E402
from morello_asp.codegen.api import Program, cdefs  # noqa: E402
from morello_asp.codegen.build import build  # noqa: E402
from morello_asp.codegen.ctarget import get_ctarget  # noqa: E402
from morello_asp.codegen.emit import generate  # noqa: E402
from morello_asp.errors import InputError  # noqa: E402
from morello_asp.synthesis import synthesize  # noqa: E402


def _panel(src: str) -> tuple[str, int, int]:
    """The buffer B's panel is packed into: its name, length and width (columns)."""
    found = re.findall(
        r"/\* (\w+): 1x\d+x(\d+) [^\n]*p\(16\)[^\n]*\*/\n\s*float \1\[(\d+)\] __attribute__\(\(aligned\(64\)\)\);",
        src,
    )
    if len(found) != 1:
        raise InputError(f"the program packs {len(found)} panels of B into 16-wide columns, not one")
    name, width, size = found[0]
    return name, int(size), int(width)


def widened(src: str, n: int, width: int) -> str:
    """The program's C with B's panels `width` columns wide instead of the searched width."""
    name, size, old = _panel(src)
    loop = rf"for \(int (\w+) = 0; \1 < {n}; \1 \+= {old}\)"
    if len(re.findall(loop, src)) != 1:
        raise InputError(f"the program has no single loop over {old}-wide panels of B")
    src = re.sub(loop, rf"for (int \1 = 0; \1 < {n}; \1 += {width})", src)
    src = src.replace(
        f"float {name}[{size}] __attribute__((aligned(64)));",
        f"static float {name}[{size // old * width}] __attribute__((aligned(64)));",
    )
    # the loops over the panel's columns: the packing copy and the column blocks
    column_loop = rf"for \(int (\w+) = 0; \1 < {old}; \1 \+= 16\)"
    src, count = re.subn(column_loop, rf"for (int \1 = 0; \1 < {width}; \1 += 16)", src)
    if count < 2:
        raise InputError(f"found {count} loops over a panel's 16-wide columns, expected 2 or more")
    return src


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--widths", type=int, nargs="+", default=[256, 512, 1024], help="panel widths to try")
    ap.add_argument("--rounds", type=int, default=11)
    args = ap.parse_args(argv)
    n = args.size
    for w in args.widths:
        if w <= 0 or w % 16 or n % w:
            raise InputError(f"width {w} must be a multiple of 16 that divides {n}")
    spec = parse_spec(f"Matmul({n}x{n}x{n}, f32)")
    imp = synthesize(spec)
    ct = get_ctarget(spec.target)
    src, omp = generate(imp, ct)
    cdef = cdefs(spec, "kernel")
    found = _panel(src)[2]
    labels, fns = [], []
    for w in [found] + [w for w in args.widths if w != found]:
        text = src if w == found else widened(src, n, w)
        prog = Program(imp, ct, _built=(build(text, cdef, ct.flags, omp, cc=ct.compiler_command), "kernel"))
        err, tol = prog.check()
        if not err <= tol:
            raise SystemExit(f"panel_width.py: width {w} differs from numpy: max |error| {err:.3g} > {tol:.3g}")
        labels.append(f"{w}{' (searched)' if w == found else ''}")
        fns.append(prog)
    ours, theirs = beside_numpy_matmul(fns, (1, n, n, n), args.rounds, min_time=0.05)
    gflop = 2 * n**3 / 1e9
    print(f"Matmul {n}^3 f32, cost {imp.cost.main:,}, {args.rounds} interleaved rounds, numpy single-threaded")
    print("| panel of B (columns) | median ms | GFLOP/s (median) | numpy / ours (paired) |")
    print("|---|---|---|---|")
    for label, t in zip(labels, ours):
        paired = statistics.median(a / o for a, o in zip(theirs, t))
        med = statistics.median(t)
        print(f"| {label} | {med * 1e3:.2f} | {gflop / med:.1f} | {paired:.2f} |")
    med = statistics.median(theirs)
    print(f"| numpy | {med * 1e3:.2f} | {gflop / med:.1f} | |")
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "panel_width.py"))
