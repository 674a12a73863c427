"""Reading clingo's printed answer: the atoms of the contract (encodings/README.md)
grouped per spec, action and child, as plain tuples of strings and ints.

This runs where clingo ran (a worker process, for big batches), so scanning the text is
done in parallel too; the result pickles cheaply and the engine only turns it into Specs.
"""

from __future__ import annotations

import re

from morello_asp.errors import RuleError

# An action term such as tile1(2,4,0), to_accum or f(g(1),h(2,x)): nested up to three
# levels of parentheses (a regular expression cannot count further; parse() checks that
# every shown action was read).
_NEST = r"[^()]*"
for _ in range(2):
    _NEST = r"(?:[^()]|\(" + _NEST + r"\))*"
_ATOM = r"(\w+(?:\(" + _NEST + r"\))?)"
RE = {
    "action": re.compile(r"\baction\((\d+)," + _ATOM + r"\)"),
    "bad": re.compile(r"\bbad\((\d+)," + _ATOM + r',"((?:[^"\\]|\\.)*)"\)'),
    "kind": re.compile(r"\bchild_kind\((\d+)," + _ATOM + r",(\d+),(\w+)\)"),
    "dim": re.compile(r"\bchild_dim\((\d+)," + _ATOM + r",(\d+),(\d+),(\d+)\)"),
    "op": re.compile(r"\bchild_operand\((\d+)," + _ATOM + r",(\d+),(\d+),(\w+),(\w+),(\d+),(\d+),(\d+),(\d+)\)"),
    "stride": re.compile(r"\bchild_stride\((\d+)," + _ATOM + r",(\d+),(\d+),(\d+)\)"),
    "serial": re.compile(r"\bchild_serial\((\d+)," + _ATOM + r",(\d+)\)"),
    "alloc": re.compile(r"\balloc\((\d+)," + _ATOM + r",(\w+),(\d+)\)"),
    "kcost": re.compile(r"\bkernel_cost\((\d+),(\w+),(-?\d+)\)"),
    "error": re.compile(r'\berror\(("(?:[^"\\]|\\.)*"|[^()]*(?:\([^()]*\))?)\)'),
}

_ANY_ACTION = re.compile(r"\baction\(")

# A child, as its atoms describe it: (kind, dims in order, operands in order, serial);
# an operand is (dtype, level, aligned, contiguity, vector size, layout id, stride or "")
# as text.
ChildKey = tuple


def errors(text: str) -> list[str]:
    return [e.strip('"') for e in RE["error"].findall(text)]


def parse(text: str, n: int) -> list[tuple[dict, dict, dict, dict]]:
    """Per spec id 0..n-1: (actions: action text -> {child index: ChildKey},
    reasons: action text -> [why], kernel costs: kernel -> cost,
    allocations: action text -> (level name, units))."""
    acts: list[dict[str, dict]] = [dict() for _ in range(n)]
    bads: list[dict[str, list[str]]] = [dict() for _ in range(n)]
    kcost: list[dict[str, int]] = [dict() for _ in range(n)]
    allocs: list[dict[str, tuple[str, int]]] = [dict() for _ in range(n)]
    found = RE["action"].findall(text)
    if len(found) != len(_ANY_ACTION.findall(text)):
        raise RuleError(
            "an action term nests more than three levels of parentheses; the answer reader "
            "(solver/answer.py) cannot read it"
        )
    for sid, a in found:
        acts[int(sid)][a] = {}
    for sid, a, why in RE["bad"].findall(text):
        bads[int(sid)].setdefault(a, []).append(why)
    for sid, k, c in RE["kcost"].findall(text):
        kcost[int(sid)][k] = int(c)
    for sid, a, lv, u in RE["alloc"].findall(text):
        allocs[int(sid)][a] = (lv, int(u))

    def child(sid, a, i):
        d = acts[int(sid)].get(a)
        if d is None:
            return None
        c = d.get(i)
        if c is None:
            c = d[i] = [None, {}, {}, False]
        return c

    for sid, a, i, k in RE["kind"].findall(text):
        c = child(sid, a, int(i))
        if c is not None:
            c[0] = k
    for sid, a, i, d, x in RE["dim"].findall(text):
        c = child(sid, a, int(i))
        if c is not None:
            c[1][int(d)] = int(x)
    for sid, a, i, op, *rest in RE["op"].findall(text):
        c = child(sid, a, int(i))
        if c is not None:
            c[2][int(op)] = tuple(rest) + ("",)
    for sid, a, i, op, st in RE["stride"].findall(text):
        c = child(sid, a, int(i))
        if c is not None and int(op) in c[2]:
            c[2][int(op)] = c[2][int(op)][:-1] + (st,)
    for sid, a, i in RE["serial"].findall(text):
        c = child(sid, a, int(i))
        if c is not None:
            c[3] = True
    for per in acts:
        for kids in per.values():
            for i, (k, dims, ops, serial) in kids.items():
                kids[i] = (k, tuple(dims[d] for d in sorted(dims)), tuple(ops[o] for o in sorted(ops)), serial)
    return list(zip(acts, bads, kcost, allocs))
