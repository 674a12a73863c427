"""`morello-asp demo` / `parse`: the hand-scheduled example of paper Figure 1, and spec checking."""

from __future__ import annotations

from morello_asp.cli.args import add_target_option
from morello_asp.spec import Spec, parse_spec
from morello_asp.target import as_target

PAPER_LIMITS = (64, 1024, 32768, 1073741824)  # the figure's limits, one per level


def figure1_spec(target=None) -> Spec:
    """Paper Figure 1's MatmulAccum: lhs in scalar registers, rhs in vector registers,
    the output in the first cache, at the target's full limits."""
    tgt = as_target(target)
    scalar = next(lv.name for lv in tgt.levels if lv.unit == "value")
    vector = tgt.vector_levels[0].name
    cache = next(lv.name for lv in tgt.levels if lv.kind == "cache")
    lims = PAPER_LIMITS if len(tgt.levels) == len(PAPER_LIMITS) else tgt.max_limits()
    limits = ", ".join(map(str, lims))
    return parse_spec(
        f"(MatmulAccum(1x4x4x16, (f32, {scalar}, row_major), (f32, {vector}, row_major, v8), "
        f"(f32, {cache}, row_major), serial), [{limits}])",
        tgt,
    )


def figure1(target=None):
    """Paper Figure 1, completed: tile, move the output into vector registers, select kernels."""
    spec = figure1_spec(target)
    vector = spec.operands[1].level
    return (
        spec.tile([1, 1, 1, 16])
        .move_param(2, vector, "row_major", vector_size=8)
        .select("BroadcastVecMultAdd")
        .subschedule([0, 0], lambda load: load.select("VectorAssign"))
        .subschedule([0, 2], lambda store: store.select("VectorAssign"))
    )


FIGURE1 = figure1_spec().text()


def _demo(args):
    imp = figure1()
    print(figure1_spec())
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
    add_target_option(p)
    p.set_defaults(func=_parse)
