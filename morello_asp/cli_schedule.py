"""`morello-asp demo` / `parse`: the hand-scheduled example of paper Figure 1, and spec checking."""
from __future__ import annotations

from .spec import parse_spec

FIGURE1 = ("(MatmulAccum(1x4x4x16, (f32, RF, row_major), (f32, VRF, row_major, v8), "
           "(f32, L1, row_major), serial), [64, 1024, 32768, 1073741824])")


def figure1():
    """Paper Figure 1, completed: tile, move the output into VRF, select kernels."""
    spec = parse_spec(FIGURE1)
    return (spec.tile([1, 1, 1, 16])
                .move_param(2, "VRF", "row_major", vector_size=8)
                .select("BroadcastVecMultAdd")
                .subschedule([0, 0], lambda load: load.select("VectorAssign"))
                .subschedule([0, 2], lambda store: store.select("VectorAssign")))


def _demo(args):
    imp = figure1()
    print(FIGURE1)
    print(imp)
    print(imp.cost)


def _parse(args):
    spec = parse_spec(args.spec, args.target)
    print(spec.text())


def register(sub):
    p = sub.add_parser("demo", help="print the hand-scheduled program of paper Figure 1 and its cost")
    p.set_defaults(func=_demo)
    p = sub.add_parser("parse", help="parse a spec and print it in canonical form")
    p.add_argument("spec")
    p.add_argument("--target", default="avx2")
    p.set_defaults(func=_parse)
