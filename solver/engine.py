"""The clingo driver: asks the logic files which rewrites apply to a spec and which
sub-specs each leaves, in batches, and decodes the answer into Spec objects.

The rule files are parsed once into clingo ASTs; each batch gets a fresh Control that
receives the parsed rules plus the batch's facts, so no text is re-parsed per call.
Expansions are cached by spec.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import clingo
from clingo import ast as cast

from morello_asp.errors import RuleError, ScheduleError
from morello_asp.layout import Layout
from morello_asp.spec import Spec
from morello_asp.target import ENCODINGS, Target, get_target

from .facts import (
    build_child, camel, kind_name, layout_facts, layout_from_symbol, layout_term, snake, spec_facts,
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


@dataclass(frozen=True)
class Expansion:
    action: Action
    children: tuple[Spec, ...]  # ordered by child key
    keys: tuple[int, ...]  # tile: region masks; move: 0 load, 1 body, 2 store; to_accum: 0, 1
    kernel_cost: int | None = None


@dataclass
class EngineStats:
    calls: int = 0
    specs: int = 0
    seconds: float = 0.0
    cache_hits: int = 0


def _parse_files(files: list[Path]) -> list:
    stmts: list = []
    messages: list[str] = []
    try:
        cast.parse_files([str(f) for f in files], stmts.append, logger=lambda c, m: messages.append(m))
    except RuntimeError:
        raise RuleError("cannot parse logic files:\n" + "\n".join(messages)) from None
    return stmts


class Engine:
    def __init__(self, target: str | Target = "avx2", rules: tuple[str | Path, ...] = ()):
        self.target = target if isinstance(target, Target) else get_target(target)
        for r in rules:
            if not Path(r).exists():
                raise RuleError(f"rule file not found: {r}")
        self.files = [ENCODINGS / "synth.lp", *self.target.files, *(Path(r).resolve() for r in rules)]
        self._ast = _parse_files(self.files)
        self._cache: dict[Spec, list[Expansion]] = {}
        self.stats = EngineStats()
        # Surface grounding errors (unsafe variables, ...) in user files now, not mid-search.
        self._run([], [])

    # ------------------------------------------------------------------------ clingo
    def _run(self, facts: list[str], specs: list[Spec]) -> list[clingo.Symbol]:
        messages: list[str] = []
        t0 = time.perf_counter()
        ctl = clingo.Control(["--warn=none"], logger=lambda c, m: messages.append(m))
        try:
            with cast.ProgramBuilder(ctl) as b:
                for s in self._ast:
                    b.add(s)
            ctl.add("facts", [], "\n".join(facts))
            ctl.ground([("base", []), ("facts", [])])
        except RuntimeError:
            raise RuleError("clingo failed on the logic files:\n" + "\n".join(messages)) from None
        syms: list[clingo.Symbol] = []
        with ctl.solve(yield_=True) as h:
            for m in h:
                syms = m.symbols(shown=True)
                break
            else:
                raise RuleError("the logic files have no answer set (a constraint rejects the input facts)")
        errors = [s for s in syms if s.name == "error"]
        if errors:
            raise RuleError("the logic files report errors:\n" + "\n".join(str(e.arguments[0]) for e in errors))
        self.stats.calls += 1
        self.stats.specs += len(specs)
        self.stats.seconds += time.perf_counter() - t0
        return syms

    # ---------------------------------------------------------------------- decoding
    def _decode(self, specs: list[Spec], syms, requested: dict[int, tuple[Action, str]] | None = None):
        per: list[dict] = [dict() for _ in specs]
        bads: list[dict] = [dict() for _ in specs]
        for s in syms:
            a = s.arguments
            if s.name in ("action", "bad") or s.name.startswith("child") or s.name == "kernel_cost":
                sid = a[0].number
            else:
                continue
            if s.name == "bad":
                bads[sid].setdefault(str(a[1]), []).append(a[2].string)
                continue
            if s.name == "kernel_cost":
                d = per[sid].setdefault(f"select({a[1]})", {})
                d["kcost"] = a[2].number
                continue
            key = str(a[1])
            d = per[sid].setdefault(key, {})
            if s.name == "action":
                d["sym"] = a[1]
                continue
            i = a[2].number
            c = d.setdefault("children", {}).setdefault(i, {"dims": {}, "ops": {}, "lims": {}, "serial": False})
            if s.name == "child_kind":
                c["kind"] = kind_name(a[3])
            elif s.name == "child_dim":
                c["dims"][a[3].number] = a[4].number
            elif s.name == "child_operand":
                op = a[3].number
                c["ops"][op] = (a[4].name, a[5].name, a[6].number, a[7].number, a[8].number, layout_from_symbol(a[9]))
            elif s.name == "child_serial":
                c["serial"] = True
            elif s.name == "child_limit":
                c["lims"][a[3].name] = a[4].number
        out = []
        for sid, spec in enumerate(specs):
            exps = []
            for key, d in per[sid].items():
                if "sym" not in d:
                    continue
                action = self._action(spec, d["sym"], requested.get(sid) if requested else None)
                kids = d.get("children", {})
                keys = tuple(sorted(kids))
                children = tuple(
                    build_child(kids[k]["kind"], kids[k]["dims"], kids[k]["ops"], kids[k]["serial"], kids[k]["lims"], self.target)
                    for k in keys
                )
                exps.append(Expansion(action, children, keys, d.get("kcost")))
            exps.sort(key=lambda e: str(e.action))
            out.append((exps, bads[sid]))
        return out

    def _action(self, spec: Spec, sym: clingo.Symbol, req) -> Action:
        n = sym.name
        a = sym.arguments
        if n == "tile1":
            d, t, par = (x.number for x in a)
            shape = list(spec.shape)
            shape[d] = t
            return Action("tile", (tuple(shape), bool(par)))
        if n == "tile":
            return req[0]
        if n == "move":
            return Action("move", (a[0].number, a[1].name.upper(), layout_from_symbol(a[2]), a[3].number))
        if n == "select":
            return Action("select", (camel(a[0].name),))
        if n == "to_accum":
            return Action("to_accum")
        raise RuleError(f"a logic file derived an action the engine does not know: {sym}")

    # -------------------------------------------------------------------------- API
    def expand_many(self, specs: list[Spec]) -> list[list[Expansion]]:
        todo = [s for s in dict.fromkeys(specs) if s not in self._cache]
        self.stats.cache_hits += len(specs) - len(todo)
        if todo:
            facts: list[str] = []
            for i, s in enumerate(todo):
                facts += spec_facts(i, s, self.target)
            for s, (exps, _) in zip(todo, self._decode(todo, self._run(facts, todo))):
                self._cache[s] = exps
        return [self._cache[s] for s in specs]

    def expand(self, spec: Spec) -> list[Expansion]:
        return self.expand_many([spec])[0]

    def request(self, spec: Spec, action: Action) -> Expansion:
        """Apply one rewrite a user asked for; ScheduleError says why it does not apply."""
        facts = spec_facts(0, spec, self.target)
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
            term = f"move({op},{lv.lower()},{layout_term(lay)},{v or 0})"
            facts.append(f"req_layout(0,{layout_term(lay)},{lay.full_contiguity()}).")
            facts += layout_facts(lay, rank)
        elif action.name == "select":
            term = f"select({snake(action.args[0])})"
        elif action.name == "to_accum":
            term = "to_accum"
        else:
            raise ScheduleError(f"unknown rewrite {action.name}")
        facts.append(f"requested(0,{term}).")
        (exps, bads), = self._decode([spec], self._run(facts, [spec]), {0: (action, term)})
        reasons = bads.get(term, [])
        for e in exps:
            if self._same(e.action, action):
                return e
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
