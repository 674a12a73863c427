"""to_accum: an accumulating kind's pair (logic file: encodings/rules/to_accum.lp).
IR node: Block.

    Matmul(lhs, rhs, out) --to_accum()--> Block[ Zero(out); MatmulAccum(lhs, rhs, out) ]
    SoftmaxDenominatorAndMax1(x, xmax, denom) --to_accum()-->
        Block[ FillNegInf(xmax); Zero(denom); SoftmaxDenominatorAndMaxAccum1(x, xmax, denom) ]

No action args. Children are keyed 0..F-1 (the fills of the outputs the accumulating kind
reads back, in operand order) and F (the accumulating spec).
"""

from __future__ import annotations

from typing import Any

from morello_asp.codegen.errors import CodegenError
from morello_asp.ir import Block
from morello_asp.kinds import accum_pairs, kind
from morello_asp.naming import camel
from morello_asp.rewrites.action import Action
from morello_asp.rewrites.base import Rewrite, view_fields


def action() -> Action:
    return Action("to_accum")


class ToAccum(Rewrite):
    name = "to_accum"
    atoms = ("to_accum",)
    node = Block
    node_tag = "block"  # the node in program JSON
    primitives = ("to_accum",)

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
        filled = _filled(node)
        for i, c in enumerate(node.stmts):  # a fill sees its output only
            out.node(c, args if i == len(node.stmts) - 1 else [args[filled[i]]], depth + 1)

    def emit_c(self, node, views, em):
        filled = _filled(node)
        if len(filled) != len(node.stmts) - 1:
            raise CodegenError(f"to_accum of {node.spec.short()}: {len(node.stmts)} children for {len(filled)} fills")
        for i, c in enumerate(node.stmts):
            em.emit(c, views if i == len(node.stmts) - 1 else [views[filled[i]]])

    def node_to_json(self, node, rec):
        return {"node": "block", "stmts": [rec(c) for c in node.stmts]}

    def node_from_json(self, d, spec, rec):
        return Block(spec, tuple(rec(c) for c in d["stmts"]))

    def program_obligations(self, node, ctx):
        """The block runs the kind's fill, then its accumulating variant, on the same
        operands."""
        from morello_asp.solver.proofs.obligations import Obligation  # z3: on the first proof, not with the package

        k = node.spec.k
        what = f"to_accum of {node.spec.short()}: the fill then the accumulating variant"
        kinds = [c.spec.kind for c in node.stmts]
        ka = _accum_kind(node)
        if ka is None:
            return [Obligation(what, "refuted", f"{k.name} has no accumulating variant")]

        want = [camel(i) for _, i in ka.fills] + [ka.name]
        if kinds != want:
            return [Obligation(what, "refuted", f"the block runs {kinds}, expected {want}")]
        shapes_ok = node.stmts[-1].spec.shape == node.spec.shape and all(
            tuple(c.spec.shape) == tuple(node.spec.operand_shapes[o]) for c, o in zip(node.stmts, ka.filled)
        )
        if not shapes_ok:
            return [Obligation(what, "refuted", "a child's shape is not the operand's or the spec's it runs on")]
        # Each fill runs on its operand's tensor, the accumulating variant on all of them.
        pairs = [(c.spec.operands[0], node.spec.operands[o]) for c, o in zip(node.stmts, ka.filled)]
        pairs += list(zip(node.stmts[-1].spec.operands, node.spec.operands))
        bad = [f"{now.text()} runs on {was.text()}" for now, was in pairs if view_fields(now) != view_fields(was)]
        return [Obligation(what, "refuted", bad[0]) if bad else Obligation(what, "proved")]

    def box_obligations(self, prover, head, seq, sp, a):
        from morello_asp.solver.proofs.boxes import BoxObligation  # z3: on the first proof, not with the package

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
    return accum_pairs()


def _accum_kind(node):
    """The accumulating variant of the block's spec kind, or None."""

    accum = next((a for a, kk in _accum_pairs() if kk == node.spec.kind), None)
    return kind(accum) if accum else None


def _filled(node) -> tuple[int, ...]:
    """The operands the block's fills write, in order (its last child accumulates)."""
    ka = _accum_kind(node)
    return ka.filled if ka else ()
