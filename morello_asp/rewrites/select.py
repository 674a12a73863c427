"""select: replace a spec by one of the target's microkernels. Logic file:
encodings/rules/select.lp; which kernels apply and what they cost is the target's
(encodings/targets/*/kernels.lp). IR node: KernelApp.

    MatmulAccum(1x1x1x8, RF, VRF, VRF) --select(BroadcastVecMultAdd)--> the kernel

Action args: (kernel name in CamelCase,); the logic files spell it in snake_case.
"""

from __future__ import annotations

from typing import Any

from morello_asp.ir import KernelApp
from morello_asp.naming import camel, snake
from morello_asp.rewrites.action import Action
from morello_asp.rewrites.base import Rewrite


def action(kernel: str) -> Action:
    return Action("select", (kernel,))


class Select(Rewrite):
    name = "select"
    atoms = ("select",)
    node = KernelApp
    node_tag = "kernel"  # the node in program JSON
    primitives = ("select",)

    def decode(self, spec, functor, args, ctx, requested):
        return Action("select", (camel(args[0]),))

    def request(self, spec, action, ctx):
        return f"select({snake(action.args[0])})", []

    def matches(self, derived, wanted):
        return snake(derived.args[0]) == snake(wanted.args[0])

    def kernel_cost(self, action, costs):
        return costs.get(snake(action.args[0]))

    def text(self, action):
        return f"select({action.args[0]})"

    def args_to_json(self, action) -> dict[str, Any]:
        return {"kernel": action.args[0]}

    def args_from_json(self, obj, ranks):
        return Action("select", (obj["kernel"],))

    def build(self, spec, exp, kids):
        return KernelApp(spec, exp.action.args[0], exp.kernel_cost)

    def action_of(self, node):
        return Action("select", (node.kernel,))

    def cost(self, node, child_costs, target):
        return node.kernel_cost

    def list_node(self, node, args, depth, out):
        out.line(depth, f"{node.kernel}({', '.join(args)})", node)

    def emit_c(self, node, views, em):
        """The target's C template for the kernel (codegen/emit.py expands it)."""
        em.kernel(node, views)

    def node_to_json(self, node, rec):
        return {"node": "kernel", "kernel": node.kernel, "cost": node.kernel_cost}

    def node_from_json(self, d, spec, rec):
        return KernelApp(spec, str(d["kernel"]), int(d["cost"]))

    def program_obligations(self, node, ctx):
        """The target's rules apply the kernel to this spec, at the cost recorded: a
        kernel's shape, level and layout conditions are the target's, evaluated by
        clingo on the exact spec, not re-encoded here."""
        from morello_asp.solver.proofs.obligations import Obligation  # z3: on the first proof, not with the package

        what = f"kernel {node.kernel} applies to {node.spec.short()}"
        want = self.action_of(node)
        exp = next(
            (e for e in ctx.expansions(node.spec) if e.action.family is self and self.matches(e.action, want)), None
        )
        if exp is None:
            return [Obligation(what, "refuted", f"the target's rules do not apply {node.kernel} to {node.spec}")]
        if exp.kernel_cost != node.kernel_cost:
            return [
                Obligation(
                    what,
                    "refuted",
                    f"the program records cost {node.kernel_cost}; the target's rules give {exp.kernel_cost}",
                )
            ]
        return [Obligation(what, "proved")]

    def box_obligations(self, prover, head, seq, sp, a):
        """None beyond the rules check (solver/proofs/boxes.py rules_obligations), which
        asks the target's rules on every spec class of the box."""
        return []
