"""Many different complete programs of one spec, drawn from the search's own
alternatives, and their cost under any target.

Sampling: starting at the root, each open spec takes its optimal rewrite with
probability `p_opt`, else one of its `k` cheapest other feasible rewrites (from
`Search.explain`), and its sub-specs are sampled the same way; below `depth` every
open spec gets its optimal program. Programs are deduplicated by their C (comments and
blank space removed), so two programs that differ only in code-free cache moves count once.
"""
from __future__ import annotations

import random
import re

from morello_asp.cost import compute_cost
from morello_asp.ir import Impl, KernelApp
from morello_asp.schedule import node_from_expansion
from morello_asp.spec import Spec

_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def sample_program(search, spec: Spec, rng: random.Random, k: int, p_opt: float, depth: int) -> Impl:
    """One program of `spec`: a random walk over the k cheapest rewrites per spec."""
    if depth <= 0:
        return search.build(spec)
    options = [e for e, d in search.explain(spec) if d is not None][: k + 1]
    if not options:
        return search.build(spec)  # raises NoImplementationError with the reason
    e = options[0] if len(options) == 1 or rng.random() < p_opt else rng.choice(options[1:])
    kids = [sample_program(search, c, rng, k, p_opt, depth - 1) for c in e.children]
    return node_from_expansion(spec, e, kids)


def code_key(impl: Impl) -> str:
    """The program's C without comments and blank space: equal keys, equal machine code."""
    from morello_asp.codegen.emit import emit_function

    body, _ = emit_function(impl, "f")
    return re.sub(r"\s+", "", _COMMENT.sub("", body))


def distinct_programs(search, spec: Spec, count: int, k: int = 3, p_opt: float = 0.6, depth: int = 12,
                      seed: int = 0, attempts: int | None = None, progress=None) -> list[Impl]:
    """Up to `count` programs of `spec` with different C; the optimal program first."""
    rng = random.Random(seed)
    best = search.build(spec)
    seen = {code_key(best)}
    out = [best]
    for i in range(attempts or 40 * count):
        if len(out) >= count:
            break
        imp = sample_program(search, spec, rng, k, p_opt, depth)
        key = code_key(imp)
        if key not in seen:
            seen.add(key)
            out.append(imp)
        if progress:
            progress(len(out), i + 1)
    return out


def recost(impl: Impl, engine) -> int:
    """Cost of `impl` under `engine`'s target: kernel costs re-derived by its rules,
    moves and loops by its level weights (the program's structure is unchanged)."""
    kernels = [n for n in impl.walk() if isinstance(n, KernelApp)]
    costs = {}
    for n, exps in zip(kernels, engine.expand_many([n.spec for n in kernels])):
        for e in exps:
            if e.action.name == "select" and e.action.args[0] == n.kernel:
                costs[id(n)] = e.kernel_cost
                break
        else:
            raise ValueError(f"target {engine.target.name} has no kernel {n.kernel} for {n.spec}")

    def rebuild(node: Impl) -> Impl:
        if isinstance(node, KernelApp):
            return KernelApp(node.spec, node.kernel, costs[id(node)])
        kids = node.children
        return node.with_children([rebuild(c) for c in kids]) if kids else node

    return compute_cost(rebuild(impl), engine.target).main
