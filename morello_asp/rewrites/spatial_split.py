"""spatial_split: a channels-last ConvAccum of one image row loops over its filter
positions, leaving a MatmulAccum over views (logic file: encodings/rules/spatial_split.lp).
IR node: FilterLoop.

    ConvAccum(1xFxCx1xWxFHxFW, img, filters, out)
      --spatial_split()--> for fh, fw: MatmulAccum(1xWxCxF, img[w + fw, c], filters[c, f], out[w, f])

No action args. The body's views drop and reorder the convolution's dimensions
(codegen/emit.py View.axes): the image view's rows are the pixels w + fw at row fh, the
filters view is the (c, f) plane at (fh, fw), the output view is the row's (w, f) plane.
A strided or dilated convolution (kinds/conv.lp: image column S*w + D*fw) reads the
pixels S*w + D*fw at row D*fh: its image view steps S pixels per row (View.steps), the
coefficients read from the kind's accesses.

A pointwise convolution (fh = fw = 1) over dense tiles of h > 1 rows splits them all at
once (rules/spatial_split.lp's spatial_merged): MatmulAccum(1 x h*w x C x F), its image
and output views the same memory read as rows of h*w pixels (a buffer of shape
(b, H*W, channels) where the operand's is (b, channels, H, W) channels-last).
A pointwise Conv (not an ...Accum) splits the same way into a Matmul, which initialises
its output itself (spatial_assigns).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from morello_asp.codegen.simplify import VarRange
from morello_asp.errors import CodegenError
from morello_asp.expr import Const, Expr, Var
from morello_asp.ir import FilterLoop
from morello_asp.rewrites.action import Action
from morello_asp.rewrites.base import Rewrite

# The body's operand dimensions, as the convolution operand's dimensions (kinds/conv.lp:
# image (b, c, h, w), filters (f, c, fh, fw), output (b, f, h, w)) that index them, and
# the dimensions the filter position moves (image h, w; filters fh, fw).
_BODY_DIMS = {0: (0, 3, 1), 1: (None, 1, 0), 2: (0, 3, 1)}
_MOVED = {0: (2, 3), 1: (2, 3), 2: ()}
# The convolution's dimension each body dimension stands for, per operand (the body is
# MatmulAccum b x m x k x n = 1 x w x c x f: lhs (b, m, k), rhs (b, k, n), out (b, m, n)).
_BODY_NAMES = {0: ("b", "w", "c"), 1: ("b", "c", "f"), 2: ("b", "w", "f")}


def access_coef(spec, op: int, j: int, name: str) -> int:
    """The coefficient of the convolution's dimension `name` in the index of operand
    op's dimension j (kind_access/3): a stride-2 image column 2*w + fw has 2 for w."""
    names = spec.k.dim_names(len(spec.shape))
    return spec.k.access(len(spec.shape))[op][j].coef(names.index(name))


def action() -> Action:
    return Action("spatial_split")


def conv_dims(spec) -> dict[str, int]:
    """The convolution's dimensions by name (kind_dim/3): b, f, c, h, w, fh, fw."""
    return dict(zip(spec.k.dim_names(len(spec.shape)), spec.shape))


def merged(spec) -> bool:
    """The split takes h > 1 rows at once (a pointwise convolution: one filter position)."""
    d = conv_dims(spec)
    return d["h"] > 1 and d["fh"] == 1 and d["fw"] == 1


def body_shape(spec) -> tuple[int, int, int, int]:
    """The MatmulAccum the split leaves: 1 x w x c x f (1 x h*w x c x f merged)."""
    d = conv_dims(spec)
    return (1, d["h"] * d["w"], d["c"], d["f"])


def _pixel_rows(v, op: int, body_ts, shape) -> Any:
    """View v of a channels-last image (op 0) or output (op 2) tile, dense, as rows of
    its pixels: the buffer read as (b, H*W, channels), the view from the tile's first
    pixel. Refused (CodegenError) for a tile that is not whole rows of whole pixels."""
    b, ch, hh, ww = v.buf.shape
    _, tc, th, tw = v.shape
    pdims = v.buf.ts.layout.pdims
    order = [p.dim for p in pdims if v.buf.shape[p.dim] > 1]  # a dimension of one lies anywhere
    last = [d for d in (0, 2, 3, 1) if v.buf.shape[d] > 1]
    if any(p.kind != "dyn" for p in pdims) or order != last or tc != ch or (th > 1 and tw != ww):
        raise CodegenError(f"spatial_split: operand {op}'s tile {v.shape} of {v.buf.shape} is no run of whole pixels")
    o = v.origin
    buf = replace(v.buf, shape=(b, hh * ww, ch), ts=replace(v.buf.ts, layout=body_ts.layout))
    return replace(v, buf=buf, origin=(o[0], o[2] * ww + o[3], o[1]), shape=shape, ts=body_ts, axes=None, steps=None)


class SpatialSplit(Rewrite):
    name = "spatial_split"
    atoms = ("spatial_split",)
    node = FilterLoop
    node_tag = "filter_loop"  # the node in program JSON
    primitives = ("spatial_split",)
    lowers_reshaped_operands = False  # emit_c refuses an operand that is already reshaped

    def decode(self, spec, functor, args, ctx, requested):
        return Action("spatial_split")

    def request(self, spec, action, ctx):
        return "spatial_split", []

    def text(self, action):
        return "spatial_split()"

    def args_to_json(self, action) -> dict[str, Any]:
        return {}

    def args_from_json(self, obj, ranks):
        return Action("spatial_split")

    def build(self, spec, exp, kids):
        return FilterLoop(spec, kids[0])

    def action_of(self, node):
        return Action("spatial_split")

    def cost(self, node, child_costs, target):
        fh, fw = node.positions
        return fh * fw * (child_costs[0] + target.loop_per_iter)

    def chain(self, node, child_chains, target):
        """Positions that add into the same registers chain their bodies' sums (Tile.chain)."""
        if node.carries_sum(target.register_levels):
            fh, fw = node.positions
            return fh * fw * max(child_chains[0], 1)
        return child_chains[0]

    def cost_floor(self, node, child_chains, target):
        return self.carried_floor(node, child_chains, target)

    def list_node(self, node, args, depth, out):
        names, binds = out.views("s", args, node.body.spec)
        fh, fw = node.positions
        out.line(depth, f"spatial_split {fh}×{fw} ({binds}):", node)
        out.node(node.body, names, depth + 1)

    def emit_c(self, node, views, em):
        """for fh, for fw: the body on views that drop and reorder the operands' dimensions."""

        fh, fw = node.positions
        shift: list[Expr] = []
        opened = []
        for name, n in (("fh", fh), ("fw", fw)):
            if n == 1:
                shift.append(Const(0))
                continue
            v = em.fresh_index(name)
            em.out(f"for (int {v} = 0; {v} < {n}; {v}++) {{")
            em.env[v] = VarRange(0, n - 1, 1)
            em.depth += 1
            opened.append(v)
            shift.append(Var(v))
        body = node.body.spec
        spec = node.spec
        kids = []
        for op, v in enumerate(views):
            if v.axes is not None or v.steps is not None:
                raise CodegenError(f"spatial_split of {spec.short()}: operand {op} is already a reshaped view")
            if op != 1 and merged(spec):
                kids.append(_pixel_rows(v, op, body.operands[op], body.operand_shapes[op]))
                continue
            # the filter position moves the image by the dilation (image row h + 2*fh)
            origin = list(v.origin)
            for dim, s, name in zip(_MOVED[op], shift, ("fh", "fw")):
                c = access_coef(spec, op, dim, name)
                origin[dim] = origin[dim] + (s * c if c != 1 else s)
            axes: list[int | None] = [None] * len(v.origin)
            steps = [1] * len(v.origin)
            for i, dim in enumerate(_BODY_DIMS[op]):
                if dim is not None:
                    axes[dim] = i
                    # the stride: the body's next pixel is the image's stride-th (2*w + fw)
                    steps[dim] = access_coef(spec, op, dim, _BODY_NAMES[op][i])
            kids.append(
                replace(
                    v,
                    origin=tuple(origin),
                    shape=body.operand_shapes[op],
                    ts=body.operands[op],
                    axes=tuple(axes),
                    steps=tuple(steps) if any(x != 1 for x in steps) else None,
                )
            )
        em.emit(node.body, kids)
        for v in reversed(opened):
            em.depth -= 1
            em.out("}")
            del em.env[v]

    def node_to_json(self, node, rec):
        return {"node": "filter_loop", "body": rec(node.body)}

    def node_from_json(self, d, spec, rec):
        return FilterLoop(spec, rec(d["body"]))

    # ---- proofs ---------------------------------------------------------------------
    def program_obligations(self, node, ctx):
        """The body is the MatmulAccum the split promises, and at every filter position
        each of its views lies inside the convolution's operand."""
        import z3

        from morello_asp.solver.proofs.obligations import (  # z3: on the first proof, not with the package
            Obligation,
            solve,
        )

        spec, body = node.spec, node.body.spec
        name = f"spatial_split of {spec.short()}"
        d = conv_dims(spec)
        out = []
        kind = "MatmulAccum" if spec.k.is_accum else "Matmul"
        what = f"{name}: the body is {kind} {'x'.join(map(str, body_shape(spec)))} on the operands' dtypes"
        want = (kind, body_shape(spec), tuple(t.dtype for t in spec.operands))
        got = (body.kind, body.shape, tuple(t.dtype for t in body.operands))
        if d["b"] != 1 or (d["h"] != 1 and not merged(spec)):
            why = "the split needs b = 1, and h = 1 or one filter position"
            out.append(Obligation(what, "refuted", f"b = {d['b']} and h = {d['h']}; {why}"))
        elif not spec.k.is_accum and d["fh"] * d["fw"] != 1:
            why = "a convolution that assigns its output splits only at one filter position"
            out.append(Obligation(what, "refuted", f"fh = {d['fh']}, fw = {d['fw']}; {why}"))
        elif got != want:
            out.append(Obligation(what, "refuted", f"expected {want}, program has {got}"))
        else:
            out.append(Obligation(what, "proved"))
        if merged(spec):
            what = f"{name}: the image and output tiles are dense runs of pixels (their rows merge)"
            loose = [
                op
                for op in (0, 2)
                if spec.operands[op].contig not in (None, spec.operands[op].layout.full_contiguity())
            ]
            out.append(
                Obligation(what, "refuted", f"operands {loose} are not contiguous")
                if loose
                else Obligation(what, "proved")
            )
        fh, fw = z3.Ints("fh fw")
        s = z3.Solver()
        s.add(0 <= fh, fh < d["fh"], 0 <= fw, fw < d["fw"])
        img, filt, outp = spec.operand_shapes
        # image rows D*fh + y for y < h (h > 1 only merged: one filter position, stride 1),
        # columns D*fw + S*x for x < w (stride S, dilation D: the kind's coefficients);
        # filters at (fh, fw); the output rows y < h
        sw, dh, dw = access_coef(spec, 0, 3, "w"), access_coef(spec, 0, 2, "fh"), access_coef(spec, 0, 3, "fw")
        s.add(
            z3.Or(
                dh * fh + d["h"] > img[2],
                dw * fw + sw * (d["w"] - 1) + 1 > img[3],
                fh + 1 > filt[2],
                fw + 1 > filt[3],
                outp[2] < d["h"],
            )
        )
        r, m = solve(s)
        what = f"{name}: every filter position's views stay inside the operands"
        if r == z3.sat:
            out.append(Obligation(what, "refuted", f"at fh = {m.eval(fh)}, fw = {m.eval(fw)}"))
        else:
            out.append(Obligation(what, "proved" if r == z3.unsat else "unknown"))
        return out

    def box_obligations(self, prover, head, seq, sp, a):
        """On every spec of the box, b is 1 and h is 1 or the filters 1 x 1, and the filters
        1 x 1 for a convolution that assigns its output (the body's
        shape then follows from the rules' children, checked on every spec class of the
        box; a merged split's dense tiles are proved on each program and checked by
        emit_c)."""
        import z3

        from morello_asp.solver.proofs.box_space import as_bool  # z3: on the first proof, not with the package
        from morello_asp.solver.proofs.boxes import value  # z3: on the first proof, not with the package

        names = sp.kind.dim_names(len(sp.dims))
        b, h = sp.dims[names.index("b")], sp.dims[names.index("h")]
        fh, fw = sp.dims[names.index("fh")], sp.dims[names.index("fw")]
        rows = z3.And(as_bool(h != 1), z3.Or(as_bool(fh != 1), as_bool(fw != 1)))
        neg = z3.Or(as_bool(b != 1), rows)
        what = "spatial_split sees one image row (b = h = 1) or one filter position (b = fh = fw = 1)"
        if not sp.kind.is_accum:  # a Conv that assigns its output: one filter position only
            neg = z3.Or(neg, as_bool(fh != 1), as_bool(fw != 1))
            what = "spatial_split of a Conv sees one filter position (b = fh = fw = 1, and h = 1 or whole rows)"
        return [
            prover.ob(
                head,
                seq,
                sp,
                what,
                neg,
                lambda m: f"b = {value(m, b)}, h = {value(m, h)}, fh = {value(m, fh)}, fw = {value(m, fw)}",
            )
        ]
