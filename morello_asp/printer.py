"""Program listings in the paper's style, one line per node with its cost."""
from __future__ import annotations

from .cost import compute_cost
from .ir import Alloc, Block, Impl, KernelApp, Loop, SpecHole
from .spec import Spec, TensorSpec


def param_names(spec: Spec) -> list[str]:
    """Operand names: the kind's, or p0, p1, ..."""
    return list(spec.k.params or [f"p{i}" for i in range(len(spec.operands))])


def _tdesc(ts: TensorSpec, shape) -> str:
    s = "×".join(map(str, shape))
    extra = [] if str(ts.layout) == "row_major" else [str(ts.layout)]
    if ts.vector_size:
        extra.append(f"v{ts.vector_size}")
    return f"({s}, {ts.dtype}, {ts.level}{''.join(', ' + e for e in extra)})"


class _Names:
    def __init__(self):
        self.used: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        n = self.used.get(base, 0)
        self.used[base] = n + 1
        return base if n == 0 else f"{base}{n}"


def listing(impl: Impl, names: list[str] | None = None, show_cost: bool = True) -> str:
    tgt = impl.spec.target
    env = _Names()
    top = names or [env.fresh(n) for n in param_names(impl.spec)]
    for n in top:
        env.used.setdefault(n, 1)
    lines: list[str] = []

    def emit(depth: int, text: str, node: Impl):
        c = f"  // cost {compute_cost(node, tgt).main}" if show_cost else ""
        lines.append("  " * depth + text + c)

    def rec(node: Impl, args: list[str], depth: int):
        spec = node.spec
        if isinstance(node, SpecHole):
            lines.append("  " * depth + f"{spec}({', '.join(args)})")
        elif isinstance(node, KernelApp):
            emit(depth, f"{node.kernel}({', '.join(args)})", node)
        elif isinstance(node, Loop):
            body = node.body.spec
            tiles = [env.fresh("t" + a.rstrip("0123456789")) for a in args]
            binds = ", ".join(f"{t}: {_tdesc(ts, shp)} ← {a}" for t, ts, shp, a in zip(tiles, body.operands, body.operand_shapes, args))
            emit(depth, f"tile{'[p]' if node.parallel else ''} ({binds}):", node)
            rec(node.body, tiles, depth + 1)
            for b, (off, shp) in zip(node.boundaries, node.regions()):
                lines.append("  " * (depth + 1) + f"boundary at {list(off)} ({'×'.join(map(str, shp))}):")
                rec(b, args, depth + 2)
        elif isinstance(node, Alloc):
            shape = spec.operand_shapes[node.operand]
            nm = env.fresh(tgt.prefix(node.new.level) + args[node.operand].lstrip("t"))
            emit(depth, f"alloc {nm}: {_tdesc(node.new, shape)} ← {args[node.operand]}:", node)
            inner = list(args)
            inner[node.operand] = nm
            if node.load is not None:
                rec(node.load, [args[node.operand], nm], depth + 1)
            rec(node.body, inner, depth + 1)
            if node.store is not None:
                rec(node.store, [nm, args[node.operand]], depth + 1)
        elif isinstance(node, Block):
            emit(depth, "block:", node)
            for c in node.children:
                if c.spec.kind == "Zero" and spec.kind != "Zero":
                    rec(c, [args[spec.output]], depth + 1)
                else:
                    rec(c, args, depth + 1)
        else:
            lines.append("  " * depth + repr(node))

    rec(impl, top, 0)
    return "\n".join(lines)
