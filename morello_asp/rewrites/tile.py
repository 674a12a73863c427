"""tile: loop over tiles of a spec (and, for accumulating kinds, over the reduction:
the "split" rewrite). Logic file: encodings/rules/tile.lp. IR node: Loop.

    Matmul(1x8x8x8) --tile([1, 4, 8, 8])--> for 2 tiles: Matmul(1x4x8x8)

Action args: (tile shape, one size per spec dimension; parallel: bool). The search
derives `tile1(D, T, P)` (one dimension D cut to T, parallel P); a user's request is
`tile(P)` with `req_tile(S, D, T)` facts for every dimension.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from functools import cache
from math import prod
from typing import TYPE_CHECKING, Any

from morello_asp.codegen import prefetch
from morello_asp.codegen.simplify import VarRange
from morello_asp.cost_model import CostModel
from morello_asp.errors import ScheduleError
from morello_asp.expr import Const, Expr, Var
from morello_asp.ir import Loop, loop_regions
from morello_asp.rewrites.action import Action
from morello_asp.rewrites.base import Rewrite, view_fields

if TYPE_CHECKING:
    from morello_asp.codegen.emitter import Emitter, View


def action(shape, parallel: bool = False) -> Action:
    return Action("tile", (tuple(int(x) for x in shape), bool(parallel)))


class Tile(Rewrite):
    name = "tile"
    atoms = ("tile1", "tile")
    node = Loop
    node_tag = "loop"  # the node in program JSON
    primitives = ("tile", "split")

    def decode(self, spec, functor, args, ctx, requested):
        if functor == "tile":
            if requested is None:
                raise ValueError("tile(P) answers a request only")
            return requested
        d, t, par = (int(x) for x in args)
        shape = list(spec.shape)
        shape[d] = t
        return Action("tile", (tuple(shape), bool(par)))

    def request(self, spec, action, ctx):
        shape, par = action.args
        if len(shape) != len(spec.shape):
            raise ScheduleError(
                f"tile {list(shape)} has {len(shape)} sizes; {spec.short()} has {len(spec.shape)} dimensions"
            )
        return f"tile({int(par)})", [f"req_tile(0,{d},{t})." for d, t in enumerate(shape)]

    def rule_term(self, spec, action, ctx):
        """The search's tiles are tile1(D, T, P): dimension D in tiles of T (P: parallel);
        a tile of several dimensions at once is asked for as tile(P) with req_tile/3 facts."""
        shape, par = action.args
        cut = [d for d, (t, n) in enumerate(zip(shape, spec.shape)) if t != n]
        if len(cut) == 1:
            return f"tile1({cut[0]},{shape[cut[0]]},{int(par)})"
        return super().rule_term(spec, action, ctx)

    def text(self, action):
        shape, par = action.args
        return f"tile([{', '.join(map(str, shape))}]{', parallel' if par else ''})"

    def args_to_json(self, action) -> dict[str, Any]:
        return {"tile": list(action.args[0]), "parallel": action.args[1]}

    def args_from_json(self, obj, ranks):
        return Action("tile", (tuple(obj["tile"]), bool(obj["parallel"])))

    def build(self, spec, exp, kids):
        shape, par = exp.action.args
        return Loop(spec, tuple(shape), par, kids[0], tuple(kids[1:]))

    def action_of(self, node):
        return Action("tile", (tuple(node.tile_shape), bool(node.parallel)))

    def cost(self, node, child_costs, target):
        return CostModel.of(target).loop(node, child_costs[0], child_costs[1:])

    def chain(self, node, child_chains, target):
        """A loop whose trips add into the same registers runs its body's chain once a
        trip (a kernel's sum is one link), then each boundary's: they add up."""
        if node.carries_sum(target.register_levels):
            return node.trips * max(child_chains[0], 1) + sum(max(c, 1) for c in child_chains[1:])
        return max(child_chains, default=0)

    def cost_floor(self, node, child_chains, target):
        return self.carried_floor(node, child_chains, target)

    def list_node(self, node, args, depth, out):
        tiles, binds = out.views("t", args, node.body.spec)
        out.line(depth, f"tile{'[p]' if node.parallel else ''} ({binds}):", node)
        out.node(node.body, tiles, depth + 1)
        for b, (off, shp) in zip(node.boundaries, node.regions()):
            out.line(depth + 1, f"boundary at {list(off)} ({'×'.join(map(str, shp))}):")
            out.node(b, args, depth + 2)

    def emit_c(self, node, views, em):
        _emit_loop(em, node, views)

    def node_to_json(self, node, rec):
        return {
            "node": "loop",
            "tile": list(node.tile_shape),
            "parallel": node.parallel,
            "body": rec(node.body),
            "boundaries": [rec(b) for b in node.boundaries],
        }

    def node_from_json(self, d, spec, rec):
        return Loop(spec, tuple(d["tile"]), bool(d["parallel"]), rec(d["body"]), tuple(rec(b) for b in d["boundaries"]))

    def rule_children_mismatch(self, spec, action, exp):
        want = [tuple(action.args[0])] + [s for _, s, main in loop_regions(spec.shape, action.args[0]) if not main]
        got = [c.shape for c in exp.children]
        return None if got == want else f"the rules' children {got} differ from the loop's regions {want}"

    # ---- proofs ---------------------------------------------------------------------
    def program_obligations(self, node, ctx):
        """The tiles and boundary regions cover each point exactly once and stay in
        bounds; children have their regions' shapes; reductions are split legally."""
        import z3

        from morello_asp.solver.proofs.obligations import (  # z3: on the first proof, not with the package
            Obligation,
            solve,
        )

        loop: Loop = node
        spec = loop.spec
        name = f"tile {list(loop.tile_shape)} of {spec.short()}"
        out = []
        shape, tile = spec.shape, loop.tile_shape
        if len(tile) != len(shape) or any(t < 1 or t > n for t, n in zip(tile, shape)):
            return [
                Obligation(
                    f"{name}: tile sizes within the spec", "refuted", f"tile {list(tile)} vs shape {list(shape)}"
                )
            ]
        # Boxes the program actually covers: full tiles of the body's shape, then each
        # boundary body once at its region.
        steps = [n // t for n, t in zip(shape, tile)]
        body_shape = loop.body.spec.shape
        boxes = [("main", [0] * len(shape), [s * b for s, b in zip(steps, body_shape)], body_shape)]
        regions = loop.regions()
        for i, child in enumerate(loop.boundaries):
            off = regions[i][0] if i < len(regions) else tuple(0 for _ in shape)
            boxes.append((f"boundary {i}", list(off), list(child.spec.shape), None))
        p = [z3.Int(f"p{d}") for d in range(len(shape))]
        s = z3.Solver()
        s.add([z3.And(0 <= v, v < n) for v, n in zip(p, shape)])
        inside = [z3.And([z3.And(o <= v, v < o + e) for v, o, e in zip(p, off, ext)]) for _, off, ext, _ in boxes]
        s.add(z3.Sum([z3.If(c, 1, 0) for c in inside]) != 1)
        r, m = solve(s)
        what = f"{name}: every point covered exactly once"
        if r == z3.sat:
            pt = [m.eval(v).as_long() for v in p]
            hits = [b[0] for b, c in zip(boxes, inside) if z3.is_true(m.eval(c))]
            out.append(Obligation(what, "refuted", f"point {pt} is covered by {hits or 'nothing'}"))
        else:
            out.append(Obligation(what, "proved" if r == z3.unsat else "unknown"))
        what = f"{name}: tiles stay in bounds"
        oob = [b for b in boxes if any(o + e > n for o, e, n in zip(b[1], b[2], shape))]
        out.append(
            Obligation(
                what,
                "refuted",
                f"{oob[0][0]} reaches {[o + e for o, e in zip(oob[0][1], oob[0][2])]} in shape {list(shape)}",
            )
            if oob
            else Obligation(what, "proved")
        )
        out.append(self._operands_in_bounds(name, loop, steps, boxes))
        what = f"{name}: body and boundary specs have their regions' shapes"
        exp = [tuple(tile)] + [r[1] for r in regions]
        got = [loop.body.spec.shape] + [c.spec.shape for c in loop.boundaries]
        out.append(
            Obligation(what, "proved")
            if exp == got
            else Obligation(what, "refuted", f"expected {exp}, program has {got}")
        )
        what = f"{name}: body and boundaries are the spec's kind over the same tensors"
        bad = []
        labels = ["body"] + [f"boundary {i}" for i in range(len(loop.boundaries))]
        for label, child in zip(labels, [loop.body, *loop.boundaries]):
            c = child.spec
            if c.kind != spec.kind or len(c.operands) != len(spec.operands):
                bad.append(f"the {label} is {c.short()}")
                continue
            for i, (was, now) in enumerate(zip(spec.operands, c.operands)):
                if view_fields(was) != view_fields(now):
                    bad.append(f"the {label}'s operand {i} is {now.text()}, a view of {was.text()}")
        out.append(Obligation(what, "refuted", "; ".join(bad[:2])) if bad else Obligation(what, "proved"))
        red = [d for d in spec.k.reduction(len(shape)) if tile[d] != shape[d]]
        what = f"{name}: reductions split only where legal"
        if red and not spec.k.is_accum:
            out.append(
                Obligation(what, "refuted", f"{spec.kind} is not accumulating but the loop splits dimension {red[0]}")
            )
        elif red and loop.parallel:
            out.append(Obligation(what, "refuted", f"a parallel loop splits reduction dimension {red[0]}"))
        else:
            out.append(Obligation(what, "proved"))
        return out

    @staticmethod
    def _operands_in_bounds(name, loop, steps, boxes):
        """Every tile's view of every operand lies inside the operand, with the kind's
        affine maps: along a dimension indexed by a sum of spec dimensions the view starts
        at the sum of the tile's origins and spans its child's extent (input tiles
        overlap by the halo)."""
        import z3

        from morello_asp.solver.proofs.obligations import (  # z3: on the first proof, not with the package
            Obligation,
            solve,
        )

        spec = loop.spec
        access = spec.k.access(len(spec.shape))
        children = [loop.body, *loop.boundaries]
        s = z3.Solver()
        bad = []
        labels = []
        for (label, off, _ext, body_shape), child in zip(boxes, children):
            if body_shape is not None:  # the main body: tile i at i * tile along each dimension
                idx = [z3.Int(f"i{d}") for d in range(len(steps))]
                s.add([z3.And(0 <= i, i < n) for i, n in zip(idx, steps)])
                origin = [i * t for i, t in zip(idx, body_shape)]
            else:
                origin = [z3.IntVal(o) for o in off]
            for op, (acc, full, part) in enumerate(zip(access, spec.operand_shapes, child.spec.operand_shapes)):
                for j, a in enumerate(acc):
                    start = z3.Sum([c * origin[d] for d, c in a.terms])
                    bad.append(z3.Or(start < 0, start + part[j] > full[j]))
                    labels.append((label, op, j))
        s.add(z3.Or(bad))
        r, m = solve(s)
        what = f"{name}: every tile's operand views stay inside the operands"
        if r == z3.sat:
            label, op, j = next(lb for lb, c in zip(labels, bad) if z3.is_true(m.eval(c, model_completion=True)))
            return Obligation(what, "refuted", f"{label}: operand {op}'s view leaves dimension {j}")
        return Obligation(what, "proved" if r == z3.unsat else "unknown")

    def box_obligations(self, prover, head, seq, sp, a):
        import z3

        from morello_asp.solver.proofs.box_space import as_bool  # z3: on the first proof, not with the package
        from morello_asp.solver.proofs.boxes import (  # z3: on the first proof, not with the package
            BoxObligation,
            sym_regions,
            value,
        )

        tile, par = tuple(a.args[0]), bool(a.args[1])
        dims, n = sp.dims, len(sp.dims)
        if len(tile) != n:
            return [
                BoxObligation(
                    f"{head}: one tile size per dimension", "refuted", f"{len(tile)} sizes for {n} dimensions", seq
                )
            ]
        key = (tile, tuple(map(tuple, sp.dim_values)))
        regions = cache(lambda: sym_regions(dims, tile))
        p = [z3.Int(f"p{d}") for d in range(n)]
        inside = cache(
            lambda: [
                z3.And(as_bool(r.present), *[z3.And(o <= x, x < o + e) for x, o, e in zip(p, r.offset, r.extent)])
                for r in regions()
            ]
        )
        obs = [
            prover.ob(
                head,
                seq,
                sp,
                "the tile fits every shape",
                lambda: z3.Or([as_bool(t < 1) for t in tile] + [as_bool(t > d) for t, d in zip(tile, dims)]),
                lambda m: f"tile {list(tile)} exceeds shape {prover.shape(m, sp)}",
                key,
            )
        ]

        def cover(m):
            hits = [
                ("main" if r.mask == 0 else f"boundary {r.mask}")
                for r, c in zip(regions(), inside())
                if z3.is_true(m.eval(c))
            ]
            return f"point {[value(m, x) for x in p]} of shape {prover.shape(m, sp)} is covered by {hits or 'nothing'}"

        in_space = lambda: z3.And([z3.And(0 <= x, x < d) for x, d in zip(p, dims)])  # noqa: E731
        obs.append(
            prover.ob(
                head,
                seq,
                sp,
                "main tiles and boundary regions cover every point exactly once",
                lambda: z3.And(in_space(), z3.Sum([z3.If(c, 1, 0) for c in inside()]) != 1),
                cover,
                key,
            )
        )

        def outside():
            return z3.Or(
                [
                    z3.And(as_bool(r.present), as_bool(o + e > d))  # noqa: E731
                    for r in regions()
                    for o, e, d in zip(r.offset, r.extent, dims)
                ]
            )

        obs.append(
            prover.ob(
                head,
                seq,
                sp,
                "every region stays in bounds",
                outside,
                lambda m: f"a region ends past shape {prover.shape(m, sp)}",
                key,
            )
        )
        obs += self._vectors(prover, head, seq, sp, regions, key)
        red = list(sp.kind.reduction(n))
        split = [as_bool(tile[d] != dims[d]) for d in red]
        bad_split = (not sp.kind.is_accum or par) and bool(red)
        neg = z3.Or(
            z3.And(as_bool(bad_split), z3.Or(split) if split else z3.BoolVal(False)), as_bool(par and sp.serial)
        )

        def loop_kind(m):
            if par and sp.serial:
                return "a serial-only spec gets a parallel loop"
            d = next(d for d, s in zip(red, split) if z3.is_true(m.eval(s)))
            why = "a parallel loop" if par else f"non-accumulating {sp.k['kind']}"
            return f"{why} splits reduction dimension {d} (size {value(m, dims[d])}, tile {tile[d]})"

        obs.append(
            prover.ob(head, seq, sp, "reductions split only in accumulating kinds, never in parallel", neg, loop_kind)
        )
        return obs

    @staticmethod
    def _vectors(prover, head, seq, sp, regions, key):
        """Each child's vector-register operands still hold whole vectors."""
        import z3

        from morello_asp.solver.proofs.box_space import (  # z3: on the first proof, not with the package
            as_bool,
            mod,
            product_of,
        )
        from morello_asp.solver.proofs.boxes import value  # z3: on the first proof, not with the package

        vlevels = [i for i, name in enumerate(sp.levels) if sp.target.level(name).unit == "vector"]
        if not vlevels:
            return []
        vrf = vlevels[0]
        ops = [(op, lv, v) for op, (lv, v, *_) in enumerate(sp.ops) if not (isinstance(lv, int) and lv != vrf)]
        if not ops:
            return []
        labels = cache(
            lambda: [(r, op, product_of(sp.operand_shape(op, r.child)), lv, v) for r in regions() for op, lv, v in ops]
        )
        terms = cache(
            lambda: [
                z3.And(
                    as_bool(r.present),
                    as_bool(lv == vrf),
                    as_bool(v > 0),
                    as_bool(mod(vol, v) != 0) if not isinstance(v, int) or v > 0 else z3.BoolVal(False),
                )
                for r, op, vol, lv, v in labels()
            ]
        )

        def explain(m):
            r, op, vol, _, v = next(x for x, t in zip(labels(), terms()) if z3.is_true(m.eval(t)))
            which = "the body" if r.mask == 0 else f"boundary child {r.mask}"
            return f"in {which} operand {op} has {value(m, vol)} values, not whole vectors of {value(m, v)}"

        axes = tuple((op, sp.axis_range(lv), sp.axis_range(v), sp.op_access[op]) for op, lv, v in ops)
        return [
            prover.ob(
                head,
                seq,
                sp,
                "every child holds its vector-register operands in whole vectors",
                lambda: z3.Or(terms()),
                explain,
                (key, vrf, axes),
            )
        ]


# ---- C ----------------------------------------------------------------------------------
def _emit_loop(em: Emitter, node: Loop, views: list[View]) -> None:
    """A C loop nest over the tiles (unrolled when it steps through registers, which a
    counter cannot index), then each boundary body once at its region."""

    spec = node.spec
    access = spec.k.access(len(spec.shape))
    names = spec.k.dim_names(len(spec.shape))
    looped = [d for d, s in enumerate(node.steps) if s > 1]
    unroll = node.unrolled(em.ct.target.register_levels)  # registers cannot be indexed by a counter

    def body_views(shift: dict[int, Expr], sub) -> list[View]:
        out = []
        for i, v in enumerate(views):
            # a sum of spec dimensions moves by the sum of their shifts, each times its
            # coefficient (a tile of t rows of a stride-2 convolution moves 2t image rows)
            for j, a in enumerate(access[i]):
                for d, c in a.terms:
                    if d in shift:
                        v = replace(v, origin=v.shifted(j, shift[d] * c if c != 1 else shift[d]))
            out.append(replace(v, shape=sub.operand_shapes[i], ts=sub.operands[i]))
        return out

    # The loop nest inside a cache move spreads the prefetches of its next tile: the
    # first loop inside takes them and hands them on to the first real loop in its body
    # (prefetch.hand_down / settle). A loop written out unrolled, or an OpenMP loop,
    # spreads only tiles of a move just outside it, and keeps handed-down ones from its
    # body (their trip numbers count the loops that handed them down).
    handed = [p for p in em.prefetches if p.counters]
    if looped and (unroll or node.parallel) and handed:
        em.prefetches = [p for p in em.prefetches if not p.counters]
    else:
        handed = []
    take, em.prefetches = (em.prefetches, []) if looped else ([], em.prefetches)
    if unroll:
        trips = prod(node.steps[d] for d in looped)
        for t, it in enumerate(itertools.product(*(range(node.steps[d]) for d in looped))):
            prefetch.spread(em, take, t, trips)
            shift: dict[int, Expr] = {d: Const(i * node.tile_shape[d]) for d, i in zip(looped, it)}
            em.emit(node.body, body_views(shift, node.body.spec))
    elif looped:
        if node.parallel:
            em.uses_omp = True
            em.out("#pragma omp parallel for" + (f" collapse({len(looped)})" if len(looped) > 1 else ""))
        opened: list[str] = []
        headers: list[tuple[int, str]] = []  # per opened counter: its extent and increment
        shifts: dict[int, Expr] = {}
        span = sum(prod(s) * t.dtype.nbytes for s, t in zip(spec.operand_shapes, spec.operands))  # for prefetch
        for d in looped:
            t, n = node.tile_shape[d], node.steps[d] * node.tile_shape[d]
            p = None if node.parallel else _pack_split(d, t, n, views, access)
            # A loop that crosses pack boundaries runs as two (outer by pack, inner
            # within): the layout's / and % then simplify away.
            bounds = [(n, p), (p, t)] if p else [(n, t)]
            shifts[d] = Const(0)
            for extent, step in bounds:
                v = em.fresh_index(names[d])
                inc = f" += {step}" if step > 1 else "++"
                em.out(f"for (int {v} = 0; {v} < {extent}; {v}{inc}) {{")
                headers.append((extent, inc))
                em.env[v] = VarRange(0, extent - step, step)
                em.loop_bytes[v] = span
                if node.parallel:
                    em.parallel_vars.add(v)
                em.depth += 1
                opened.append(v)
                shifts[d] = shifts[d] + Var(v)
        split = None
        if take and not node.parallel:
            top, passed = len(em.lines), prefetch.hand_down(em, take, opened)
            em.emit(node.body, body_views(shifts, node.body.spec))
            split = prefetch.settle(em, passed, top, opened)
        else:
            if take:
                prefetch.spread(em, take, *prefetch.trip_number(em, opened))
            em.emit(node.body, body_views(shifts, node.body.spec))
        for v in reversed(opened):
            em.depth -= 1
            em.out("}")
            if split is not None:  # the loop's first trips prefetch, the rest run without
                prefetch.split_loop(em, split, v, *headers[-1])
            del em.env[v]
            em.loop_bytes.pop(v, None)
            em.parallel_vars.discard(v)
    else:
        em.emit(node.body, body_views({}, node.body.spec))
    for b, (off, _shp) in zip(node.boundaries, node.regions()):
        em.out(f"/* boundary at [{', '.join(map(str, off))}]: {b.spec.short()} */")
        at: dict[int, Expr] = {d: Const(o) for d, o in enumerate(off) if o}
        em.emit(b, body_views(at, b.spec))
    em.prefetches += handed  # for the loops after this one


def _pack_split(d: int, t: int, n: int, views: list[View], access) -> int | None:
    """A pack size P along loop dimension d of an operand in memory such that the loop
    (tiles of t over n) can run as n/P packs of P/t tiles, or None."""
    for i, v in enumerate(views):
        if v.buf.in_registers:
            continue
        for j, a in enumerate(access[i]):
            for pd in v.buf.ts.layout.pdims if a.single == d else ():
                if (
                    pd.dim == v.buffer_dim(j)
                    and pd.kind == "pack"
                    and t < pd.size < n
                    and pd.size % t == 0
                    and n % pd.size == 0
                ):
                    return pd.size
    return None
