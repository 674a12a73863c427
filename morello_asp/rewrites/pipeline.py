"""pipeline: a spec -> stages run one after the other, joined by intermediate buffers
(paper 2.1). Logic files: encodings/rules/pipeline.lp (the action, its children and
allocation, for every step), with the steps declared in encodings/rules/softmax.lp (the
softmax decompositions) and encodings/rules/bufferize.lp (splitting a Compose). IR
node: Pipeline.

    Softmax1(x, out) --to_softmax_parts(RF, row_major)-->
        pipeline (rdenom: (m×1, f32, RF)):
            SoftmaxDenominatorAndUnscaled1(x, rdenom, out); DivideVecScalar1(out, rdenom, out)
    Compose((Softmax2, Matmul))(a, b, out) --bufferize(0, L1, row_major)-->
        pipeline (lx: (1×m×n, f32, L1)): Matmul(a, b, lx); Softmax2(lx, out)

Action args: (step name, Compose cut index (0 for other steps), level of the
intermediates ("" when there are none), their Layout (None), vector size (0)).
Children are keyed by stage: 0, 1, ... in the order they run. The logic files say which
operand of which stage is which buffer (pipe_wire/5); this module needs the same wiring
to build the node: a Compose's from morello_asp/compose.py, every other step's from its
pipe_wiring/4 declarations.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from morello_asp.codegen.emitter import View
from morello_asp.errors import ScheduleError
from morello_asp.expr import Const
from morello_asp.ir import Pipeline
from morello_asp.kinds import Access, loaded_files
from morello_asp.kinds.compose import cut
from morello_asp.layout import Layout
from morello_asp.rewrites.action import Action
from morello_asp.rewrites.base import Rewrite, split_term
from morello_asp.spec import parse_tensor_spec, tensor_text
from morello_asp.target import engine_files, get_target

if TYPE_CHECKING:
    from morello_asp.solver.proofs.obligations import Obligation


def action(step: str, level: str = "", layout=None, vector_size: int | None = None, index: int = 0) -> Action:
    return Action("pipeline", (step, int(index), level.upper(), layout, vector_size or 0))


@functools.cache
def declared_wiring(key: tuple[str, ...], extra: tuple[str, ...] = ()) -> dict[str, tuple[tuple[int, ...], ...]]:
    """Step -> per stage, per operand: the spec's operand (>= 0) or -1 - T (intermediate
    T), from the pipe_wiring/4 declarations of a target's logic files and of the users'
    files `extra` (a step a --rules file declares)."""
    import clingo

    ctl = clingo.Control(["--warn=none"])
    for f in engine_files(get_target(key[0], key[1:]), extra):
        ctl.load(str(f))
    ctl.ground([("base", [])])
    rows: dict[str, dict[tuple[int, int], int]] = {}
    for a in ctl.symbolic_atoms.by_signature("pipe_wiring", 4):
        sym, i, j, w = a.symbol.arguments
        n = w.arguments[0].number
        rows.setdefault(str(sym), {})[(i.number, j.number)] = n if w.name == "op" else -1 - n
    out = {}
    for step, cells in rows.items():
        stages = max(i for i, _ in cells) + 1
        out[step] = tuple(
            tuple(cells[(i, j)] for j in range(max(jj for ii, jj in cells if ii == i) + 1)) for i in range(stages)
        )
    return out


def wiring(spec, step: str, index: int) -> tuple[tuple[int, ...], ...]:
    """How the stages of `step` on `spec` take their operands."""
    if step == "bufferize":
        if not spec.k.is_compose:
            raise ScheduleError(f"bufferize splits a Compose; {spec.short()} is not one")
        c = cut(spec.k, index)
        return (c.producer.wires, c.consumer.wires)

    known = declared_wiring(spec.target.key, loaded_files())
    if step not in known:
        raise ScheduleError(
            f"unknown pipeline step {step!r}; known: bufferize, {', '.join(sorted(known))} "
            "(pipe_wiring/4 in the target's logic files or a --rules file)"
        )
    return known[step]


def temp_rank(spec, step: str, index: int) -> int:
    """Rank of the step's intermediates (bufferize: the Compose's intermediate; the
    softmax steps: the spec's)."""
    if step == "bufferize":
        return len(cut(spec.k, index).temp)
    return len(spec.shape)


def temp_dims(kind, step: str, index: int, rank: int):
    """The intermediates' dimensions as accesses of the spec's (for memo boxes): a
    Compose's from its cut; the declared steps' intermediates hold one value per scan
    (the spec's shape, size one along its scan dimensions: rules/softmax.lp)."""

    if step == "bufferize":
        return cut(kind, index).temp
    scans = set(kind.scans(rank))
    return tuple(Access(()) if d in scans else Access((d,)) for d in range(rank))


class PipelineFamily(Rewrite):
    name = "pipeline"
    atoms = ("pipeline",)
    node = Pipeline
    node_tag = "pipeline"  # the node in program JSON
    primitives = (
        "pipeline",
        "bufferize",
        "to_softmax_parts",
        "to_softmax_parts_recompute",
        "to_max_and_unscaled",
        "to_max_and_denominator",
    )

    # ---- the logic files' side ----------------------------------------------------
    def decode(self, spec, functor, args, ctx, requested):
        step, sargs = split_term(args[0])
        index = int(sargs[0]) if sargs else 0
        level = "" if args[1] == "none" else args[1].upper()
        layout = None if args[2] == "none" else ctx.ids.layouts[int(args[2])]
        return Action("pipeline", (step, index, level, layout, int(args[3])))

    def request(self, spec, action, ctx):
        step, index, level, layout, v = action.args
        wires = wiring(spec, step, index)
        has_temps = any(w < 0 for ws in wires for w in ws)
        term = f"bufferize({index})" if step == "bufferize" else step
        if not has_temps:
            if level:
                raise ScheduleError(f"{step} allocates no intermediate: give no level")
            return f"pipeline({term},none,none,0)", []
        if not level:
            raise ScheduleError(f"{step} allocates intermediates: give their level")
        ctx.target.level(level)
        rank = temp_rank(spec, step, index)
        lay = layout if layout is not None else Layout.row_major(rank)
        return f"pipeline({term},{level.lower()},{ctx.ids.id(lay)},{v or 0})", []

    def matches(self, derived, wanted):
        a, b = derived.args, wanted.args
        lay_ok = b[3] is None or a[3] == b[3]
        return a[0] == b[0] and a[1] == b[1] and a[2] == b[2].upper() and lay_ok and (a[4] or 0) == (b[4] or 0)

    # ---- text and JSON ----------------------------------------------------------------
    def text(self, action):
        step, index, level, layout, v = action.args
        args = [str(index)] if step == "bufferize" else []
        if level:
            args += [level, str(layout) if layout is not None else "row_major"]
            if v:
                args.append(f"v{v}")
        return f"{step}({', '.join(args)})"

    def args_to_json(self, action) -> dict[str, Any]:
        step, index, level, layout, v = action.args
        return {
            "step": step,
            "index": index,
            "level": level,
            "layout": None if layout is None else str(layout),
            "layout_rank": None if layout is None else layout.full_contiguity(),
            "vector_size": v,
        }

    def args_from_json(self, obj, ranks):
        lay = obj.get("layout")
        layout = None if lay is None else Layout.parse(lay, int(obj["layout_rank"]), validate=False)
        return Action("pipeline", (obj["step"], int(obj["index"]), obj["level"], layout, int(obj["vector_size"])))

    # ---- the IR -------------------------------------------------------------------------
    def build(self, spec, exp, kids):
        step, index = exp.action.args[0], exp.action.args[1]
        wires = wiring(spec, step, index)
        ntemps = -min((w for ws in wires for w in ws), default=0)
        temps, shapes = [], []
        for t in range(ntemps):
            i, j = next((i, j) for i, ws in enumerate(wires) for j, w in enumerate(ws) if w == -1 - t)
            temps.append(kids[i].spec.operands[j])
            shapes.append(tuple(kids[i].spec.operand_shapes[j]))
        return Pipeline(spec, step, index, tuple(kids), wires, tuple(temps), tuple(shapes))

    def action_of(self, node):
        t = node.temps[0] if node.temps else None
        return Action(
            "pipeline",
            (
                node.step,
                node.index,
                t.level if t else "",
                t.layout if t else None,
                (t.vector_size or 0) if t else 0,
            ),
        )

    def cost(self, node, child_costs, target):
        """The stages' costs: writing and reading the intermediates is theirs."""
        return sum(child_costs)

    def allocations(self, node, target):
        from math import prod

        return [
            (target.level(ts.level).index, target.units(ts.level, prod(shp), ts.dtype.nbytes, ts.vector_size))
            for ts, shp in zip(node.temps, node.temp_shapes)
        ]

    def peak(self, node, child_peaks, target):
        """The intermediates take their units while every stage runs; the stages get
        what is left, snapped down to a power of two (as a move's body)."""
        return self.allocating_peak(node, child_peaks, target)

    def temp_names(self, node, out_fresh, prefix) -> list[str]:
        names = []
        for t in range(len(node.temps)):  # as the stage writing it calls it, unless that is just "out"
            uses = [(i, j) for i, ws in enumerate(node.wiring) for j, w in enumerate(ws) if w == -1 - t]
            called = [node.stages[i].spec.k.params[j] for i, j in uses]
            name = called[0] if called[0] != "out" or len(called) == 1 else called[1]
            names.append(out_fresh(prefix(node.temps[t].level) + name))
        return names

    def list_node(self, node, args, depth, out):
        names = self.temp_names(node, out.fresh, out.target.prefix)
        binds = ", ".join(f"{n}: {tensor_text(ts, shp)}" for n, ts, shp in zip(names, node.temps, node.temp_shapes))
        head = f"pipeline {self.text(self.action_of(node))}" + (f" ({binds})" if binds else "") + ":"
        out.line(depth, head, node)
        for stage, ws in zip(node.stages, node.wiring):
            out.node(stage, [args[w] if w >= 0 else names[-1 - w] for w in ws], depth + 1)

    def emit_c(self, node, views, em):
        """Each intermediate is a new buffer (registers, stack or heap) in its own scope
        around the stages, which run in order on their wired views."""

        names = self.temp_names(node, lambda n: n, lambda lv: "")
        opened = []
        tviews = []
        for name, ts, shp in zip(names, node.temps, node.temp_shapes):
            buf, heap = em.open_buffer(name, tuple(shp), ts, name, f"{node.step} intermediate")
            opened.append((buf, heap))
            tviews.append(View(buf, tuple(Const(0) for _ in shp), tuple(shp), ts))
        for stage, ws in zip(node.stages, node.wiring):
            em.out(f"/* {stage.spec.short()} */")
            em.emit(stage, [views[w] if w >= 0 else tviews[-1 - w] for w in ws])
        for buf, heap in reversed(opened):
            em.close_buffer(buf, heap)

    def node_to_json(self, node, rec):
        return {
            "node": "pipeline",
            "step": node.step,
            "index": node.index,
            "wiring": [list(ws) for ws in node.wiring],
            "temps": [ts.text() for ts in node.temps],
            "temp_shapes": [list(s) for s in node.temp_shapes],
            "stages": [rec(c) for c in node.stages],
        }

    def node_from_json(self, d, spec, rec):
        shapes = tuple(tuple(s) for s in d["temp_shapes"])
        temps = tuple(parse_tensor_spec(t, len(s)).canonical(s, spec.target) for t, s in zip(d["temps"], shapes))
        return Pipeline(
            spec,
            d["step"],
            int(d["index"]),
            tuple(rec(c) for c in d["stages"]),
            tuple(tuple(int(w) for w in ws) for ws in d["wiring"]),
            temps,
            shapes,
        )

    def rule_children_mismatch(self, spec, action, exp):
        wires = wiring(spec, action.args[0], action.args[1])
        if len(wires) != len(exp.children):
            return f"the rules leave {len(exp.children)} stages, the wiring has {len(wires)}"
        for i, (c, ws) in enumerate(zip(exp.children, wires)):
            if len(ws) != len(c.operands):
                return f"stage {i} ({c.kind}) has {len(c.operands)} operands, the wiring names {len(ws)}"
        return None

    # ---- proofs ---------------------------------------------------------------------------
    def program_obligations(self, node, ctx):
        return pipeline_obligations(self, node, ctx)

    def box_obligations(self, prover, head, seq, sp, a):
        return pipeline_box_obligations(prover, head, seq, sp, a)


# ---------------------------------------------------------------------------- proofs
# Proof obligations of pipeline nodes (morello_asp/rewrites/pipeline.py): bufferize
# and the softmax decompositions.
#
# Of a program's node: the rules derive this step with these stages; each stage gets
# buffers of the shapes and dtypes its spec names; intermediates are written whole by a
# stage before any stage reads them (z3: every point of each written buffer is covered);
# stages write only the spec's outputs and intermediates, and every output is written;
# a buffer passed twice to one stage is safe in place (a pointwise kind, the same
# coordinates on both sides); intermediates' layouts are bijections. Their memory, live
# while every stage runs, is summed with the rest of the program's along each path by
# solver/proofs/verify.py (prove_memory, through the family's `allocations`).
#
# Of a memo box: the intermediates fit under the box's lowest limit at their level, and a
# vector size divides their volume, for every spec of the box.


def _covers(what: str, writes: list[tuple[str, tuple[int, ...]]], shape: tuple[int, ...]) -> Obligation:
    """z3: every point of a `shape` buffer lies in some written box (origin 0, extent)."""
    import z3  # z3: on the first proof, not with the package

    from morello_asp.solver.proofs.obligations import Obligation, solve  # z3: on the first proof, not with the package

    p = [z3.Int(f"p{d}") for d in range(len(shape))]
    s = z3.Solver()
    s.add([z3.And(0 <= v, v < n) for v, n in zip(p, shape)])
    inside = [z3.And([v < e for v, e in zip(p, ext)]) for _, ext in writes] or [z3.BoolVal(False)]
    s.add(z3.Not(z3.Or(inside)))
    r, m = solve(s)
    if r == z3.sat:
        return Obligation(what, "refuted", f"point {[m.eval(v).as_long() for v in p]} is written by no stage")
    return Obligation(what, "proved" if r == z3.unsat else "unknown")


def pipeline_obligations(fam, node, ctx) -> list[Obligation]:
    from morello_asp.solver.proofs.obligations import (  # z3: on the first proof, not with the package
        Obligation,
        prove_layout,
    )

    spec = node.spec
    name = f"{node.step} of {spec.short()}"
    out: list[Obligation] = []
    # the rules derive this step, with these stages
    want = fam.action_of(node)
    what = f"{name}: the rules derive it with these stages"
    exp = next((e for e in ctx.expansions(spec) if e.action.family is fam and fam.matches(e.action, want)), None)
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
    import z3  # z3: on the first proof, not with the package

    from morello_asp.solver.proofs.box_space import (  # z3: on the first proof, not with the package
        as_bool,
        mod,
        product_of,
        sym_units,
    )
    from morello_asp.solver.proofs.boxes import value  # z3: on the first proof, not with the package

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
                lambda: as_bool(mod(vol, v) != 0) if v else z3.BoolVal(True),
                lambda m: f"v{v} against {value(m, vol)} values at shape {prover.shape(m, sp)}",
                key,
            )
        )
    return obs


def _declared_temps(sp, step: str) -> int:
    wires = declared_wiring(sp.target.key, loaded_files()).get(step, ())
    return -min((w for ws in wires for w in ws), default=0)
