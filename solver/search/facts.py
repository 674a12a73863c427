"""Spec <-> logic terms: the input facts written for each spec, and decoding of the
child atoms the rule files derive. The predicate contract is in encodings/README.md."""

from __future__ import annotations

from dataclasses import replace
from math import prod

import clingo

from morello_asp.cost_model import CostModel
from morello_asp.dtypes import Dtype
from morello_asp.kinds import kind as get_kind
from morello_asp.kinds.compose import cut
from morello_asp.layout import Layout, PhysDim
from morello_asp.naming import camel, snake  # noqa: F401  (re-exported for the engine)
from morello_asp.spec import Spec, TensorSpec
from morello_asp.target import Target


def layout_term(lay: Layout) -> str:
    parts = [f"pd({p.dim},{p.kind},{p.size})" for p in lay.pdims]
    return "(" + ",".join(parts) + ("," if len(parts) == 1 else "") + ")"


def layout_from_symbol(sym: clingo.Symbol) -> Layout:
    return Layout(
        tuple(PhysDim(a.arguments[0].number, a.arguments[1].name, a.arguments[2].number) for a in sym.arguments)
    )


class LayoutIds:
    """Numbers layouts so the logic files pass small integers instead of nested terms,
    and keeps what is written in those numbers: canonical child operands and operands'
    input facts (one engine, one target, one numbering)."""

    def __init__(self):
        self.ids: dict[Layout, int] = {}
        self.layouts: list[Layout] = []
        self.operands: dict[tuple, TensorSpec] = {}  # build_child's canonical operands
        self.operand_facts: dict[tuple, tuple[str, ...]] = {}  # spec_facts' facts of an operand

    def id(self, lay: Layout) -> int:
        i = self.ids.get(lay)
        if i is None:
            i = self.ids[lay] = len(self.layouts)
            self.layouts.append(lay)
        return i

    def pack_facts(self, lay: Layout) -> list[str]:
        """lpack/3 facts: logical dim J is packed in blocks of Sz values."""
        covered: dict[int, int] = {}
        out = []
        i = self.id(lay)
        for p in reversed(lay.pdims):
            if p.kind != "dyn":
                covered[p.dim] = covered.get(p.dim, 1) * p.size
                out.append(f"lpack({i},{p.dim},{covered[p.dim]}).")
        return out


def spec_facts(sid: int, spec: Spec, target: Target, ids: LayoutIds, kinds_written: set | None = None) -> list[str]:
    """The input facts of spec `sid`, and those of its kind at its rank unless
    `kinds_written` (the (kind, rank) pairs one clingo call has, updated here) has them."""
    kind = snake(spec.kind)
    rank = len(spec.shape)
    f = [f"spec({sid},{kind}).", f"spec_rank({sid},{rank})."]
    f += [f"spec_dim({sid},{d},{n})." for d, n in enumerate(spec.shape)]
    if spec.serial:
        f.append(f"spec_serial({sid}).")
    k = spec.k
    if kinds_written is None or (kind, rank) not in kinds_written:
        f += _kind_facts(kind, rank, k)
        if kinds_written is not None:
            kinds_written.add((kind, rank))
    # An operand's facts depend on the spec only through its id: the text is made once
    # per operand and shape (the search writes facts for tens of thousands of classes).
    sid_text = f"({sid},"
    for op, (ts, access, shape) in enumerate(zip(spec.operands, k.access(rank), spec.operand_shapes)):
        key = (op, ts, access, shape)
        text = ids.operand_facts.get(key)
        if text is None:
            text = ids.operand_facts[key] = _operand_facts(op, ts, access, shape, target, ids)
        f += [t.replace("(§,", sid_text) for t in text]
    if k.is_compose:
        f += compose_facts(sid, spec)
    return f


def _kind_facts(kind: str, rank: int, k) -> list[str]:
    """What kind `k` (named `kind`) at a rank says about every spec of it (kind_rank_*,
    rules/base.lp): written once per clingo call, not once per spec (a third of a 64^3
    batch's facts text was these, and clingo derives them per spec faster than it reads
    them)."""
    head = f"{kind},{rank}"
    f = [f"kind_rank_output({head},{o})." for o in k.outputs]
    f += [f"kind_rank_reduction({head},{d})." for d in k.reduction(rank)]
    f += [f"kind_rank_scan({head},{d})." for d in k.scans(rank)]
    for op, access in enumerate(k.access(rank)):
        for j, a in enumerate(access):
            if a.single is not None:
                f.append(f"kind_rank_opdim({head},{op},{j},{a.single}).")
            else:
                f += [f"kind_rank_opsum({head},{op},{j},{d})." for d in a.dims]
                f += [f"kind_rank_opcoef({head},{op},{j},{d},{c})." for d, c in a.terms if c != 1]
                f.append(f"kind_rank_opoff({head},{op},{j},{a.offset}).")
    return f


def operand_fields(ts: TensorSpec, ids: LayoutIds) -> tuple[str, ...]:
    """An operand as text: the fields spec_operand/8 writes after the spec and operand
    (dtype, level, aligned, contiguity, vector size, layout id), then its stride
    exponent or "". A child's atoms give these back (build_child reads them), and
    Engine._like fills a child_like/3 child's unstated operands with its parent's."""
    return (
        ts.dtype.short,
        ts.level.lower(),
        str(int(ts.aligned)),
        str(ts.contig),
        str(ts.vector_size or 0),
        str(ids.id(ts.layout)),
        "" if ts.stride is None else str(ts.stride),
    )


def _operand_facts(op: int, ts: TensorSpec, access, shape, target: Target, ids: LayoutIds) -> tuple[str, ...]:
    """spec_facts' facts of one operand, with § for the spec's id."""
    sid = "§"
    lay = ts.layout
    *fields, exponent = operand_fields(ts, ids)
    f = [f"spec_operand({sid},{op},{','.join(fields)})."]
    if exponent:
        f.append(f"spec_stride({sid},{op},{exponent}).")
    for j, (a, x) in enumerate(zip(access, shape)):
        if a.single is None:  # a single dimension's extent is derived (rules/base.lp)
            f.append(f"spec_opext({sid},{op},{j},{x}).")
    f.append(f"spec_npdims({sid},{op},{lay.full_contiguity()}).")
    f.append(f"spec_opvol({sid},{op},{prod(shape)}).")
    f.append(f"spec_mcost({sid},{op},{CostModel.of(target).move(ts, shape)}).")
    stride = 1
    for p, (before, ext, pd) in enumerate(lay._covers(shape)):
        f.append(f"spec_pdim({sid},{op},{p},{pd.dim},{pd.kind},{before},{ext},{stride}).")
        stride *= ext
    if lay.is_packed:
        f += ids.pack_facts(lay)
    return tuple(f)


def compose_facts(sid: int, spec: Spec) -> list[str]:
    """A Compose's cuts for bufferize (encodings/rules/bufferize.lp): per cut I, the
    producer (part 0) and consumer (part 1) kinds, their dimensions and operands in
    terms of S's, the intermediate's extents and dtype (the output's), and whether it is
    indexed as the output (then it may take the output's layout)."""

    f = []
    k = spec.k
    assert k.components is not None
    dt = spec.operands[-1].dtype.short
    out_access = k.access(len(spec.shape))[-1]
    for i in range(len(k.components.parts) - 1):
        c = cut(k, i)
        f.append(f"spec_cut({sid},{i}).")
        f.append(f"spec_cut_dtype({sid},{i},{dt}).")
        for j, a in enumerate(c.temp):
            f.append(f"spec_cut_tmp_ext({sid},{i},{j},{a.extent(spec.shape)}).")
        if c.temp == tuple(out_access):
            f.append(f"spec_cut_tmp_like({sid},{i},{len(spec.operands) - 1}).")
        for p, part in enumerate((c.producer, c.consumer)):
            f.append(f"spec_cut_part({sid},{i},{p},{snake(part.kind)}).")
            f += [f"spec_cut_dim({sid},{i},{p},{j},{d})." for j, d in enumerate(part.dims)]
            for j, w in enumerate(part.wires):
                f.append(f"spec_cut_wire({sid},{i},{p},{j},{'tmp(0)' if w < 0 else f'op({w})'}).")
    return f


def kind_name(sym: clingo.Symbol) -> str:
    return camel(sym.name)


_DTYPES = {d.short: d for d in Dtype}


def build_child(
    kind: str,
    shape: tuple[int, ...],
    ops: tuple[tuple, ...],
    serial: bool,
    ids: LayoutIds,
    target: Target,
    keep_alignment: bool = True,
    stride_levels: frozenset[str] | None = None,
    stride_runs: int = 0,
) -> Spec:
    """The canonical spec a child's atoms describe (kind in snake case, operands as
    (dtype, level, aligned, contiguity, vector size, layout id, stride or "") text).
    Without `keep_alignment` (no rule in force reads it: track_alignment/0 in
    rules/base.lp) every operand is aligned, and an operand keeps its stride only at
    `stride_levels` (stride_read/1 in rules/aliasing.lp; None: everywhere) and only if
    it has more than `stride_runs` runs (stride_read_runs/1), so children that differ
    only there are one class."""
    name = camel(kind)
    operands = []
    for op, opshape in zip(ops, get_kind(name).operand_shapes(shape)):
        # The same operand recurs in thousands of children: canonicalised once per shape
        # (per engine, which owns `ids` and has one target).
        key = (op, opshape)
        ts = ids.operands.get(key)
        if ts is None:
            dt, lv, al, c, v, lay, st = op
            ts = TensorSpec(
                _DTYPES[dt],
                lv.upper(),
                ids.layouts[int(lay)],
                al == "1" or not keep_alignment,
                int(c),
                int(v) or None,
                int(st) if st and (stride_levels is None or lv.upper() in stride_levels) else None,
            ).canonical(opshape, target)
            if ts.stride is not None and stride_runs and _runs(ts, opshape) <= stride_runs:
                ts = replace(ts, stride=None)
            ids.operands[key] = ts
        operands.append(ts)
    return Spec(name, shape, tuple(operands), serial, (), target)


def _runs(ts: TensorSpec, shape: tuple[int, ...]) -> int:
    """How many runs a view that is not contiguous has along the physical dim where its
    adjacency breaks (alias_runs/3 in rules/aliasing.lp)."""
    assert ts.contig is not None  # canonical
    return ts.layout._covers(shape)[ts.contig][1]
