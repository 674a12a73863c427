"""The clingo driver: asks the logic files which rewrites apply to a spec and which
sub-specs each leaves, in batches, and decodes the answer into Spec objects.

The rule files are parsed once into clingo ASTs; each batch gets a fresh Control that
receives the parsed rules plus the batch's facts, so no text is re-parsed per call.
Expansions are cached by spec.
"""
from __future__ import annotations

import re
import time
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from pathlib import Path

import clingo

from morello_asp.errors import RuleError, ScheduleError
from morello_asp.spec import Spec
from morello_asp.target import ENCODINGS, Target, get_target, rule_file

from . import clingo_run
from .facts import (
    LayoutIds, build_child, camel, layout_from_symbol, snake, spec_facts,
)


@dataclass(frozen=True)
class Action:
    """A rewrite: tile(shape, parallel) | to_accum() | move(op, level, layout, vsize) | select(kernel)."""

    name: str
    args: tuple = ()

    def text(self) -> str:
        if self.name == "tile":
            shape, par = self.args
            return f"tile([{', '.join(map(str, shape))}]{', parallel' if par else ''})"
        if self.name == "move":
            op, lv, lay, v = self.args
            return f"move_param({op}, {lv}, {lay}{f', v{v}' if v else ''})"
        if self.name == "select":
            return f"select({self.args[0]})"
        return f"{self.name}()"

    __str__ = text

    def to_json(self):
        if self.name == "tile":
            return {"rewrite": "tile", "tile": list(self.args[0]), "parallel": self.args[1]}
        if self.name == "move":
            op, lv, lay, v = self.args
            return {"rewrite": "move", "operand": op, "level": lv, "layout": str(lay), "vector_size": v}
        if self.name == "select":
            return {"rewrite": "select", "kernel": self.args[0]}
        return {"rewrite": self.name}

    @staticmethod
    def from_json(obj, ranks=()) -> "Action":
        """Inverse of to_json; `ranks` (operand ranks of the spec) parses move layouts."""
        from morello_asp.layout import Layout

        r = obj["rewrite"]
        if r == "tile":
            return Action("tile", (tuple(obj["tile"]), bool(obj["parallel"])))
        if r == "move":
            op = obj["operand"]
            return Action("move", (op, obj["level"], Layout.parse(obj["layout"], ranks[op], validate=False), obj["vector_size"]))
        if r == "select":
            return Action("select", (obj["kernel"],))
        return Action(r, ())


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


@dataclass
class EngineStats:
    calls: int = 0
    specs: int = 0
    seconds: float = 0.0
    cache_hits: int = 0


_ACTION = re.compile(r"(\w+)(?:\(([^()]*)\))?$")
SPLIT_MIN = 40  # classes per worker below which one in-process call is faster


class Engine:
    def __init__(self, target: str | Target = "avx2", rules: tuple[str | Path, ...] = ()):
        self.target = target if isinstance(target, Target) else get_target(target)
        self.files = [ENCODINGS / "synth.lp", *self.target.files, *(rule_file(r) for r in rules)]
        self._files = tuple(str(f) for f in self.files)
        self._cache: dict[Spec, list[Expansion]] = {}
        self._class_cache: dict[Spec, list[Expansion]] = {}
        self._limited: dict[tuple[Spec, tuple], Spec] = {}
        self._children: dict[tuple, Spec] = {}  # decoded child atoms -> spec class
        self.stats = EngineStats()
        self.ids = LayoutIds()
        self._catalog_facts = self._load_catalog()
        # Surface grounding errors (unsafe variables, ...) in user files now, not mid-search.
        self._run([], 0)

    def _load_catalog(self) -> list[str]:
        """Number the catalog's layout terms (layout_cand/3) once per engine."""
        messages: list[str] = []
        ctl = clingo.Control(["--warn=none"], logger=lambda c, m: messages.append(m))
        try:
            for f in self.files:
                ctl.load(str(f))
            ctl.ground([("base", [])])
        except RuntimeError:
            raise RuleError("clingo cannot load the logic files:\n" + "\n".join(messages)) from None
        from .verify import prove_catalog_layout

        facts = []
        for a in ctl.symbolic_atoms.by_signature("layout_cand", 3):
            term = a.symbol.arguments[1]
            lay = layout_from_symbol(term)
            ob = prove_catalog_layout(lay, a.symbol.arguments[0].number)
            if ob.status != "proved":
                raise RuleError(f"layout_cand offers {lay}, which z3 does not prove: {ob.what}: {ob.status}: {ob.detail}")
            facts.append(f"layout_id({term},{self.ids.id(lay)}).")
        return facts

    # ------------------------------------------------------------------------ clingo
    def _run(self, facts: list[str], nspecs: int) -> list:
        """Ground and solve the rule files with `facts` in this process; the parsed answer."""
        t0 = time.perf_counter()
        parsed = self._check(*clingo_run.parsed_answer(self._files, self._text(facts), nspecs))
        self._count(nspecs, time.perf_counter() - t0)
        return parsed

    def _run_split(self, chunks: list[list[str]], sizes: list[int]):
        """Ground several chunks of facts side by side in worker processes; yields
        (chunk index, parsed answer) as each finishes."""
        t0 = time.perf_counter()
        futs = {clingo_run.submit(self._files, self._text(f), sizes[i]): i for i, f in enumerate(chunks)}
        for fut in as_completed(futs):
            parsed = self._check(*fut.result())
            self._count(sizes[futs[fut]], time.perf_counter() - t0)
            yield futs[fut], parsed
            t0 = time.perf_counter()

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
            raise RuleError("clingo failed on the logic files:\n" + errs.strip())
        if errors:
            raise RuleError("the logic files report errors:\n" + "\n".join(errors))
        return parsed

    # ---------------------------------------------------------------------- decoding
    def _decode(self, specs: list[Spec], parsed: list, requested: dict[int, tuple[Action, str]] | None = None):
        out = []
        for sid, (spec, (acts, bads, kcost, allocs)) in enumerate(zip(specs, parsed)):
            exps = []
            for a, kids in acts.items():
                action = self._action(spec, a, requested.get(sid) if requested else None)
                keys = tuple(sorted(kids))
                children = tuple(self._child(kids[k]) for k in keys)
                kc = kcost.get(_ACTION.match(a).group(2) or "") if a.startswith("select(") else None
                al = allocs.get(a)
                if al is not None:
                    al = (self.target.level(al[0]).index, al[1])
                exps.append(Expansion(action, children, keys, kc, al))
            exps.sort(key=lambda e: str(e.action))
            out.append((exps, bads))
        return out

    def _child(self, key: tuple) -> Spec:
        """The spec class a child's atoms describe; the same child recurs under many
        parents, so each distinct key maps to one shared object."""
        spec = self._children.get(key)
        if spec is None:
            spec = self._children[key] = build_child(*key, self.ids)
        return spec

    def _action(self, spec: Spec, text: str, req) -> Action:
        m = _ACTION.match(text)
        n, args = m.group(1), (m.group(2).split(",") if m.group(2) else [])
        if n == "tile1":
            d, t, par = (int(x) for x in args)
            shape = list(spec.shape)
            shape[d] = t
            return Action("tile", (tuple(shape), bool(par)))
        if n == "tile":
            return req[0]
        if n == "move":
            return Action("move", (int(args[0]), args[1].upper(), self.ids.layouts[int(args[2])], int(args[3])))
        if n == "select":
            return Action("select", (camel(args[0]),))
        if n == "to_accum":
            return Action("to_accum")
        raise RuleError(f"a logic file derived an action the engine does not know: {text}")

    # -------------------------------------------------------------------------- API
    def expand_many(self, specs: list[Spec]) -> list[list[Expansion]]:
        """Expansions of each spec under its own memory limits. The rules see specs
        without limits (a spec class); the class answer is cached and applied to each
        limit vector here."""
        out = []
        todo: dict[Spec, None] = {}
        for s in specs:
            if s not in self._cache and s.without_limits not in self._class_cache:
                todo[s.without_limits] = None
        self.stats.cache_hits += len(specs) - len(todo)
        if todo:
            classes = list(todo)
            n = clingo_run.jobs() if len(classes) >= 2 * SPLIT_MIN else 1
            parts = [classes[i::n] for i in range(n)]
            chunks = []
            for part in parts:
                facts: list[str] = []
                for i, c in enumerate(part):
                    facts += spec_facts(i, c, self.target, self.ids)
                chunks.append(facts)
            answers = self._run_split(chunks, [len(p) for p in parts]) if n > 1 else [(0, self._run(chunks[0], len(parts[0])))]
            for j, parsed in answers:
                for c, (exps, _) in zip(parts[j], self._decode(parts[j], parsed)):
                    self._class_cache[c] = exps
        for s in specs:
            exps = self._cache.get(s)
            if exps is None:
                exps = self._cache[s] = self._apply_limits(s, self._class_cache[s.without_limits])
            out.append(exps)
        return out

    def _apply_limits(self, spec: Spec, exps: list[Expansion]) -> list[Expansion]:
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
            out.append(Expansion(e.action, tuple(kids), e.keys, e.kernel_cost, e.alloc, e.derived))
        return out

    def expand(self, spec: Spec) -> list[Expansion]:
        return self.expand_many([spec])[0]

    def request(self, spec: Spec, action: Action) -> Expansion:
        """Apply one rewrite a user asked for; ScheduleError says why it does not apply."""
        facts = spec_facts(0, spec, self.target, self.ids)
        if action.name == "tile":
            shape, par = action.args
            if len(shape) != len(spec.shape):
                raise ScheduleError(f"tile {list(shape)} has {len(shape)} sizes; {spec.short()} has {len(spec.shape)} dimensions")
            term = f"tile({int(par)})"
            facts += [f"req_tile(0,{d},{t})." for d, t in enumerate(shape)]
        elif action.name == "move":
            op, lv, lay, v = action.args
            if not 0 <= op < len(spec.operands):
                raise ScheduleError(f"{spec.short()} has no operand {op} (it has {len(spec.operands)})")
            self.target.level(lv)
            rank = len(spec.operand_shapes[op])
            try:
                lay.validate(rank)
            except ValueError as e:
                raise ScheduleError(f"operand {op}: {e}") from None
            lid = self.ids.id(lay)
            term = f"move({op},{lv.lower()},{lid},{v or 0})"
            facts.append(f"req_layout(0,{lid},{lay.full_contiguity()}).")
            facts += self.ids.pack_facts(lay)
        elif action.name == "select":
            term = f"select({snake(action.args[0])})"
        elif action.name == "to_accum":
            term = "to_accum"
        else:
            raise ScheduleError(f"unknown rewrite {action.name}")
        facts.append(f"requested(0,{term}).")
        (exps, bads), = self._decode([spec], self._run(facts, 1), {0: (action, term)})
        reasons = bads.get(term, [])
        for e in exps:
            if self._same(e.action, action):
                fitted = self._apply_limits(spec, [e])
                if fitted:
                    return fitted[0]
                lv = self.target.levels[e.alloc[0]]
                reasons.append(f"the new buffer needs {e.alloc[1]} {lv.unit}s of {lv.name} but only {spec.limits[e.alloc[0]]} are left")
        why = "; ".join(dict.fromkeys(reasons)) or "no rule derives it"
        raise ScheduleError(f"{action} does not apply to {spec}: {why}")

    @staticmethod
    def _same(a: Action, b: Action) -> bool:
        if a.name != b.name:
            return False
        if a.name == "select":
            return snake(a.args[0]) == snake(b.args[0])
        if a.name == "move":
            return a.args[0] == b.args[0] and a.args[1] == b.args[1].upper() and a.args[2] == b.args[2] and (a.args[3] or 0) == (b.args[3] or 0)
        return a.args == b.args


_ENGINES: dict = {}


def get_engine(target: str | Target = "avx2", rules: tuple = ()) -> Engine:
    key = (target if isinstance(target, str) else id(target), tuple(str(r) for r in rules))
    if key not in _ENGINES:
        _ENGINES[key] = Engine(target, tuple(rules))
    return _ENGINES[key]
