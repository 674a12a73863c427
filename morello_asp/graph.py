"""Dataflow graphs of programs and of Compose specs (networkx), written as Graphviz DOT
(`morello-asp synth SPEC --graph FILE`), or drawn as PNG when matplotlib is installed.

A program's graph has a node per buffer (the spec's operands, every buffer a move
allocates, every intermediate of a pipeline; views of a buffer, such as a loop's tiles,
are the buffer itself) and a node per kernel or open spec the program runs, with an
edge from each buffer an operation reads to it and from it to each buffer it writes. A
move that emits no code (a cache level) is an edge `cache` from the buffer to its copy.
Names are the program listing's (morello_asp/printer.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from morello_asp.errors import MorelloError
from morello_asp.ir import Alloc, Impl, KernelApp, Pipeline, SpecHole
from morello_asp.kinds.compose import dataflow_graph
from morello_asp.printer import Listing, param_names
from morello_asp.rewrites import for_node

if TYPE_CHECKING:
    import networkx as nx

    from morello_asp.spec import Spec


class _Dataflow(Listing):
    """A listing that records, instead of lines, the buffers and operations it names."""

    def __init__(self, impl: Impl):
        import networkx as nx

        super().__init__(impl.spec.target, show_cost=False)
        self.g = nx.DiGraph()
        self.root: dict[str, str] = {}  # a view's name -> the buffer it views
        self.ops = 0
        self.allocs: list[tuple[Alloc, list[str]]] = []  # moves being listed, with their args

    def _alloc(self, a: Alloc, src_name: str, inner: list[str]) -> None:
        """Move `a` gave operand a.operand the new buffer inner[a.operand], a copy of src_name."""
        nm = inner[a.operand]
        src = self.buffer(src_name, "buffer", src_name)
        self.root[nm] = nm
        self.buffer(nm, "buffer", nm)
        self.g.nodes[nm]["label"] = f"{nm} ({a.new.level})"
        if a.load is None and a.store is None:  # an output's copy flows back
            self.g.add_edge(*((nm, src) if a.operand in a.spec.outputs else (src, nm)), label="cache")

    def buffer(self, name: str, kind: str, label: str) -> str:
        r = self.root.setdefault(name, name)
        if r not in self.g:
            self.g.add_node(r, kind=kind, label=label)
        return r

    def node(self, node: Impl, args: list[str], depth: int) -> None:
        if self.allocs and node is self.allocs[-1][0].body:
            a, outer = self.allocs[-1]
            self._alloc(a, outer[a.operand], args)
        if isinstance(node, (KernelApp, SpecHole)) or not node.children:
            self.ops += 1
            op = f"op{self.ops}"
            label = node.kernel if isinstance(node, KernelApp) else node.spec.short()
            self.g.add_node(op, kind="op", label=label)
            outs = set(node.spec.outputs)
            bufs = [self.buffer(a, "buffer", a) for a in args]
            written = {b for j, b in enumerate(bufs) if j in outs}
            for b in written:
                self.g.add_edge(op, b)
            for b in set(bufs) - written:  # a buffer updated in place: written only
                self.g.add_edge(b, op)
            return
        if isinstance(node, Pipeline):
            names = self._temps(node)
            for n, ts in zip(names, node.temps):
                self.root[n] = n
                self.g.add_node(n, kind="intermediate", label=f"{n} ({ts.level}, {node.step})")
            for stage, ws in zip(node.stages, node.wiring):
                self.node(stage, [args[w] if w >= 0 else names[-1 - w] for w in ws], depth + 1)
            return
        if isinstance(node, Alloc):  # the listing names the new buffer; its body shows it
            self.allocs.append((node, args))
            super().node(node, args, depth)
            self.allocs.pop()
            return
        super().node(node, args, depth)

    def _temps(self, node: Pipeline) -> list[str]:
        return for_node(node).temp_names(node, self.fresh, self.target.prefix)  # type: ignore[attr-defined]

    def views(self, prefix: str, args: list[str], spec: Spec) -> tuple[list[str], str]:
        names, binds = super().views(prefix, args, spec)
        for n, a in zip(names, args):
            self.root[n] = self.root.get(a, a)
        return names, binds

    def line(self, depth: int, text: str, node: Impl | None = None) -> None:
        pass


def program_graph(impl: Impl) -> nx.DiGraph:
    """The dataflow of a (possibly partial) program: buffers, intermediates, operations."""
    d = _Dataflow(impl)
    top = [d.fresh(n) for n in param_names(impl.spec)]
    for j, n in enumerate(top):
        what = "output" if j in impl.spec.outputs else "input"
        d.buffer(n, what, f"{n} ({what})")
    d.node(impl, top, 0)
    return d.g


def compose_graph(spec: Spec) -> nx.DiGraph:
    """A Compose spec's components and operands (morello_asp/compose.py), labelled."""

    info = spec.k.components
    if info is None:
        raise MorelloError(f"{spec.kind} is not a Compose: it has no component graph")
    ks = [p.kind for p in info.parts]
    g = dataflow_graph(ks, info.sources)
    names = param_names(spec)
    for n, data in g.nodes(data=True):
        if n[0] == "c":
            data["kind"], data["label"] = "op", f"{n[1]}: {ks[n[1]].name}"
        else:
            data["kind"] = "output" if n[1] == len(info.sources) - 1 else "input"
            data["label"] = names[n[1]] if n[1] < len(names) else f"op{n[1]}"
    return g


_SHAPE = {
    "op": "box",
    "intermediate": "ellipse, style=dashed",
    "input": "ellipse, style=bold",
    "output": "doubleoctagon",
}


def _quote(s: Any) -> str:
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(g: nx.DiGraph, name: str = "program") -> str:
    """Graphviz DOT text of a graph from program_graph or compose_graph."""
    ids = {n: f"n{i}" for i, n in enumerate(g.nodes)}
    lines = [f"digraph {_quote(name)} {{", "  rankdir=LR;"]
    for n, data in g.nodes(data=True):
        shape = _SHAPE.get(data.get("kind", ""), "ellipse")
        lines.append(f"  {ids[n]} [label={_quote(data.get('label', n))}, shape={shape}];")
    for u, v, data in g.edges(data=True):
        lab = f" [label={_quote(data['label'])}]" if "label" in data else ""
        lines.append(f"  {ids[u]} -> {ids[v]}{lab};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_graph(g: nx.DiGraph, path: str | Path, name: str = "program") -> None:
    """Write `g` to `path`: DOT text, or a PNG drawing if the name ends in .png (that
    needs matplotlib)."""
    path = Path(path)
    if path.suffix.lower() == ".png":
        try:
            import matplotlib
        except ImportError:
            raise MorelloError(
                "a .png graph needs matplotlib (pip install -e '.[bench]'); write .dot instead"
            ) from None
        import networkx as nx

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(max(6, len(g) * 0.6), 5))
        if nx.is_directed_acyclic_graph(g):  # left to right in dataflow order
            layers = {n: i for i, gen in enumerate(nx.topological_generations(g)) for n in gen}
            h = g.copy()
            nx.set_node_attributes(h, layers, "layer")
            pos = nx.multipartite_layout(h, subset_key="layer")
        else:
            pos = nx.spring_layout(g, seed=0)
        colors = ["#cde" if d.get("kind") == "op" else "#fed" for _, d in g.nodes(data=True)]
        nx.draw_networkx(
            g, pos, ax=ax, labels={n: d.get("label", n) for n, d in g.nodes(data=True)}, node_color=colors, font_size=7
        )
        ax.set_axis_off()
        try:
            fig.savefig(path, dpi=120, bbox_inches="tight")
        except OSError as e:
            raise MorelloError(f"cannot write {path}: {e.strerror or e}") from None
        finally:
            plt.close(fig)
        return
    try:
        path.write_text(to_dot(g, name))
    except OSError as e:
        raise MorelloError(f"cannot write {path}: {e.strerror or e}") from None
