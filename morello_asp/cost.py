"""A program's cost, peak memory and depth: the cost model (cost_model.py) applied node
by node, each node by the rewrite family that builds it (morello_asp.rewrites)."""

from __future__ import annotations

import functools
import hashlib
import inspect

from morello_asp import cost_model
from morello_asp.cost_model import Cost
from morello_asp.ir import Impl, SpecHole
from morello_asp.rewrites import families, for_node
from morello_asp.target import Target


def node_cost(node: Impl, child_costs: list[int], child_chains: list[int], target: Target) -> int:
    """Cost of one node given its children's costs and chains of sums: the affine step
    the DP uses, or the least a chain of sums takes if that is more; the rules are the
    family's that builds the node (morello_asp.rewrites)."""
    if isinstance(node, SpecHole):
        return 0
    fam = for_node(node)
    return max(fam.cost(node, child_costs, target), fam.cost_floor(node, child_chains, target))


def node_chain(node: Impl, child_chains: list[int], target: Target) -> int:
    """The chain of sums into the same registers a node leaves open to its parent, given
    its children's: part of what a solved spec reports upward, as its cost is, so that a
    loop around it is priced by the whole chain however the search nests the loops."""
    if isinstance(node, SpecHole):
        return 0
    return for_node(node).chain(node, child_chains, target)


def node_peak(node: Impl, child_peaks: list[tuple[int, ...]], target: Target) -> tuple[int, ...]:
    """Smallest per-level limits under which this node's program still fits, given its
    children's (the family's rule; an open spec needs nothing)."""
    if isinstance(node, SpecHole):
        return tuple(0 for _ in target.levels)
    return for_node(node).peak(node, child_peaks, target)


def compute_cost(node: Impl, target: Target | None = None) -> Cost:
    """The program's cost under `target` (default: the one its spec is for)."""
    target = target or node.spec.target
    kids = [compute_cost(c, target) for c in node.children]
    chains = [k.chain for k in kids]
    return Cost(
        main=node_cost(node, [k.main for k in kids], chains, target),
        peak=node_peak(node, [k.peak for k in kids], target),
        depth=1 + max((k.depth for k in kids), default=0),
        complete=not isinstance(node, SpecHole) and all(k.complete for k in kids),
        levels=tuple(target.level_names),
        chain=node_chain(node, chains, target),
    )


def cost_fingerprint() -> str:
    """The cost model's code version: cost_model.py and every rewrite family's cost,
    peak and chain rules, as they are in this process. A memo table holds optima under one cost
    model, so this is part of its key (solver/memo/sqlite.py): change the code of a term
    and an old table is refused by name instead of answering with the old model's optima.
    The terms' numbers (CostModel.terms) are the target's facts, and the kernels' costs
    are rules: both are in the logic files' hash, the key's other half."""
    rules = tuple(
        (f.name, type(f).cost, type(f).peak, type(f).chain, type(f).cost_floor)
        for f in sorted(families(), key=lambda f: f.name)
    )
    return _fingerprint(rules)


@functools.cache
def _fingerprint(rules: tuple) -> str:
    """cost_fingerprint of these rule functions (read once per process: a table is opened
    and a default table named in every run, each asking)."""
    h = hashlib.sha256(inspect.getsource(cost_model).encode())
    for name, *fns in rules:
        for rule in fns:
            h.update(name.encode() + b"\0" + inspect.getsource(rule).encode())
    return h.hexdigest()[:16]
