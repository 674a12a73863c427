"""Is a hand-scheduled program one the synthesizer could find? A program is in the
search space when every node's rewrite is among the rewrites the rule files offer the
search for that node's spec (under its memory limits). Then the search's optimum
costs at most as much as the program, which is how a hand recipe checks the space.
"""

from __future__ import annotations

from morello_asp.ir import Impl, SpecHole
from morello_asp.rewrites import Action, for_node
from morello_asp.solver.search.engine import Engine


def node_action(node: Impl) -> Action:
    """The rewrite that built an IR node (its family's inverse of build)."""
    return for_node(node).action_of(node)


def outside_search(impl: Impl, engine: Engine) -> list[tuple[tuple[int, ...], str, Action]]:
    """(child path, spec, rewrite) of every node whose rewrite the search does not
    offer; empty when the whole program is in the search space. Open specs count as in."""
    nodes: list[tuple[tuple[int, ...], Impl]] = []

    def rec(node: Impl, path: tuple[int, ...]):
        if not isinstance(node, SpecHole):
            nodes.append((path, node))
        for i, c in enumerate(node.children):
            rec(c, path + (i,))

    rec(impl, ())
    expansions = engine.expand_many([n.spec for _, n in nodes])
    out = []
    for (path, node), exps in zip(nodes, expansions):
        act = node_action(node)
        if not any(e.action == act for e in exps):
            out.append((path, node.spec.short(), act))
    return out
