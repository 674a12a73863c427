"""Reading clingo's printed answer: the atoms of the contract (encodings/README.md)
grouped per spec, action and child, as plain tuples of strings and ints.

This runs where clingo ran (a worker process, for big batches), so scanning the text is
done in parallel too; the result pickles cheaply and the engine only turns it into Specs.
An answer holds tens of thousands of atoms per call, so they are cut apart with string
methods, in one pass, not regular expressions (which took a fifth of a worker's time):
clingo prints them separated by single spaces, and every atom read here has its action
term second and only plain numbers or names after it, so the term is what lies between
the first comma and the last few (benchmarks/answer_read.py compares the readers).
"""

from __future__ import annotations

import re
from collections import defaultdict

_ERROR = re.compile(r'\berror\(("(?:[^"\\]|\\.)*"|[^()]*(?:\([^()]*\))?)\)')

# A child, as its atoms describe it: (kind, dims in order, operands in order, serial);
# an operand is (dtype, level, aligned, contiguity, vector size, layout id, stride or "")
# as text. A child like its parent (child_like/3) is (None, ((dim, size), ...),
# ((operand, operand text), ...), serial, kind or None): what it states, completed from
# the parent spec by the engine, which has it.
ChildKey = tuple


def errors(text: str) -> list[str]:
    if "error(" not in text:
        return []
    return [e.strip('"') for e in _ERROR.findall(text)]


def _atoms(text: str):
    """The atoms of the answer, as text. A token with an odd number of unescaped quotes
    opens (or closes) a string with spaces in it, which is joined back together."""
    pending: list[str] = []
    for line in text.splitlines():
        for tok in line.split(" "):
            if '"' in tok and (tok.count('"') - tok.count('\\"')) % 2:
                if pending:
                    pending.append(tok)
                    yield " ".join(pending)
                    pending = []
                else:
                    pending.append(tok)
            elif pending:
                pending.append(tok)
            elif tok:
                yield tok
        if pending:
            pending.append("\n")  # a string spanning lines: keep reading
    if pending:
        yield " ".join(pending)


def _new_child() -> list:
    """A child met for the first time: [kind, {dim: size}, {operand: fields}, serial,
    like its parent, {operand: stride} or None]."""
    return [None, {}, {}, False, False, None]


def parse(text: str, n: int) -> list[tuple[dict, dict, dict, dict]]:
    """Per spec id 0..n-1: (actions: action text -> {child index: ChildKey},
    reasons: action text -> [why], kernel costs: kernel -> cost,
    allocations: action text -> (level name, units)).

    One pass over the atoms. A child's atoms all begin "S,A,I" (spec, action term,
    child index), so that text, cut off the end of each atom with one rsplit, is the
    child's key while reading; it is split into its parts once per child, at the end.
    Equal strings and tuples are made one object (`canon`): the same action, operand
    and child recur across a batch's atoms, and the answer is pickled to the search's
    process, where each object pickled is one to rebuild; shared, they pickle once (a
    64^3 search's answers: 4x smaller, 4x faster to read back)."""
    canon: dict = {}
    one = canon.setdefault
    acts: list[dict[str, dict]] = [dict() for _ in range(n)]
    bads: list[dict[str, list[str]]] = [dict() for _ in range(n)]
    kcost: list[dict[str, int]] = [dict() for _ in range(n)]
    allocs: list[dict[str, tuple[str, int]]] = [dict() for _ in range(n)]
    kids: defaultdict[str, list] = defaultdict(_new_child)  # "S,A,I" -> _new_child's list
    # An answer without strings (a search's usually has none) splits on white space.
    for atom in text.split() if '"' not in text else _atoms(text):
        p = atom.find("(")
        if p < 0:  # a printed atom with arguments ends with ")"
            continue
        name = atom[:p]
        body = atom[p + 1 : -1]
        if name == "child_dim":
            head, d, x = body.rsplit(",", 2)
            kids[head][1][int(d)] = int(x)
        elif name == "child_like":
            kids[body][4] = True
        elif name == "action":
            sid, _, a = body.partition(",")
            acts[int(sid)][one(a, a)] = {}
        elif name == "child_operand":
            head, op, *fields = body.rsplit(",", 7)
            kids[head][2][int(op)] = fields
        elif name == "alloc":
            sid, _, rest = body.partition(",")
            a, lv, u = rest.rsplit(",", 2)
            t = (one(lv, lv), int(u))
            allocs[int(sid)][one(a, a)] = one(t, t)
        elif name == "child_kind":
            head, kind = body.rsplit(",", 1)
            kids[head][0] = one(kind, kind)
        elif name == "child_serial":
            kids[body][3] = True
        elif name == "child_stride":
            head, op, st = body.rsplit(",", 2)
            c = kids[head]
            if c[5] is None:
                c[5] = {}
            c[5][int(op)] = st
        elif name == "bad":
            sid, _, rest = body.partition(",")
            q = rest.index(',"')
            a, why = rest[:q], rest[q + 2 : -1]
            bads[int(sid)].setdefault(one(a, a), []).append(one(why, why))
        elif name == "kernel_cost":
            sid, kern, cost = body.split(",")
            kcost[int(sid)][one(kern, kern)] = int(cost)

    def shared(t: tuple) -> tuple:
        """`t`, made of shared objects, as one shared object itself."""
        u = canon.get(t)
        if u is None:
            u = tuple([one(x, x) for x in t])
            canon[u] = u
        return u

    for head, (k, dims, ops, serial, like, strides) in kids.items():
        sid, _, rest = head.partition(",")
        a, i = rest.rsplit(",", 1)
        per = acts[int(sid)].get(a)
        if per is None:  # a child of an action that does not apply
            continue
        for o, f in ops.items():
            ops[o] = shared((*f, strides.get(o, "") if strides else ""))
        key: tuple
        if like:
            key = (None, shared(tuple(sorted(dims.items()))), shared(tuple(sorted(ops.items()))), serial, k)
        else:
            key = (k, tuple([dims[d] for d in sorted(dims)]), tuple([ops[o] for o in sorted(ops)]), serial)
        per[int(i)] = one(key, key)
    return list(zip(acts, bads, kcost, allocs))
