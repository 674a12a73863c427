"""Program listings in the paper's style, one line per node with its cost."""

from __future__ import annotations

from morello_asp.cost import compute_cost
from morello_asp.ir import Impl, SpecHole
from morello_asp.rewrites import for_node
from morello_asp.spec import Spec, tensor_text
from morello_asp.target import Target


def param_names(spec: Spec) -> list[str]:
    """Operand names: the kind's, or p0, p1, ..."""
    return list(spec.k.params or [f"p{i}" for i in range(len(spec.operands))])


class Listing:
    """A listing being written: node families (morello_asp.rewrites, `list_node`) add
    their lines through `line` and recurse into children through `node`."""

    def __init__(self, target: Target, show_cost: bool = True):
        self.target = target
        self.show_cost = show_cost
        self.lines: list[str] = []
        self.used: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        """A name not used yet in this listing: base, base1, base2, ..."""
        n = self.used.get(base, 0)
        self.used[base] = n + 1
        return base if n == 0 else f"{base}{n}"

    def views(self, prefix: str, args: list[str], spec: Spec) -> tuple[list[str], str]:
        """Fresh names (prefix + the argument's name) for views of `args` that `spec`
        sees, and their bindings `tlhs: (1×4, f32, L1) ← lhs, ...` for a node's line."""
        names = [self.fresh(prefix + a.rstrip("0123456789")) for a in args]
        binds = ", ".join(
            f"{t}: {tensor_text(ts, shp)} ← {a}"
            for t, ts, shp, a in zip(names, spec.operands, spec.operand_shapes, args)
        )
        return names, binds

    def line(self, depth: int, text: str, node: Impl | None = None) -> None:
        """One line; with `node`, followed by the node's cost."""
        c = f"  // cost {compute_cost(node, self.target).main}" if node is not None and self.show_cost else ""
        self.lines.append("  " * depth + text + c)

    def node(self, node: Impl, args: list[str], depth: int) -> None:
        """The lines of `node`, whose operands are named `args`."""
        if isinstance(node, SpecHole):
            self.line(depth, f"{node.spec}({', '.join(args)})")
        else:
            for_node(node).list_node(node, args, depth, self)


def listing(impl: Impl, names: list[str] | None = None, show_cost: bool = True) -> str:
    out = Listing(impl.spec.target, show_cost)
    top = names or [out.fresh(n) for n in param_names(impl.spec)]
    for n in top:
        out.used.setdefault(n, 1)
    out.node(impl, top, 0)
    return "\n".join(out.lines)
