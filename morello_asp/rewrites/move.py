"""move_param: give one operand a new buffer at another level, layout, vector size or
dtype. Logic file: encodings/rules/move.lp. IR node: Alloc.

    Spec(.., t, ..) --move_param(i, level, layout, v[, dtype])-->
        alloc t' at level: [load t -> t'] Spec(.., t', ..) [store t' -> t]

Action args: (operand index, level name as in spec text, Layout, vector size or 0),
and a fifth, the new Dtype, for a casting move (term move/5 in the logic files; the
load converts, e.g. bf16 -> f32; only inputs are cast and only to a wider dtype).
Children are keyed 0 load, 1 body, 2 store; a cache move that keeps the layout and
dtype has the body only (the hardware does the copy).
"""

from __future__ import annotations

from typing import Any

from morello_asp.codegen import prefetch
from morello_asp.codegen.emitter import View
from morello_asp.cost_model import CostModel, alloc_units
from morello_asp.dtypes import Dtype
from morello_asp.errors import ScheduleError
from morello_asp.expr import Const
from morello_asp.ir import Alloc
from morello_asp.layout import Layout
from morello_asp.rewrites.action import Action
from morello_asp.rewrites.base import Rewrite, view_fields
from morello_asp.spec import parse_tensor_spec, tensor_text


def action(operand: int, level: str, layout, vector_size: int | None = None, dtype: Dtype | None = None) -> Action:
    args: tuple = (int(operand), level.upper(), layout, vector_size or 0)
    return Action("move", args if dtype is None else (*args, dtype))


def unpack(a: Action) -> tuple:
    """(operand, level, layout, vector size, new dtype or None for a plain move)."""
    op, lv, lay, v, *dt = a.args
    return op, lv, lay, v, (dt[0] if dt else None)


class Move(Rewrite):
    name = "move"
    atoms = ("move",)
    node = Alloc
    node_tag = "alloc"  # the node in program JSON
    primitives = ("move_param",)

    def decode(self, spec, functor, args, ctx, requested):
        dt = Dtype.parse(args[4]) if len(args) > 4 else None
        return action(int(args[0]), args[1], ctx.ids.layouts[int(args[2])], int(args[3]), dt)

    def request(self, spec, action, ctx):
        op, lv, lay, v, dt = unpack(action)
        if not 0 <= op < len(spec.operands):
            raise ScheduleError(f"{spec.short()} has no operand {op} (it has {len(spec.operands)})")
        ctx.target.level(lv)
        rank = len(spec.operand_shapes[op])
        try:
            lay.validate(rank)
        except ValueError as e:
            raise ScheduleError(f"operand {op}: {e}") from None
        lid = ctx.ids.id(lay)
        facts = [f"req_layout(0,{lid},{lay.full_contiguity()})."] + ctx.ids.pack_facts(lay)
        cast = f",{dt.short}" if dt is not None else ""
        return f"move({op},{lv.lower()},{lid},{v or 0}{cast})", facts

    def matches(self, derived, wanted):
        a, b = unpack(derived), unpack(wanted)
        return a[0] == b[0] and a[1] == b[1].upper() and a[2] == b[2] and (a[3] or 0) == (b[3] or 0) and a[4] == b[4]

    def text(self, action):
        op, lv, lay, v, dt = unpack(action)
        return f"move_param({op}, {lv}, {lay}{f', v{v}' if v else ''}{f', dtype={dt}' if dt is not None else ''})"

    def args_to_json(self, action) -> dict[str, Any]:
        op, lv, lay, v, dt = unpack(action)
        d = {"operand": op, "level": lv, "layout": str(lay), "vector_size": v}
        if dt is not None:
            d["dtype"] = dt.short
        return d

    def args_from_json(self, obj, ranks):
        op = obj["operand"]
        dt = Dtype.parse(obj["dtype"]) if obj.get("dtype") else None
        return action(op, obj["level"], Layout.parse(obj["layout"], ranks[op], validate=False), obj["vector_size"], dt)

    def build(self, spec, exp, kids):
        op = exp.action.args[0]
        idx = {k: kids[i] for i, k in enumerate(exp.keys)}
        body_spec = exp.children[exp.keys.index(1)]
        return Alloc(spec, op, body_spec.operands[op], idx[1], idx.get(0), idx.get(2))

    def action_of(self, node):
        old = node.spec.operands[node.operand].dtype
        dt = node.new.dtype if node.new.dtype != old else None
        return action(node.operand, node.new.level, node.new.layout, node.new.vector_size or 0, dt)

    def cost(self, node, child_costs, target):
        return CostModel.of(target).alloc(node) + sum(child_costs)

    def chain(self, node, child_chains, target):
        """An output moved into registers is stored once its sums are done: what chains
        them ends inside the move, and a loop around it runs independent tiles."""
        if node.operand in node.spec.outputs and node.new.level in target.register_levels:
            return 0
        return super().chain(node, child_chains, target)

    def allocations(self, node, target):
        return [(target.level(node.new.level).index, alloc_units(node, target))]

    def peak(self, node, child_peaks, target):
        return self.allocating_peak(node, child_peaks, target)

    def list_node(self, node, args, depth, out):
        shape = node.spec.operand_shapes[node.operand]
        nm = out.fresh(out.target.prefix(node.new.level) + args[node.operand].lstrip("t"))
        out.line(depth, f"alloc {nm}: {tensor_text(node.new, shape)} ← {args[node.operand]}:", node)
        inner = list(args)
        inner[node.operand] = nm
        if node.load is not None:
            out.node(node.load, [args[node.operand], nm], depth + 1)
        out.node(node.body, inner, depth + 1)
        if node.store is not None:
            out.node(node.store, [nm, args[node.operand]], depth + 1)

    def emit_c(self, node, views, em):
        """A copy: a new buffer in its own scope, loaded before and stored after the body.
        A cache move with unchanged layout copies nothing (the hardware does it); where
        the target says how, it prefetches the next iteration's tile (codegen/prefetch.py)."""
        from dataclasses import replace

        i = node.operand
        old = views[i]
        body_ts = node.body.spec.operands[i]
        if node.load is None and node.store is None:
            inner = list(views)
            inner[i] = replace(old, ts=body_ts)
            p = prefetch.plan(em, old, node.new.level)
            if p is not None:
                em.prefetches.append(p)
            em.emit(node.body, inner)
            if p is not None and p in em.prefetches:  # no loop inside took it up (eq is identity)
                em.prefetches.remove(p)
                prefetch.flush(em, [p])
            return
        root = old.buf.root or old.buf.name
        buf, heap = em.open_buffer(root, old.shape, node.new, root, old.buf.name)
        nv = View(buf, tuple(Const(0) for _ in old.shape), old.shape, body_ts)
        if node.load is not None:
            em.emit(node.load, [old, nv])
        inner = list(views)
        inner[i] = nv
        em.emit(node.body, inner)
        if node.store is not None:
            em.emit(node.store, [nv, old])
        em.close_buffer(buf, heap)

    def node_to_json(self, node, rec):
        return {
            "node": "alloc",
            "operand": node.operand,
            "new": node.new.text(),
            "body": rec(node.body),
            "load": rec(node.load) if node.load is not None else None,
            "store": rec(node.store) if node.store is not None else None,
        }

    def node_from_json(self, d, spec, rec):
        op = d["operand"]
        shape = spec.operand_shapes[op]
        new = parse_tensor_spec(d["new"], len(shape)).canonical(shape, spec.target)
        load = rec(d["load"]) if d.get("load") is not None else None
        store = rec(d["store"]) if d.get("store") is not None else None
        return Alloc(spec, op, new, rec(d["body"]), load, store)

    # ---- proofs ---------------------------------------------------------------------
    def program_obligations(self, node, ctx):
        """The new buffer's layout is a bijection onto it (a copy's: a cache move has no
        buffer of its own), and a cast is exact (every value of the old dtype is one of
        the new); memory is checked for the whole program by solver/proofs/verify.py."""
        from morello_asp.solver.proofs.obligations import (  # z3: on the first proof, not with the package
            Obligation,
            prove_cast,
            prove_layout,
        )

        # A cache move that keeps the layout copies nothing: its body sees the same view of
        # the same buffer (proved where that buffer was made), and a view's layout may pad
        # at the view's shape (a 1x1x1 tile of a [0, 2, 1, 2 p(16)] rhs: issue 57's fuzzer).
        cache_move = node.load is None and node.store is None
        obs = [] if cache_move else [prove_layout(node.new.layout, tuple(node.spec.operand_shapes[node.operand]))]
        old = node.spec.operands[node.operand].dtype
        if node.new.dtype != old:
            obs.append(prove_cast(old, node.new.dtype))
        # The children see the new buffer: the body's operand, the load's destination and
        # the store's source have its dtype, level and layout.
        new = (node.new.dtype, node.new.level, node.new.layout)
        seen = [("the body", node.body.spec.operands[node.operand])]
        seen += [("the load", node.load.spec.operands[1])] if node.load is not None else []
        seen += [("the store", node.store.spec.operands[0])] if node.store is not None else []
        what = f"{node.spec.short()}: the children of the move of operand {node.operand} see its new buffer"
        bad = [f"{who} sees {t.text()}" for who, t in seen if (t.dtype, t.level, t.layout) != new]
        obs.append(
            Obligation(what, "refuted", f"{'; '.join(bad)}, not {node.new.text()}")
            if bad
            else Obligation(what, "proved")
        )
        obs.append(_same_spec_around(node))
        return obs

    def box_obligations(self, prover, head, seq, sp, a):
        import z3

        from morello_asp.solver.proofs.box_space import (  # z3: on the first proof, not with the package
            as_bool,
            mod,
            sym_units,
        )
        from morello_asp.solver.proofs.boxes import BoxObligation, value  # z3: on the first proof, not with the package
        from morello_asp.solver.proofs.obligations import prove_cast  # z3: on the first proof, not with the package

        op, level, layout, v, dt = unpack(a)
        v = v or 0
        lv = prover.target.level(level)
        shape = sp.operand_shape(op)
        shape_key = (sp.op_access[op], tuple(tuple(sp.dim_values[d]) for d in sp.op_deps[op]))
        src = Layout.parse(sp.k["ops"][op][1], len(shape), validate=False)
        copies = lv.kind == "register" or layout != src or dt is not None
        obs = []
        if copies:
            obs.append(prover.layout(head, seq, sp, layout, shape, shape_key))
        if dt is not None:
            ob = prove_cast(sp.dtypes[op], dt)
            obs.append(BoxObligation(f"{head}: {ob.what}", ob.status, ob.detail, seq))
        nb = (dt or sp.dtypes[op]).nbytes
        vol = sp.operand_volume(op)
        units = sym_units(prover.target, lv.unit, vol, nb, v)
        obs.append(prover.buffer_fits(head, seq, sp, lv, units, (lv.unit, v, nb, shape_key)))
        if lv.unit == "vector":
            width_ok = v > 0 and v * nb in prover.target.vector_types
            obs.append(
                prover.ob(
                    head,
                    seq,
                    sp,
                    f"v{v} is a vector register and divides every volume",
                    lambda: z3.Or(as_bool(not width_ok), as_bool(mod(vol, v) != 0) if v > 0 else z3.BoolVal(True)),
                    lambda m: f"v{v} of {sp.dtypes[op]} against {value(m, vol)} values at shape {prover.shape(m, sp)}",
                    (v, nb, shape_key),
                )
            )
        return obs


def _same_spec_around(node):
    """A move changes one operand's buffer and nothing else: its body is the same kind
    and shape with the other operands as they were, and its load and store move the
    operand's whole shape. (A program file edited by hand could say otherwise, and the
    C is generated from what each node says.)"""
    from morello_asp.solver.proofs.obligations import Obligation  # z3: on the first proof, not with the package

    spec, body = node.spec, node.body.spec
    what = f"{spec.short()}: the move of operand {node.operand} keeps the kind, the shape and the other operands"
    bad = []
    if body.kind != spec.kind or tuple(body.shape) != tuple(spec.shape) or len(body.operands) != len(spec.operands):
        bad.append(f"the body is {body.short()}")
    else:
        for i, (was, now) in enumerate(zip(spec.operands, body.operands)):
            if i != node.operand and (view_fields(was), was.layout) != (view_fields(now), now.layout):
                bad.append(f"the body's operand {i} is {now.text()}, not {was.text()}")
    shape = tuple(spec.operand_shapes[node.operand])
    for who, child in (("the load", node.load), ("the store", node.store)):
        if child is not None and tuple(child.spec.shape) != shape:
            bad.append(f"{who} moves {'x'.join(map(str, child.spec.shape))}, not {'x'.join(map(str, shape))}")
    return Obligation(what, "refuted", "; ".join(bad)) if bad else Obligation(what, "proved")
