"""Compose kinds (paper 2.1; Morello's LogicalSpec::Compose): a chain of kinds whose
head's output is the result, built here from its components' declarations, and the
lookup of every kind by name (`kind`). See morello_asp/compose.py for what a Compose
is; this module is what makes one a `Kind`: its dimensions are its components',
unified where one's output feeds the next one's first input (a *merged* iteration
space), its operands index those dimensions as the components do. The components form
a dataflow graph, validated and ordered with networkx; `bufferize` (rules/bufferize.lp)
cuts it at an intermediate into a producer and a consumer (`cut`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import NamedTuple

from morello_asp.errors import MorelloError, SpecError
from morello_asp.kinds.declared import Kind, declared_kind, declared_names
from morello_asp.naming import compose_name, is_compose_name, parse_compose_name, snake


def kind(name: str) -> Kind:
    """The kind named `name`: declared in a logic file, or a Compose of declared kinds."""
    k = declared_kind(name)
    if k is not None:
        return k
    if is_compose_name(name):
        try:
            return build_kind(name)
        except MorelloError as e:
            raise ValueError(str(e)) from None
    raise ValueError(f"unknown spec kind {name!r}; known: {', '.join(declared_names())}") from None


get_kind = kind  # for functions whose own parameter is named `kind`


@dataclass(frozen=True)
class Component:
    kind: Kind
    dims: tuple[int, ...]  # component dimension -> merged dimension

    @property
    def rank(self) -> int:
        return len(self.dims)


class ComposeInfo(NamedTuple):
    parts: tuple[Component, ...]  # head first
    sources: tuple[tuple[int, int], ...]  # per Compose operand: (component, its operand)


# -------------------------------------------------------------------- the kind
def needs_rank(components) -> bool:
    """No component has a fixed rank: the Compose's name carries one."""
    return all(kind(c).rank is None for c in components)


@functools.cache
def build_kind(name: str) -> Kind:
    """The Kind of a Compose named `Compose((A, B, ...))` (or `...@R`)."""
    parsed = parse_compose_name(name)
    if parsed is None:
        raise SpecError(f"not a Compose kind: {name!r}")
    comps, rank = parsed
    if len(comps) < 2:
        raise SpecError(f"{name}: a Compose has at least two components")
    ks = []
    for cname in comps:
        if is_compose_name(cname):
            raise SpecError(f"{name}: a component is a primitive kind, not a Compose")
        try:
            ks.append(kind(cname))
        except ValueError as e:
            raise SpecError(f"{name}: {e}") from None
    if all(k.rank is None for k in ks) and rank is None:
        raise SpecError(f"{name}: no component fixes the rank: name it {name}@R")
    if rank is not None and not all(k.rank is None for k in ks):
        raise SpecError(f"{name}: a component fixes the rank; write the Compose without @{rank}")
    for i, k in enumerate(ks):
        if k.is_accum:
            raise SpecError(f"{name}: component {k.name} accumulates into its output; a Compose computes it anew")
        if i > 0 and len(k.outputs) != 1:
            raise SpecError(f"{name}: component {k.name} has {len(k.outputs)} outputs; only the head may have several")
        if len(k.outputs) != 1:
            raise SpecError(f"{name}: component {k.name} has {len(k.outputs)} outputs; a Compose chains one")
        if k.outputs[0] == 0 or len(k.params) < 2:
            raise SpecError(f"{name}: component {k.name} has no input to chain")
    # Innermost first: its dimensions are new; each next component's first input is the
    # previous output, so their dimensions are the same merged dimensions.
    names: list[str] = []

    def new_dim(base: str) -> int:
        n, cand = 1, base
        while cand in names:
            cand = f"{base}{n}"
            n += 1
        names.append(cand)
        return len(names) - 1

    inner = ks[-1]
    r = inner.rank if inner.rank is not None else rank
    if r is None:  # any-rank components keep their rank: the innermost fixed one's first input sets it
        fixed = max(c for c, k in enumerate(ks) if k.rank is not None)
        r = len(ks[fixed].access(len(ks[fixed].dims or ()))[0])
    maps: list[tuple[int, ...]] = [()] * len(ks)
    maps[-1] = tuple(new_dim(n) for n in inner.dim_names(r))
    for i in range(len(ks) - 2, -1, -1):
        prev, prev_map = ks[i + 1], maps[i + 1]
        prev_out = prev.access(len(prev_map))[prev.output]
        k = ks[i]
        rk = k.rank if k.rank is not None else len(prev_out)
        first = k.access(rk)[0]
        if len(first) != len(prev_out):
            raise SpecError(
                f"{name}: {prev.name}'s output has rank {len(prev_out)} but {k.name}'s first input has "
                f"rank {len(first)}"
            )
        m: list[int | None] = [None] * rk
        for a, b in zip(first, prev_out):
            if a.unit and b.unit:
                continue
            if a.single is None or b.single is None:
                raise SpecError(
                    f"{name}: {k.name}'s first input and {prev.name}'s output must index each dimension by one "
                    "dimension (or both by 0) to be chained"
                )
            m[a.single] = prev_map[b.single]
        dn = k.dim_names(rk)
        maps[i] = tuple(d if d is not None else new_dim(dn[j]) for j, d in enumerate(m))
    parts = tuple(Component(k, mp) for k, mp in zip(ks, maps))
    sources = operand_sources(ks)
    accesses = []
    for c, j in sources:
        comp = parts[c]
        accesses.append(
            tuple(replace(a, dims=tuple(comp.dims[d] for d in a.dims)) for a in comp.kind.access(comp.rank)[j])
        )
    params: list[str] = []
    for c, j in sources:
        base = ks[c].params[j]
        cand, suffix = base, c
        while cand in params:
            cand = f"{base}{suffix}"
            suffix += 1
        params.append(cand)
    check_dataflow(ks, sources, name)
    out = len(sources) - 1
    merged_rank = len(names)
    reductions_or_scans = set()
    for comp in parts:
        rr = comp.rank
        for d in set(comp.kind.reduction(rr)) | set(comp.kind.scans(rr)):
            reductions_or_scans.add(comp.dims[d])
    out_dims = {d for a in accesses[out] for d in a.dims}
    scans = tuple(sorted(d for d in reductions_or_scans if d in out_dims))
    made = Kind(
        name,
        snake(name),
        tuple(names),
        tuple(params),
        (out,),
        tuple(accesses),
        (),
        (None,),
        components=ComposeInfo(parts, sources),
        compose_scans=scans,
    )
    assert made.rank == merged_rank
    return made


def operand_sources(ks) -> tuple[tuple[int, int], ...]:
    """(component, operand) of each Compose operand, in Morello's order."""
    out: list[tuple[int, int]] = []
    n = len(ks)
    for c in range(n - 1):  # the head's and the middle components' inputs but the first
        out += [(c, j) for j in range(1, len(ks[c].params)) if j not in ks[c].outputs]
    out += [(n - 1, j) for j in range(len(ks[-1].params)) if j not in ks[-1].outputs]
    out.append((0, ks[0].output))
    return tuple(out)


def dataflow_graph(ks, sources):
    """The Compose as a networkx DiGraph: a node per component (`("c", i)`) and per
    operand (`("op", j)`), and an edge along each value's way (operand -> component that
    reads it -> the component that reads its output ... -> the output operand)."""
    import networkx as nx

    g = nx.DiGraph()
    for i, k in enumerate(ks):
        g.add_node(("c", i), kind=k.name)
    for j, (c, o) in enumerate(sources):
        g.add_node(("op", j))
        if o in ks[c].outputs:
            g.add_edge(("c", c), ("op", j))
        else:
            g.add_edge(("op", j), ("c", c))
    for i in range(len(ks) - 1):
        g.add_edge(("c", i + 1), ("c", i), value="intermediate")
    return g


def check_dataflow(ks, sources, name: str) -> list[int]:
    """The graph is acyclic, every component feeds the head, and the output is the
    head's: a valid Compose. Returns the components in execution order."""
    import networkx as nx

    g = dataflow_graph(ks, sources)
    if not nx.is_directed_acyclic_graph(g):
        raise SpecError(f"{name}: the components' dataflow has a cycle")
    order = [n[1] for n in nx.topological_sort(g) if n[0] == "c"]
    for i in range(len(ks)):
        if not nx.has_path(g, ("c", i), ("op", len(sources) - 1)):
            raise SpecError(f"{name}: component {ks[i].name} does not feed the output")
    return order


def execution_order(kind: Kind) -> list[int]:
    info = kind.components
    assert info is not None
    return check_dataflow([p.kind for p in info.parts], info.sources, kind.name)


# ----------------------------------------------------------------- sub-chains
class Part(NamedTuple):
    kind: str  # the kind's name (a primitive's, or a Compose's)
    dims: tuple[int, ...]  # its dimension -> the parent's merged dimension
    wires: tuple[int, ...]  # its operand -> parent operand (>= 0) or -1 (the intermediate)


class Cut(NamedTuple):
    producer: Part  # components index+1 .. n-1
    consumer: Part  # components 0 .. index
    temp: tuple  # the intermediate's accesses in the parent's merged dimensions


def sub_kind_name(kind: Kind, lo: int, hi: int) -> str:
    """The kind of components lo..hi (inclusive) of a Compose."""
    info = kind.components
    assert info is not None
    names = [p.kind.name for p in info.parts[lo : hi + 1]]
    if len(names) == 1:
        return names[0]
    rank = None
    if needs_rank(names):
        rank = info.parts[hi].rank
    return compose_name(names, rank)


def _part(kind: Kind, lo: int, hi: int) -> Part:
    info = kind.components
    assert info is not None
    parts = info.parts
    name = sub_kind_name(kind, lo, hi)
    sub = get_kind(name)
    if sub.components is None:  # one component: its own dimensions and operands
        sub_maps = [tuple(range(parts[lo].rank))]
        sub_sources = tuple((0, j) for j in range(len(sub.params)))
    else:
        sub_maps = [p.dims for p in sub.components.parts]
        sub_sources = sub.components.sources
    rank = sub.rank if sub.rank is not None else parts[lo].rank
    dims: list[int | None] = [None] * rank
    for c, mp in enumerate(sub_maps):
        for e, d in enumerate(mp):
            dims[d] = parts[lo + c].dims[e]
    assert all(d is not None for d in dims)
    parent = {s: j for j, s in enumerate(info.sources)}
    wires = []
    for c, j in sub_sources:
        wires.append(parent.get((lo + c, j), -1))
    return Part(name, tuple(d for d in dims if d is not None), tuple(wires))


def cut(kind: Kind, index: int) -> Cut:
    """bufferize(index): the intermediate between component `index` (consumer side) and
    component `index + 1` (its producer)."""
    info = kind.components
    assert info is not None
    n = len(info.parts)
    if not 0 <= index < n - 1:
        raise SpecError(f"{kind.name} has cuts 0..{n - 2}, not {index}")
    prod = _part(kind, index + 1, n - 1)
    cons = _part(kind, 0, index)
    p = info.parts[index + 1]
    temp = tuple(a for a in p.kind.access(p.rank)[p.kind.output])
    temp = tuple(type(a)(tuple(p.dims[d] for d in a.dims), a.offset) for a in temp)
    return Cut(prod, cons, temp)
