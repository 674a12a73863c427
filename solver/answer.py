"""Reading clingo's printed answer: the atoms of the contract (encodings/README.md)
grouped per spec, action and child, as plain tuples of strings and ints.

This runs where clingo ran (a worker process, for big batches), so scanning the text is
done in parallel too; the result pickles cheaply and the engine only turns it into Specs.
An answer holds tens of thousands of atoms per call, so they are cut apart with string
methods, not regular expressions (which took a fifth of a worker's time): clingo prints
them separated by single spaces, and every atom read here has its action term second and
only plain numbers or names after it, so the term is what lies between the first comma
and the last few.
"""

from __future__ import annotations

import re

_ERROR = re.compile(r'\berror\(("(?:[^"\\]|\\.)*"|[^()]*(?:\([^()]*\))?)\)')

# Predicates with an action term as second argument: how many arguments follow it.
_AFTER_ACTION = {
    "action": 0,
    "child_kind": 2,
    "child_like": 1,
    "child_dim": 3,
    "child_operand": 8,
    "child_stride": 3,
    "child_serial": 1,
    "alloc": 2,
}

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


def parse(text: str, n: int) -> list[tuple[dict, dict, dict, dict]]:
    """Per spec id 0..n-1: (actions: action text -> {child index: ChildKey},
    reasons: action text -> [why], kernel costs: kernel -> cost,
    allocations: action text -> (level name, units))."""
    return group(scan(text), n)


def scan(text: str) -> dict[str, list]:
    """The arguments of each atom read here, as text, per predicate name."""
    rows: dict[str, list] = {k: [] for k in (*_AFTER_ACTION, "bad", "kernel_cost")}
    # An answer without strings (a search's usually has none) splits on white space.
    for atom in text.split() if '"' not in text else _atoms(text):
        p = atom.find("(")
        if p < 0 or atom[-1] != ")":
            continue
        name = atom[:p]
        k = _AFTER_ACTION.get(name)
        if k is not None:
            sid, _, rest = atom[p + 1 : -1].partition(",")
            rows[name].append([sid, *rest.rsplit(",", k)] if k else [sid, rest])
        elif name == "bad":
            sid, _, rest = atom[p + 1 : -1].partition(",")
            q = rest.index(',"')
            rows[name].append((sid, rest[:q], rest[q + 2 : -1]))
        elif name == "kernel_cost":
            rows[name].append(atom[p + 1 : -1].split(","))
    return rows


def group(rows: dict[str, list], n: int) -> list[tuple[dict, dict, dict, dict]]:
    """`parse`'s result from `scan`'s rows. Equal strings and tuples are made one object
    (`canon`): the same action, operand and child recur across a batch's atoms, and the
    answer is pickled to the search's process, where each object pickled is one to
    rebuild; shared, they pickle once (a 64^3 search's answers: 4x smaller, 4x faster
    to read back)."""
    canon: dict = {}
    one = canon.setdefault
    acts: list[dict[str, dict]] = [dict() for _ in range(n)]
    bads: list[dict[str, list[str]]] = [dict() for _ in range(n)]
    kcost: list[dict[str, int]] = [dict() for _ in range(n)]
    allocs: list[dict[str, tuple[str, int]]] = [dict() for _ in range(n)]
    for sid, a in rows["action"]:
        acts[int(sid)][one(a, a)] = {}
    for sid, a, why in rows["bad"]:
        bads[int(sid)].setdefault(one(a, a), []).append(one(why, why))
    for sid, kern, c in rows["kernel_cost"]:
        kcost[int(sid)][one(kern, kern)] = int(c)
    for sid, a, lv, u in rows["alloc"]:
        t = (one(lv, lv), int(u))
        allocs[int(sid)][one(a, a)] = one(t, t)

    def child(sid, a, i):
        d = acts[int(sid)].get(a)
        if d is None:
            return None
        c = d.get(i)
        if c is None:
            c = d[i] = [None, {}, {}, False, False]
        return c

    for sid, a, i, kind in rows["child_kind"]:
        c = child(sid, a, int(i))
        if c is not None:
            c[0] = one(kind, kind)
    for sid, a, i, d, x in rows["child_dim"]:
        c = child(sid, a, int(i))
        if c is not None:
            c[1][int(d)] = int(x)
    for sid, a, i, op, *rest in rows["child_operand"]:
        c = child(sid, a, int(i))
        if c is not None:
            c[2][int(op)] = tuple(rest) + ("",)
    for sid, a, i, op, st in rows["child_stride"]:
        c = child(sid, a, int(i))
        if c is not None and int(op) in c[2]:
            c[2][int(op)] = c[2][int(op)][:-1] + (st,)
    for sid, a, i in rows["child_serial"]:
        c = child(sid, a, int(i))
        if c is not None:
            c[3] = True
    for sid, a, i in rows["child_like"]:
        c = child(sid, a, int(i))
        if c is not None:
            c[4] = True
    for per in acts:
        for kids in per.values():
            for i, (k, dims, ops, serial, like) in kids.items():
                for o, t in ops.items():
                    t = tuple([one(x, x) for x in t])
                    ops[o] = one(t, t)
                key: tuple
                if like:
                    dims_t = tuple([one(x, x) for x in sorted(dims.items())])
                    ops_t = tuple([one(x, x) for x in sorted(ops.items())])
                    key = (None, one(dims_t, dims_t), one(ops_t, ops_t), serial, k)
                else:
                    key = (k, tuple(dims[d] for d in sorted(dims)), tuple(ops[o] for o in sorted(ops)), serial)
                kids[i] = one(key, key)
    return list(zip(acts, bads, kcost, allocs))
