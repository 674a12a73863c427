"""Implementation IR (paper 2): partial programs whose leaves are kernels or open specs.

Nodes hold their spec and children only; costs, peaks and listings are computed by
`cost.py` and `printer.py` so the tree stays a plain value that JSON, codegen and the
z3 checker can all walk.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product as iproduct
from math import prod
from typing import TYPE_CHECKING, Any

from morello_asp.default_table import DEFAULT_TABLE
from morello_asp.ports import port
from morello_asp.schedulable import Schedulable
from morello_asp.spec import Spec, TensorSpec

if TYPE_CHECKING:
    from morello_asp.codegen.api import BenchResult, Program
    from morello_asp.cost_model import Cost


class Impl(Schedulable):
    """A node of a (partial) program; the scheduling primitives grow its open specs."""

    spec: Spec

    @property
    def children(self) -> tuple[Impl, ...]:
        return ()

    def with_children(self, children) -> Impl:
        return self

    def _program(self) -> Impl:
        return self

    @property
    def cost(self) -> Cost:
        """Cost, peak memory and depth under the spec's target (paper 3)."""
        return port("compute_cost")(self)

    def __str__(self) -> str:
        return port("listing")(self)

    def synthesize_all(self, db: Any = DEFAULT_TABLE, rules=(), progress=None) -> Impl:
        """Fill every open spec with its optimal implementation (paper 2.3)."""
        return port("synthesize_all")(self, db, rules=rules, progress=progress)

    def graph(self):
        """The program's dataflow as a networkx DiGraph (morello_asp/graph.py): buffers,
        pipeline intermediates and the kernels that read and write them."""
        return port("program_graph")(self)

    def write_graph(self, path) -> None:
        """Write the dataflow graph to `path` as Graphviz DOT (a .png: drawn, needs matplotlib)."""
        port("write_graph")(self.graph(), path)

    def to_c(self, rules=(), standalone: bool = False) -> str:
        """The C of the complete program (`rules`: logic files with kernels it uses);
        `standalone`: a whole C program with `main` (codegen/standalone.py)."""
        return port("standalone_c" if standalone else "to_c")(self, self.spec.target, rules)

    def compile(self, rules=()) -> Program:
        """Compile through cffi: a callable on numpy arrays."""
        return port("compile")(self, self.spec.target, rules)

    def benchmark(self, rules=(), **kw: Any) -> BenchResult:
        return self.compile(rules).benchmark(**kw)

    def walk(self) -> Iterator[Impl]:
        yield self
        for c in self.children:
            yield from c.walk()

    def holes(self) -> list[tuple[tuple[int, ...], SpecHole]]:
        """Open specs with their child-index paths."""
        out = []

        def rec(node, path):
            if isinstance(node, SpecHole):
                out.append((path, node))
            for i, c in enumerate(node.children):
                rec(c, path + (i,))

        rec(self, ())
        return out

    @property
    def is_complete(self) -> bool:
        return not self.holes()


@dataclass(frozen=True, eq=False)
class SpecHole(Impl):
    spec: Spec


def loop_regions(shape, tile):
    """Regions a tiling covers: (offset, region shape, is_main) for the full-tile main
    region and one boundary region per non-empty subset R of the non-dividing
    dimensions (remainder along R, the full-tile part elsewhere), ordered by the mask
    sum(2**d for d in R) as the rule files number them. Together they partition the
    iteration space."""
    steps = [s // t for s, t in zip(shape, tile)]
    nondiv = [d for d, (s, t) in enumerate(zip(shape, tile)) if s % t]
    regions = []
    for choice in iproduct((False, True), repeat=len(nondiv)):
        rem = {d for d, c in zip(nondiv, choice) if c}
        mask = sum(1 << d for d in rem)
        off = tuple(steps[d] * tile[d] if d in rem else 0 for d in range(len(shape)))
        shp = tuple(shape[d] % tile[d] if d in rem else steps[d] * tile[d] for d in range(len(shape)))
        if not rem:
            shp = tuple(tile)
        regions.append((mask, off, shp, not rem))
    return [(o, s, m) for _, o, s, m in sorted(regions)]


@dataclass(frozen=True, eq=False)
class Loop(Impl):
    """Loop over full tiles of `tile` shape; each boundary body runs once on its region."""

    spec: Spec
    tile_shape: tuple[int, ...]
    parallel: bool
    body: Impl
    boundaries: tuple[Impl, ...] = ()

    @property
    def children(self):
        return (self.body, *self.boundaries)

    def with_children(self, children):
        return Loop(self.spec, self.tile_shape, self.parallel, children[0], tuple(children[1:]))

    # steps, trips and unrolled are kept on the node: the search costs one node under
    # every limit vector of its spec class.
    @property
    def steps(self) -> tuple[int, ...]:
        got = self.__dict__.get("_steps")
        if got is None:
            got = tuple(s // t for s, t in zip(self.spec.shape, self.tile_shape))
            object.__setattr__(self, "_steps", got)
        return got

    @property
    def trips(self) -> int:
        return prod(self.steps)

    def unrolled(self, register_levels) -> bool:
        """Whether codegen writes this loop out as straight-line code: it steps through an
        operand held in registers, and registers cannot be indexed by a loop counter. Such
        a loop has no per-iteration overhead (the cost model) and no C loop (codegen)."""
        got = self.__dict__.get("_unrolled")
        if got is not None and got[0] == register_levels:
            return got[1]
        looped = {d for d, s in enumerate(self.steps) if s > 1}
        dims = self.spec.k.deps(len(self.spec.shape))
        value = any(
            op.level in register_levels and looped.intersection(dims[i]) for i, op in enumerate(self.spec.operands)
        )
        object.__setattr__(self, "_unrolled", (register_levels, value))
        return value

    def carries_sum(self, register_levels) -> bool:
        """Whether every trip adds into the same registers: an output held in registers
        that no looped dimension indexes (the k loop of a register tile), so each trip's
        sum waits on the one before (the cost model's carried chain)."""
        got = self.__dict__.get("_carries")
        if got is not None and got[0] == register_levels:
            return got[1]
        looped = {d for d, s in enumerate(self.steps) if s > 1}
        dims = self.spec.k.deps(len(self.spec.shape))
        value = bool(looped) and any(
            self.spec.operands[o].level in register_levels and not looped.intersection(dims[o])
            for o in self.spec.outputs
        )
        object.__setattr__(self, "_carries", (register_levels, value))
        return value

    def regions(self):
        """(offset, region shape) of each boundary body, in `boundaries` order."""
        return [(o, s) for o, s, main in loop_regions(self.spec.shape, self.tile_shape) if not main]


@dataclass(frozen=True, eq=False)
class FilterLoop(Impl):
    """A convolution's loop over its filter positions (fh, fw), running `body` (a
    MatmulAccum over views of the operands) at each: the spatial_split rewrite."""

    spec: Spec
    body: Impl

    @property
    def children(self):
        return (self.body,)

    def with_children(self, children) -> Impl:
        return FilterLoop(self.spec, children[0])

    @property
    def positions(self) -> tuple[int, int]:
        """(fh, fw): the filter's extents, found by dimension name."""
        names = self.spec.k.dim_names(len(self.spec.shape))
        return self.spec.shape[names.index("fh")], self.spec.shape[names.index("fw")]

    def carries_sum(self, register_levels) -> bool:
        """Whether the positions add into the same registers (Loop.carries_sum): the
        output does not depend on the filter position, so it does when it is held in
        registers."""
        return any(self.spec.operands[o].level in register_levels for o in self.spec.outputs)


@dataclass(frozen=True, eq=False)
class Subsample(Impl):
    """A strided convolution of one filter position copies the image pixels it reads
    into a dense buffer `new` (`load`, a Move) and runs `body`, the stride-1 convolution,
    on it: the subsample rewrite. Children are [load, body]."""

    spec: Spec
    new: TensorSpec
    load: Impl
    body: Impl

    @property
    def children(self):
        return (self.load, self.body)

    def with_children(self, children) -> Impl:
        return Subsample(self.spec, self.new, children[0], children[1])


@dataclass(frozen=True, eq=False)
class Block(Impl):
    """Children run in order on the same operands (e.g. Zero then MatmulAccum)."""

    spec: Spec
    stmts: tuple[Impl, ...]

    @property
    def children(self):
        return self.stmts

    def with_children(self, children):
        return Block(self.spec, tuple(children))


@dataclass(frozen=True, eq=False)
class Alloc(Impl):
    """move_param: operand `operand` gets a new buffer `new`; optional load before and
    store after the body. Children are [load?, body, store?] in that order."""

    spec: Spec
    operand: int
    new: TensorSpec
    body: Impl
    load: Impl | None = None
    store: Impl | None = None

    @property
    def children(self):
        return tuple(c for c in (self.load, self.body, self.store) if c is not None)

    def with_children(self, children):
        children = list(children)
        load = children.pop(0) if self.load is not None else None
        body = children.pop(0)
        store = children.pop(0) if self.store is not None else None
        return Alloc(self.spec, self.operand, self.new, body, load, store)

    @property
    def body_index(self) -> int:
        return 1 if self.load is not None else 0


@dataclass(frozen=True, eq=False)
class KernelApp(Impl):
    """A target microkernel applied to the spec's operands; `kernel_cost` comes from the target."""

    spec: Spec
    kernel: str
    kernel_cost: int


@dataclass(frozen=True, eq=False)
class Pipeline(Impl):
    """Stages run one after the other on the spec's operands and on intermediate buffers
    the node allocates (paper 2.1: a Compose split by bufferize; the softmax rewrites).
    `wiring[i][j]` says what operand j of stage i is: the spec's operand w for w >= 0,
    intermediate -1 - w otherwise. An intermediate lives while the stages run.
    `step` names the rewrite (bufferize, to_softmax_parts, ...), `index` its Compose cut."""

    spec: Spec
    step: str
    index: int
    stages: tuple[Impl, ...]
    wiring: tuple[tuple[int, ...], ...]
    temps: tuple[TensorSpec, ...]
    temp_shapes: tuple[tuple[int, ...], ...]

    @property
    def children(self):
        return self.stages

    def with_children(self, children):
        return Pipeline(self.spec, self.step, self.index, tuple(children), self.wiring, self.temps, self.temp_shapes)
