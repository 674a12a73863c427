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


def node_cost(node: Impl, child_costs: list[int], target: Target) -> int:
    """Cost of one node given its children's costs: the affine step the DP uses; the
    rule is the family's that builds the node (morello_asp.rewrites)."""
    if isinstance(node, SpecHole):
        return 0
    return for_node(node).cost(node, child_costs, target)


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
    return Cost(
        main=node_cost(node, [k.main for k in kids], target),
        peak=node_peak(node, [k.peak for k in kids], target),
        depth=1 + max((k.depth for k in kids), default=0),
        complete=not isinstance(node, SpecHole) and all(k.complete for k in kids),
        levels=tuple(target.level_names),
    )


def cost_fingerprint() -> str:
    """The cost model's code version: cost_model.py and every rewrite family's cost and
    peak rules, as they are in this process. A memo table holds optima under one cost
    model, so this is part of its key (solver/memo/sqlite.py): change the code of a term
    and an old table is refused by name instead of answering with the old model's optima.
    The terms' numbers (CostModel.terms) are the target's facts, and the kernels' costs
    are rules: both are in the logic files' hash, the key's other half."""
    rules = tuple((f.name, type(f).cost, type(f).peak) for f in sorted(families(), key=lambda f: f.name))
    return _fingerprint(rules)


@functools.cache
def _fingerprint(rules: tuple) -> str:
    """cost_fingerprint of these rule functions (read once per process: a table is opened
    and a default table named in every run, each asking)."""
    h = hashlib.sha256(inspect.getsource(cost_model).encode())
    for name, cost, peak in rules:
        for rule in (cost, peak):
            h.update(name.encode() + b"\0" + inspect.getsource(rule).encode())
    return h.hexdigest()[:16]
