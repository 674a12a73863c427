"""The affine cost model of paper section 3, peak memory and depth.

c(loop)   = ceil(trips / threads if parallel) * (c(body) + loop overhead) + sum c(boundary)
            [+ parallel overhead]   (loop overhead: tgt_loop_overhead/1, 0 if absent, and 0
            for a loop codegen writes out unrolled: one that steps through registers)
c(block)  = sum c(children)
c(alloc)  = m(src) + m(dest) + sum c(children)
            [+ move overhead of the destination level if the move copies: tgt_move_overhead/2]
c(kernel) = the kernel's cost from the target's logic files
m(t)      = lines(t) * weight(level(t)) * (1 if t is contiguous else 2)

The paper prints the contiguity factor as "[t is contiguous] + 1"; Morello's code
(imp/allocs.rs, move_cost) doubles the cost of *non*-contiguous tensors, which is the
intended meaning, and is what we do.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from morello_asp.ir import Alloc, Loop
from morello_asp.spec import TensorSpec
from morello_asp.target import Target


def pow2ceil(x: int) -> int:
    return 0 if x <= 0 else 1 << (x - 1).bit_length()


def cache_lines(ts: TensorSpec, shape, target: Target) -> int:
    """Cache lines a view touches: runs of adjacent values, each rounded up to lines."""
    vol = prod(shape)
    contig = ts.layout.full_contiguity() if ts.contig is None else ts.contig
    run = ts.layout.contiguous_run(shape, contig) if contig > 0 else 1
    runs = -(-vol // run)
    return runs * -(-(run * ts.dtype.nbytes) // target.line_bytes)


def move_cost(ts: TensorSpec, shape, target: Target) -> int:
    lv = target.level(ts.level)
    if lv.weight == 0:
        return 0
    c = cache_lines(ts, shape, target) * lv.weight
    return c if ts.is_contiguous() else 2 * c


def alloc_units(node: Alloc, target: Target) -> int:
    # The DP prices one node under every limit vector it meets: computed once per node.
    memo = node.__dict__.get("_units")
    if memo is not None and memo[0] is target:
        return memo[1]
    shape = node.spec.operand_shapes[node.operand]
    u = target.units(node.new.level, prod(shape), node.new.dtype.nbytes, node.new.vector_size)
    object.__setattr__(node, "_units", (target, u))
    return u


def alloc_cost(node: Alloc, target: Target) -> int:
    memo = node.__dict__.get("_cost")
    if memo is not None and memo[0] is target:
        return memo[1]
    shape = node.spec.operand_shapes[node.operand]
    c = move_cost(node.spec.operands[node.operand], shape, target) + move_cost(node.new, shape, target)
    if node.load is not None or node.store is not None:  # a copy, not a cache-only move
        c += target.move_overhead.get(node.new.level, 0)
    object.__setattr__(node, "_cost", (target, c))
    return c


def loop_cost(node: Loop, body_cost: int, boundary_costs, target: Target) -> int:
    trips = node.trips
    if node.parallel:
        trips = -(-trips // target.threads)
    per_iter = target.loop_per_iter
    if per_iter and node.unrolled(target.register_levels):
        per_iter = 0
    total = trips * (body_cost + per_iter) + sum(boundary_costs)
    if node.parallel:
        total += target.parallel_setup + target.parallel_per_iter * trips
    return total


@dataclass(frozen=True)
class Cost:
    main: int
    peak: tuple[int, ...]
    depth: int
    complete: bool
    levels: tuple[str, ...] = ()  # the target's level names, for `peak`

    def describe(self) -> str:
        peaks = ", ".join(f"{lv} {p}" for lv, p in zip(self.levels, self.peak))
        tail = "" if self.complete else " (partial: open specs count 0)"
        return f"cost {self.main}, peak memory [{peaks}], depth {self.depth}{tail}"

    __str__ = describe
