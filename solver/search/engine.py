"""The clingo driver: asks the logic files which rewrites apply to a spec and which
sub-specs each leaves, in batches, and decodes the answer into Spec objects.

The rule files are parsed once into clingo ASTs; each batch gets a fresh Control that
receives the parsed rules plus the batch's facts, so no text is re-parsed per call.
Expansions are cached by spec.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from pathlib import Path

import clingo

from morello_asp import kinds
from morello_asp.errors import RuleError, ScheduleError
from morello_asp.layout import Layout
from morello_asp.rewrites import Action, family, for_atom, split_term
from morello_asp.solver.logic import clingo_run
from morello_asp.solver.logic.anonymous_vars import name_anonymous_in_snapshot
from morello_asp.solver.logic.files import contents_hash, is_shipped, read_logic, snapshot, unsnapshot
from morello_asp.solver.logic.rule_check import check_logic_files
from morello_asp.solver.proofs.catalog import prove_catalog_layout_cached
from morello_asp.solver.search.facts import (
    LayoutIds,
    build_child,
    layout_from_symbol,
    operand_fields,
    snake,
    spec_facts,
)
from morello_asp.spec import Spec
from morello_asp.target import Target, as_target, engine_files
from morello_asp.user_cache import pickled

__all__ = ["Action", "Engine", "Expansion", "Fitted", "get_engine"]


@dataclass(frozen=True)
class Expansion:
    action: Action
    children: tuple[Spec, ...]  # ordered by child key
    keys: tuple[int, ...]  # tile: region masks; move: 0 load, 1 body, 2 store; to_accum: 0, 1
    kernel_cost: int | None = None
    alloc: tuple[int, int] | None = None  # (level index, units) the rewrite allocates
    # Shared by a class's expansion and its copies under each limit vector: what the
    # search derives once per class (the IR node its cost and peak are computed from).
    derived: dict = field(default_factory=dict, compare=False, hash=False, repr=False)


def _new_expansion(action: Action, children: tuple[Spec, ...], keys: tuple[int, ...], kernel_cost, alloc) -> Expansion:
    """Expansion(...) without the frozen dataclass's __init__ (a setattr per field): the
    search decodes hundreds of thousands."""
    x = object.__new__(Expansion)
    x.__dict__.update(action=action, children=children, keys=keys, kernel_cost=kernel_cost, alloc=alloc, derived={})
    return x


# A class's expansion and its children under one spec's limits: what the search reads.
Fitted = tuple[Expansion, tuple[Spec, ...]]


def _with_children(e: Expansion, children: tuple[Spec, ...]) -> Expansion:
    """A copy of `e` (sharing its `derived`) with other children: an expansion of a spec
    with limits, for callers other than the search's inner loop."""
    x = object.__new__(Expansion)
    d = x.__dict__
    d.update(e.__dict__)
    d["children"] = children
    return x


@dataclass
class EngineStats:
    calls: int = 0
    specs: int = 0
    seconds: float = 0.0
    cache_hits: int = 0


SPLIT_MIN = 40  # classes per worker below which one in-process call is faster


def _record_end(ended: dict[int, float], i: int, _done) -> None:
    ended.setdefault(i, time.perf_counter())


class Engine:
    def __init__(self, target: str | Target | None = None, rules: tuple[str | Path, ...] = ()):
        self.target = as_target(target)

        self.files = engine_files(self.target, rules)
        # A user's file that is not UTF-8, does not ground, or grounds for ever is reported
        # here (in a worker with a time limit), before this process grounds it.

        check_logic_files(self.files)
        kinds.load(self.files[len(self.files) - len(rules) :] if rules else ())  # the user's kinds, if any

        # The engine grounds copies of the files as they are now (logic_files.snapshot),
        # and its memo tables are keyed by the hash of their contents. The copies are
        # written when the engine first grounds (a warm query may never).
        self._contents = read_logic(self.files)
        self.logic_hash = contents_hash(self._contents)
        self._snapshot: tuple[str, ...] | None = None
        self._snapshot_lock = threading.Lock()
        self._cache: dict[Spec, list[Fitted]] = {}  # spec with limits -> its rewrites that fit
        self._class_cache: dict[Spec, list[Expansion]] = {}
        # Classes sent to clingo whose answers are not read yet: a batch started while
        # another is out does not ground them again (start_expand).
        self._inflight: set[Spec] = set()
        self._limited: dict[tuple[Spec, tuple], Spec] = {}
        self._children: dict[tuple, Spec] = {}  # decoded child atoms -> spec class
        self._classes: dict[Spec, Spec] = {}  # each child class -> its one object
        self._parent_keys: dict[Spec, tuple] = {}  # spec class -> its key as a child's (_like)
        self._action_text: dict[Action, str] = {}  # the order of a class's expansions (_decode)
        self.stats = EngineStats()
        self.rules = tuple(str(r) for r in rules)  # the user's rule files, as given (a memo table records them)
        self.ids = LayoutIds()
        self.tracks_alignment = True  # until the files are read (_load_catalog)
        self.stride_levels: frozenset[str] | None = None
        self.stride_runs = 0
        self.kernels: frozenset[str] = frozenset()
        self._catalog_facts = self._load_catalog()
        # Surface grounding errors (unsafe variables, ...) in user files now, not mid-search
        # (the shipped files ground: _load_catalog just did, and the test suite runs them).

        if not all(is_shipped(f) for f in self.files):
            self._run([], 0)

    def forget(self) -> None:
        """Drop every class's expansions and the child classes decoded so far (not the
        layout ids, which specs carry). Between two searches whose answers are in a memo
        table nothing is lost: the next search reads them from it, and grounds only what
        it does not find. A session compiling a model's specs one after another kept all
        of them: torchvision's ResNet-50 held 13.5 GB after 13 minutes, growing."""
        if self._inflight:
            raise RuntimeError("Engine.forget while a batch is out")
        for d in (self._cache, self._class_cache, self._limited, self._children, self._classes, self._parent_keys):
            d.clear()

    @property
    def _files(self) -> tuple[str, ...]:
        """The snapshot's copies of the files, which clingo grounds; written on first use,
        then without their projections (solver/logic/anonymous_vars.py): the same answers,
        grounded faster (the hash is of what the files say)."""
        if self._snapshot is None:
            with self._snapshot_lock:
                if self._snapshot is None:
                    files = snapshot(self.files, self._contents)
                    name_anonymous_in_snapshot(files)
                    self._snapshot = files
        return self._snapshot

    def _declarations(self) -> dict:
        """What the whole rule set says without any spec: the layout catalog, (rank,
        layout term text) of each layout_cand/3 atom in clingo's order; whether the files
        declare track_alignment/0; the levels stride_read/1 holds for. Grounding the rule
        files for them was a tenth of a warm `query`, so they are remembered in the user's
        cache under the hash of the files (and clingo's version)."""

        def ground() -> dict:
            messages: list[str] = []
            ctl = clingo.Control(["--warn=none"], logger=lambda c, m: messages.append(m))
            try:
                for f in self._files:
                    ctl.load(str(f))
                ctl.ground([("base", [])])
            except RuntimeError:
                raise RuleError("clingo cannot load the logic files:\n" + unsnapshot("\n".join(messages))) from None
            atoms = ctl.symbolic_atoms.by_signature("layout_cand", 3)
            runs = [a.symbol.arguments[0] for a in ctl.symbolic_atoms.by_signature("stride_read_runs", 1)]
            if any(x.type != clingo.SymbolType.Number for x in runs):
                raise RuleError(f"stride_read_runs/1 takes a number of runs, not {', '.join(map(str, runs))}")
            return {
                "layouts": [(a.symbol.arguments[0].number, str(a.symbol.arguments[1])) for a in atoms],
                "track_alignment": any(True for _ in ctl.symbolic_atoms.by_signature("track_alignment", 0)),
                "stride_read": sorted(
                    str(a.symbol.arguments[0]) for a in ctl.symbolic_atoms.by_signature("stride_read", 1)
                ),
                "stride_read_runs": min((x.number for x in runs), default=0),
                "kernels": sorted(str(a.symbol.arguments[0]) for a in ctl.symbolic_atoms.by_signature("tgt_kernel", 1)),
            }

        def well_formed(value) -> bool:
            try:
                return (
                    isinstance(value["track_alignment"], bool)
                    and all(isinstance(x, str) for x in value["stride_read"])
                    and isinstance(value["stride_read_runs"], int)
                    and all(isinstance(k, str) for k in value["kernels"])
                    and all(isinstance(r, int) and isinstance(t, str) for r, t in value["layouts"])
                )
            except (KeyError, TypeError, ValueError):  # an entry of another format
                return False

        return pickled("catalogs", f"{self.logic_hash}-{clingo.__version__}", ground, well_formed)

    def _load_catalog(self) -> list[str]:
        """Number the catalog's layout terms (layout_cand/3) once per engine, and keep what
        the files declare about spec fields (`tracks_alignment`, `stride_levels`)."""
        # Row-major layouts first (ids 0-7 for ranks 1-8): a rewrite that reshapes views
        # (spatial_split) names its children's, and the ids stay put when the catalog grows.

        decl = self._declarations()
        self.tracks_alignment = decl["track_alignment"]
        self.stride_levels = frozenset(x.upper() for x in decl["stride_read"])
        self.stride_runs = decl["stride_read_runs"]
        self.kernels = frozenset(decl["kernels"])  # tgt_kernel/1: the target's kernels, snake case
        facts = [f"layout_row_major({r},{self.ids.id(Layout.row_major(r))})." for r in range(1, 9)]
        for rank, text in decl["layouts"]:
            term = clingo.parse_term(text)
            lay = layout_from_symbol(term)
            proved, ob = prove_catalog_layout_cached(lay, rank)
            if not proved:
                raise RuleError(
                    f"layout_cand offers {lay}, which z3 does not prove: {ob.what}: {ob.status}: {ob.detail}"
                )
            facts.append(f"layout_id({term},{self.ids.id(lay)}).")
        return facts

    # ------------------------------------------------------------------------ clingo
    def _run(self, facts: list[str], nspecs: int) -> list:
        """Ground and solve the rule files with `facts` in this process; the parsed answer."""
        t0 = time.perf_counter()
        parsed = self._check(*clingo_run.parsed_answer(self._files, self._text(facts), nspecs))
        self._count(nspecs, time.perf_counter() - t0)
        return parsed

    def _submit(self, chunks: list[list[str]], sizes: list[int]):
        """Send each chunk of facts to a worker process now; a function that yields
        (chunk index, parsed answer) as each call finishes. Clingo's share of the time
        counts from the calls' start to their ends, not the waits for them."""
        t0 = time.perf_counter()
        # Keyed by chunk index, not by future: a future kept in `ended` would hold the
        # callback that holds `ended`, a reference cycle that left every parsed answer
        # (tens of thousands of objects) to the cyclic garbage collector.
        ended: dict[int, float] = {}
        futs = {}
        for i, f in enumerate(chunks):
            fut = clingo_run.submit(self._files, self._text(f), sizes[i], len(chunks) > 1)
            fut.add_done_callback(functools.partial(_record_end, ended, i))
            futs[fut] = i

        def results():
            last = t0
            for fut in as_completed(futs):
                parsed = self._check(*fut.result())
                end = ended.get(futs[fut], last)
                self._count(sizes[futs[fut]], max(end - last, 0.0))
                last = max(last, end)
                yield futs[fut], parsed

        return results

    def _text(self, facts: list[str]) -> str:
        return "\n".join(self._catalog_facts + facts) + "\n"

    def _count(self, nspecs: int, seconds: float) -> None:
        self.stats.calls += 1
        self.stats.specs += nspecs
        self.stats.seconds += seconds

    @staticmethod
    def _check(rc: int, parsed, errs: str, errors: list[str]) -> list:
        if rc not in (10, 30):
            if rc == 20:
                raise RuleError("the logic files have no answer set (a constraint rejects the input facts)")
            raise RuleError("clingo failed on the logic files:\n" + unsnapshot(errs.strip()))
        if errors:
            raise RuleError("the logic files report errors:\n" + "\n".join(errors))
        return parsed

    # ---------------------------------------------------------------------- decoding
    def _decode(self, specs: list[Spec], parsed: list, requested: dict[int, Action] | None = None):
        out = []
        for sid, (spec, (acts, bads, kcost, allocs)) in enumerate(zip(specs, parsed)):
            exps = []
            for a, kids in acts.items():
                functor, args = split_term(a)
                fam = for_atom(functor)
                action = fam.decode(spec, functor, args, self, requested.get(sid) if requested else None)
                keys = tuple(sorted(kids))
                children = tuple(
                    self._child(kids[k] if kids[k][0] is not None else self._like(spec, kids[k])) for k in keys
                )
                al = allocs.get(a)
                if al is not None:
                    al = (self.target.level(al[0]).index, al[1])
                exps.append(_new_expansion(action, children, keys, fam.kernel_cost(action, kcost), al))
            exps.sort(key=self._text_of)
            out.append((exps, bads))
        return out

    def _text_of(self, e: Expansion) -> str:
        """An expansion's action as text (kept: the same actions recur across classes)."""
        t = self._action_text.get(e.action)
        if t is None:
            t = self._action_text[e.action] = str(e.action)
        return t

    def _like(self, spec: Spec, stated: tuple) -> tuple:
        """The key of a child like its parent (child_like/3): the parent's, with what the
        child's atoms state in place of it."""
        base = self._parent_keys.get(spec)
        if base is None:
            ops = tuple(operand_fields(t, self.ids) for t in spec.operands)
            base = self._parent_keys[spec] = (snake(spec.kind), spec.shape, ops, spec.serial)
        kind, shape, ops, serial = base
        _, dims, opers, more_serial, own_kind = stated
        if dims:
            sh = list(shape)
            for d, x in dims:
                sh[d] = x
            shape = tuple(sh)
        if opers:
            op = list(ops)
            for o, t in opers:
                op[o] = t
            ops = tuple(op)
        return (own_kind or kind, shape, ops, serial or more_serial)

    def _child(self, key: tuple) -> Spec:
        """The spec class a child's atoms describe; the same child recurs under many
        parents, so each distinct key maps to one shared object, and so do keys that
        build equal classes (a view whose stride is dropped): dictionaries keyed by
        classes then find them by identity, without comparing them field by field."""
        spec = self._children.get(key)
        if spec is None:
            kind, shape, ops, serial = key
            spec = build_child(
                kind,
                shape,
                ops,
                serial,
                self.ids,
                self.target,
                self.tracks_alignment,
                self.stride_levels,
                self.stride_runs,
            )
            spec = self._children[key] = self._classes.setdefault(spec, spec)
        return spec

    # -------------------------------------------------------------------------- API
    def expand_many(self, specs: list[Spec]) -> list[list[Expansion]]:
        """Expansions of each spec under its own memory limits. The rules see specs
        without limits (a spec class); the class answer is cached and applied to each
        limit vector here."""
        return [[_with_children(e, kids) for e, kids in fl] for fl in self.start_expand(specs)()]

    def fitted(self, spec: Spec) -> list[Fitted]:
        """`expand`, as the search reads it: (class expansion, children under the spec's
        limits) pairs, with no Expansion copied per limit vector."""
        return self.start_expand([spec])()[0]

    def start_expand(self, specs: list[Spec], split: bool = True) -> Callable[[], list[list[Fitted]]]:
        """`fitted` for many specs, in two halves: the clingo calls for the classes not
        known yet start now, and the function returned waits for them and gives each
        spec's rewrites that fit its limits.
        The search reads one batch's answers while the workers ground the next. A class
        already sent in a batch started earlier is not sent again: that batch's answers
        are read first (the functions are called in the order they were made).
        `split`: a big batch is cut into a call per worker; a caller that keeps a batch
        per worker out itself sends each whole (each call has a fixed cost)."""
        todo: dict[Spec, None] = {}
        for s in specs:
            c = s.without_limits
            if s not in self._cache and c not in self._class_cache and c not in self._inflight:
                todo[c] = None
        self.stats.cache_hits += len(specs) - len(todo)
        parts: list[list[Spec]] = []
        results = None
        if todo:
            classes = list(todo)
            n = clingo_run.jobs() if split and len(classes) >= 2 * SPLIT_MIN else 1
            parts = [classes[i::n] for i in range(n)]
            chunks = []
            for part in parts:
                facts: list[str] = []
                kinds: set = set()  # kinds whose facts this call has
                for i, c in enumerate(part):
                    facts += spec_facts(i, c, self.target, self.ids, kinds)
                chunks.append(facts)
            results = self._submit(chunks, [len(p) for p in parts])
            self._inflight.update(todo)

        def finish() -> list[list[Fitted]]:
            if results is not None:
                try:
                    for j, parsed in results():
                        for c, (exps, _) in zip(parts[j], self._decode(parts[j], parsed)):
                            self._class_cache[c] = exps
                finally:
                    self._inflight.difference_update(todo)
            # A class left to a batch whose answers were never read (its search was
            # stopped) is grounded now.
            lost = [s for s in specs if s not in self._cache and s.without_limits not in self._class_cache]
            if lost:
                self._inflight.difference_update(s.without_limits for s in lost)
                self.start_expand(lost)()
            out = []
            for s in specs:
                exps = self._cache.get(s)
                if exps is None:
                    exps = self._cache[s] = self._apply_limits(s, self._class_cache[s.without_limits])
                out.append(exps)
            return out

        return finish

    def _apply_limits(self, spec: Spec, exps: list[Expansion]) -> list[Fitted]:
        """Drop rewrites whose allocation does not fit; give children the limits left,
        snapped down to a power of two (paper 2.4.4). Children are interned: one object
        per (class, limits), so their hashes are computed once for the whole search."""
        out = []
        interned = self._limited
        for e in exps:
            lims = spec.limits
            if e.alloc is not None:
                li, units = e.alloc
                if units > lims[li]:
                    continue
                left = lims[li] - units
                lims = lims[:li] + ((1 << (left.bit_length() - 1)) if left > 0 else 0,) + lims[li + 1 :]
            kids = []
            for c in e.children:
                k = interned.get((c, lims))
                if k is None:
                    k = interned[(c, lims)] = c.with_limits(lims)
                kids.append(k)
            out.append((e, tuple(kids)))
        return out

    def expand(self, spec: Spec) -> list[Expansion]:
        return self.expand_many([spec])[0]

    def class_expansions(self, spec: Spec) -> list[Expansion]:
        """Every rewrite the rules derive for spec's class, whether it fits spec's memory
        limits or not (`fitted` keeps those that do)."""
        self.fitted(spec)
        return self._class_cache[spec.without_limits]

    def request(self, spec: Spec, action: Action) -> Expansion:
        """Apply one rewrite a user asked for; ScheduleError says why it does not apply."""
        fam = family(action.name)
        term, extra = fam.request(spec, action, self)
        facts = spec_facts(0, spec, self.target, self.ids) + extra
        facts.append(f"requested(0,{term}).")
        ((exps, bads),) = self._decode([spec], self._run(facts, 1), {0: action})
        reasons = bads.get(term, [])
        for e in exps:
            if e.action.name == action.name and fam.matches(e.action, action):
                fitted = self._apply_limits(spec, [e])
                if fitted:
                    return _with_children(*fitted[0])
                lv = self.target.levels[e.alloc[0]]
                reasons.append(
                    f"the new buffer needs {e.alloc[1]} {lv.unit}s of {lv.name} but only {spec.limits[e.alloc[0]]} "
                    "are left"
                )
        why = "; ".join(dict.fromkeys(reasons)) or "no rule derives it"
        raise ScheduleError(f"{action} does not apply to {spec}: {why}")


_ENGINES: dict = {}


def drop_engines() -> None:
    """Forget every engine get_engine keeps (and the expansions each caches), so a
    long-running process (benchmarks/fuzz.py) bounds its memory; the next get_engine
    builds a new one."""
    _ENGINES.clear()


def get_engine(target: str | Target | None = None, rules: tuple = ()) -> Engine:
    """One engine per target (by its files) and rule files, kept for the process."""
    tgt = as_target(target)
    key = (tgt.key, tuple(str(r) for r in rules))
    if key not in _ENGINES:
        _ENGINES[key] = Engine(tgt, tuple(rules))
    return _ENGINES[key]
