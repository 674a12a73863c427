"""Proof obligations of pipeline nodes (morello_asp/rewrites/pipeline.py): bufferize
and the softmax decompositions.

Of a program's node: the rules derive this step with these stages; each stage gets
buffers of the shapes and dtypes its spec names; intermediates are written whole by a
stage before any stage reads them (z3: every point of each written buffer is covered);
stages write only the spec's outputs and intermediates, and every output is written;
a buffer passed twice to one stage is safe in place (a pointwise kind, the same
coordinates on both sides); intermediates' layouts are bijections. Their memory, live
while every stage runs, is summed with the rest of the program's along each path by
solver/verify.py (prove_memory, through the family's `allocations`).

Of a memo box: the intermediates fit under the box's lowest limit at their level, and a
vector size divides their volume, for every spec of the box.
"""

from __future__ import annotations

import z3

from .verify import Obligation, prove_layout, solve


def _covers(what: str, writes: list[tuple[str, tuple[int, ...]]], shape: tuple[int, ...]) -> Obligation:
    """z3: every point of a `shape` buffer lies in some written box (origin 0, extent)."""
    p = [z3.Int(f"p{d}") for d in range(len(shape))]
    s = z3.Solver()
    s.add([z3.And(0 <= v, v < n) for v, n in zip(p, shape)])
    inside = [z3.And([v < e for v, e in zip(p, ext)]) for _, ext in writes] or [z3.BoolVal(False)]
    s.add(z3.Not(z3.Or(inside)))
    r, m = solve(s)
    if r == z3.sat:
        return Obligation(what, "refuted", f"point {[m.eval(v).as_long() for v in p]} is written by no stage")
    return Obligation(what, "proved" if r == z3.unsat else "unknown")


def pipeline_obligations(node, ctx) -> list[Obligation]:
    spec = node.spec
    name = f"{node.step} of {spec.short()}"
    out: list[Obligation] = []
    # the rules derive this step, with these stages
    from morello_asp.rewrites import for_node

    fam = for_node(node)
    want = fam.action_of(node)
    what = f"{name}: the rules derive it with these stages"
    exp = next((e for e in ctx.expansions(spec) if e.action.name == "pipeline" and fam.matches(e.action, want)), None)
    if exp is None:
        out.append(Obligation(what, "refuted", f"the rules do not derive {want} on {spec}"))
    else:
        got = [st.spec.without_limits for st in node.stages]
        rules = [c.without_limits for c in exp.children]
        bad = next((i for i, (a, b) in enumerate(zip(got, rules)) if a != b), None)
        if len(got) != len(rules) or bad is not None:
            i = bad if bad is not None else min(len(got), len(rules))
            out.append(
                Obligation(what, "refuted", f"stage {i} is {got[i : i + 1]}, the rules leave {rules[i : i + 1]}")
            )
        else:
            out.append(Obligation(what, "proved"))
    # each stage's operands are the buffers its wiring names
    shapes = [tuple(s) for s in spec.operand_shapes]
    what = f"{name}: every stage gets buffers of the shapes and dtypes its spec names"
    problem = None
    for i, (st, ws) in enumerate(zip(node.stages, node.wiring)):
        if len(ws) != len(st.spec.operands):
            problem = f"stage {i} has {len(st.spec.operands)} operands, wired {len(ws)}"
            break
        for j, w in enumerate(ws):
            buf_shape = shapes[w] if w >= 0 else node.temp_shapes[-1 - w]
            buf_dt = spec.operands[w].dtype if w >= 0 else node.temps[-1 - w].dtype
            if tuple(st.spec.operand_shapes[j]) != tuple(buf_shape) or st.spec.operands[j].dtype != buf_dt:
                problem = (
                    f"stage {i} ({st.spec.short()}) operand {j} is {st.spec.operand_shapes[j]} "
                    f"{st.spec.operands[j].dtype}, its buffer {buf_shape} {buf_dt}"
                )
                break
        if problem:
            break
    out.append(Obligation(what, "refuted", problem) if problem else Obligation(what, "proved"))
    # writes: only outputs and intermediates; intermediates before they are read; all outputs
    written: set[int] = set()
    what = f"{name}: stages write only the spec's outputs and intermediates, each intermediate before it is read"
    problem = None
    for i, (st, ws) in enumerate(zip(node.stages, node.wiring)):
        outs = set(st.spec.outputs)
        for j, w in enumerate(ws):
            if j in outs:
                if w >= 0 and w not in spec.outputs:
                    problem = f"stage {i} writes input {w} of the spec"
            elif w < 0 and w not in written:
                problem = f"stage {i} reads intermediate {-1 - w} before any stage writes it"
        for j in outs:
            written.add(ws[j])
        if problem:
            break
    out.append(Obligation(what, "refuted", problem) if problem else Obligation(what, "proved"))
    for o in spec.outputs:
        writes = [
            (f"stage {i}", tuple(st.spec.operand_shapes[j]))
            for i, (st, ws) in enumerate(zip(node.stages, node.wiring))
            for j in st.spec.outputs
            if ws[j] == o
        ]
        out.append(_covers(f"{name}: the stages write every point of output {o}", writes, shapes[o]))
    # a buffer passed twice to a stage
    what = f"{name}: a buffer a stage reads and writes is safe in place (pointwise, same coordinates)"
    problem = None
    for i, (st, ws) in enumerate(zip(node.stages, node.wiring)):
        k = st.spec.k
        rank = len(st.spec.shape)
        acc = k.access(rank)
        for w in set(ws):
            pos = [j for j, x in enumerate(ws) if x == w]
            if len(pos) < 2:
                continue
            outs_at = [j for j in pos if j in st.spec.outputs]
            if len(outs_at) != 1:
                problem = f"stage {i} gets one buffer as operands {pos}, {len(outs_at)} of them outputs"
            elif k.is_compose or k.is_accum or k.reduction(rank) or k.scans(rank):
                problem = f"stage {i} ({k.name}) reads along dimensions it writes: not safe in place"
            elif any(acc[j] != acc[outs_at[0]] for j in pos):
                problem = f"stage {i} ({k.name}) reads operands {pos} at different coordinates"
        if problem:
            break
    out.append(Obligation(what, "refuted", problem) if problem else Obligation(what, "proved"))
    for ts, shp in zip(node.temps, node.temp_shapes):
        out.append(prove_layout(ts.layout, tuple(shp)))
    return out


def pipeline_box_obligations(prover, head, seq, sp, a) -> list:
    import z3 as _z3

    from morello_asp.rewrites.pipeline import temp_dims
    from morello_asp.solver.box_space import as_bool, mod, product_of, sym_units
    from morello_asp.solver.verify_boxes import value

    step, index, level, layout, v = a.args
    if not level:
        return []
    rank = len(sp.dims)
    dims = temp_dims(sp.kind, step, index, rank)
    vol = product_of([sp.dims[x.dims[0]] if x.dims else 1 for x in dims])
    nb = sp.dtypes[-1].nbytes if step == "bufferize" else sp.dtypes[0].nbytes
    lv = prover.target.level(level)
    per = sym_units(prover.target, lv.unit, vol, nb, v)
    ntemps = 1 if step == "bufferize" else _declared_temps(sp, step)
    units = per * ntemps
    limit = sp.limits[lv.index]
    key = (step, index, lv.unit, v, nb, ntemps, tuple(map(tuple, sp.dim_values)), sp.axis_range(limit))
    obs = [
        prover.ob(
            head,
            seq,
            sp,
            f"the intermediates fit under the box's lowest {lv.name} limit",
            lambda: as_bool(units > limit),
            lambda m: f"{value(m, units)} {lv.unit}s at shape {prover.shape(m, sp)} but the limit is {value(m, limit)}",
            key,
        )
    ]
    if lv.unit == "vector":
        obs.append(
            prover.ob(
                head,
                seq,
                sp,
                f"v{v} divides every intermediate's volume",
                lambda: as_bool(mod(vol, v) != 0) if v else _z3.BoolVal(True),
                lambda m: f"v{v} against {value(m, vol)} values at shape {prover.shape(m, sp)}",
                key,
            )
        )
    return obs


def _declared_temps(sp, step: str) -> int:
    from morello_asp.kinds import loaded_files
    from morello_asp.rewrites.pipeline import declared_wiring

    wires = declared_wiring(sp.target.key, loaded_files()).get(step, ())
    return -min((w for ws in wires for w in ws), default=0)


__all__ = ["pipeline_box_obligations", "pipeline_obligations"]
