"""Dynamic programming over specs (paper section 4): the optimal implementation of a
spec is the cheapest applicable rewrite given optimal implementations of the sub-specs
it leaves. The cost model is affine in the children's costs, so this is exact.

Sub-specs are expanded in batches (a thousand specs per clingo round, split across the
workers), smallest first, before they are solved: the expansion phase is most of a cold
search's time.

Nothing is lost when a search stops early. A spec is solved as soon as everything it
depends on is expanded, and decisions are committed to a persistent memo table as they
are made; each batch's expansions are committed too, so a rerun grounds only what was
not grounded yet. SIGINT and SIGTERM stop a search at a safe point (solver/logic/interrupt.py):
`Interrupted` is raised after what is known is committed and the clingo workers are
stopped.
"""

from __future__ import annotations

import atexit
import gc
import heapq
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count

from morello_asp.cost import node_chain, node_cost, node_peak
from morello_asp.errors import NoImplementationError, SpecError
from morello_asp.ir import Impl, SpecHole
from morello_asp.rewrites import node_from_expansion
from morello_asp.solver.logic import clingo_run, interrupt
from morello_asp.solver.memo.table import Decision, DictMemo, MemoTable
from morello_asp.solver.search.engine import Engine, Expansion
from morello_asp.spec import Spec

# Specs per expansion batch, one clingo call each, a batch per worker out at once.
# Smaller batches complete sub-DAGs sooner, so decisions are committed earlier, but each
# call pays a fixed cost: 700 searched 64^3 and 1024^3 a little sooner than 500 or 1000.
BATCH = 700


@dataclass
class SearchStats:
    solved: int = 0
    memo_hits: int = 0
    expanded: int = 0  # specs whose expansions the expansion phase asked for
    queued: int = 0  # specs found by the expansion phase and not yet expanded
    from_table: int = 0  # spec classes whose expansions came from the memo table's cache
    phase: str = "solving"
    started: float = field(default_factory=time.perf_counter)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started


class Progress:
    """The progress display on stderr (tqdm), one bar per stage: while expanding, specs
    expanded out of those known so far (the frontier grows, so no ETA), spec classes
    grounded and specs solved; while solving, specs solved out of those expanded, with
    rate, ETA, memo hits and clingo's share of the time. Redrawn at most every 0.2 s;
    silent when stderr is not a TTY or under --quiet. `show` draws a free-text line
    instead (precompute's)."""

    def __init__(self, enabled: bool | None = None, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._last = 0.0
        self._bar = None
        self._stage: str | None = None

    def update(self, stats: SearchStats, engine: Engine, force: bool = False):
        if not self._due(force):
            return
        if stats.phase == "expanding":
            bar = self._open(
                "expanding",
                "{desc}: {n_fmt}/{total_fmt} specs [{elapsed}, {rate_fmt}{postfix}]",
                " specs",
            )
            bar.total = stats.expanded + stats.queued
            bar.n = stats.expanded
            table = f", {stats.from_table:,} from the table" if stats.from_table else ""
            bar.set_postfix_str(f"{engine.stats.specs:,} classes{table}, {stats.solved:,} solved", False)
        else:
            bar = self._open(
                "solving",
                "{desc}: {percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} specs "
                "[{elapsed}<{remaining}, {rate_fmt}{postfix}]",
                " specs",
            )
            bar.total = max(stats.expanded, stats.solved) or None
            bar.n = stats.solved
            share = engine.stats.seconds / max(stats.elapsed, 1e-9)
            bar.set_postfix_str(f"{stats.memo_hits:,} memo hits, clingo {share:.0%}", False)
        bar.refresh()

    def show(self, text: str, force: bool = False) -> None:
        """Any status line (precompute's, which computes its own ETA), on the same terms."""
        if self._due(force):
            bar = self._open("status", "{desc}", "")
            bar.set_description_str(text, False)
            bar.refresh()

    def _open(self, stage: str, fmt: str, unit: str):
        if self._stage != stage:
            self.done()
            from tqdm import tqdm

            self._bar = tqdm(
                desc=stage,
                file=self.stream,
                bar_format=fmt,
                unit=unit,
                # a pty may report a 0x0 size, which tqdm takes as "no room": then 80x24
                ncols=shutil.get_terminal_size().columns,
                nrows=shutil.get_terminal_size().lines,
                mininterval=0,
                leave=True,
            )
            self._stage = stage
        return self._bar

    def _due(self, force: bool) -> bool:
        if not self.enabled:
            return False
        now = time.perf_counter()
        if not force and now - self._last < 0.2:
            return False
        self._last = now
        return True

    def done(self):
        if self._bar is not None:
            self._bar.close()
        self._bar = None
        self._stage = None


# The search keeps what it learns (decisions, expansions, interned specs), so the heap
# only grows, and Python's cyclic collector rescanned all of it at every 25% of growth:
# at 1024^3, 21 full collections took 17 of the main process's 56 CPU s. After each batch
# what is alive is moved out of the collector's sight (gc.freeze); young objects are
# still collected as usual, and everything is handed back when the search ends
# (gc.unfreeze hands back all, also what a worker froze after fork: one rescan, no loss).
_FREEZING = False  # some search in this process freezes after its batches


def _freeze_gc() -> bool:
    """Start freezing after each batch, unless an enclosing search already does (or the
    collector is off)."""
    global _FREEZING
    if _FREEZING or not gc.isenabled():
        return False
    _FREEZING = True
    return True


def _thaw_gc() -> None:
    global _FREEZING
    _FREEZING = False
    gc.unfreeze()


# When the interpreter exits it collects garbage over the whole heap several times
# before and while it tears down its modules. After a search that heap is what the
# search kept (and what the engine and the memo table cache): the 64^3 search's 600 MB
# took 7 s to tear down, a third of `synth`'s wall time. A process that has made a
# search freezes its heap at exit, so those collections skip it: the files and
# processes the search holds are closed by their own exit handlers, and the operating
# system takes the memory back (Python does not promise to finalize what is left at
# exit anyway).
_FREEZE_AT_EXIT = False


def _freeze_at_exit() -> None:
    global _FREEZE_AT_EXIT
    if not _FREEZE_AT_EXIT:
        _FREEZE_AT_EXIT = True
        atexit.register(gc.freeze)


# For as long as a search runs, the youngest generation is collected every 10,000 new
# objects, not 700: nearly everything the search makes is kept, so a young collection
# finds little (docs/search_speed.md, "A lighter main process": fewer collections, the same peak
# memory).
_YOUNG = 10_000
_tuned = 0  # searches running in this process (one may call another)


@contextmanager
def _young_collections_rarer():
    global _tuned
    saved = gc.get_threshold()
    if not _tuned:
        gc.set_threshold(max(_YOUNG, saved[0]), *saved[1:])
    _tuned += 1
    try:
        yield
    finally:
        _tuned -= 1
        if not _tuned:
            gc.set_threshold(*saved)


WHY_NONE_SPECS = 2000  # how many specs why_none looks at, unless MORELLO_ASP_WHY_NONE_SPECS says


def why_none_budget() -> int:
    """How many specs `why_none` looks at: MORELLO_ASP_WHY_NONE_SPECS, default 2000."""
    return clingo_run.env_number(
        "MORELLO_ASP_WHY_NONE_SPECS", int, WHY_NONE_SPECS, 1, "a whole number of specs, at least 1"
    )


def _specs(n: int) -> str:
    return f"{n} spec{'s' if n != 1 else ''}"


_UNSEEN: list = []  # state.get's default in Search._prefetch: a spec not met yet


class Search:
    def __init__(self, engine: Engine, memo: MemoTable | None = None, progress: Progress | None = None):
        self.engine = engine
        self.target = engine.target
        self.memo = memo if memo is not None else DictMemo()
        self.stats = SearchStats()
        self.progress = progress or Progress(enabled=False)
        self._active: set[Spec] = set()
        # Decisions this search has read or made, by spec: the DP asks for each sub-spec
        # once per parent rewrite, and a table look-up (coordinates, box scan, cost
        # scaling) costs far more than a dict's. A decision once answered stays the
        # answer (a table returns a point's first box, and later boxes come after it).
        self._decided: dict[Spec, Decision] = {}
        _freeze_at_exit()

    def forget(self) -> None:
        """Drop what this search and its engine keep in memory of the specs searched so
        far (decisions read or made, classes' expansions); the memo table keeps the
        answers. For a caller that searches many specs in turn (a model's)."""
        self._decided.clear()
        self.engine.forget()

    # ------------------------------------------------------------ interruption
    @contextmanager
    def _stoppable(self):
        """Around a public entry point: SIGINT/SIGTERM stop the search at a safe point;
        then what is known is committed and the clingo workers are stopped."""
        with interrupt.handling(), _young_collections_rarer():
            try:
                yield
            except KeyboardInterrupt:
                try:
                    self.memo.flush()
                finally:
                    clingo_run.shutdown()
                raise

    # ------------------------------------------------------------------ optimal costs
    def prefetch(self, *roots: Spec, batch: int | None = None) -> None:
        """Expand every spec reachable from the roots that the memo cannot answer, many
        specs per clingo call (one call per spec is dominated by overhead), smallest
        first, solving each spec as soon as all its descendants are expanded. With a memo
        table that keeps expansions (SqliteMemo), classes it holds are read from it
        instead of grounded, and each batch's new ones are committed to it."""
        with self._stoppable():
            self._prefetch(roots, batch or BATCH)

    def _same_target(self, specs) -> None:
        """A spec parsed for another target has another limits vector: refused here in
        one line, not an IndexError deep in the search. (A target is one object per set
        of files, but a spec unpickled in a worker carries a copy: files decide.)"""
        mine = self.target
        for s in specs:
            t = s.target
            if t is not mine and t.files != mine.files:
                raise SpecError(
                    f"{s} is a spec for target {t.name}, this search is for {mine.name}: "
                    f"parse it for that target (parse_spec(text, target))"
                )

    def _prefetch(self, roots, batch: int) -> None:
        self._same_target(roots)
        load = getattr(self.memo, "load_expansions", None)
        save = getattr(self.memo, "save_expansions", None)
        # The engine's per-class cache (spec without limits -> expansions), which the
        # table's cache fills and is filled from.
        classes: dict | None = getattr(self.engine, "_class_cache", None)
        if classes is None:
            load = save = None
            classes = {}
        # Smallest specs first (a spec's sub-specs are never larger), so whole sub-DAGs
        # are expanded early; a spec whose every descendant is expanded ("complete") is
        # solved at once and its decision committed, so an interrupted search keeps
        # decisions from its expansion phase too.
        tie = count()
        # Every spec met so far: None once complete, else the expanded specs waiting for
        # it (one dict, not sets of seen and complete specs: each child is hashed once).
        state: dict[Spec, list[Spec] | None] = {}
        heap = []
        for r in dict.fromkeys(roots):
            if self._lookup(r) is None:
                state[r] = []
                heap.append((r.volume, next(tie), r))
            else:
                state[r] = None
        heapq.heapify(heap)
        waiting: dict[Spec, int] = {}  # expanded, not complete: how many children are not
        self.stats.phase = "expanding"

        def start() -> tuple[list[Spec], list[Spec], Callable[[], list]]:
            """Pop the next batch and start its clingo calls: (batch, classes the table
            did not have, the function that waits for the batch's expansions)."""
            chunk = [heapq.heappop(heap)[2] for _ in range(min(batch, len(heap)))]
            new: list[Spec] = []
            if load is not None:
                todo = list(dict.fromkeys(s.without_limits for s in chunk if s.without_limits not in classes))
                if todo:
                    got = load(todo)
                    classes.update(got)
                    self.stats.from_table += len(got)
                    new = [c for c in todo if c not in got]
            return chunk, new, self.engine.start_expand(chunk, split=ahead == 1)

        # One batch out per clingo worker while this process reads the answers of the
        # one before them and solves what they finish (it lags a few batches behind
        # the smallest specs; any order is exact). A batch is one clingo call: split
        # into a call per worker, each batch paid each call's fixed cost (parsing and
        # grounding the rules), a tenth of the workers' time at 64^3.
        ahead = clingo_run.calls_ahead()
        out: deque = deque()  # started batches, oldest first

        def top_up() -> None:
            while heap and len(out) < ahead:
                out.append(start())

        frozen = _freeze_gc()
        try:
            while heap or out:
                interrupt.check()
                top_up()
                chunk, new, expansions = out.popleft()
                top_up()
                ready: list[Spec] = []
                for s, exps in zip(chunk, expansions()):
                    need = 0
                    for c in dict.fromkeys(c for _, kids in exps for c in kids):
                        st = state.get(c, _UNSEEN)
                        if st is _UNSEEN:
                            if self._lookup(c) is None:
                                heapq.heappush(heap, (c.volume, next(tie), c))
                                st = state[c] = []
                            else:
                                st = state[c] = None
                        if st is not None:
                            st.append(s)
                            need += 1
                    if need:
                        waiting[s] = need
                    else:
                        ready.append(s)
                self.stats.expanded += len(chunk)
                self.stats.queued = len(heap)
                if save is not None and new:
                    save({c: classes[c] for c in new if c in classes})
                done = []
                while ready:  # a spec is pushed only once its last child is complete
                    s = ready.pop()
                    waited_by = state[s] or ()
                    state[s] = None
                    done.append(s)
                    for q in waited_by:
                        waiting[q] -= 1
                        if not waiting[q]:
                            del waiting[q]
                            ready.append(q)
                # The heap may have been empty when this batch was read; its children
                # ground while this process solves what finished.
                top_up()
                for s in done:  # children before parents
                    self._solve(s)
                self.memo.flush()
                self.progress.update(self.stats, self.engine)
                if frozen:
                    gc.freeze()
        finally:
            if frozen:
                _thaw_gc()
            self.stats.phase = "solving"

    def _lookup(self, spec: Spec) -> Decision | None:
        d = self._decided.get(spec)
        if d is None:
            d = self.memo.get(spec)
            if d is not None:
                self._decided[spec] = d
        return d

    def solve(self, spec: Spec) -> Decision:
        """The optimal decision for a spec. What lies below it is expanded in batches
        first, which solves it too: solved depth first, every sub-spec not expanded yet
        would be one clingo call of its own (a cold explain of Matmul 4x4x4 made 816
        calls in 36 s instead of 11 in 2 s)."""
        if self._lookup(spec) is None:
            self.prefetch(spec)
            d = self._lookup(spec)
            if d is not None:
                return d
        return self._solve(spec)

    def _solve(self, spec: Spec) -> Decision:
        """`solve` inside the search, where what it needs is expanded already."""
        d = self._lookup(spec)
        if d is not None:
            self.stats.memo_hits += 1
            return d
        interrupt.check()  # a safe point: nothing half-done
        if spec in self._active:  # a rule set that loops back to an open spec
            return Decision(None, 0, (), 0)
        self._active.add(spec)
        try:
            d = self._solve_uncached(spec)
        finally:
            self._active.discard(spec)
        self.memo.put(spec, d)
        self._decided[spec] = d
        self.stats.solved += 1
        self.progress.update(self.stats, self.engine)
        return d

    def _solve_uncached(self, spec: Spec) -> Decision:
        best: Decision | None = None
        for e, kids in self.engine.fitted(spec):
            d = self.evaluate(spec, e, kids)
            if d is None:
                continue
            if best is None or (d.cost, d.depth, d.chain) < (best.cost, best.depth, best.chain):
                best = d
        if best is None:
            return Decision(None, 0, tuple(0 for _ in spec.limits), 0)
        return best

    def evaluate(self, spec: Spec, e: Expansion, children: tuple[Spec, ...] | None = None) -> Decision | None:
        """Cost of rewrite `e` of `spec` with optimal children (`children`: e's under the
        spec's limits, if e is its class's expansion), or None if a child has none."""
        kids = []
        decided = self._decided
        for c in e.children if children is None else children:
            d = decided.get(c)
            if d is None:
                d = self._solve(c)
            else:  # _solve's first step, without the call
                self.stats.memo_hits += 1
            if not d.feasible:
                return None
            kids.append(d)
        node = e.derived.get("node")
        if node is None:  # the node's cost and peak rules do not depend on the limits
            node = e.derived["node"] = node_from_expansion(spec, e)
        costs: list[int] = [k.cost for k in kids]  # the DP holds int costs
        chains = [k.chain for k in kids]
        cost = node_cost(node, costs, chains, self.target)
        peak = node_peak(node, [k.peak for k in kids], self.target)
        depth = 1 + max((k.depth for k in kids), default=0)
        return Decision(e.action, cost, peak, depth, node_chain(node, chains, self.target))

    # -------------------------------------------------------------- program rebuild
    def build(self, spec: Spec) -> Impl:
        """The optimal program, rebuilt from stored decisions."""
        with self._stoppable():
            return self._build(spec)

    def _build(self, spec: Spec) -> Impl:
        self._prefetch((spec,), BATCH)
        d = self._solve(spec)
        if not d.feasible:
            raise NoImplementationError(self.why_none(spec))
        for e in self._expansions(spec):
            if e.action == d.action:
                return node_from_expansion(spec, e, [self._build(c) for c in e.children])
        raise NoImplementationError(f"stored decision {d.action} no longer applies to {spec} (rules changed?)")

    def why_none(self, spec: Spec, most: int | None = None) -> str:
        """Why a spec the search found no implementation of has none, in one line: the
        specs every way down ends at (breadth first, at most `most` looked at: the budget
        MORELLO_ASP_WHY_NONE_SPECS, default 2000), either because no rewrite applies to
        them at all (the rules derive none, or forbid every one) or because every rewrite
        that applies needs more memory than is left. When the budget runs out before any
        such spec is reached, the message says so, and how to raise it."""
        if most is None:
            most = why_none_budget()
        bare: list[Spec] = []  # no rewrite at all
        over: list[tuple[Spec, list[Expansion]]] = []  # rewrites, none within the limits
        seen = {spec}
        queue = deque([spec])
        while queue and len(seen) <= most:
            s = queue.popleft()
            fitted = self.engine.fitted(s)
            if not fitted:
                every = self.engine.class_expansions(s)
                if every:
                    over.append((s, every))
                else:
                    bare.append(s)
                continue
            for _, kids in fitted:
                for c in kids:
                    if c not in seen and not self._solve(c).feasible:
                        seen.add(c)
                        queue.append(c)
        head = f"no implementation of {spec}"
        rules = "under the rules in force (they derive none, or forbid every one)"
        if bare and bare[0] is spec:
            return f"{head}: no rewrite applies to it {rules}"
        if over and over[0][0] is spec:
            return (
                f"{head}: every rewrite that applies to it exceeds its memory limits ({self._least(spec, over[0][1])})"
            )
        why = []
        if bare:
            more = f" (and to {_specs(len(bare) - 1)} more below it)" if len(bare) > 1 else ""
            why.append(f"no rewrite applies to {bare[0]}{more} {rules}")
        if over:
            s, every = over[0]
            more = f" (and of {_specs(len(over) - 1)} more below it)" if len(over) > 1 else ""
            why.append(f"every rewrite of {s}{more} exceeds its memory limits ({self._least(s, every)})")
        if not why and queue:  # the budget ran out before a way down ended
            return (
                f"{head}: no way down ended among the {len(seen) - 1} specs below it reached before the budget "
                f"MORELLO_ASP_WHY_NONE_SPECS={most} ran out; set it higher (e.g. {most * 10}) to look further"
            )
        if not why:  # only a rule set that loops back to an open spec
            return f"{head}: its rewrites lead back to specs being solved (a rule set that loops)"
        return f"{head}: every way down ends where " + "; and where ".join(why)

    def _least(self, spec: Spec, every: list[Expansion]) -> str:
        """The rewrite of `spec` that needs the least memory, and how much is left."""
        needs = [(e.alloc[1], e.alloc[0], e) for e in every if e.alloc is not None]
        if not needs:
            return "none fits"
        units, li, e = min(needs, key=lambda x: x[0])
        lv = self.target.levels[li]
        plural = "s" if units != 1 else ""
        return f"the least, {e.action}, needs {units} {lv.unit}{plural} of {lv.name}, {spec.limits[li]} left"

    def _expansions(self, spec: Spec) -> list[Expansion]:
        """A spec's rewrites, its class read from the memo table's cache when the table
        has it (a warm rebuild then grounds nothing)."""
        classes: dict | None = getattr(self.engine, "_class_cache", None)
        load = getattr(self.memo, "load_expansions", None)
        if classes is not None and load is not None and spec.without_limits not in classes:
            classes.update(load([spec.without_limits]))
        return self.engine.expand(spec)

    def build_many(self, specs: list[Spec]) -> list[Impl]:
        """Optimal programs for several specs; their sub-specs are expanded together."""
        with self._stoppable():
            self._prefetch(specs, BATCH)
            return [self._build(s) for s in specs]

    def complete(self, impl: Impl) -> Impl:
        """Fill every open spec of a partial program with its optimal implementation."""
        with self._stoppable():
            self._prefetch(tuple(h.spec for _, h in impl.holes()), BATCH)
            return self._fill(impl)

    def _fill(self, impl: Impl) -> Impl:
        if isinstance(impl, SpecHole):
            return self._build(impl.spec)
        kids = impl.children
        if not kids:
            return impl
        return impl.with_children([self._fill(c) for c in kids])

    def explain(self, spec: Spec) -> list[tuple[Expansion, Decision | None]]:
        """Every applicable rewrite with its optimal cost (None: a sub-spec has no implementation)."""
        self._same_target((spec,))
        exps = self._expansions(spec)
        self.prefetch(*(c for e in exps for c in e.children))  # every sub-spec solved in batches
        out = [(e, self.evaluate(spec, e)) for e in exps]
        out.sort(key=lambda x: (x[1] is None, x[1].cost if x[1] else 0, str(x[0].action)))
        return out
