"""What every rewrite family owns (Morello's `scheduling/<family>.rs` is the model).

A family is one logic file in `encodings/rules/` (which rewrites apply, what they leave)
plus one subclass of `Rewrite` here, registered in `morello_asp.rewrites`: how its action
terms are decoded from clingo's answer and requested for manual scheduling, its text and
JSON, the IR node it builds and the inverse, the node's cost, peak memory and JSON, and
its z3 proof obligations for programs and for memo boxes. Every method without a body is
abstract, so a family that forgets one fails when it is registered, not silently later.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from morello_asp.cost_model import CostModel, pow2ceil
from morello_asp.rewrites.action import Action

if TYPE_CHECKING:
    from morello_asp.codegen.emitter import Emitter, View
    from morello_asp.ir import Impl
    from morello_asp.printer import Listing
    from morello_asp.solver.proofs.box_space import BoxSpace
    from morello_asp.solver.proofs.boxes import BoxObligation, BoxProver
    from morello_asp.solver.proofs.obligations import Obligation
    from morello_asp.solver.proofs.verify import ProgramContext
    from morello_asp.solver.search.engine import Expansion
    from morello_asp.solver.search.facts import LayoutIds
    from morello_asp.spec import Spec
    from morello_asp.target import Target


class Context(Protocol):
    """What decoding and requests need from the engine."""

    target: Target
    ids: LayoutIds


class Rewrite(ABC):
    name: ClassVar[str]  # Action.name of its actions
    atoms: ClassVar[tuple[str, ...]]  # functors of its action terms in the logic files
    node: ClassVar[type]  # the IR node class it builds
    node_tag: ClassVar[str]  # the "node" of that class in program JSON
    # The scheduling API's primitives that ask for its actions: methods of specs and
    # programs (morello_asp/schedulable.py) and functions of morello_asp.schedule; a test
    # holds the API to exactly the registered families' primitives.
    primitives: ClassVar[tuple[str, ...]]
    # Whether its C takes operands that are reshaped views (View.axes, View.steps):
    # db verify embeds a spec's operands that claim no adjacency (c0) as such views
    # where the family lowers them (solver/proofs/verify.py, _embedded_views).
    lowers_reshaped_operands: ClassVar[bool] = True

    # ---- the logic files' side ------------------------------------------------------
    @abstractmethod
    def decode(self, spec: Spec, functor: str, args: list[str], ctx: Context, requested: Action | None) -> Action:
        """The action an answer's term `functor(args)` stands for; `requested` is the
        action a user asked for, when the term answers a request."""

    @abstractmethod
    def request(self, spec: Spec, action: Action, ctx: Context) -> tuple[str, list[str]]:
        """The action term and extra facts that ask the logic files for `action`;
        raises ScheduleError when the arguments cannot fit the spec at all."""

    def rule_term(self, spec: Spec, action: Action, ctx: Context) -> str:
        """`action` as the rule files spell it: the term of cand/2, forbid/2 and action/2
        (`explain --terms` prints it beside each action, for users who write rules)."""
        return self.request(spec, action, ctx)[0]

    def matches(self, derived: Action, wanted: Action) -> bool:
        """Whether a derived action is the one a user asked for."""
        return derived == wanted

    def kernel_cost(self, action: Action, costs: dict[str, int]) -> int | None:
        """The kernel cost an answer reports for `action` (kernels only)."""
        return None

    # ---- text and JSON ----------------------------------------------------------------
    @abstractmethod
    def text(self, action: Action) -> str: ...

    @abstractmethod
    def args_to_json(self, action: Action) -> dict[str, Any]: ...

    @abstractmethod
    def args_from_json(self, obj: dict, ranks: tuple[int, ...]) -> Action: ...

    # ---- the IR -------------------------------------------------------------------------
    @abstractmethod
    def build(self, spec: Spec, exp: Expansion, kids: list[Impl]) -> Impl:
        """The IR node the expansion builds, with `kids` as its children in key order."""

    @abstractmethod
    def action_of(self, node: Impl) -> Action:
        """The inverse of build: the action that made `node`."""

    @abstractmethod
    def cost(self, node: Impl, child_costs: list[int], target: Target) -> int:
        """The node's cost from its children's (paper 3: affine in them)."""

    def chain(self, node: Impl, child_chains: list[int], target: Target) -> int:
        """The longest chain of sums into the same registers the node leaves open to its
        parent (a loop around it that adds on to them waits on every one): by default its
        children's longest. A loop whose trips add into the same registers lengthens it,
        a move of the output into registers closes it."""
        return max(child_chains, default=0)

    def cost_floor(self, node: Impl, child_chains: list[int], target: Target) -> int:
        """The least the node costs whatever its children cost, from the chains of sums
        they leave open (the cost model's carried chain): none by default."""
        return 0

    def carried_floor(self, node: Impl, child_chains: list[int], target: Target) -> int:
        """cost_floor for a family whose node may add into the same registers each step
        (its `carries_sum`: ir.Loop, ir.FilterLoop): the latency of the chain it runs."""
        if not node.carries_sum(target.register_levels):  # type: ignore[attr-defined]
            return 0
        return CostModel.of(target).carried_floor(self.chain(node, child_chains, target))

    def allocations(self, node: Impl, target: Target) -> list[tuple[int, int]]:
        """(level index, units) of each buffer the node allocates for its children's
        lifetime (solver/proofs/verify.py adds them up along every path); none by default."""
        return []

    def peak(self, node: Impl, child_peaks: list[tuple[int, ...]], target: Target) -> tuple[int, ...]:
        """Smallest per-level limits the node fits in: by default its children's
        (only a family that allocates adds to them)."""
        n = len(target.levels)
        if len(child_peaks) == 1:  # the common case in the search's inner loop
            return tuple(child_peaks[0][:n])
        if not child_peaks:
            return (0,) * n
        return tuple(map(max, *(p[:n] for p in child_peaks)))

    def allocating_peak(self, node: Impl, child_peaks: list[tuple[int, ...]], target: Target) -> tuple[int, ...]:
        """`peak` for a family that allocates (allocations()): at each level its buffers'
        units plus pow2ceil of what the children need there, because a child's limit is
        snapped down to a power of two after the allocation (paper 2.4.4)."""
        base = Rewrite.peak(self, node, child_peaks, target)
        allocs = self.allocations(node, target)
        if len(allocs) == 1:  # a move's, in the search's inner loop
            li, u = allocs[0]
            return tuple(u + pow2ceil(v) if i == li else v for i, v in enumerate(base))
        per: dict[int, int] = {}
        for li, u in allocs:
            per[li] = per.get(li, 0) + u
        out = list(base)
        for li, u in per.items():
            out[li] = u + pow2ceil(out[li])
        return tuple(out)

    @abstractmethod
    def list_node(self, node: Impl, args: list[str], depth: int, out: Listing) -> None:
        """The node's lines in a program listing (morello_asp/printer.py), its operands
        named `args`; children through out.node(child, names, depth)."""

    @abstractmethod
    def emit_c(self, node: Impl, views: list[View], em: Emitter) -> None:
        """The node's C (codegen/emit.py): `views` are its operands' buffers and origins;
        children through em.emit(child, views)."""

    @abstractmethod
    def node_to_json(self, node: Impl, rec: Callable[[Impl], dict]) -> dict: ...

    @abstractmethod
    def node_from_json(self, d: dict, spec: Spec, rec: Callable[[dict], Impl]) -> Impl: ...

    # ---- proofs ---------------------------------------------------------------------------
    @abstractmethod
    def program_obligations(self, node: Impl, ctx: ProgramContext) -> list[Obligation]:
        """Proof obligations of one node of a program (return [] to state there are
        none); `ctx` gives the target and the rules' expansions of a spec."""

    @abstractmethod
    def box_obligations(
        self, prover: BoxProver, head: str, seq: int, space: BoxSpace, action: Action
    ) -> list[BoxObligation]:
        """z3 obligations of a memo box that stores `action` for all its specs."""

    def rule_children_mismatch(self, spec: Spec, action: Action, exp: Expansion) -> str | None:
        """When the rules' children for `action` on `spec` differ from what the IR node
        runs, why; checked on every spec class of a memo box."""
        return None


_TERM = re.compile(r"([a-z_][A-Za-z0-9_]*)(?:\((.*)\))?$", re.S)


def view_fields(t) -> tuple:
    """What a view shares with the tensor it views (a tile, a fill, a move's other
    operands): dtype, level and vector size. Its layout's text may differ (a view's
    layout is canonical for its own shape)."""
    return (t.dtype, t.level, t.vector_size)


def split_term(text: str) -> tuple[str, list[str]]:
    """`f(a,g(b,c),"x,y")` -> ("f", ["a", "g(b,c)", '"x,y"']): an action term as clingo
    prints it, split at its top-level commas (terms may nest to any depth)."""
    m = _TERM.match(text)
    if m is None:
        raise ValueError(f"not a term: {text!r}")
    inner = m.group(2)
    if inner is None:
        return m.group(1), []
    if "(" not in inner and '"' not in inner:
        return m.group(1), inner.split(",")
    args, depth, start, quoted, i = [], 0, 0, False, 0
    while i < len(inner):
        ch = inner[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(inner[start:i])
            start = i + 1
        i += 1
    args.append(inner[start:])
    return m.group(1), args
