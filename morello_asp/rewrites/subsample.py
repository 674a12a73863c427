"""subsample: a strided convolution of one filter position copies the image pixels it
reads into a dense channels-last buffer and runs the stride-1 convolution on it (logic
file: encodings/rules/subsample.lp). IR node: Subsample.

    ConvS2(1xFxCxHxWx1x1, img, filters, out)
      --subsample(L)--> alloc p at L: Move(img[b, c, 2h, 2w] -> p); Conv(1xFxCxHxWx1x1, p, filters, out)

Action args: the level name of the new buffer. The load's source is a view of the image
whose steps are the kind's strides (codegen/emitter.py View.steps); the body is the
same spec but for its kind (the stride-1 one of its family, accumulating or not) and its
image, the new buffer, whose pixels are adjacent, so it splits all its rows at once
(rules/spatial_split.lp's spatial_merged).
"""

from __future__ import annotations

from dataclasses import replace
from math import prod
from typing import Any

from morello_asp.codegen.emitter import View
from morello_asp.cost_model import CostModel
from morello_asp.errors import CodegenError
from morello_asp.expr import Const
from morello_asp.ir import Subsample as SubsampleNode
from morello_asp.rewrites.action import Action
from morello_asp.rewrites.base import Rewrite, view_fields
from morello_asp.rewrites.spatial_split import access_coef, conv_dims
from morello_asp.spec import parse_tensor_spec, tensor_text


def action(level: str) -> Action:
    return Action("subsample", (level.upper(),))


def pixels(spec) -> tuple[int, int, int, int]:
    """The shape of the pixels the convolution reads: b x c x h x w."""
    d = conv_dims(spec)
    return (d["b"], d["c"], d["h"], d["w"])


def strides(spec) -> tuple[int, int]:
    """The image's steps along h and w (the coefficients of h and w in its access,
    kind_access/3: 2 for ConvS2's image row 2*h + fh)."""
    return access_coef(spec, 0, 2, "h"), access_coef(spec, 0, 3, "w")


def _units(node, target) -> int:
    """Units of its level the new buffer takes."""
    return target.units(node.new.level, prod(node.load.spec.shape), node.new.dtype.nbytes, node.new.vector_size)


class Subsample(Rewrite):
    name = "subsample"
    atoms = ("subsample",)
    node = SubsampleNode
    node_tag = "subsample"  # the node in program JSON
    primitives = ("subsample",)
    lowers_reshaped_operands = False  # emit_c refuses an image that is already reshaped

    def decode(self, spec, functor, args, ctx, requested):
        return action(args[0])

    def request(self, spec, action, ctx):
        lv = action.args[0]
        ctx.target.level(lv)
        return f"subsample({lv.lower()})", []

    def text(self, action):
        return f"subsample({action.args[0]})"

    def args_to_json(self, action) -> dict[str, Any]:
        return {"level": action.args[0]}

    def args_from_json(self, obj, ranks):
        return action(obj["level"])

    def build(self, spec, exp, kids):
        body_spec = exp.children[exp.keys.index(1)]
        return SubsampleNode(spec, body_spec.operands[0], kids[exp.keys.index(0)], kids[exp.keys.index(1)])

    def action_of(self, node):
        return action(node.new.level)

    def cost(self, node, child_costs, target):
        return CostModel.of(target).subsample(node) + sum(child_costs)

    def allocations(self, node, target):
        return [(target.level(node.new.level).index, _units(node, target))]

    def peak(self, node, child_peaks, target):
        return self.allocating_peak(node, child_peaks, target)

    def list_node(self, node, args, depth, out):
        sh, sw = strides(node.spec)
        nm = out.fresh(out.target.prefix(node.new.level) + "sub" + args[0].lstrip("t"))
        shape = pixels(node.spec)
        out.line(depth, f"subsample {nm}: {tensor_text(node.new, shape)} ← {args[0]}[::{sh}, ::{sw}]:", node)
        out.node(node.load, [args[0], nm], depth + 1)
        out.node(node.body, [nm, *args[1:]], depth + 1)

    def emit_c(self, node, views, em):
        """A new buffer in its own scope: the load copies the pixels read (a view of the
        image stepping by the strides), then the body runs on it."""
        old = views[0]
        if old.axes is not None or old.steps is not None:
            raise CodegenError(f"subsample of {node.spec.short()}: its image is already a reshaped view")
        sh, sw = strides(node.spec)
        shape = pixels(node.spec)
        src = replace(old, shape=shape, ts=node.load.spec.operands[0], steps=(1, 1, sh, sw))
        root = old.buf.root or old.buf.name
        buf, heap = em.open_buffer(root, shape, node.new, root, old.buf.name)
        nv = View(buf, tuple(Const(0) for _ in shape), shape, node.body.spec.operands[0])
        em.emit(node.load, [src, replace(nv, ts=node.load.spec.operands[1])])
        em.emit(node.body, [nv, *views[1:]])
        em.close_buffer(buf, heap)

    def node_to_json(self, node, rec):
        return {"node": "subsample", "new": node.new.text(), "load": rec(node.load), "body": rec(node.body)}

    def node_from_json(self, d, spec, rec):
        shape = pixels(spec)
        new = parse_tensor_spec(d["new"], len(shape)).canonical(shape, spec.target)
        return SubsampleNode(spec, new, rec(d["load"]), rec(d["body"]))

    # ---- proofs ---------------------------------------------------------------------
    def program_obligations(self, node, ctx):
        """The body is the stride-1 convolution of the same dimensions on the new buffer,
        with the filters and output as they were; the load moves the b x c x h x w pixels
        into it; the new buffer's layout is a bijection; and the pixels read, S*y and
        S*x, lie inside the image."""
        import z3

        from morello_asp.solver.proofs.obligations import (  # z3: on the first proof, not with the package
            Obligation,
            prove_layout,
            solve,
        )

        spec, body, load = node.spec, node.body.spec, node.load.spec
        name = f"subsample of {spec.short()}"
        d = conv_dims(spec)
        shape = pixels(spec)
        out = [prove_layout(node.new.layout, shape)]
        what = f"{name}: one filter position, the body the stride-1 convolution on the new buffer"
        bad = []
        if (d["fh"], d["fw"]) != (1, 1):
            bad.append(f"fh = {d['fh']}, fw = {d['fw']}")
        n = len(spec.shape)
        same_family = (
            len(body.shape) == n
            and body.k.dim_names(n) == spec.k.dim_names(n)
            and body.k.access(n)[1:] == spec.k.access(n)[1:]  # filters and output read alike
        )
        if not same_family or strides(body) != (1, 1) or body.k.is_accum != spec.k.is_accum:
            bad.append(f"the body is {body.kind}")
        if tuple(body.shape) != tuple(spec.shape):
            bad.append(f"the body's shape is {'x'.join(map(str, body.shape))}")
        t = body.operands[0]
        if (t.dtype, t.level, t.layout) != (node.new.dtype, node.new.level, node.new.layout):
            bad.append(f"the body's image is {t.text()}, not {node.new.text()}")
        for i in (1, 2):
            was, now = spec.operands[i], body.operands[i]
            if (view_fields(was), was.layout) != (view_fields(now), now.layout):
                bad.append(f"the body's operand {i} is {now.text()}, not {was.text()}")
        if load.kind != "Move" or tuple(load.shape) != shape:
            bad.append(f"the load is {load.short()}")
        elif (load.operands[1].dtype, load.operands[1].level) != (node.new.dtype, node.new.level):
            bad.append(f"the load writes {load.operands[1].text()}")
        out.append(Obligation(what, "refuted", "; ".join(bad)) if bad else Obligation(what, "proved"))
        sh, sw = strides(spec)
        img = spec.operand_shapes[0]
        y, x = z3.Ints("y x")
        s = z3.Solver()
        s.add(0 <= y, y < d["h"], 0 <= x, x < d["w"], z3.Or(sh * y >= img[2], sw * x >= img[3]))
        r, m = solve(s)
        what = f"{name}: every pixel read lies inside the image"
        if r == z3.sat:
            out.append(Obligation(what, "refuted", f"pixel ({sh} * {m.eval(y)}, {sw} * {m.eval(x)}) of {img}"))
        else:
            out.append(Obligation(what, "proved" if r == z3.unsat else "unknown"))
        return out

    def box_obligations(self, prover, head, seq, sp, a):
        """On every spec of the box the filters are 1 x 1 and the new buffer fits under
        the box's lowest limit at its level."""
        import z3

        from morello_asp.solver.proofs.box_space import (  # z3: on the first proof, not with the package
            as_bool,
            sym_units,
        )
        from morello_asp.solver.proofs.boxes import value  # z3: on the first proof, not with the package

        names = sp.kind.dim_names(len(sp.dims))
        dim = {n: sp.dims[names.index(n)] for n in ("b", "c", "h", "w", "fh", "fw")}
        lv = prover.target.level(a.args[0])
        nb = sp.dtypes[0].nbytes
        units = sym_units(prover.target, lv.unit, dim["b"] * dim["c"] * dim["h"] * dim["w"], nb, 0)
        return [
            prover.ob(
                head,
                seq,
                sp,
                "subsample sees one filter position (fh = fw = 1)",
                lambda: z3.Or(as_bool(dim["fh"] != 1), as_bool(dim["fw"] != 1)),
                lambda m: f"fh = {value(m, dim['fh'])}, fw = {value(m, dim['fw'])}",
            ),
            prover.buffer_fits(head, seq, sp, lv, units),
        ]
