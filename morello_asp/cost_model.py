"""The affine cost model of paper section 3, peak memory and depth.

c(loop)   = ceil(trips / threads if parallel) * (c(body) + loop overhead) + sum c(boundary)
            [+ parallel overhead]   (loop overhead: tgt_loop_overhead/1, 0 if absent, and 0
            for a loop codegen writes out unrolled: one that steps through registers)
            and, for a loop whose every trip adds into the same registers (Loop.carries_sum),
            at least chain * latency - hidden   (tgt_carried_trip/2; none if absent), where
            chain = trips * the chain of sums its body leaves open (morello_asp/cost.py)
c(block)  = sum c(children)
c(alloc)  = m(src) + m(dest) + sum c(children)
            [+ move overhead of the destination level if the move copies: tgt_move_overhead/2]
c(kernel) = the kernel's cost from the target's logic files
m(t)      = lines(t) * weight(level(t)) * (1 if t is contiguous or its runs are whole fetches else 2)

The paper prints the contiguity factor as "[t is contiguous] + 1"; Morello's code
(imp/allocs.rs, move_cost) doubles the cost of *non*-contiguous tensors, which is the
intended meaning, and is what we do, but for a view whose every run is a whole number of
the target's fetches (tgt_fetch_lines/1: the lines its memory system moves together, an
x86 L2's adjacent-line pair): it moves exactly the lines lines(t) counts, as a
contiguous view does. Without the fact every strided view pays double. On a Zen 4 the
doubling priced MobileNetV2's stride-2 depthwise layer in blocks of 32 channels (runs of
128 bytes over a band of the image kept in L1) above whole-pixel tiles that ran 1.8 times
slower (docs/convolutions.md, "Strided views of whole fetches").

`CostModel` holds every term for one target, read from its facts (level weights, line
size, move and loop overheads, parallel overhead and threads); the rewrite families
price their nodes with it, the engine's facts carry its move costs to the rules, and
calibration fits the same terms (codegen/calibration.py). Its terms and this module's
code are in a memo table's key (morello_asp/cost.py, cost_fingerprint).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from morello_asp.ir import Alloc, Loop, Subsample
from morello_asp.spec import TensorSpec
from morello_asp.target import Target


def pow2ceil(x: int) -> int:
    return 0 if x <= 0 else 1 << (x - 1).bit_length()


@dataclass(frozen=True)
class CostModel:
    """Every term of the affine cost model for one target (the module's docstring)."""

    weights: tuple[tuple[str, int], ...]  # per level: cost per line (tgt_level/6)
    line_bytes: int  # tgt_line_bytes/1
    move_overhead: tuple[tuple[str, int], ...]  # per destination level: cost of a copying move
    loop_per_iter: int  # tgt_loop_overhead/1
    carried_trip: int  # tgt_carried_trip/2: the latency of one sum into the same registers ...
    carried_hidden: int  # ... and what of a chain of them the out-of-order window overlaps
    threads: int  # tgt_threads/1
    parallel_setup: int  # tgt_parallel_overhead/2, once per parallel loop
    parallel_per_iter: int  # ... and per iteration
    register_levels: frozenset[str]  # loops through these are unrolled: no loop overhead
    fetch_lines: int = 0  # tgt_fetch_lines/1: a strided view of runs of whole fetches pays single

    @staticmethod
    def of(target: Target) -> CostModel:
        """The target's cost model (one object per target)."""
        return _model(target)

    def terms(self) -> dict[str, int]:
        """Every number of the model by name, as calibration fits them."""
        t = {f"{lv}.line": w for lv, w in self.weights}
        t.update({f"{lv}.move": c for lv, c in self.move_overhead})
        t.update(
            line_bytes=self.line_bytes,
            loop=self.loop_per_iter,
            carried_trip=self.carried_trip,
            carried_hidden=self.carried_hidden,
            threads=self.threads,
            parallel_setup=self.parallel_setup,
            parallel_per_iter=self.parallel_per_iter,
            fetch_lines=self.fetch_lines,
        )
        return t

    def cache_lines(self, ts: TensorSpec, shape) -> int:
        """Cache lines a view touches: runs of adjacent values, each rounded up to lines."""
        vol = prod(shape)
        contig = ts.layout.full_contiguity() if ts.contig is None else ts.contig
        run = ts.layout.contiguous_run(shape, contig) if contig > 0 else 1
        runs = -(-vol // run)
        return runs * -(-(run * ts.dtype.nbytes) // self.line_bytes)

    def move(self, ts: TensorSpec, shape) -> int:
        """m(t): what reading or writing a view at its level costs."""
        weight = dict(self.weights)[ts.level]
        if weight == 0:
            return 0
        c = self.cache_lines(ts, shape) * weight
        return c if ts.is_contiguous() or self.whole_fetches(ts, shape) else 2 * c

    def whole_fetches(self, ts: TensorSpec, shape) -> bool:
        """Every run of the view is a whole number of the target's fetches
        (tgt_fetch_lines/1), so it moves only the lines `cache_lines` counts."""
        if not self.fetch_lines:
            return False
        contig = ts.layout.full_contiguity() if ts.contig is None else ts.contig
        run = ts.layout.contiguous_run(shape, contig) if contig > 0 else 1
        return (run * ts.dtype.nbytes) % (self.fetch_lines * self.line_bytes) == 0

    def alloc(self, node: Alloc) -> int:
        """c(alloc) less its children: both sides of the move, and the copy's overhead."""
        memo = node.__dict__.get("_cost")  # the DP prices one node under many limits
        if memo is not None and memo[0] is self:
            return memo[1]
        shape = node.spec.operand_shapes[node.operand]
        c = self.move(node.spec.operands[node.operand], shape) + self.move(node.new, shape)
        if node.load is not None or node.store is not None:  # a copy, not a cache-only move
            c += dict(self.move_overhead).get(node.new.level, 0)
        object.__setattr__(node, "_cost", (self, c))
        return c

    def subsample(self, node: Subsample) -> int:
        """c(subsample) less its children: the pixels read, the new buffer written and a
        copy's overhead, as a move that copies."""
        shape = tuple(node.load.spec.shape)
        c = self.move(node.load.spec.operands[0], shape) + self.move(node.new, shape)
        return c + dict(self.move_overhead).get(node.new.level, 0)

    def loop(self, node: Loop, body_cost: int, boundary_costs) -> int:
        """c(loop) from its body's and boundaries' costs."""
        trips = node.trips
        if node.parallel:
            trips = -(-trips // self.threads)
        per_iter = self.loop_per_iter
        if per_iter and node.unrolled(self.register_levels):
            per_iter = 0
        total = trips * (body_cost + per_iter) + sum(boundary_costs)
        if node.parallel:
            total += self.parallel_setup + self.parallel_per_iter * trips
        return total

    def carried_floor(self, chain: int) -> int:
        """The least cost of a loop that leaves `chain` sums into the same registers, one
        after the other: each waits on the one before, so the chain runs at the adding
        instruction's latency, less what the out-of-order window overlaps with the work
        around it (tgt_carried_trip/2; 0 without it)."""
        if not self.carried_trip:
            return 0
        return max(0, chain * self.carried_trip - self.carried_hidden)


_MODELS: dict[int, tuple[Target, CostModel]] = {}  # id(target) -> (target, its model)


def _model(target: Target) -> CostModel:
    hit = _MODELS.get(id(target))
    if hit is not None and hit[0] is target:
        return hit[1]
    model = CostModel(
        weights=tuple((lv.name, lv.weight) for lv in target.levels),
        line_bytes=target.line_bytes,
        move_overhead=tuple(sorted(target.move_overhead.items())),
        loop_per_iter=target.loop_per_iter,
        carried_trip=target.carried_trip,
        carried_hidden=target.carried_hidden,
        threads=target.threads,
        parallel_setup=target.parallel_setup,
        parallel_per_iter=target.parallel_per_iter,
        register_levels=frozenset(target.register_levels),
        fetch_lines=target.fetch_lines,
    )
    _MODELS[id(target)] = (target, model)
    return model


def alloc_units(node: Alloc, target: Target) -> int:
    """Units of its level an allocation takes (memory, not cost: the peak's rule)."""
    # The DP prices one node under every limit vector it meets: computed once per node.
    memo = node.__dict__.get("_units")
    if memo is not None and memo[0] is target:
        return memo[1]
    shape = node.spec.operand_shapes[node.operand]
    u = target.units(node.new.level, prod(shape), node.new.dtype.nbytes, node.new.vector_size)
    object.__setattr__(node, "_units", (target, u))
    return u


@dataclass(frozen=True)
class Cost:
    main: int
    peak: tuple[int, ...]
    depth: int
    complete: bool
    levels: tuple[str, ...] = ()  # the target's level names, for `peak`
    chain: int = 0  # the sums into the same registers left open to a parent (cost.py, node_chain)

    def describe(self) -> str:
        peaks = ", ".join(f"{lv} {p}" for lv, p in zip(self.levels, self.peak))
        tail = "" if self.complete else " (partial: open specs count 0)"
        return f"cost {self.main}, peak memory [{peaks}], depth {self.depth}{tail}"

    __str__ = describe
