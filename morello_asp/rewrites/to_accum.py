"""to_accum: an accumulating kind's pair (logic file: encodings/rules/to_accum.lp).
IR node: Block.

    Matmul(lhs, rhs, out) --to_accum()--> Block[ Zero(out); MatmulAccum(lhs, rhs, out) ]

No action args. Children are keyed 0 (the fill of the output) and 1 (the accumulating spec).
"""

from __future__ import annotations

from typing import Any

from morello_asp.ir import Block

from .action import Action
from .base import Rewrite


def action() -> Action:
    return Action("to_accum")


class ToAccum(Rewrite):
    name = "to_accum"
    atoms = ("to_accum",)
    node = Block
    node_tag = "block"  # the node in program JSON

    def decode(self, spec, functor, args, ctx, requested):
        return Action("to_accum")

    def request(self, spec, action, ctx):
        return "to_accum", []

    def text(self, action):
        return "to_accum()"

    def args_to_json(self, action) -> dict[str, Any]:
        return {}

    def args_from_json(self, obj, ranks):
        return Action("to_accum")

    def build(self, spec, exp, kids):
        return Block(spec, tuple(kids))

    def action_of(self, node):
        return Action("to_accum")

    def cost(self, node, child_costs, target):
        return sum(child_costs)

    def list_node(self, node, args, depth, out):
        out.line(depth, "block:", node)
        for c in node.stmts:  # the fill sees the output only
            out.node(c, args if len(c.spec.operands) == len(args) else [args[node.spec.k.init_output]], depth + 1)

    def emit_c(self, node, views, em):
        from morello_asp.codegen.errors import CodegenError

        for c in node.stmts:
            if len(c.spec.operands) == len(views):
                em.emit(c, views)
            elif len(c.spec.operands) == 1:  # the fill writes the output only
                em.emit(c, [views[node.spec.k.init_output]])
            else:
                raise CodegenError(f"cannot map the operands of {node.spec.short()} onto block child {c.spec.short()}")

    def node_to_json(self, node, rec):
        return {"node": "block", "stmts": [rec(c) for c in node.stmts]}

    def node_from_json(self, d, spec, rec):
        return Block(spec, tuple(rec(c) for c in d["stmts"]))

    def program_obligations(self, node, ctx):
        """The block runs the kind's fill, then its accumulating variant, on the same
        operands."""
        from morello_asp.solver.verify import Obligation

        k = node.spec.k
        what = f"to_accum of {node.spec.short()}: the fill then the accumulating variant"
        kinds = [c.spec.kind for c in node.stmts]
        accum = next((a for a, kk in _accum_pairs() if kk == node.spec.kind), None)
        want = [_init_of(accum), accum] if accum else None
        if want is None:
            return [Obligation(what, "refuted", f"{k.name} has no accumulating variant")]
        if kinds != want:
            return [Obligation(what, "refuted", f"the block runs {kinds}, expected {want}")]
        shapes_ok = node.stmts[1].spec.shape == node.spec.shape
        return [
            Obligation(what, "proved")
            if shapes_ok
            else Obligation(what, "refuted", f"the accumulating spec has shape {node.stmts[1].spec.shape}")
        ]

    def box_obligations(self, prover, head, seq, sp, a):
        from morello_asp.solver.verify_boxes import BoxObligation

        kind = sp.k["kind"]
        ok = any(kk == kind for _, kk in _accum_pairs())
        return [
            BoxObligation(
                f"{head}: {kind} has an accumulating variant",
                "proved" if ok else "refuted",
                "" if ok else f"{kind} has none",
                seq,
            )
        ]


def _accum_pairs():
    from morello_asp.kinds import accum_pairs

    return accum_pairs()


def _init_of(accum: str) -> str | None:
    from morello_asp.kinds import kind

    return kind(accum).init_kind
